"""Physical invariants of the collective model over every preset, node counts 1..512, every op,
algorithm and size: busbw never above what the links the group uses can carry, time monotone
in size, no zero, infinite or NaN result."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.collectives.model import OPS, ScalarCandidates, bus_factor, candidates
from tierwise.collectives.predict import group_shape, predict
from tierwise.collectives.shape import Shape
from tierwise.collectives.tables import TREE_CORRECTION
from tierwise.hardware.cluster import ClusterSpec, load_cluster, presets
from tierwise.hardware.placement import Placement

POW2_SIZES = 2 ** np.arange(0, 37)
IN_NETWORK = {"nvls", "collnet_direct", "collnet_chain"}  # reduce in a switch, not on GPUs


def _cluster(
    name: str, nodes: int, inr: str | None, kind: str | None = None, planes: int | None = None
) -> ClusterSpec:
    """The preset at `nodes` nodes, optionally as another topology kind (rail-only) or with
    its NICs split into planes."""
    c = load_cluster(name, nodes=nodes, topology=kind, planes=planes)
    return c.model_copy(update={"in_network_reduction": inr}) if inr else c


def _bound_busbw(op: str, algo: str, s: Shape, c: ClusterSpec) -> float:
    """Most busbw the links can carry, GB/s: each GPU's NVLink plus its NIC share at line rate
    (all_reduce: 2x when a switch reduces), and each NVLink domain's NICs at line rate moving
    the bytes a domain must send at least (all_reduce 2(N-1)/N n over N domains without
    in-network reduction, n with it)."""
    per_gpu_nic = s.rails * c.inter.nic.line_GBps / s.k  # the domain's NICs in use, shared
    gpu = (c.intra.bw_GBps if s.k > 1 else 0.0) + (per_gpu_nic if s.crosses_domains else 0.0)
    gpu *= 2.0 if op == "all_reduce" and algo in IN_NETWORK else 1.0
    if not s.crosses_domains:
        return gpu
    net = s.rails * c.inter.nic.line_GBps  # one domain's NICs in use, each direction
    n_dom, p, k = s.n_dom, s.p, s.k
    if op == "all_reduce":
        algbw = net if algo in IN_NETWORK else net * n_dom / (2 * (n_dom - 1))
    elif op in {"all_gather", "reduce_scatter"}:
        algbw = net * n_dom / (n_dom - 1)
    elif op == "alltoall":
        algbw = net * p / (k * (p - k))
    else:  # broadcast, reduce, sendrecv: a domain receives (or sends) all n bytes
        algbw = net
    return min(gpu, algbw * bus_factor(op, p))


@st.composite
def groups(draw: st.DrawFn) -> tuple[ClusterSpec, Shape]:
    name = draw(st.sampled_from(sorted(presets())))
    inr = draw(st.sampled_from([None, "none", "nvls", "sharp", "nvls+sharp"]))
    kind = draw(st.sampled_from([None, "rail-only"]))
    planes = draw(st.sampled_from([None, 2, 4]))
    c = _cluster(name, draw(st.integers(1, 512)), inr, kind, planes)
    k = draw(
        st.sampled_from([d for d in range(1, c.gpus_per_node + 1) if c.gpus_per_node % d == 0])
    )
    placement = Placement.contiguous(c, c.nodes * k, ranks_per_node=k)
    if draw(st.booleans()):  # one GPU per node, each on the next rail: every step changes rail
        full = Placement.contiguous(c)
        ranks = [n * c.gpus_per_node + n % c.gpus_per_node for n in range(c.nodes)]
        return c, group_shape(c, ranks, placement=full)
    return c, group_shape(c, placement=placement)


@settings(max_examples=150, deadline=None)
@given(
    groups(),
    st.sampled_from(OPS),
    st.lists(st.integers(1, 1 << 36), min_size=2, max_size=12),
)
def test_busbw_bounded_time_monotone_and_finite(
    group: tuple[ClusterSpec, Shape], op: str, extra: list[int]
) -> None:
    c, s = group
    sizes = np.unique(np.concatenate([POW2_SIZES, extra]))
    auto = predict(op, s, sizes)
    if s.p < 2:
        assert np.all(auto.time_us == 0)
        return
    for algo in ["auto", *sorted({x.algo for x in candidates(op, s)})]:
        pred = predict(op, s, sizes, algo)
        t, bw = pred.time_us, pred.busbw_GBps
        assert np.all(np.isfinite(t)) and np.all(t > 0), (algo, t)
        assert np.all(np.isfinite(bw)) and np.all(bw > 0), (algo, bw)
        assert np.all(np.diff(t) >= 0), (algo, "time not monotone")
        for chosen in set(pred.algo):
            mask = np.array(pred.algo) == chosen
            bound = _bound_busbw(op, chosen, s, c)
            assert np.all(bw[mask] <= bound * (1 + 1e-9)), (op, chosen, bw.max(), bound, s)


@settings(max_examples=40, deadline=None)
@given(groups(), st.sampled_from(OPS))
def test_candidates_have_positive_finite_costs(group: tuple[ClusterSpec, Shape], op: str) -> None:
    _, s = group
    for x in candidates(op, s):
        assert math.isfinite(x.lat_us) and x.lat_us > 0, x
        assert math.isfinite(x.algbw_GBps) and x.algbw_GBps > 0, x


@settings(max_examples=40, deadline=None)
@given(groups(), st.sampled_from(OPS), st.integers(1, 1 << 36))
def test_scalar_time_is_the_vector_time(
    group: tuple[ClusterSpec, Shape], op: str, size: int
) -> None:
    """The planner's scalar path and `predict` agree for every candidate."""
    _, s = group
    for x in candidates(op, s):
        assert x.time_scalar_us(float(size)) == pytest.approx(float(x.time_us(size)), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(groups(), st.sampled_from(OPS), st.floats(1.0, 2.0**36))
def test_scalar_fastest_is_the_min_of_every_candidate(
    group: tuple[ClusterSpec, Shape], op: str, size: float
) -> None:
    """The scalar path's fastest time skips candidates by a lower bound: it is exactly the
    minimum over every candidate's time."""
    _, s = group
    cands = candidates(op, s)
    every = min([c.time_scalar_us(size) for c in cands], default=0.0)
    assert ScalarCandidates.of(cands).fastest_us(size) == every


def test_tree_correction_never_adds_bandwidth() -> None:
    """The scalar path's lower bound takes a corrected tree no faster than uncorrected."""
    assert all(v <= 1.0 for table in TREE_CORRECTION.values() for v in table)


@settings(max_examples=200, deadline=None)
@given(
    arch=st.sampled_from(["ampere", "hopper", "blackwell"]),
    nvlink=st.floats(min_value=20.0, max_value=2000.0),
    nics=st.integers(min_value=0, max_value=128),
    nic=st.sampled_from([12.5, 25.0, 50.0, 100.0]),
)
def test_searched_graph_fits_nvlink_and_nics(
    arch: str, nvlink: float, nics: int, nic: float
) -> None:
    """NCCL's graph search: 1 to 32 channels at one of its speeds (halved when duplicated);
    channels x speed fit one GPU's NVLink and, across domains, the NICs (each channel at that
    speed through one NIC); the graph is never below the first speed's, and one more NIC
    lowers it by at most half (a faster first graph ends the walk sooner, as search.cc's
    0.49 rule does: 5 HDR NICs on 94 GB/s of NVLink give 5 x 18 = 90, 4 give 23 x 4 = 92)."""
    from tierwise.collectives import tables as T
    from tierwise.collectives.model import searched_graph

    n, speed = searched_graph(arch, nvlink, nics, nic)
    assert 1 <= n <= T.GRAPH_MAX_CHANNELS
    speeds = (T.SEARCH_SPEEDS_INTER if nics else T.SEARCH_SPEEDS_INTRA)[arch]
    assert speed in speeds or 2 * speed in speeds
    assert n * speed <= nvlink + 1e-9
    if nics:
        assert n * speed <= nics * nic + 1e-9
        first = next((v for v in speeds if v <= min(nic, nvlink)), speeds[-1])
        fits = min(int(nvlink // first), T.GRAPH_MAX_CHANNELS, nics * int(nic // first))
        assert n * speed >= fits * first / 2 - 1e-9
        more_n, more_speed = searched_graph(arch, nvlink, nics + 1, nic)
        assert more_n * more_speed >= 0.5 * n * speed - 1e-9
