"""Cost of one collective on a placed group, per algorithm and protocol, NCCL-tuner style.

Each (algorithm, protocol) reduces to a fixed latency `lat_us` and an algorithm bandwidth
`algbw_GBps`, so that time(n bytes) = lat_us + n / (1e3 * algbw_GBps) in us — the same form as
NCCL's tuner (src/graph/tuning.cc). Candidates are built once per group shape; evaluating any
number of sizes is one numpy expression. `auto` picks the fastest candidate per size.

busbw as nccl-tests reports it is algbw x factor (all_reduce 2(p-1)/p; all_gather,
reduce_scatter, alltoall (p-1)/p; broadcast, reduce, sendrecv 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tierwise.collectives import tables as T
from tierwise.collectives.shape import Shape, intra_class
from tierwise.errors import SpecError
from tierwise.formats.ops import BUSBW_FACTORS

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv")
ALGOS = ("ring", "tree", "hierarchical", "nvls", "sharp", "pairwise")
# Extra latency per peer of a grouped point-to-point exchange (alltoall), us. Assumed: NCCL
# posts one send/recv pair per peer and its proxy progresses them in turn.
P2P_PER_PEER_US = 0.5


@dataclass(frozen=True)
class Candidate:
    """One way to run the collective: time(n) = lat_us + n / (1e3 * algbw_GBps)."""

    algo: str
    proto: str
    lat_us: float
    algbw_GBps: float

    def time_us(self, size_bytes: np.ndarray | float) -> np.ndarray:
        """Predicted time in us for message sizes in bytes."""
        return self.lat_us + np.asarray(size_bytes, dtype=float) / (1e3 * self.algbw_GBps)


def bus_factor(op: str, p: int) -> float:
    """nccl-tests' busbw / algbw factor (canonical op names)."""
    return BUSBW_FACTORS[op](p)


@lru_cache(maxsize=65536)
def candidates(op: str, s: Shape) -> tuple[Candidate, ...]:
    """Every algorithm/protocol NCCL (or tierwise's runtime) could run for `op` on `s`.

    Cached per (op, shape): like NCCL's per-communicator tables, built once, read often."""
    return tuple(_candidates(op, s))


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
    if op == "all_reduce":
        out += _tree(s)
    if op in {"all_reduce", "all_gather", "reduce_scatter"} and s.crosses_domains and s.even:
        out += _hierarchical(op, s)
    if op == "all_reduce" and s.nvls:
        out += _nvls(s)
    if op == "all_reduce" and s.sharp and s.crosses_domains:
        out += _sharp(s)
    return out


# --- building blocks -------------------------------------------------------------------------


def _protocols(s: Shape) -> tuple[str, ...]:
    """LL128 needs NVLink inside the node (NCCL disables it on PCIe-only systems)."""
    return T.PROTOCOLS if s.intra_kind == "nvlink" else ("LL", "Simple")


def _proto_bw_factor(op: str, proto: str, s: Shape, algo: str) -> float:
    if proto == "Simple":
        return 1.0
    if proto == "LL128":
        return T.LL128_BW_FACTOR if s.k >= 2 else T.LL128_BW_FACTOR_ONE_PER_NODE
    if algo == "tree":
        return 1.0 / 3.8
    reduce_or_net = op in {"all_reduce", "reduce"} or s.crosses_domains
    return T.LL_BW_FACTOR_REDUCE_OR_NET if reduce_or_net else T.LL_BW_FACTOR_OTHER


def _step_lat(s: Shape, algo: str, proto: str, net: bool) -> float:
    """Latency of one ring/tree step on the intra link or across the network, us."""
    if net:
        return max(0.0, T.STEP_LAT_US["net"][algo][proto] + s.net_step_extra_us)
    table = T.STEP_LAT_US[intra_class(s.intra_kind)][algo][proto]
    return max(0.0, table + s.intra_step_extra_us)


def _simple_overhead(s: Shape, proto: str) -> float:
    """Calibrated fixed cost of a bandwidth-protocol collective (0 uncalibrated), us."""
    return s.overhead_us if proto == "Simple" else 0.0


def ring_busbw(s: Shape) -> float:
    """Bus bandwidth a ring reaches in the group's rank order, GB/s (Simple protocol).

    Intra: each GPU's link. Inter: the ring steps between domains `dom_crossings` times; per
    domain those crossings spread over its `rails` NICs (one channel per rail), shared with
    `nic_share` concurrent groups: n_dom * rails * port / (crossings * share). Spine: the
    leaf-crossing steps share each leaf's uplinks.
    """
    bw = s.intra_GBps if s.k > 1 else math.inf
    if s.crosses_domains:
        bw = min(bw, s.n_dom * s.rails * s.port_GBps / (s.dom_crossings * s.nic_share))
    if s.leaf_crossings:
        bw = min(bw, s.n_dom * s.uplink_GBps_per_domain / (s.leaf_crossings * s.nic_share))
    return bw


def _ring_steps(op: str, s: Shape) -> tuple[int, int]:
    """(total steps, steps that cross the network) of a ring `op`, as NCCL's tuner counts."""
    mult = 2 if op == "all_reduce" else 1
    total = mult * (s.p - 1)
    inter = mult * max(0, s.dom_crossings - 1) if s.crosses_domains else 0
    return total, min(inter, total)


def _ring(op: str, s: Shape) -> list[Candidate]:
    busbw = ring_busbw(s)
    total, inter = _ring_steps(op, s)
    out = []
    for proto in _protocols(s):
        lat = (
            T.BASE_LAT_US["ring"][proto]
            + _simple_overhead(s, proto)
            + (total - inter) * _step_lat(s, "ring", proto, net=False)
            + inter * _step_lat(s, "ring", proto, net=True)
        )
        bw = busbw * _proto_bw_factor(op, proto, s, "ring") / bus_factor(op, s.p)
        out.append(Candidate("ring", proto, lat, bw))
    return out


def _tree(s: Shape) -> list[Candidate]:
    """NCCL's double binary tree between domains, a chain inside each (all_reduce only)."""
    if s.p < 3:
        return []
    bw = s.intra_GBps if s.k > 1 else math.inf
    if s.crosses_domains:
        bw = min(bw, s.rails * s.port_GBps / s.nic_share)
        if s.n_leaf > 1:
            bw = min(bw, s.uplink_GBps_per_domain / s.nic_share)
    busbw = T.TREE_BW_FACTOR * bw
    depth = math.ceil(math.log2(s.n_dom)) if s.crosses_domains else 0
    out = []
    for proto in _protocols(s):
        lat = (
            T.BASE_LAT_US["tree"][proto]
            + _simple_overhead(s, proto)
            + 2
            * (
                (s.k - 1) * _step_lat(s, "tree", proto, net=False)
                + depth * _step_lat(s, "tree", proto, net=True)
            )
        )
        # The tree moves every byte up and down once: algbw = half the per-link bandwidth.
        out.append(
            Candidate(
                "tree", proto, lat, 0.5 * busbw * _proto_bw_factor("all_reduce", proto, s, "tree")
            )
        )
    return out


def _chain(algo: str, proto: str, stages: list[tuple[Candidate, float]]) -> Candidate:
    """Stages run one after another, stage i on a fraction f_i of the bytes."""
    lat = sum(c.lat_us for c, _ in stages)
    inv = sum(f / c.algbw_GBps for c, f in stages)
    return Candidate(algo, proto, lat, 1.0 / inv)


def _overlap(algo: str, stages: list[tuple[Candidate, float]]) -> Candidate:
    """Stages on different links pipelined chunk by chunk (NCCL's NVLS/CollNet chains):
    latencies add, the slowest stage sets the bandwidth."""
    lat = sum(c.lat_us for c, _ in stages)
    return Candidate(algo, "Simple", lat, min(c.algbw_GBps / f for c, f in stages))


def _best_simple(op: str, s: Shape) -> Candidate:
    """Fastest Simple-protocol ring or tree for large messages on `s`."""
    cands = [
        c for c in _ring(op, s) + (_tree(s) if op == "all_reduce" else []) if c.proto == "Simple"
    ]
    return max(cands, key=lambda c: c.algbw_GBps)


def _stage(op: str, s: Shape, proto: str) -> Candidate:
    """One stage of a multi-level algorithm; a stage over one rank moves nothing."""
    if s.p < 2:
        return Candidate("ring", proto, 0.0, math.inf)
    return next(c for c in _ring(op, s) if c.proto == proto)


def _hierarchical(op: str, s: Shape) -> list[Candidate]:
    """Reduce-scatter in the domain, the op across domains per local rank (per leaf, then
    across the spine when the group crosses it), all-gather in the domain."""
    intra = s.intra_group()
    upper = (
        [(s.leaf_group(), 1), (s.spine_group(), s.n_dom // s.n_leaf)]
        if s.n_leaf > 1
        else [(s.inter_group(), 1)]
    )
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


def _nvls_stage(s: Shape) -> Candidate:
    """One NVLS all-reduce inside the NVSwitch domain (each GPU sends and receives n once)."""
    return Candidate(
        "nvls",
        "Simple",
        T.NVLS_LAT_US + s.intra_overhead_us,
        T.NVLS_ALGBW_EFFICIENCY * s.intra_line_GBps * s.intra_calibration_scale,
    )


def _nvls(s: Shape) -> list[Candidate]:
    """NVLink SHARP in the domain; across domains, a ring per rail on n/k bytes in between."""
    if not s.crosses_domains:
        return [_nvls_stage(s)]
    inter = _best_simple("all_reduce", s.inter_group())
    return [_overlap("nvls", [(_nvls_stage(s), 1.0), (inter, 1.0 / s.k)])]


def _sharp(s: Shape) -> list[Candidate]:
    """SHARP in the IB switch: each byte goes up and down once per rail (n/k bytes each),
    pipelined with the reduce-scatter/all-gather (or NVLS) inside the domain."""
    intra = s.intra_group()
    rail_bw = s.port_GBps / s.rail_contention * T.SHARP_ALGBW_EFFICIENCY
    if s.n_leaf > 1:
        rail_bw = min(rail_bw, s.uplink_GBps_per_domain / (s.rails * s.rail_contention))
    switch = Candidate("sharp", "Simple", T.SHARP_LAT_US + s.net_overhead_us, rail_bw)
    if s.k == 1:
        return [switch]
    if s.nvls:
        inner = _nvls_stage(s)
    else:
        rs = _stage("reduce_scatter", intra, "Simple")
        inner = _chain("sharp", "Simple", [(rs, 1.0), (_stage("all_gather", intra, "Simple"), 1.0)])
    return [_overlap("sharp", [(inner, 1.0), (switch, 1.0 / s.k)])]


def _alltoall_bytes_time_per_byte(s: Shape) -> float:
    """us per byte of a pairwise alltoall: intra, inter and cross-leaf shares run at once."""
    per_gpu_net = s.rails * s.port_GBps / (s.k * s.nic_share)
    t = (s.k - 1) / s.p / s.intra_GBps if s.k > 1 else 0.0
    if s.crosses_domains:
        t = max(t, (s.p - s.k) / s.p / per_gpu_net)
    if s.n_leaf > 1:
        cross_leaf = (s.p - s.ranks_per_leaf) / s.p
        t = max(t, cross_leaf / (s.uplink_GBps_per_domain / (s.k * s.nic_share)))
    return t / 1e3


def _pairwise(s: Shape, group: Shape, proto: str, net: bool) -> Candidate:
    """One pairwise exchange over `group` (a sub-shape of `s`): every peer at once."""
    lat = (
        T.BASE_LAT_US["ring"][proto]
        + _step_lat(s, "ring", proto, net)
        + (group.p - 1) * P2P_PER_PEER_US
    )
    factor = _proto_bw_factor("alltoall", proto, s, "ring")
    return Candidate("pairwise", proto, lat, factor / (_alltoall_bytes_time_per_byte(group) * 1e3))


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


def _sendrecv(s: Shape) -> list[Candidate]:
    """Each rank sends n bytes to the next in ring order at once (nccl-tests sendrecv)."""
    bw = s.intra_GBps if s.p > s.dom_crossings else math.inf
    if s.crosses_domains:
        per_node = -(-s.dom_crossings // s.n_dom)
        bw = min(bw, s.port_GBps / (-(-per_node // s.rails) * s.nic_share))
    if s.leaf_crossings:  # sends that leave the leaf share its (oversubscribed) uplinks
        per_node = -(-s.leaf_crossings // s.n_dom)
        bw = min(bw, s.uplink_GBps_per_domain / (per_node * s.nic_share))
    net = s.crosses_domains
    return [
        Candidate(
            "ring",
            proto,
            T.BASE_LAT_US["ring"][proto] + _step_lat(s, "ring", proto, net),
            bw * _proto_bw_factor("sendrecv", proto, s, "ring"),
        )
        for proto in ("LL", "Simple")
    ]
