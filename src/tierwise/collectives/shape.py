"""The scalar shape of a process group that the cost formulas need.

Built once per (cluster, group placement, concurrency) from a `GroupSpan`; sub-shapes describe
the stages of hierarchical algorithms (the ranks of one domain; one rank per domain).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from tierwise.collectives import tables as T
from tierwise.collectives.links import busiest_load
from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.placement import GroupSpan
from tierwise.hardware.tiers import Tier, tier


def intra_class(kind: str) -> str:
    """NCCL's latency table row for an intra-node link kind."""
    return "nvlink" if kind == "nvlink" else "pcie"


def gpu_arch(cluster: ClusterSpec) -> str:
    """NCCL's architecture row for the cluster's GPU (sm80/86/89 ampere, sm90 hopper, sm100
    blackwell); a GPU outside the table is placed by its NVLink generation."""
    by_key = T.GPU_ARCH.get(cluster.gpu.key)
    if by_key is not None:
        return by_key
    return T.LINK_ARCH.get(cluster.intra.key, "ampere")


def step_extra_us(t: Tier, cls: str) -> float:
    """Per-step latency a tier adds to NCCL's table value, us.

    Calibrated: the fitted LL step latency minus the table's; else the tier's hardware latency
    minus the hardware latency the table was measured with.
    """
    if t.alpha_us is not None:
        return t.alpha_us - T.STEP_LAT_US[cls]["ring"]["LL"]
    reference = T.NET_REFERENCE_LATENCY_US if cls == "net" else T.INTRA_REFERENCE_LATENCY_US[cls]
    return max(0.0, t.latency_us - reference)


# What a sub-shape of a hierarchical algorithm changes between rails: nothing (each local rank
# stays on its own rail; the first stage stays inside the domain).
_SAME_RAIL: dict[str, float] = {
    "rail_changes": 0.0,
    "pair_rail_changes": 0,
    "cross_rail_share": 0.0,
}
# Topologies whose leaves are per rail (NIC index): a domain's NICs land on that many switches.
RAIL_SWITCHED = ("rail-optimized", "rail-only")


def relay_of(cluster: ClusterSpec) -> str:
    """How traffic between different rails of two domains travels on this fabric.

    `pxn`: over the intra link first, to the GPU on the destination's rail, then that rail
    (NCCL's PXN, NCCL_P2P_PXN_LEVEL default 2). A rail-only fabric has no other path (without
    NVLink the hop goes through host PCIe), and a rail-optimized one takes it when NVLink is
    there. `spine`: a rail-optimized fabric without NVLink sends it up through the spine
    that joins the rails. `none`: fat-tree, spine-leaf and single-switch leaves take every NIC
    of a node, so any rail reaches any other directly.
    """
    kind = cluster.topology.kind
    if kind == "rail-only" or (kind == "rail-optimized" and cluster.intra.kind == "nvlink"):
        return "pxn"
    return "spine" if kind == "rail-optimized" else "none"


def simple_tree_pattern(cluster: ClusterSpec) -> bool:
    """NCCL builds its tree between these nodes on the plain TREE pattern (priced x0.85,
    `tables.TREE_PATTERN_BW_FACTOR`), not the balanced one.

    A balanced tree sends the channel's parent traffic from the chain's first GPU and its
    children's from the second, each with half the channel's bandwidth, both to the same NIC
    over a path no longer than one PCIe switch at first (search.cc, ncclTopoSearchRecGpu, path
    type PIX); on sm90+ ncclTopoCompute falls back to the plain tree before it allows longer
    paths (NCCL 2.19.3 to 2.30.7). HGX boards put each NIC under one GPU's PCIe switch, so
    no NIC has two such GPUs: H100 with 8 NICs (`nvidia-smi topo -m` in NVIDIA/nccl issue 1264:
    each NIC PIX to one GPU, SYS to the rest) and with 4 (issue 1357: NICs PIX to GPUs 0, 2, 4,
    6 only). So every Hopper NVLink node has it, and Blackwell HGX nodes are assumed to (the
    same one-NIC-per-GPU-switch board; the sources show no B200 topology). Not assumed where
    they say nothing: NVLink domains over several trays (GB200 NVL72: a rack is one NCCL node)
    and nodes without NVLink (PCIe boxes may put two GPUs and a NIC under one switch)."""
    return (
        gpu_arch(cluster) in ("hopper", "blackwell")
        and cluster.intra.kind == "nvlink"
        and cluster.nodes_per_domain == 1
    )


@dataclass(frozen=True)
class Shape:
    """A group: p ranks, k per NVLink domain over n_dom domains, in n_leaf leaves.

    Bandwidths are GB/s per GPU per direction (effective). `port_GBps` is one NIC's effective
    bandwidth; `intra_calibration_scale` the fitted/catalog ratio of the intra bandwidth (it
    scales NVLS too). Traffic that leaves an NVLink domain spreads over every NIC of the domain
    (one node's NICs; all 72 of a GB200 NVL72 rack, as NCCL's multi-node-NVLink rings use them):
    `rails` is how many NICs the group's GPUs use in its least-connected domain, so
    `rails x port_GBps` is what its traffic can leave one domain at; `nic_share` how many groups
    running at once use one NIC; `uplink_GBps_per_domain` what one domain's share of the group
    has through the leaf uplinks (port x rails / oversubscription x the share of the uplinks
    this job gets); `arch` NCCL's GPU architecture row of the tuning tables.

    Rails: `rail_changes` ring steps between domains, `pair_rail_changes` rank-order steps
    (sendrecv) and `cross_rail_share` of all-to-all bytes change rail (NIC index) on the way;
    `relay` says what that costs on this fabric (`relay_of`).

    Switch tree: the group spans `n_pod` pods and its ring order crosses between them
    `pod_crossings` times; leaf uplinks are `oversubscription`:1, pod uplinks a further
    `pod_oversubscription`:1. `routing` (ecmp | adaptive | static) spreads the flows leaving
    a switch over its uplinks (`collectives.links`), `qps` flows per connection; a domain's
    NICs (`domain_nics`) land on `rail_switches` leaf switches (one per rail on rail-optimized
    fabrics); `siblings` groups like this one cross the same switches at once, and the job
    gets `uplink_share` of the uplinks (other jobs take the rest).

    NCCL's view, for its graph search (`collectives.model.graph_channels`): one GPU's NVLink
    bandwidth as NCCL's topology counts it (`nccl_nvlink_GBps`, 0 without NVLink) and one NIC's
    line rate (`nic_line_GBps`); `simple_tree`: its tree between the group's domains is the
    plain TREE pattern (`simple_tree_pattern`).
    """

    p: int
    k: int
    n_dom: int
    n_leaf: int
    dom_crossings: int
    leaf_crossings: int
    rails: int
    nic_share: int
    intra_GBps: float
    intra_line_GBps: float
    intra_calibration_scale: float
    intra_kind: str
    intra_step_extra_us: float
    intra_overhead_us: float
    port_GBps: float
    net_step_extra_us: float
    net_overhead_us: float
    uplink_GBps_per_domain: float
    nvls: bool
    sharp: bool
    ranks_per_leaf: int
    arch: str = "hopper"
    rail_changes: float = 0.0
    pair_rail_changes: int = 0
    cross_rail_share: float = 0.0
    relay: str = "none"
    n_pod: int = 1
    pod_crossings: int = 0
    oversubscription: float = 1.0
    pod_oversubscription: float = 1.0
    routing: str = "adaptive"
    qps: int = 1
    rail_switches: int = 1
    domain_nics: int = 1
    siblings: int = 1
    uplink_share: float = 1.0
    nccl_nvlink_GBps: float = 0.0
    nic_line_GBps: float = 0.0
    simple_tree: bool = False

    @property
    def crosses_domains(self) -> bool:
        """The group leaves its NVLink domain."""
        return self.n_dom > 1

    @property
    def top_tier(self) -> str:
        """The slowest tier the group crosses: intra, leaf, spine or core (between pods)."""
        if not self.crosses_domains:
            return "intra"
        if self.n_pod > 1:
            return "core"
        return "spine" if self.n_leaf > 1 else "leaf"

    @property
    def pod_uplink_GBps_per_domain(self) -> float:
        """One domain's share of its pod's uplinks (the leaf uplinks' share over the pod
        oversubscription), GB/s."""
        return self.uplink_GBps_per_domain / self.pod_oversubscription

    def _switch_rails(self) -> tuple[int, int]:
        """(NICs of one domain that the group and its concurrent siblings send through, the
        leaf switches those NICs land on)."""
        used = max(1, min(self.rails * self.siblings, self.domain_nics))
        return used, max(1, min(used, self.rail_switches))

    def uplinks(self, level: str) -> int:
        """Uplinks of one leaf switch (`leaf`), or of one pod's layer above it (`pod`), that
        the group and its concurrent siblings there get."""
        blocks, over = (
            (self.n_leaf, self.oversubscription)
            if level == "leaf"
            else (self.n_pod, self.oversubscription * self.pod_oversubscription)
        )
        used, switches = self._switch_rails()
        return max(1, round(self.n_dom / blocks * used / switches / over * self.uplink_share))

    def flows_up(self, level: str, crossings: float, connections: int) -> int:
        """Flows leaving the busiest switch of `level` when the group's order crosses its
        boundary `crossings` times, each crossing carrying `connections` connections (NCCL
        channels) of `qps` flows, for the group and each concurrent sibling, spread over the
        rail switches."""
        blocks = self.n_leaf if level == "leaf" else self.n_pod
        per_switch = -(-connections * self.siblings // self._switch_rails()[1])
        return per_switch * math.ceil(crossings / blocks) * self.qps

    def switches(self, level: str, crossings: float) -> int:
        """Switches of `level` (leaf switches; pods' layers above the leaves) whose uplinks the
        group's `crossings` climb through: a boundary crossed at most once per block counted
        once, times the rail switches of a block. Each is priced with the busiest one's
        flows (`flows_up`, an upper bound where the crossings do not divide evenly)."""
        blocks = self.n_leaf if level == "leaf" else self.n_pod
        return max(1, min(blocks, math.ceil(crossings))) * self._switch_rails()[1]

    def busiest_flows(self, level: str, crossings: float, connections: int) -> float:
        """Flows on the busiest link of `level` in the whole fabric (expected, under ECMP):
        the uplinks of every switch the crossings leave by and the downlinks into every
        switch they arrive at, each switch hashing its flows independently (`links`).

        Downlinks: the spine (core) a flow takes is the source switch's hash, and a spine
        with several links to the destination hashes again among them, so the flows arriving
        at a switch fall on its downlinks as balls into bins too, as many as leave it (the
        patterns are symmetric). Taken as independent of the uplinks' loads: within 1% of
        a simulation with 2 or more links from each spine to each leaf; where each spine has
        one link to each leaf and a switch receives from one other only (a ring in block
        order), the downlinks repeat that switch's uplinks and the busiest load is that of
        half as many switches (6% lower at 256 flows on 128 uplinks of 4 leaves)."""
        flows, links = self.flows_up(level, crossings, connections), self.uplinks(level)
        return busiest_load(self.routing, flows, links, 2 * self.switches(level, crossings))

    def flow_cap_GBps(self, level: str, crossings: float, connections: int) -> float:
        """What one flow gets on the busiest link of `level` (a port's rate over the flows
        on it, `busiest_flows`), GB/s; unbounded under adaptive routing, where the fluid
        share of the uplinks (`uplink_GBps_per_domain`) is the bound. See `flows_up`."""
        if not crossings or self.routing == "adaptive":
            return math.inf
        return self.port_GBps / self.busiest_flows(level, crossings, connections)

    def link_load(self, level: str, crossings: float, connections: int) -> dict[str, Any]:
        """The busiest link of `level` for a pattern that climbs through it `crossings` times
        with `connections` connections per crossing: flows leaving one switch over its
        uplinks, the switches crossed (each with as many downlinks, hashed too), the flows on
        the busiest link in the fabric and at one switch alone, the fabric's as a share of
        one switch's flows, and what one flow gets there (GB/s; None: adaptive routing, whose
        fluid share of the uplinks bounds instead)."""
        flows, links = self.flows_up(level, crossings, connections), self.uplinks(level)
        busiest = self.busiest_flows(level, crossings, connections)
        cap = self.flow_cap_GBps(level, crossings, connections)
        return {
            "level": level,
            "routing": self.routing,
            "flows": flows,
            "uplinks": links,
            "switches": self.switches(level, crossings),
            "links_hashed": 2 * self.switches(level, crossings) * links,
            "busiest_link_flows": busiest,
            "one_switch_busiest_flows": busiest_load(self.routing, flows, links),
            "busiest_link_share": busiest / flows,
            "per_flow_GBps": None if math.isinf(cap) else cap,
        }

    def busiest_link(self, connections: int, crossings: dict[str, float]) -> list[dict[str, Any]]:
        """`link_load` of each level the group crosses (`crossings` per level), every
        crossing carrying `connections` connections."""
        return [
            self.link_load(level, count, connections) for level, count in crossings.items() if count
        ]

    @property
    def overhead_us(self) -> float:
        """Calibrated fixed cost of one bandwidth-protocol collective on the top tier, us."""
        return self.net_overhead_us if self.crosses_domains else self.intra_overhead_us

    @property
    def even(self) -> bool:
        """Every domain holds k > 1 ranks (a two-level algorithm applies)."""
        return self.k > 1 and self.p == self.k * self.n_dom

    @property
    def rail_contention(self) -> int:
        """Local ranks (and concurrent groups) that take turns on one NIC."""
        return -(-self.k // self.rails) * self.nic_share

    def intra_group(self) -> Shape:
        """The ranks of one NVLink domain (first stage of a hierarchical collective)."""
        return replace(
            self,
            p=self.k,
            n_dom=1,
            n_leaf=1,
            dom_crossings=0,
            leaf_crossings=0,
            n_pod=1,
            pod_crossings=0,
            ranks_per_leaf=self.k,
            **_SAME_RAIL,
        )

    def inter_group(self) -> Shape:
        """One rank per domain, all ranks of a domain doing this at once on their own NICs."""
        return replace(
            self,
            p=self.n_dom,
            k=1,
            dom_crossings=self.n_dom,
            leaf_crossings=self.n_leaf if self.n_leaf > 1 else 0,
            pod_crossings=self.n_pod if self.n_pod > 1 else 0,
            rails=1,
            nic_share=self.rail_contention,
            siblings=self.siblings * self.k,
            uplink_GBps_per_domain=self.uplink_GBps_per_domain / self.rails,
            ranks_per_leaf=max(1, self.n_dom // self.n_leaf),
            **_SAME_RAIL,
        )

    def leaf_group(self) -> Shape:
        """One rank per domain inside one leaf (middle stage of a 3-level collective)."""
        inter = self.inter_group()
        per_leaf = max(1, self.n_dom // self.n_leaf)
        return replace(
            inter,
            p=per_leaf,
            n_dom=per_leaf,
            n_leaf=1,
            dom_crossings=per_leaf,
            leaf_crossings=0,
            n_pod=1,
            pod_crossings=0,
            ranks_per_leaf=per_leaf,
        )

    def spine_group(self) -> Shape:
        """One rank per leaf (top stage of a 3-level collective)."""
        inter = self.inter_group()
        return replace(
            inter,
            p=self.n_leaf,
            n_dom=self.n_leaf,
            dom_crossings=self.n_leaf,
            leaf_crossings=self.n_leaf,
            ranks_per_leaf=1,
        )


def shape_of(
    cluster: ClusterSpec,
    span: GroupSpan,
    nic_share: int = 1,
    uplink_share: float = 1.0,
    siblings: int = 1,
) -> Shape:
    """The Shape of a placed group; `nic_share` groups use each NIC at once, `siblings` groups
    like it run at once (their flows share the switches' uplinks), and the job gets
    `uplink_share` (0-1] of its leaves' uplinks (other jobs take the rest)."""
    gpn, nics = cluster.gpus_per_node, max(cluster.inter.nics_per_node, 1)
    leaf = tier(cluster, "leaf")
    net = span.top if span.domains > 1 else leaf
    port = leaf.eff_GBps * gpn / nics
    rails = min(span.rails, nics * cluster.nodes_per_domain)
    topo = cluster.topology
    over = topo.oversubscription
    return Shape(
        p=span.size,
        k=span.ranks_per_domain,
        n_dom=span.domains,
        n_leaf=span.leaves,
        dom_crossings=span.domain_crossings,
        leaf_crossings=span.leaf_crossings,
        rails=rails,
        nic_share=max(1, nic_share),
        intra_GBps=span.intra.eff_GBps,
        intra_line_GBps=span.intra.line_GBps,
        intra_calibration_scale=span.intra.eff_GBps / cluster.intra.effective_GBps,
        intra_kind=cluster.intra.kind,
        intra_step_extra_us=step_extra_us(span.intra, intra_class(cluster.intra.kind)),
        intra_overhead_us=span.intra.overhead_us,
        port_GBps=port,
        net_step_extra_us=step_extra_us(net, "net"),
        net_overhead_us=net.overhead_us,
        uplink_GBps_per_domain=port * rails / over * uplink_share,
        nvls=cluster.nvls,
        sharp=cluster.sharp,
        ranks_per_leaf=max(1, span.size // span.leaves),
        arch=gpu_arch(cluster),
        rail_changes=span.rail_changes,
        pair_rail_changes=span.pair_rail_changes,
        cross_rail_share=span.cross_rail_share,
        relay=relay_of(cluster) if cluster.inter.nics_per_node > 1 else "none",
        n_pod=span.pods,
        pod_crossings=span.pod_crossings,
        oversubscription=over,
        pod_oversubscription=topo.pod_oversubscription,
        routing=cluster.routing,
        qps=topo.qps_per_connection,
        rail_switches=cluster.inter.nics_per_node if topo.kind in RAIL_SWITCHED else 1,
        domain_nics=max(1, cluster.nics_per_domain),
        siblings=max(1, siblings),
        uplink_share=uplink_share,
        nccl_nvlink_GBps=T.NCCL_NVLINK_GBPS_PER_GPU.get(cluster.intra.key, 0.0),
        nic_line_GBps=cluster.inter.nic.line_GBps,
        simple_tree=span.domains > 1 and simple_tree_pattern(cluster),
    )
