"""The scalar shape of a process group that the cost formulas need.

Built once per (cluster, group placement, concurrency) from a `GroupSpan`; sub-shapes describe
the stages of hierarchical algorithms (the ranks of one domain; one rank per domain).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tierwise.collectives import tables as T
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

    @property
    def crosses_domains(self) -> bool:
        """The group leaves its NVLink domain."""
        return self.n_dom > 1

    @property
    def top_tier(self) -> str:
        """The slowest tier the group crosses: intra, leaf or spine."""
        if not self.crosses_domains:
            return "intra"
        return "spine" if self.n_leaf > 1 else "leaf"

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
            ranks_per_leaf=self.k,
        )

    def inter_group(self) -> Shape:
        """One rank per domain, all ranks of a domain doing this at once on their own NICs."""
        return replace(
            self,
            p=self.n_dom,
            k=1,
            dom_crossings=self.n_dom,
            leaf_crossings=self.n_leaf if self.n_leaf > 1 else 0,
            rails=1,
            nic_share=self.rail_contention,
            uplink_GBps_per_domain=self.uplink_GBps_per_domain / self.rails,
            ranks_per_leaf=max(1, self.n_dom // self.n_leaf),
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
    cluster: ClusterSpec, span: GroupSpan, nic_share: int = 1, uplink_share: float = 1.0
) -> Shape:
    """The Shape of a placed group; `nic_share` groups use each NIC at once, and the job gets
    `uplink_share` (0-1] of its leaves' uplinks (other jobs take the rest)."""
    gpn, nics = cluster.gpus_per_node, max(cluster.inter.nics_per_node, 1)
    leaf = tier(cluster, "leaf")
    net = span.top if span.domains > 1 else leaf
    port = leaf.eff_GBps * gpn / nics
    rails = min(span.rails, nics * cluster.nodes_per_domain)
    over = cluster.topology.oversubscription
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
    )
