"""Cost of one collective on a placed group, per algorithm and protocol, as NCCL's tuner sees it.

Each (algorithm, protocol) reduces to a fixed latency `lat_us` and an algorithm bandwidth
`algbw_GBps`: time(n bytes) = lat_us + n / (1e3 * algbw_GBps) in us, the form of NCCL's tuner
(src/graph/tuning.cc; tables in `tables.py`). The tree also takes NCCL's per-size tree
correction; NVLS and NVLS-tree pay their chunk pipeline's fill (`Pipeline`). Candidates are
built once per group shape; any number of sizes is one numpy expression. `auto` picks the
fastest candidate per size, as NCCL does.

Bandwidths are physical first: what each algorithm moves over each tier the group crosses
(NVLink per GPU, the NICs of each NVLink domain, leaf uplinks), at each tier's effective rate.
NCCL's tables then cap them per channel by node count (1, 2, >= 4 nodes) and scale them per
protocol. Per node and per direction an all_reduce moves: ring 2(p-1)/p n per GPU; tree n
through the NICs on 2 nodes but 2n on more (each node is an inner node of one of the two
trees), 2n per GPU on the NVLink chain; NVLS n per GPU through the switch; SHARP n per node
through the NICs.

busbw as nccl-tests reports it is algbw x factor (all_reduce 2(p-1)/p; all_gather,
reduce_scatter, alltoall (p-1)/p; broadcast, reduce, sendrecv 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from tierwise.collectives import tables as T
from tierwise.collectives.shape import Shape, intra_class
from tierwise.errors import SpecError
from tierwise.formats.ops import BUSBW_FACTORS
from tierwise.hardware.tiers import EXTRA_LEVEL_LATENCY_US

if TYPE_CHECKING:
    import numpy as np

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv")
ALGOS = (
    "ring",
    "tree",
    "hierarchical",
    "nvls",
    "nvls_tree",
    "collnet_direct",
    "collnet_chain",
    "pat",
    "pairwise",
)
# `--algo sharp` selects the in-network (SHARP/CollNet) algorithms.
ALGO_ALIASES = {"sharp": ("collnet_direct", "collnet_chain")}
# Extra latency per peer of a grouped point-to-point exchange (alltoall), us. Assumed: NCCL
# posts one send/recv pair per peer and its proxy progresses them in turn.
P2P_PER_PEER_US = 0.5


@dataclass(frozen=True)
class Pipeline:
    """NCCL's NVLS pipeline for one group: `ops` chunks in flight (channels x heads), a chunk
    of `chunk` bytes that `rules` shrink for small messages ((multiple, size): below multiple x
    ops x chunk bytes the chunk drops to `size`, in order, as enqueue.cc does), filled `loops`
    times before it streams (`nvls_pipeline`)."""

    ops: int
    chunk: int
    rules: tuple[tuple[int, int], ...]
    loops: float = T.NVLS_FILL_LOOPS

    def fill_bytes(self, size_bytes: float) -> float:
        """Bytes' worth of time the pipeline takes to fill for one message."""
        c = self.chunk
        for mult, size in self.rules:
            if size_bytes < mult * self.ops * c and c > size:
                c = size
        return self.loops * min(self.ops * c, size_bytes)

    def fill_bytes_array(self, n: np.ndarray) -> np.ndarray:
        """`fill_bytes` of every size in `n`."""
        import numpy as np

        c = np.full(n.shape, float(self.chunk))
        for mult, size in self.rules:
            c = np.where((n < mult * self.ops * c) & (c > size), float(size), c)
        return self.loops * np.minimum(self.ops * c, n)


@dataclass(frozen=True)
class Candidate:
    """One way to run the collective: time(n) = lat_us + (n + f(n)) / (1e3 * algbw_GBps * c(n)),
    c = NCCL's tree correction where `corrected`, else 1; f = the NVLS `pipeline` fill, else 0."""

    algo: str
    proto: str
    lat_us: float
    algbw_GBps: float
    corrected: bool = False
    pipeline: Pipeline | None = None
    bytes_per_us: float = field(init=False, repr=False, compare=False)
    """1e3 x algbw_GBps: the uncorrected rate, computed once for the scalar path."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "bytes_per_us", 1e3 * self.algbw_GBps)

    def time_us(self, size_bytes: np.ndarray | float) -> np.ndarray:
        """Predicted time in us for message sizes in bytes."""
        import numpy as np

        n = np.asarray(size_bytes, dtype=float)
        bw = self.algbw_GBps * (tree_correction(self.proto, n) if self.corrected else 1.0)
        moved = n + self.pipeline.fill_bytes_array(n) if self.pipeline else n
        return self.lat_us + moved / (1e3 * bw)

    def time_scalar_us(self, size_bytes: float) -> float:
        """`time_us` of one size in plain Python (the planner's hot path)."""
        rate = self.bytes_per_us
        if self.corrected:
            rate = 1e3 * (self.algbw_GBps * _correction_scalar(self.proto, size_bytes))
        if self.pipeline:
            size_bytes += self.pipeline.fill_bytes(size_bytes)
        return self.lat_us + size_bytes / rate


class ScalarCandidates(NamedTuple):
    """Candidates laid out for pricing one size in plain Python: (lat_us, bytes per us) of
    the plain ones, whose time is lat + n / rate, and the others (tree correction, NVLS
    fill), priced by `Candidate.time_scalar_us`."""

    plain: tuple[tuple[float, float], ...]
    special: tuple[Candidate, ...]

    @classmethod
    def of(cls, cands: Sequence[Candidate]) -> ScalarCandidates:
        """`cands` split into the plain ones and the others. A plain candidate with no lower
        latency and no higher rate than another is never faster (rounding is monotonic too):
        left out."""
        plain = [(c.lat_us, c.bytes_per_us) for c in cands if not _special(c)]
        kept = tuple(
            (lat, rate)
            for i, (lat, rate) in enumerate(plain)
            if not any(
                other_lat <= lat
                and other_rate >= rate
                and (j < i or (other_lat, other_rate) != (lat, rate))
                for j, (other_lat, other_rate) in enumerate(plain)
                if j != i
            )
        )
        return cls(kept, tuple(c for c in cands if _special(c)))

    def fastest_us(self, size_bytes: float) -> float:
        """Time of the fastest candidate for one message of `size_bytes` (0 without any).
        NCCL's tree correction (at most 1) and the NVLS fill only add time, so a special
        candidate whose uncorrected time cannot beat the fastest so far is not priced."""
        plain, special = self  # (locals: a named tuple's attribute is a slow lookup)
        best = math.inf  # a loop: cheaper than min() over a list for a handful of candidates
        for lat, rate in plain:
            time = lat + size_bytes / rate
            if time < best:
                best = time
        if not special:
            return best if plain else 0.0
        for c in special:
            if c.lat_us + size_bytes / c.bytes_per_us < best:
                time = c.time_scalar_us(size_bytes)
                if time < best:
                    best = time
        return best


def _special(c: Candidate) -> bool:
    return c.corrected or c.pipeline is not None


def _correction_scalar(proto: str, size_bytes: float) -> float:
    """`tree_correction` of one size without numpy."""
    x = math.log2(max(size_bytes, 1.0) / T.TREE_CORRECTION_MIN_BYTES)
    if x <= 0:
        return T.TREE_CORRECTION[proto][0]
    i = int(x)
    if i >= T.TREE_CORRECTION_LAST_INDEX + 1:
        return 1.0
    table = T.TREE_CORRECTION[proto]
    hi = table[i + 1] if i < T.TREE_CORRECTION_LAST_INDEX else 1.0
    return table[i] + (x - i) * (hi - table[i])


def tree_correction(proto: str, size_bytes: np.ndarray | float) -> np.ndarray:
    """NCCL's tree bandwidth correction at each size, interpolated in log2(size)."""
    import numpy as np

    n = np.maximum(np.asarray(size_bytes, dtype=float), 1.0)
    table = np.asarray((*T.TREE_CORRECTION[proto][: T.TREE_CORRECTION_LAST_INDEX + 1], 1.0))
    x = np.log2(n / T.TREE_CORRECTION_MIN_BYTES)
    return np.interp(x, np.arange(len(table)), table)


def times_us(cands: Sequence[Candidate], size_bytes: np.ndarray) -> np.ndarray:
    """[candidate, size] matrix of predicted times, us."""
    import numpy as np

    n = np.asarray(size_bytes, dtype=float)
    if not cands:
        return np.zeros((0, n.size))
    lat = np.array([c.lat_us for c in cands])[:, None]
    bw = np.array([c.algbw_GBps for c in cands])[:, None] * np.ones((1, n.size))
    moved = np.ones((len(cands), 1)) * n[None, :]
    for i, c in enumerate(cands):
        if c.corrected:
            bw[i] = bw[i] * tree_correction(c.proto, n)
        if c.pipeline:
            moved[i] += c.pipeline.fill_bytes_array(n)
    return lat + moved / (1e3 * bw)


def bus_factor(op: str, p: int) -> float:
    """nccl-tests' busbw / algbw factor (canonical op names)."""
    return BUSBW_FACTORS[op](p)


@lru_cache(maxsize=65536)
def candidates(op: str, s: Shape) -> tuple[Candidate, ...]:
    """Every algorithm/protocol NCCL (or tierwise's runtime) could run for `op` on `s`.

    Cached per (op, shape): like NCCL's per-communicator tables, built once, read often."""
    return tuple(c for c in _candidates(op, s) if c.algbw_GBps > 0)


@lru_cache(maxsize=65536)
def auto_candidates(op: str, s: Shape) -> tuple[Candidate, ...]:
    """The candidates NCCL's tuner chooses among. tierwise's own hierarchical algorithm only
    stands in for NCCL's ring when the rank order leaves a domain more than once per domain
    (NCCL orders each ring by topology, not by rank)."""
    scattered = s.crosses_domains and s.dom_crossings > s.n_dom
    return tuple(c for c in candidates(op, s) if c.algo != "hierarchical" or scattered)


def _candidates(op: str, s: Shape) -> list[Candidate]:
    if op not in OPS:
        raise SpecError(f"--op: unknown collective {op!r}; allowed: {', '.join(OPS)}")
    if s.p < 2:
        return []
    if op == "alltoall":
        return _alltoall(s)
    if op == "sendrecv":
        return _sendrecv(s)
    out = _ring(op, s)
    if op in {"all_gather", "reduce_scatter"} and s.k == 1 and s.n_dom == s.p:
        out += _pat(op, s)
    if op in {"all_reduce", "all_gather", "reduce_scatter"} and s.crosses_domains and s.even:
        out += _hierarchical(op, s)
    if op != "all_reduce":
        return out
    out += _tree(s)
    if s.nvls and s.k > 1:
        out += _nvls(s) if not s.crosses_domains or s.sharp else []
        out += _nvls_tree(s) if s.crosses_domains else []
    if s.sharp and s.crosses_domains:
        out += _collnet(s)
    return out


# --- shared pieces -------------------------------------------------------------------------


def node_index(s: Shape) -> int:
    """Column of NCCL's per-node-count tables: 0 one node, 1 two nodes, 2 three or more."""
    return min(s.n_dom, 3) - 1


def channels(s: Shape) -> int:
    """Ring/tree channels NCCL runs (`comm->nChannels`, one connection each per peer): 32
    inside one node; across nodes those of NCCL's searched graph as `run_channels` turns them
    into run-time channels (a GB200 NVL72 rack pair: 15 x 2 = 30, not 2 per NIC), raised to
    the NVLS channels where NVLS is on (connect.cc: `comm->nChannels < comm->nvlsChannels`),
    or 2 per rail (at most 64) where tierwise does not follow NCCL's search."""
    if not s.crosses_domains:
        return T.ONE_NODE_CHANNELS
    if not s.nccl_nvlink_GBps or s.arch not in T.SEARCH_SPEEDS_INTRA:
        return min(T.CHANNELS_PER_RAIL * s.rails, T.MAX_CHANNELS)
    graph = searched_graph(s.arch, s.nccl_nvlink_GBps, s.rails, s.nic_line_GBps)
    n = run_channels(s.arch, *graph)
    nvls = T.NVLS_CHANNELS.get(s.arch, (0, 0))[1] if s.nvls else 0
    return max(n, nvls)


def run_channels(arch: str, graph_n: int, speed_GBps: float) -> int:
    """Run-time ring/tree channels across nodes from a searched graph of `graph_n` channels at
    `speed_GBps` each (connect.cc `ncclTopoPostset`, NCCL 2.25-2.30): every ring and tree
    channel is duplicated (at most MAXCHANNELS 64), and on sm90+ a graph above 45 GB/s a
    channel that leaves fewer than 16 is doubled once more ("4 compute channels per search
    channel to reach peak BW on <8 PPN")."""
    n = min(2 * graph_n, T.MAX_CHANNELS)
    if arch != "ampere" and speed_GBps > T.COMPUTE_DUP_MIN_SPEED and n < T.COMPUTE_DUP_BELOW:
        n = min(2 * n, T.MAX_CHANNELS)
    return n


def graph_channels(s: Shape) -> int:
    """Channels of NCCL's ring/tree graph, which the tuner's per-channel caps multiply
    (tuning.cc `graphs[a]->nChannels`; NCCL runs at least twice as many, `channels`).

    NCCL's search (search.cc `ncclTopoCompute`) takes the per-channel speed that fits the most
    bandwidth: every channel passes each GPU of the domain (channels x speed within one GPU's
    NVLink) and, across domains, enters and leaves through one NIC (channels x speed within the
    group's NICs); `ncclTopoDupChannels` then doubles a fast graph. So a GB200 NVL72 rack
    runs 16 channels alone and 15 across racks, not one per NIC. Without NVLink (or outside
    NCCL's tables) `channels` stands in."""
    if not s.nccl_nvlink_GBps or s.arch not in T.SEARCH_SPEEDS_INTRA:
        return channels(s)
    nics = s.rails if s.crosses_domains else 0
    return searched_graph(s.arch, s.nccl_nvlink_GBps, nics, s.nic_line_GBps)[0]


@lru_cache(maxsize=256)
def searched_graph(arch: str, nvlink_GBps: float, nics: int, nic_GBps: float) -> tuple[int, float]:
    """(channels, GB/s per channel) of NCCL's ring graph for one GPU's NVLink bandwidth and,
    across domains (`nics` > 0), that many NICs of `nic_GBps` each (`graph_channels`).

    As `ncclTopoCompute` (search.cc) walks its speed array: it starts at the fastest speed one
    path can carry (a GPU's NVLink inside a domain, a GPU's NIC across domains: `maxBw`), stops
    at a graph whose channels x speed fill the GPU's links (`totalBw`), and otherwise tries
    slower speeds only while they stay above 0.49 of the best graph's speed, keeping the graph
    with the most bandwidth (the first of equals). At a speed, NVLink holds nvlink // speed
    channels and, across domains, each NIC nic // speed of them. So 4 HDR NICs on an A100
    node give 4 channels at 24 GB/s, not 20 at 5 (which would fit as much in total)."""
    speeds = (T.SEARCH_SPEEDS_INTER if nics else T.SEARCH_SPEEDS_INTRA)[arch]
    max_bw = min(nic_GBps, nvlink_GBps) if nics else nvlink_GBps
    i = next((j for j, v in enumerate(speeds) if v <= max_bw), len(speeds) - 1)
    best_n, best_speed = 0, 0.0
    while True:
        speed = speeds[i]
        n = min(int(nvlink_GBps // speed), T.GRAPH_MAX_CHANNELS)
        if nics:
            n = min(n, nics * int(nic_GBps // speed))
        if n * speed > best_n * best_speed:
            best_n, best_speed = n, speed
        if best_n * best_speed >= nvlink_GBps or i + 1 >= len(speeds):
            break
        if best_n and speeds[i + 1] / best_speed <= T.SEARCH_MIN_SPEED_RATIO:
            break
        i += 1
    slow_sm90 = arch != "ampere" and best_speed < T.DUP_MIN_SPEED_SM90
    keep = slow_sm90 and best_n > T.DUP_MAX_CHANNELS_BELOW_SM90_SPEED
    if best_speed >= T.DUP_MIN_SPEED and not keep and best_n:
        doubled = min(2 * best_n, T.GRAPH_MAX_CHANNELS)
        best_n, best_speed = doubled, best_speed / -(-doubled // best_n)
    return max(best_n, 1), best_speed


def _ll_max(s: Shape) -> float:
    """NCCL's LL ceiling (busBw, GB/s) for this node count."""
    if not s.crosses_domains:
        return T.LL_MAX_BW_ONE_NODE[s.arch]
    return T.LL_MAX_BW_MULTI_NODE[node_index(s) - 1]


def _protocols(s: Shape) -> tuple[str, ...]:
    """LL128 needs NVLink inside the node (NCCL enables it only up to NVB paths)."""
    return T.PROTOCOLS if s.intra_kind == "nvlink" else ("LL", "Simple")


def _hw_lat(s: Shape, algo: str, proto: str, net: bool) -> float:
    """NCCL's per-step latency on the intra link or across the network, plus what this
    cluster's hardware (or calibration) adds to the table's reference, us."""
    if net:
        return max(0.0, T.STEP_LAT_US["net"][algo][proto] + s.net_step_extra_us)
    table = T.STEP_LAT_US[intra_class(s.intra_kind)][algo][proto]
    return max(0.0, table + s.intra_step_extra_us) if table else 0.0


def _inter_lat(s: Shape, algo: str, proto: str) -> float:
    """Latency of one network step: one rank per node exposes the tree's network latency;
    Simple adds the flush (NCCL adds graph latencyInter once more)."""
    row = "tree" if s.k == 1 else algo
    lat = _hw_lat(s, row, proto, net=True)
    return lat + (max(0.0, s.net_step_extra_us) if proto == "Simple" else 0.0)


def _overhead(s: Shape, proto: str) -> float:
    """Calibrated fixed cost of a bandwidth-protocol (LL128, Simple) collective (0
    uncalibrated), us."""
    return s.overhead_us if proto != "LL" else 0.0


def node_net_GBps(s: Shape) -> float:
    """Bandwidth the group has through the NICs of one NVLink domain, each direction, GB/s;
    across leaves (and pods), its share of the uplinks too, and its channels' flows at what
    one flow gets on the busiest uplink."""
    bw = s.rails * s.port_GBps
    nch = channels(s)
    crossings = node_net_crossings(s)
    for level, per_domain in (
        ("leaf", s.uplink_GBps_per_domain),
        ("pod", s.pod_uplink_GBps_per_domain),
    ):
        count = crossings[level]
        if count:
            bw = min(bw, per_domain, nch * s.qps * s.flow_cap_GBps(level, count, nch) * s.nic_share)
    return bw / s.nic_share


def node_net_crossings(s: Shape) -> dict[str, float]:
    """Boundaries climbed above a leaf and above a pod by an algorithm that sends through a
    domain's NICs once per domain (tree, NVLS and SHARP across domains): every leaf's (one
    switch level up also when rails change through the spine) and every pod's."""
    leaf = s.n_leaf > 1 or (s.relay == "spine" and s.rail_changes)
    return {"leaf": s.n_leaf if leaf else 0, "pod": s.pod_crossings}


def _relay_hop_us(s: Shape, proto: str, changes: float = 1.0) -> float:
    """Extra latency of a step that changes rail between domains, us: one intra-node hop to
    the GPU on the destination's rail (PXN), or one more switch level (through the spine);
    0 when the group changes no rail (`changes` 0)."""
    if not changes:
        return 0.0
    if s.relay == "pxn":
        return _hw_lat(s, "ring", proto, net=False)
    return EXTRA_LEVEL_LATENCY_US if s.relay == "spine" else 0.0


def _nvlink_relay(s: Shape) -> bool:
    """PXN relays rail-changing bytes over another GPU's NVLink (the hop loads a GPU link)."""
    return s.relay == "pxn" and s.intra_kind == "nvlink"


def _relay_intra_GBps(s: Shape, own_intra: bool, relayed: bool) -> float:
    """Per-GPU intra bandwidth left for a step when PXN relays other GPUs' rail-changing
    sends over NVLink: the busiest GPU's link carries its own intra step and one relayed
    step. (Without NVLink the hop crosses the host's PCIe to the other rail's NIC, which the
    GPU's own link carries anyway.)"""
    load = int(own_intra) + int(relayed and _nvlink_relay(s))
    return s.intra_GBps / load if load else math.inf


def _leaf_crossings(s: Shape, rail_changes: float) -> float:
    """Steps that climb above a leaf: leaf crossings, plus (relay through the spine) the
    rail-changing steps, at most one per domain crossing."""
    if s.relay != "spine":
        return s.leaf_crossings
    return min(s.dom_crossings, s.leaf_crossings + rail_changes)


def _chain_GBps(s: Shape) -> float:
    """algbw of a chain through the k GPUs of a domain (NCCL tree/CollNet chain inside a node):
    reduce up and broadcast down put 2n on each middle GPU's link per direction."""
    if s.k < 2:
        return math.inf
    return s.intra_GBps / (2.0 if s.k > 2 else 1.0)


def _nvls_GBps(s: Shape) -> float:
    """algbw of an NVLS all_reduce inside the NVSwitch domain."""
    share = T.NVLS_EFFICIENCY[s.arch] * T.NVLS_LINE_SHARE
    return share * s.intra_line_GBps * s.intra_calibration_scale


def _tree_net_GBps(s: Shape) -> float:
    """algbw the double binary tree gets through the NICs: n per node on 2 nodes, 2n above."""
    return node_net_GBps(s) / (1.0 if s.n_dom == 2 else 2.0)


# --- ring -----------------------------------------------------------------------------------


def ring_busbw(s: Shape) -> float:
    """Bus bandwidth a ring reaches in the group's rank order, GB/s (Simple protocol).

    Intra: each GPU's link (halved when PXN also relays rail-changing steps over it). Inter:
    the ring steps between domains `dom_crossings` times; per domain those crossings spread
    over its `rails` NICs (one channel per rail), shared with `nic_share` concurrent groups:
    n_dom * rails * port / (crossings * share). Spine: the leaf-crossing steps (and, relayed
    through the spine, the rail-changing ones) share each leaf's uplinks; core: the
    pod-crossing steps share each pod's uplinks. Both at the pace of the busiest uplink
    (`uplink_bounds`).
    """
    bw = _relay_intra_GBps(s, s.k > 1, s.rail_changes > 0)
    if s.crosses_domains:
        bw = min(bw, s.n_dom * s.rails * s.port_GBps / (s.dom_crossings * s.nic_share))
    return min([bw, *uplink_bounds(s, ring_crossings(s), channels(s))])


def ring_crossings(s: Shape) -> dict[str, float]:
    """Times a ring in the group's order climbs above a leaf and above a pod."""
    return {"leaf": _leaf_crossings(s, s.rail_changes), "pod": s.pod_crossings}


def uplink_bounds(s: Shape, crossings: dict[str, float], connections: int) -> list[float]:
    """What the leaf and pod uplinks let a pattern carry, GB/s of busbw: each domain's share
    of the uplinks over the pattern's crossings (fluid), and its `connections` connections
    (NCCL channels) of `qps` flows at what one flow gets on the busiest uplink."""
    out = []
    for level, per_domain in (
        ("leaf", s.uplink_GBps_per_domain),
        ("pod", s.pod_uplink_GBps_per_domain),
    ):
        count = crossings[level]
        if count:
            out.append(s.n_dom * per_domain / (count * s.nic_share))
            out.append(connections * s.qps * s.flow_cap_GBps(level, count, connections))
    return out


def _ring_proto_busbw(s: Shape, busbw: float, proto: str) -> float:
    """Ring busbw per protocol (NCCL: LL half of Simple up to the LL ceiling; LL128 0.92 of it
    up to the per-channel LL128 ceiling)."""
    if proto == "LL":
        return min(_ll_max(s), T.LL_BW_FACTOR * busbw)
    if proto == "LL128":
        cap = graph_channels(s) * T.PER_CH_MAX_RING_LL128[s.arch][node_index(s)]
        return min(T.LL128_BW_FACTOR * busbw, cap)
    return busbw


def _ring_lat(op: str, s: Shape, proto: str) -> float:
    """NCCL's ring latency: base + intra steps x intra latency + inter steps x net latency;
    broadcast/reduce pay one step; multi-node Simple all_reduce the ring plateau."""
    base = T.BASE_LAT_US["ring"][proto] + _overhead(s, proto)
    if op in {"broadcast", "reduce"}:
        return base + (
            _inter_lat(s, "ring", proto)
            if s.crosses_domains
            else _hw_lat(s, "ring", proto, net=False)
        )
    mult = 2 if op == "all_reduce" else 1
    total = mult * (s.p - 1)
    inter = min(total, mult * max(0, s.dom_crossings - 1)) if s.crosses_domains else 0
    intra_lat = _hw_lat(s, "ring", proto, net=False)
    if s.crosses_domains:
        net_over = T.NET_OVERHEAD_US * (T.NET_OVERHEAD_SIMPLE_MULT if proto == "Simple" else 1.0)
        intra_lat = max(intra_lat, net_over)
    relayed = min(inter, mult * s.rail_changes) * _relay_hop_us(s, proto, s.rail_changes)
    lat = base + (total - inter) * intra_lat + inter * _inter_lat(s, "ring", proto) + relayed
    if op == "all_reduce" and proto == "Simple" and s.crosses_domains:
        lat *= T.RING_PLATEAU[s.arch]
    return lat


def _ring(op: str, s: Shape) -> list[Candidate]:
    busbw = ring_busbw(s)
    return [
        Candidate(
            "ring",
            proto,
            _ring_lat(op, s, proto),
            _ring_proto_busbw(s, busbw, proto) / bus_factor(op, s.p),
        )
        for proto in _protocols(s)
    ]


def _pat(op: str, s: Shape) -> list[Candidate]:
    """PAT all_gather/reduce_scatter, one GPU per node: the ring's bytes at 0.75 of NCCL's
    bandwidth (which it also leaves unconverted: algbw = busBw), log-depth network latency."""
    busbw = ring_busbw(s) * T.PAT_BW_FACTOR * bus_factor(op, s.p)
    lat = (
        T.BASE_LAT_US["pat"]["Simple"]
        + _overhead(s, "Simple")
        + _log2i(s.n_dom) * (_inter_lat(s, "tree", "Simple") / T.PAT_LOG_LAT_DIVISOR)
        + _log2i(s.n_dom) * _relay_hop_us(s, "Simple", s.rail_changes)
        + s.p * T.PAT_STEP_LAT_US
    )
    return [Candidate("pat", "Simple", lat, busbw / bus_factor(op, s.p))]


def _log2i(n: int) -> int:
    return max(0, int(n).bit_length() - 1)


# --- tree -----------------------------------------------------------------------------------


def _tree(s: Shape) -> list[Candidate]:
    """NCCL's double binary tree between domains and a chain inside each (all_reduce).

    NCCL's busBw for the tree is twice the algbw; its caps apply to that, and its x0.85 when the
    tree graph is the plain TREE pattern (`Shape.simple_tree`)."""
    phys = min(_chain_GBps(s), _tree_net_GBps(s) if s.crosses_domains else math.inf)
    if not math.isfinite(phys):
        return []
    idx = node_index(s)
    nch = graph_channels(s)
    simple = min(T.TREE_BW_FACTOR * 2 * phys, nch * T.PER_CH_MAX_TREE[s.arch][idx])
    by_proto = {
        "Simple": simple,
        "LL": min(simple * T.TREE_LL_BW_FACTOR, _ll_max(s)),
        "LL128": min(
            simple * (T.TREE_LL128_BW_FACTOR if idx else T.TREE_LL128_BW_FACTOR_ONE_NODE),
            nch * T.PER_CH_MAX_TREE_LL128[s.arch][idx],
        ),
    }
    pattern = T.TREE_PATTERN_BW_FACTOR if s.simple_tree else 1.0
    out = []
    for proto in _protocols(s):
        lat = (
            T.BASE_LAT_US["tree"][proto]
            + _overhead(s, proto)
            + 2
            * (
                (s.k - 1) * _hw_lat(s, "tree", proto, net=False)
                + _log2i(s.n_dom)
                * (_inter_lat(s, "tree", proto) + _relay_hop_us(s, proto, s.rail_changes))
            )
        )
        out.append(Candidate("tree", proto, lat, 0.5 * pattern * by_proto[proto], corrected=True))
    return out


# --- in-switch (NVLS) and in-network (SHARP) reduction ------------------------------------


def nvls_pipeline(s: Shape, tree: bool, algbw: float = math.inf) -> Pipeline:
    """The NVLS pipeline NCCL runs on `s` (NVLS-tree with `tree`): its channels x heads chunks
    and the chunk rules of enqueue.cc (tables).

    NVLS-tree's fill grows with its tree: a chunk is reduced and broadcast once per level of
    the tree between domains, log2i(domains) levels as NCCL's tuner counts them (tuning.cc,
    the tree latency's `log2i(nNodes)`), and each level is `T.NVLS_FILL_LOOPS` loops (fitted
    on one level: 2 nodes). NCCL's 64 KiB chunk from 4 nodes (enqueue.cc) halves the loop
    where the levels double, so adding domains never shortens the fill."""
    nch = T.NVLS_CHANNELS.get(s.arch, T.NVLS_CHANNELS["hopper"])[int(s.crosses_domains)]
    ops = nch * max(1, min(s.k, T.NVLS_MAX_HEADS))
    if tree:
        many = s.n_dom >= 4
        chunk = T.NVLS_TREE_MANY_NODES_CHUNK_BYTES if many else T.NVLS_CHUNK_BYTES
        loops = T.NVLS_FILL_LOOPS * max(1, _log2i(s.n_dom))
        return Pipeline(ops, chunk, T.NVLS_TREE_CHUNK_RULES, loops)
    slow = s.crosses_domains and algbw < T.NVLS_NET_SLOW_GBPS
    chunk = T.NVLS_NET_SLOW_CHUNK_BYTES if slow else T.NVLS_CHUNK_BYTES
    return Pipeline(ops, chunk, T.NVLS_CHUNK_RULES)


def _nvls(s: Shape) -> list[Candidate]:
    """NVLS: the NVSwitch reduces; across domains (NCCL: only with CollNet/SHARP) each domain's
    NICs carry n once up and once down through the SHARP switches.

    NVLS and NVLS-tree fill NCCL's chunk pipeline before they stream (`nvls_pipeline`,
    `T.NVLS_FILL_LOOPS`): with the chunk NCCL picks per size this is what the NVLS logs in
    ../shared/calibration/nccl fall short of the line by, from 1 MiB up.
    """
    lat = _hw_lat(s, "nvls", "Simple", net=False) + s.intra_overhead_us
    bw = _nvls_GBps(s)
    if s.crosses_domains:
        lat += _inter_lat(s, "nvls", "Simple") + s.net_overhead_us
        bw = min(bw * T.NVLS_TREE_INTRA_SHARE, node_net_GBps(s) * T.SHARP_ALGBW_EFFICIENCY)
    return [Candidate("nvls", "Simple", lat, bw, pipeline=nvls_pipeline(s, False, bw))]


def _nvls_tree(s: Shape) -> list[Candidate]:
    """NVLS inside each domain, NCCL's tree between domains: the 2-node tree sends n per node,
    a deeper one 2n, so the 2-node gain does not carry to 4+ nodes; capped per NVLS channel
    by node count (NCCL's busBw, i.e. nccl-tests busbw). Fills NCCL's NVLS-tree pipeline
    (see `_nvls`)."""
    nvls_ch = T.NVLS_CHANNELS.get(s.arch)
    if nvls_ch is None:
        return []
    cap_busbw = nvls_ch[1] * T.PER_CH_MAX_NVLS_TREE[s.arch][node_index(s)]
    algbw = min(
        _nvls_GBps(s) * T.NVLS_TREE_INTRA_SHARE,
        _tree_net_GBps(s),
        cap_busbw / bus_factor("all_reduce", s.p),
    )
    lat = (
        _hw_lat(s, "nvls_tree", "Simple", net=False)
        + s.net_overhead_us
        + 2 * _log2i(s.n_dom) * _inter_lat(s, "nvls_tree", "Simple")
    )
    return [Candidate("nvls_tree", "Simple", lat, algbw, pipeline=nvls_pipeline(s, True))]


def _collnet(s: Shape) -> list[Candidate]:
    """SHARP in the IB switch (NCCL CollNet): each domain's NICs send n once up and get it once
    down. Chain: a chain through the domain's GPUs to the NIC; direct: every GPU scatters and
    gathers over NVSwitch (NCCL: NVSwitch only; it discounts GPUs sharing a NIC, and 15% on
    sm90+)."""
    net = node_net_GBps(s) * T.SHARP_ALGBW_EFFICIENCY
    intra_lat = _hw_lat(s, "collnet_chain", "Simple", net=False)
    chain_lat = 2 * (s.k - 1) * intra_lat + _inter_lat(s, "collnet_chain", "Simple")
    out = [
        Candidate(
            "collnet_chain", "Simple", chain_lat + s.net_overhead_us, min(_chain_GBps(s), net)
        )
    ]
    if s.intra_kind == "nvlink" and s.k > 1:
        gpus_per_nic = max(1.0, s.k / s.rails)
        direct = min(s.intra_GBps * s.k / (2 * (s.k - 1)), net) / ((gpus_per_nic + 1) / 2)
        if s.arch in {"hopper", "blackwell"}:
            direct *= T.COLLNET_HOPPER_BW_FACTOR
        lat = (
            2
            * (
                min(1, s.k - 1) * _hw_lat(s, "collnet_direct", "Simple", net=False)
                + (s.k - 1) * T.COLLNET_ARITY_LAT_US
            )
            + _inter_lat(s, "collnet_direct", "Simple")
            + s.net_overhead_us
        )
        out.append(Candidate("collnet_direct", "Simple", lat, direct))
    return out


# --- tierwise's hierarchical runtime algorithm ----------------------------------------------


def _chain(algo: str, proto: str, stages: list[tuple[Candidate, float]]) -> Candidate:
    """Stages run one after another, stage i on a fraction f_i of the bytes."""
    lat = sum(c.lat_us for c, _ in stages)
    inv = sum(f / c.algbw_GBps for c, f in stages)
    return Candidate(algo, proto, lat, 1.0 / inv)


def _stage(op: str, s: Shape, proto: str) -> Candidate:
    """One stage of a multi-level algorithm; a stage over one rank moves nothing."""
    if s.p < 2:
        return Candidate("ring", proto, 0.0, math.inf)
    return next(c for c in _ring(op, s) if c.proto == proto)


def _upper_groups(s: Shape) -> list[tuple[Shape, int]]:
    """The stages of the hierarchical algorithm above the domain: (sub-shape, multiplicity):
    per leaf, then across the spine, when the group crosses leaves; else across domains."""
    if s.n_leaf > 1:
        return [(s.leaf_group(), 1), (s.spine_group(), s.n_dom // s.n_leaf)]
    return [(s.inter_group(), 1)]


def _hierarchical(op: str, s: Shape) -> list[Candidate]:
    """Reduce-scatter in the domain, the op across domains per local rank (per leaf, then
    across the spine when the group crosses it), all-gather in the domain."""
    intra = s.intra_group()
    upper = _upper_groups(s)
    out = []
    for proto in _protocols(s):
        if op == "all_reduce":
            down: list[tuple[Candidate, float]] = []
            frac = 1.0 / s.k
            for g, _ in upper[:-1]:
                down.append((_stage("reduce_scatter", g, proto), frac))
                frac /= g.p
            top = (_stage("all_reduce", upper[-1][0], proto), frac)
            stages = [
                (_stage("reduce_scatter", intra, proto), 1.0),
                *down,
                top,
                *reversed(
                    [
                        (_stage("all_gather", g, proto), f)
                        for (g, _), (_, f) in zip(upper[:-1], down, strict=True)
                    ]
                ),
                (_stage("all_gather", intra, proto), 1.0),
            ]
        else:
            inner = (_stage(op, intra, proto), 1.0)
            outer = [(_stage(op, g, proto), 1.0 / s.k) for g, _ in upper]
            stages = [*outer, inner] if op == "all_gather" else [inner, *outer]
        out.append(_chain("hierarchical", proto, stages))
    return out


# --- point to point: alltoall and sendrecv -------------------------------------------------


def _p2p_bw(s: Shape, bw: float, proto: str) -> float:
    """Point-to-point bandwidth per protocol (LL: half, up to NCCL's LL ceiling)."""
    return min(_ll_max(s), T.LL_BW_FACTOR * bw) if proto == "LL" else bw


def _alltoall_bytes_time_per_byte(s: Shape) -> float:
    """us per byte of a pairwise alltoall: intra, inter and cross-leaf shares run at once.

    Across domains the domain's NICs together carry each GPU's (p - k)/p remote share. The
    `cross_rail_share` of it changes rail: with PXN over NVLink it crosses the intra link
    first (each GPU relays as much for others as it hands off), through the spine it leaves
    the leaf."""
    per_gpu_net = s.rails * s.port_GBps / (s.k * s.nic_share)
    remote = (s.p - s.k) / s.p
    intra = (s.k - 1) / s.p + (s.cross_rail_share * remote if _nvlink_relay(s) else 0.0)
    t = intra / s.intra_GBps if intra else 0.0
    if s.crosses_domains:
        t = max(t, remote / per_gpu_net)
    for level, share, per_domain, blocks, local, peers in _alltoall_levels(s):
        # every rank under the switch holds a connection to each peer its bytes climb to
        cap = s.flow_cap_GBps(level, blocks, math.ceil(local * peers))
        per_gpu = min(per_domain / (s.k * s.nic_share), peers * s.qps * cap)
        t = max(t, share / per_gpu)
    return t / 1e3


def _alltoall_levels(s: Shape) -> list[tuple[str, float, float, int, int, float]]:
    """Levels a pairwise alltoall climbs above: (level, share of the bytes that leave it,
    one domain's share of its uplinks GB/s, blocks (leaves; pods), ranks under one block,
    peers each of them reaches through the level's uplinks). Through the spine, a rank's
    rail-changing peers in the other domains of its leaf climb too."""
    beyond_leaf = s.p - s.ranks_per_leaf if s.n_leaf > 1 else 0
    relayed = s.cross_rail_share * (s.ranks_per_leaf - s.k) if s.relay == "spine" else 0.0
    per_pod = s.p // s.n_pod
    levels = (
        (
            "leaf",
            (beyond_leaf + relayed) / s.p,
            s.uplink_GBps_per_domain,
            s.n_leaf,
            s.ranks_per_leaf,
            beyond_leaf + relayed,
        ),
        (
            "pod",
            (s.p - per_pod) / s.p,
            s.pod_uplink_GBps_per_domain,
            s.n_pod,
            per_pod,
            s.p - per_pod,
        ),
    )
    return [x for x in levels if x[1] > 0]


def _pairwise(s: Shape, group: Shape, proto: str, net: bool) -> Candidate:
    """One pairwise exchange over `group` (a sub-shape of `s`): every peer at once."""
    lat = (
        T.BASE_LAT_US["ring"][proto]
        + _hw_lat(s, "ring", proto, net)
        + (group.p - 1) * P2P_PER_PEER_US
        + _relay_hop_us(group, proto, group.cross_rail_share)
    )
    bw = _p2p_bw(s, 1.0 / (_alltoall_bytes_time_per_byte(group) * 1e3), proto)
    return Candidate("pairwise", proto, lat, bw)


def _alltoall(s: Shape) -> list[Candidate]:
    """Pairwise across the whole group; hierarchical: inside each domain, then across."""
    net = s.crosses_domains
    out = [_pairwise(s, s, proto, net) for proto in ("LL", "Simple")]
    if net and s.even:
        intra, inter = s.intra_group(), s.inter_group()
        for proto in ("LL", "Simple"):
            stages = [
                (_pairwise(s, intra, proto, False), 1.0),
                (_pairwise(s, inter, proto, True), 1.0),
            ]
            out.append(_chain("hierarchical", proto, stages))
    return out


def sendrecv_crossings(s: Shape) -> dict[str, float]:
    """Sends of a rank-order sendrecv that climb above a leaf and above a pod."""
    return {"leaf": _leaf_crossings(s, s.pair_rail_changes), "pod": s.pod_crossings}


def _sendrecv(s: Shape) -> list[Candidate]:
    """Each rank sends n bytes to the next in rank order at once (nccl-tests sendrecv); with
    PXN a GPU reaches a remote peer through the NIC on the peer's rail, so the sends leaving
    a domain share its NICs. A send between different rails pays one relay hop: over the
    intra link of a GPU that may send its own intra-domain bytes too (PXN), or through the
    spine."""
    relayed = s.pair_rail_changes > 0
    bw = _relay_intra_GBps(s, s.p > s.dom_crossings, relayed)
    if s.crosses_domains:
        per_node = -(-s.dom_crossings // s.n_dom)
        bw = min(bw, s.port_GBps / (-(-per_node // s.rails) * s.nic_share))
    crossings = sendrecv_crossings(s)
    for level, per_domain in (
        ("leaf", s.uplink_GBps_per_domain),
        ("pod", s.pod_uplink_GBps_per_domain),
    ):
        count = crossings[level]
        if count:  # sends that leave the leaf (pod) share its (oversubscribed) uplinks
            per_node = -(-math.ceil(count) // s.n_dom)
            bw = min(
                bw,
                per_domain / (per_node * s.nic_share),
                s.qps * s.flow_cap_GBps(level, count, 1),
            )
    net = s.crosses_domains
    return [
        Candidate(
            "ring",
            proto,
            T.BASE_LAT_US["ring"][proto]
            + _hw_lat(s, "ring", proto, net)
            + _relay_hop_us(s, proto, s.pair_rail_changes),
            _p2p_bw(s, bw, proto),
        )
        for proto in ("LL", "Simple")
    ]


# --- what an algorithm loads on the switches' links -----------------------------------------

LinkPattern = tuple[Shape, str, float, int]
"""(the (sub-)group, level, its crossings of the level, connections per crossing)."""


def link_patterns(op: str, algo: str, s: Shape) -> list[LinkPattern]:
    """What `algo` running `op` on `s` sends through the switches' uplinks, as it is priced:
    one pattern per level it climbs above, and per stage of a staged algorithm; empty where
    it climbs above no leaf (inside one leaf, NVLS in a domain). `Shape.link_load` of each
    is its busiest link."""
    if op == "alltoall":
        groups = [s.intra_group(), s.inter_group()] if algo == "hierarchical" else [s]
        return [
            (g, level, blocks, math.ceil(local * peers))
            for g in groups
            for level, _, _, blocks, local, peers in _alltoall_levels(g)
        ]
    if op == "sendrecv":
        crossings = [(s, sendrecv_crossings(s), 1)]
    elif algo in ("ring", "pat"):
        crossings = [(s, ring_crossings(s), channels(s))]
    elif algo == "hierarchical":
        crossings = [(g, ring_crossings(g), channels(g)) for g, _ in _upper_groups(s) if g.p > 1]
    elif s.crosses_domains and algo in ("tree", "nvls", "nvls_tree", *ALGO_ALIASES["sharp"]):
        crossings = [(s, node_net_crossings(s), channels(s))]
    else:
        return []
    return [(g, level, n, conns) for g, per, conns in crossings for level, n in per.items() if n]
