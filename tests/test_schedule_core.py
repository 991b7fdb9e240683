"""Scheduler core: state, policies, slowdowns from the perf and collective models, simulator
invariants."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.hardware.cluster import load_cluster
from tierwise.schedule.jobs import Job, JobClass, synthetic
from tierwise.schedule.policies import POLICIES, naive, topo, topo_frag
from tierwise.schedule.simulate import place_all, price, simulate
from tierwise.schedule.slowdown import SlowdownModel, share_bucket
from tierwise.schedule.state import ClusterState
from tierwise.schedule.step_time import (
    PerfStepTime,
    collective_step_time,
    job_placement,
    step_time_fn,
)


def small(nodes: int = 8, npl: int = 4, over: float = 4.0, **kw):
    """pcie-h100 shape (2 RoCE NICs per node) with small leaves; fluid uplinks (adaptive
    routing): these tests are about uplink shares, ECMP's collisions are
    tests/test_fabric_routing.py's."""
    data = {"nodes": nodes, "oversubscription": over, "routing": "adaptive", **kw}
    spec = load_cluster("pcie-h100", **data)
    return spec.model_copy(
        update={"topology": spec.topology.model_copy(update={"nodes_per_leaf": npl})}
    )


def job(i: int, nodes: int, arrival: float = 0.0, duration: float = 100.0, tp: int = 1) -> Job:
    cls = JobClass("llama3-8b", 8.0e9, tp, 1, nodes * 8 // tp, 0.5)
    return Job(f"j{i}", arrival, duration, cls)


def test_topo_is_slurm_best_fit_and_naive_is_first_fit() -> None:
    c = small()
    jobs = [job(0, 2), job(1, 4), job(2, 2)]
    got = place_all(ClusterState(c), jobs, POLICIES["topo"])
    assert [a.tolist() for a in got] == [[0, 1], [4, 5, 6, 7], [2, 3]]
    got = place_all(ClusterState(c), jobs, POLICIES["naive"])
    assert [a.tolist() for a in got] == [[0, 1], [2, 3, 4, 5], [6, 7]]


def test_topo_spans_fewest_leaves_and_skips_down_nodes() -> None:
    c = small(nodes=12)
    s = ClusterState(c, down=[0, 5])
    s.allocate(99, np.array([1]))
    # free per leaf: [2, 3] (2), [4, 6, 7] (3), [8-11] (4). 5 nodes: the whole leaf, then the
    # leaf that best fits the last node (fewest free: nodes 2-3).
    assert topo(s, 5).tolist() == [2, 8, 9, 10, 11]
    assert topo(s, 3).tolist() == [4, 6, 7]  # tightest leaf that holds the job
    assert naive(s, 3).tolist() == [2, 3, 4]


def test_topo_frag_keeps_whole_leaf_for_waiting_large_job() -> None:
    s = ClusterState(small(nodes=12))
    s.allocate(1, np.array([0, 1, 2]))  # leaf 0 has 1 free, leaves 1 and 2 are whole
    assert topo(s, 2).tolist() == [4, 5]  # best fit: no partial leaf fits, take a whole one
    assert topo_frag(s, 2, reserve=1).tolist() == [4, 5]  # two whole leaves, one reserved
    assert topo_frag(s, 2, reserve=2) is None  # both whole leaves are reserved; 1 node partial


def test_topo_frag_takes_a_whole_leaf_that_holds_the_job() -> None:
    """A whole free leaf can be small (down nodes): topo-frag takes the first one that holds
    the job, never fewer nodes than asked."""
    s = ClusterState(small(nodes=12), down=[4, 5, 6])
    s.allocate(1, np.array([0, 1, 2]))  # leaf 0: 1 free; whole: leaf 1 (1 node), leaf 2 (4)
    assert topo_frag(s, 3, reserve=1).tolist() == [8, 9, 10]
    assert topo_frag(s, 2, reserve=1).tolist() == [8, 9]
    assert topo_frag(s, 3, reserve=2) is None  # both whole leaves reserved


def test_simulated_trace_by_hand() -> None:
    """Four jobs on two leaves of 4 nodes at 4:1, with a step time of 4 / uplink share (1 at
    full rate): every start, end and node, worked out by hand.

    naive: A (2 nodes) 0-1, B (4) 2-5 across both leaves (2 spine-crossing nodes per leaf:
    share 2, slowdown 2), C (2) 6-7; D (4) waits for A and C, starts at 100 on 0,1,6,7, and
    then 4 crossing nodes per leaf give B and D a share of 1 (slowdown 4): B has done 50 of
    its 100 ideal s and ends at 100 + 4 * 50 = 300, D at 100 + 4 * 50 = 300.
    topo: A leaf 0, B the whole leaf 1, C the rest of leaf 0; D takes leaf 0 at 100."""
    c = small(nodes=8, over=4.0)
    jobs = [job(0, 2), job(1, 4), job(2, 2), job(3, 4, duration=50.0)]
    model = SlowdownModel(c, lambda cls, placement, share: 4.0 / share)
    got = {}
    for name in ("naive", "topo"):
        result = simulate(ClusterState(c), jobs, POLICIES[name], model)
        got[name] = [(r.start_s, r.end_s, r.nodes) for r in result.records]
    assert got["naive"] == [
        (0.0, 100.0, (0, 1)),
        (0.0, 300.0, (2, 3, 4, 5)),
        (0.0, 100.0, (6, 7)),
        (100.0, 300.0, (0, 1, 6, 7)),
    ]
    assert got["topo"] == [
        (0.0, 100.0, (0, 1)),
        (0.0, 100.0, (4, 5, 6, 7)),
        (0.0, 100.0, (2, 3)),
        (100.0, 150.0, (0, 1, 2, 3)),
    ]
    assert result.busy_node_s == 2 * 100 + 4 * 100 + 2 * 100 + 4 * 50


def test_slowdown_comes_from_fabric() -> None:
    """Spreading a DP job over leaves costs more on a more oversubscribed fabric, nothing when
    it stays in one leaf; a faster NIC shrinks the cost."""
    cls = JobClass("llama3-8b", 8.0e9, 1, 1, 32, 0.5)
    spread = np.array([0, 1, 4, 5])
    costs = {}
    for over in (1.0, 4.0):
        m = SlowdownModel(small(over=over))
        assert m.slowdown(cls, np.array([0, 1, 2, 3]), 1.0) == pytest.approx(1.0)
        costs[over] = m.slowdown(cls, spread, 1.0)
    assert costs[4.0] > costs[1.0] * 1.3, costs
    fast = SlowdownModel(small(over=4.0, nic="roce400", nics_per_node=8)).slowdown(cls, spread, 1.0)
    assert fast < costs[4.0]


def test_perf_step_time_on_the_actual_placement() -> None:
    """The default (perf) slowdown grows as the uplink share shrinks, and sees the pipeline
    stage whose DP group crosses the spine, which the DP-all-reduce model (stage 0 only)
    misses; compute_s sets the micro-batches; a bare parameter count falls back."""
    c = small(over=4.0)
    perf, dp_only = SlowdownModel(c), SlowdownModel(c, step_time_fn("dp-allreduce"))
    dp = JobClass("llama3-8b", 8.0e9, 1, 1, 32, 0.5)
    spread = np.array([0, 1, 4, 5])
    assert perf.slowdown(dp, np.array([4, 5, 6, 7]), 1.0) == 1.0
    by_share = [perf.slowdown(dp, spread, s) for s in (4.0, 1.0, 0.5)]
    assert by_share[0] == pytest.approx(1.0, abs=1e-3) and 1.2 < by_share[1] < by_share[2]
    staged = JobClass("llama3-8b", 8.0e9, 8, 2, 2, 0.5)  # two stages of two nodes
    late = np.array([0, 1, 2, 4])  # stage 0 in leaf 0, stage 1 across leaves 0 and 1
    assert dp_only.slowdown(staged, late, 1.0) == 1.0
    assert perf.slowdown(staged, late, 1.0) > 1.1
    # each stage inside one leaf: only the pipeline send crosses the 4:1 spine
    split = perf.slowdown(staged, np.array([0, 1, 4, 5]), 1.0)
    assert 1.0 < split < perf.slowdown(staged, late, 1.0)
    fn = PerfStepTime()
    packed = job_placement(c, dp, np.arange(4))
    assert fn(dp, packed, 4.0) < fn(replace(dp, compute_s=2.0), packed, 4.0)
    count = replace(dp, model="8e9")
    assert fn(count, packed, 1.0) == collective_step_time(count, packed, 1.0)


def test_share_bucket_rounds_down() -> None:
    assert share_bucket(1.0) == 1.0 and share_bucket(2.0) == 2.0
    assert 0.84 < share_bucket(0.99) <= 0.99


def test_price_counts_uplink_contention() -> None:
    c = small(nodes=8)
    cls = JobClass("llama3-8b", 8.0e9, 1, 1, 16, 0.5)
    jobs = [Job("a", 0, 1, cls), Job("b", 0, 1, cls)]
    m = SlowdownModel(c)
    alone = price(ClusterState(c), jobs[:1], [np.array([0, 4])], m)[0]
    both = price(ClusterState(c), jobs, [np.array([0, 4]), np.array([1, 5])], m)
    assert alone.uplink_share == 4.0 and both[0].uplink_share == 2.0
    assert both[0].slowdown > alone.slowdown


traces = st.lists(
    st.tuples(
        st.sampled_from([1, 2, 3, 4, 6, 8]),
        st.floats(0, 500),
        st.floats(1, 400),
        st.sampled_from([1, 8]),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=25, deadline=None)
@given(traces, st.sampled_from(sorted(POLICIES)), st.sampled_from([0.0, 50.0]))
def test_simulator_invariants(spec, name, wait) -> None:
    c = small(nodes=12)
    jobs = [job(i, n, a, d, tp) for i, (n, a, d, tp) in enumerate(spec)]
    state = ClusterState(c, down=[11])
    result = simulate(state, jobs, POLICIES[name], SlowdownModel(c), max_wait_s=wait)
    recs = result.records
    assert len(recs) == len(jobs)  # every job finishes
    assert state.free_total == state.usable  # and gives its nodes back
    for r, j in zip(recs, jobs, strict=True):
        assert r.start_s >= j.arrival_s and r.end_s > r.start_s
        assert len(r.nodes) * c.gpus_per_node >= j.cls.gpus  # never fewer GPUs than asked
        assert 11 not in r.nodes
        assert r.slowdown >= 1.0 - 1e-9
    # no node held by two jobs at once
    for node in range(c.nodes):
        spans = sorted((r.start_s, r.end_s) for r in recs if node in r.nodes)
        assert all(a[1] <= b[0] + 1e-9 for a, b in itertools.pairwise(spans))
    # GPU-hours: what the jobs held equals what the cluster was busy
    held = sum(len(r.nodes) * (r.end_s - r.start_s) for r in recs)
    assert held == pytest.approx(result.busy_node_s, rel=1e-9)


def test_topology_aware_beats_naive_on_oversubscribed_fabric() -> None:
    c = load_cluster("pcie-h100", nodes=128, oversubscription=2.0)
    jobs = synthetic(c, 300, seed=3)
    m = SlowdownModel(c)
    res = {p: simulate(ClusterState(c), jobs, POLICIES[p], m).metrics() for p in POLICIES}
    assert res["topo"]["mean_jct_s"] < res["naive"]["mean_jct_s"]
    assert res["topo"]["mean_leaves_per_job"] < res["naive"]["mean_leaves_per_job"]
    assert res["naive"]["mean_slowdown"] > res["topo"]["mean_slowdown"]
