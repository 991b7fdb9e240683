"""Fabric routing (ECMP hashing, adaptive, static), pods and stragglers in the models."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.collectives.links import busiest_load, expected_max_load
from tierwise.collectives.model import channels, ring_busbw, ring_crossings
from tierwise.collectives.predict import group_shape, predict
from tierwise.hardware.cluster import ClusterSpec, load_cluster
from tierwise.hardware.fleet import FleetSpec, expected_max_normal
from tierwise.hardware.placement import Placement
from tierwise.perf.estimate import estimate
from tierwise.perf.groups import Degrees, group_shape_of, worst_group
from tierwise.perf.step import Flags
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model

GIB = 1 << 30


def _monte_carlo_max(flows: int, links: int, trials: int, seed: int) -> float:
    """Mean busiest-link load when each flow hashes uniformly onto one of the links."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, links, size=(trials, flows))
    counts = np.zeros((trials, links), dtype=np.int64)
    np.add.at(counts, (np.arange(trials)[:, None], picks), 1)
    return float(counts.max(axis=1).mean())


@pytest.mark.parametrize(
    ("flows", "links"),
    [(2, 32), (8, 8), (16, 128), (64, 16), (256, 128), (1000, 16), (3000, 64)],
)
def test_ecmp_expected_busiest_link_matches_monte_carlo(flows: int, links: int) -> None:
    simulated = _monte_carlo_max(flows, links, trials=4000, seed=flows * 31 + links)
    assert expected_max_load(flows, links) == pytest.approx(simulated, rel=0.02)


def _fabric_monte_carlo(
    flows: int, leaves: int, spines: int, parallel: int, trials: int, seed: int
) -> tuple[float, float]:
    """Mean busiest load (uplinks only; uplinks and downlinks) of a two-level fabric: every
    leaf sends `flows` flows to the next leaf (a ring's crossings), hashing each onto one of
    its spines x parallel uplinks; the spine hashes it again onto one of its `parallel` links
    down to the destination leaf. Every switch hashes independently."""
    rng = np.random.default_rng(seed)
    links = spines * parallel
    up = rng.integers(0, links, size=(trials, leaves, flows), dtype=np.int32)
    down = (up // parallel) * parallel + rng.integers(0, parallel, size=up.shape, dtype=np.int32)
    dest = np.roll(np.arange(leaves), -1)[None, :, None]  # leaf i sends to leaf i + 1
    trial = np.arange(trials)[:, None, None]

    def loads(leaf: np.ndarray, link: np.ndarray) -> np.ndarray:
        flat = ((trial * leaves + leaf) * links + link).ravel()
        counts = np.bincount(flat, minlength=trials * leaves * links)
        return counts.reshape(trials, leaves * links).max(axis=1)

    ups = loads(np.arange(leaves)[None, :, None], up)
    both = np.maximum(ups, loads(np.broadcast_to(dest, up.shape), down))
    return float(ups.mean()), float(both.mean())


@pytest.mark.parametrize(
    ("flows", "links", "switches"), [(256, 128, 4), (32, 16, 128), (8, 8, 16), (2000, 64, 8)]
)
def test_ecmp_busiest_link_over_independent_switches_matches_monte_carlo(
    flows: int, links: int, switches: int
) -> None:
    """The busiest link over several switches, each hashing its own flows onto its own
    uplinks, F(t)^switches: against a simulation of the switches together (2%)."""
    rng = np.random.default_rng(flows + links + switches)
    trials = 2000
    picks = rng.integers(0, links, size=(trials, switches, flows), dtype=np.int32)
    flat = ((np.arange(trials * switches)[:, None] * links) + picks.reshape(-1, flows)).ravel()
    counts = np.bincount(flat, minlength=trials * switches * links)
    simulated = counts.reshape(trials, switches * links).max(axis=1).mean()
    fabric = expected_max_load(flows, links, switches)
    assert fabric == pytest.approx(simulated, rel=0.02)
    if switches >= 4 and flows <= 256:  # one switch alone is well below: the audit's error
        assert expected_max_load(flows, links) < 0.92 * simulated


@pytest.mark.parametrize(
    ("flows", "leaves", "spines", "parallel"), [(256, 4, 32, 4), (32, 64, 8, 2), (64, 8, 4, 32)]
)
def test_ecmp_busiest_link_with_downlinks_matches_monte_carlo(
    flows: int, leaves: int, spines: int, parallel: int
) -> None:
    """A ring scattered over leaves: every leaf's uplinks and the spines' downlinks into every
    leaf, hashed as a switch does (2%), priced as 2 x leaves independent switches; the audit's
    256 flows on 128 uplinks at 4 leaves: 6.49 at one switch, 7.44 over the 4 leaves' uplinks,
    7.90 with the downlinks."""
    links = spines * parallel
    ups, both = _fabric_monte_carlo(flows, leaves, spines, parallel, trials=2000, seed=flows)
    assert expected_max_load(flows, links, leaves) == pytest.approx(ups, rel=0.02)
    assert expected_max_load(flows, links, 2 * leaves) == pytest.approx(both, rel=0.02)
    assert expected_max_load(flows, links) < 0.92 * both


def test_fabric_busiest_link_in_the_ring_model() -> None:
    """A ring scattered over 4 leaves prices its flows at the busiest of the 4 leaves'
    uplinks and their downlinks (8 switches' worth), adaptive and static routing as before."""
    s = _dp_shape(_roce(routing="ecmp"), True)
    crossings = s.leaf_crossings
    assert s.switches("leaf", crossings) == s.n_leaf == 4
    flows, links = s.flows_up("leaf", crossings, channels(s)), s.uplinks("leaf")
    assert (flows, links) == (256, 128)
    assert s.busiest_flows("leaf", crossings, channels(s)) == pytest.approx(
        expected_max_load(256, 128, 8)
    )
    assert expected_max_load(256, 128, 8) == pytest.approx(7.90, abs=0.01)
    static = dataclasses.replace(s, routing="static")
    assert static.busiest_flows("leaf", crossings, channels(s)) == 2.0  # ceil(256 / 128)
    rail = _dp_shape(load_cluster("dgx-h100", nodes=64, routing="ecmp"), True)
    # rail-optimized: each leaf block's 8 rail switches hash on their own
    assert rail.switches("leaf", rail.leaf_crossings) == rail.n_leaf * 8


def test_large_flow_counts_are_bounded_and_right() -> None:
    """Many uplinks (1,000 flows on 100,000) and many flows cost milliseconds, not seconds
    (the truncated power series; the Poisson window; the normal limit), and stay right."""
    import time

    from tierwise.collectives.links import _poisson_max, max_load_cdf

    start = time.perf_counter()
    sparse = expected_max_load.__wrapped__(1000, 100000)
    max_load_cdf.cache_clear()
    expected_max_load.__wrapped__(1024, 8192, 2048)
    expected_max_load.__wrapped__(5000, 3)
    assert time.perf_counter() - start < 1.0  # 4.8 s and 448 MiB before
    # 1,000 flows on 100,000 links: at least one collision is near certain (C(1000, 2) / 1e5
    # = 5 pairs expected), a triple has probability ~ C(1000, 3) / 1e10 = 0.0166
    assert sparse == pytest.approx(2.0 + 0.0166, abs=0.01)
    assert expected_max_load(5000, 3) == pytest.approx(
        _monte_carlo_max(5000, 3, trials=4000, seed=5), rel=0.02
    )
    # the normal limit joins the Poisson window at the threshold
    lam = 1e6
    window = _poisson_max.__wrapped__(lam, 64)
    normal = _poisson_max.__wrapped__(lam * (1 + 1e-9), 64)
    assert normal == pytest.approx(window, rel=1e-5)


def test_ecmp_hand_values_and_meta_imbalance() -> None:
    # Two flows on two links collide with probability 1/2: E[max] = 1.5; three on two: 2.25.
    assert expected_max_load(2, 2) == pytest.approx(1.5, abs=1e-9)
    assert expected_max_load(3, 2) == pytest.approx(2.25, abs=1e-9)
    assert expected_max_load(5, 1) == 5.0
    # Meta (SIGCOMM'24): max/average flows per link above 1.2 for 1,000 flows on 16 links.
    assert expected_max_load(1000, 16) / (1000 / 16) > 1.2


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 256))
def test_busiest_load_ordering(flows: int, links: int) -> None:
    fluid = busiest_load("adaptive", flows, links)
    static = busiest_load("static", flows, links)
    ecmp = busiest_load("ecmp", flows, links)
    assert fluid == pytest.approx(flows / links)
    assert fluid <= static + 1e-9 and static <= ecmp + 1e-6 * ecmp
    assert ecmp <= flows + 1e-9


def _roce(nodes: int = 64, **topo: Any) -> ClusterSpec:
    return load_cluster("mi300x-8", nodes=nodes, **topo)


def test_roce_defaults_to_ecmp_and_ib_to_adaptive() -> None:
    assert _roce().routing == "ecmp"
    assert load_cluster("dgx-h100").routing == "adaptive"
    assert load_cluster("dgx-h100", routing="static").routing == "static"


def _dp_shape(cluster: ClusterSpec, scatter: bool) -> Any:
    return group_shape_of(cluster, Degrees(tp=8, cp=1, ep=1, dp=64, pp=1), "dpcp", scatter=scatter)


def test_adaptive_prices_the_fluid_share() -> None:
    """Adaptive routing: a ring scattered over 4 leaves at 2:1 gets each domain's share of
    the uplinks over its crossings (the model before routing existed)."""
    s = _dp_shape(_roce(routing="adaptive", oversubscription=2.0), scatter=True)
    fluid = s.n_dom * s.uplink_GBps_per_domain / (s.leaf_crossings * s.nic_share)
    nic = s.n_dom * s.rails * s.port_GBps / (s.dom_crossings * s.nic_share)
    assert ring_busbw(s) == pytest.approx(min(fluid, nic, s.intra_GBps))
    assert math.isinf(s.flow_cap_GBps("leaf", s.leaf_crossings, channels(s)))


def test_one_flow_per_uplink_prices_as_adaptive() -> None:
    """Static routing deals the flows one per uplink: the contiguous ring prices as adaptive
    routing does, every algorithm and size."""
    sizes = [1 << 20, 256 << 20, 4 * GIB]
    base = predict("all_reduce", _dp_shape(_roce(routing="adaptive"), False), sizes)
    s = _dp_shape(_roce(routing="static"), False)
    links = s.busiest_link(channels(s), ring_crossings(s))
    assert links[0]["busiest_link_flows"] == 1.0  # fewer flows than uplinks: one each
    again = predict("all_reduce", s, sizes)
    np.testing.assert_allclose(again.time_us, base.time_us)


def test_ecmp_collisions_slow_a_scattered_ring_and_queue_pairs_help() -> None:
    """A ring whose every step crosses leaves loads the uplinks fully: hashed flows collide
    and it runs at the busiest uplink's pace; 4 queue pairs per connection spread it."""
    size = [GIB]

    def busbw(routing: str, qps: int = 1) -> float:
        cluster = _roce(routing=routing, qps_per_connection=qps)
        return float(predict("all_reduce", _dp_shape(cluster, True), size, "ring").busbw_GBps[0])

    adaptive, ecmp, ecmp4 = busbw("adaptive"), busbw("ecmp"), busbw("ecmp", 4)
    s = _dp_shape(_roce(routing="ecmp"), True)
    flows = s.flows_up("leaf", s.leaf_crossings, channels(s))
    switches = 2 * s.switches("leaf", s.leaf_crossings)  # every leaf's uplinks and downlinks
    busiest = expected_max_load(flows, s.uplinks("leaf"), switches)
    # the ring's channels, one flow each, at a port's rate over the busiest link's flows
    assert ring_busbw(s) == pytest.approx(channels(s) * s.port_GBps / busiest, rel=1e-9)
    assert ecmp < 0.6 * adaptive
    assert ecmp < ecmp4 < adaptive


def _two_pods(pod_over: float) -> ClusterSpec:
    return load_cluster("dgx-h100", nodes=64).model_copy(
        update={
            "topology": load_cluster("dgx-h100").topology.model_copy(
                update={
                    "nodes_per_leaf": 16,
                    "leaves_per_pod": 2,
                    "pod_oversubscription": pod_over,
                }
            )
        }
    )


def test_pod_boundary_slows_exactly_the_groups_that_cross_it() -> None:
    """Two pods of 32 nodes at 1:7 above them: with pp outermost, only the pipeline's stage
    boundary crosses the pods (Alibaba HPN's placement); with dp outermost, the gradient
    ring crosses them instead."""
    model = load_model("llama3-70b")
    layout = Layout(tp=8, pp=2, dp=32, seq=4096, gbs=256, distributed_optimizer=True)
    flags = Flags(overlap_grad_reduce=False)

    def comm(pod_over: float, order: str) -> dict[str, float]:
        out = estimate(model, _two_pods(pod_over), layout, dataclasses.replace(flags, order=order))
        return {**out["comm_total_s"], "tiers": out["comm_tiers"]}

    flat, steep = comm(1.0, ("tp", "cp", "dp", "pp")), comm(7.0, ("tp", "cp", "dp", "pp"))
    assert steep["tiers"]["pp"] == "core" and steep["tiers"]["dp"] == "spine"
    assert steep["pp"] > 1.5 * flat["pp"]
    for kind in ("tp", "dp"):
        assert steep[kind] == pytest.approx(flat[kind])
    flat, steep = comm(1.0, ("tp", "cp", "pp", "dp")), comm(7.0, ("tp", "cp", "pp", "dp"))
    assert steep["tiers"]["dp"] == "core" and steep["tiers"]["pp"] != "core"
    assert steep["pp"] == pytest.approx(flat["pp"]) and steep["tp"] == pytest.approx(flat["tp"])
    # a contiguous ring crosses each pod boundary once: 1:7 leaves it on its NICs' pace
    assert steep["dp"] >= flat["dp"]
    # pp 4 (stages of 16 nodes): the boundary falls between stages 1 and 2, not at the first
    # pair; the step waits for that pair, so pp pays the pods and nothing else does
    layout = layout.model_copy(update={"pp": 4, "dp": 16})
    d = Degrees(tp=8, cp=1, ep=1, dp=16, pp=4)
    assert Placement.contiguous(_two_pods(7.0)).span([0, 128]).pods == 1
    assert worst_group(_two_pods(7.0), d, "pp").ranks == (128, 256)
    flat, steep = comm(1.0, ("tp", "cp", "dp", "pp")), comm(7.0, ("tp", "cp", "dp", "pp"))
    assert steep["tiers"]["pp"] == "core" and steep["tiers"]["dp"] == "leaf"
    assert steep["pp"] > 1.5 * flat["pp"]
    for kind in ("tp", "dp"):
        assert steep[kind] == pytest.approx(flat[kind])


def _leaves_of_8(pod_sizes: tuple[int, ...], pod_over: float) -> ClusterSpec:
    """64 DGX H100 nodes in leaves of 8, pods of `pod_sizes` leaves."""
    base = load_cluster("dgx-h100", nodes=64)
    return base.model_copy(
        update={
            "topology": base.topology.model_copy(
                update={
                    "nodes_per_leaf": 8,
                    "pod_sizes": pod_sizes,
                    "pod_oversubscription": pod_over,
                }
            )
        }
    )


def test_pod_boundary_inside_a_later_dp_group_slows_exactly_dp() -> None:
    """tp 8, pp 4, dp 16: stages of 16 nodes (2 leaves). A 15:1 boundary at node 32 falls
    between stages (pp crosses it); at node 40 it falls inside the third stage's dp groups
    too, the first stage's staying inside one pod. Moving it there slows dp alone: the stage
    pairs cross the pods once either way, and tp stays in its node."""
    model = load_model("llama3-70b")
    layout = Layout(tp=8, pp=4, dp=16, seq=4096, gbs=256, distributed_optimizer=True)
    flags = Flags(overlap_grad_reduce=False)
    d = Degrees(tp=8, cp=1, ep=1, dp=16, pp=4)

    def comm(pod_sizes: tuple[int, ...], pod_over: float = 15.0) -> dict[str, Any]:
        out = estimate(model, _leaves_of_8(pod_sizes, pod_over), layout, flags)
        return {**out["comm_total_s"], "tiers": out["comm_tiers"]}

    between, inside, flat = comm((4, 4)), comm((5, 3)), comm((5, 3), 1.0)
    assert between["tiers"]["dp"] == "spine" and inside["tiers"]["dp"] == "core"
    assert between["tiers"]["pp"] == inside["tiers"]["pp"] == "core"
    worst = worst_group(_leaves_of_8((5, 3), 15.0), d, "dpcp")
    assert worst.ranks[0] == 256 and worst.span.pods == 2  # the third stage's first dp group
    assert Placement.contiguous(_leaves_of_8((5, 3), 15.0)).span(range(0, 128, 8)).pods == 1
    assert inside["dp"] > 1.5 * between["dp"] and inside["dp"] > 1.5 * flat["dp"]
    for kind in ("tp", "pp"):
        assert inside[kind] == pytest.approx(between[kind])


def test_plan_says_what_crosses_the_pods(tmp_path: Path) -> None:
    """A 15:1 pod boundary between later stages: the plan's pp row is core, counts the
    pipelines that cross and names the slowest one; its why line names pp, and its JSON and
    table agree."""
    spec = tmp_path / "two-pods.yaml"
    spec.write_text(
        "name: two-pods\ngpu: h100-sxm\ngpus_per_node: 8\nnodes: 64\nintra: nvlink4\n"
        "inter: {nic: ndr400, nics_per_node: 8}\n"
        "topology: {kind: rail-optimized, nodes_per_leaf: 16, leaves_per_pod: 2,"
        " pod_oversubscription: 15}\n"
    )
    base = [
        "plan", "-m", "llama3-70b", "-c", str(spec), "--gbs", "256", "--seq", "4096",
        "--fix", "tp=8,pp=4,cp=1",
    ]  # fmt: skip
    out = cli_json(*base)
    rows = {m["kind"]: m for m in out["mapping"]}
    for m in out["mapping"]:
        assert (m["tier"] == "core") == (m["groups_crossing_pods"] > 0) == (m["pods_per_group"] > 1)
    pp = rows["pp"]
    assert pp["tier"] == "core" and pp["groups_crossing_pods"] == pp["priced_groups"] == 128
    assert pp["slowest_group"] == ["node0:gpu0", "node16:gpu0", "node32:gpu0", "node48:gpu0"]
    best = out["plans"][0]
    assert best["comm_tiers"]["pp"] == "core" and "crosses pods: pp" in best["why"]
    human = run_cli(*base).stdout
    assert "pods/group" in human and "128 of 128" in human and "crosses pods: pp" in human


def test_pod_oversubscription_divides_a_ring_that_crosses_pods_often() -> None:
    """A scattered ring steps between pods on every step: 1:7 above the pods is its bound."""
    sizes = [4 * GIB]
    busbw = {}
    for over in (1.0, 7.0):
        c = _two_pods(over)
        nodes = [n for pair in zip(range(32), range(32, 64), strict=True) for n in pair]
        placement = Placement.contiguous(c, 64, nodes=nodes, ranks_per_node=1)
        shape = group_shape(c, placement=placement)
        assert shape.n_pod == 2 and shape.pod_crossings == 64
        busbw[over] = float(predict("all_reduce", shape, sizes, "ring").busbw_GBps[0])
        expect = shape.n_dom * shape.pod_uplink_GBps_per_domain / shape.pod_crossings
        assert busbw[over] <= expect * (1 + 1e-9)
    assert busbw[7.0] < busbw[1.0] / 3


def test_ecmp_flows_over_a_pod_boundary_hash_onto_its_fewer_uplinks() -> None:
    """RoCE (ECMP), 64 nodes in two pods of 2 leaves of 16: a data-parallel ring in block
    order crosses the pod boundary once per channel, its 2 channels x 8 sibling rings = 16
    flows leaving a pod hashed onto the pod's uplinks, 2 x 128 at 1:1, 256 / 7 -> 37 at
    1:7, and into the other pod's downlinks (4 switches). At 1:7 the pod's links, not the
    leaves', set the ring's pace."""
    busbw = {}
    for over, links in ((1.0, 256), (7.0, 37)):
        c = _roce(routing="ecmp")
        topo = {"nodes_per_leaf": 16, "leaves_per_pod": 2, "pod_oversubscription": over}
        c = c.model_copy(update={"topology": c.topology.model_copy(update=topo)})
        s = _dp_shape(c, False)
        assert channels(s) == 2
        leaf, pod = s.busiest_link(channels(s), ring_crossings(s))
        assert (pod["level"], pod["flows"], pod["switches"]) == ("pod", 16, 2)
        assert pod["uplinks"] == links
        assert pod["busiest_link_flows"] == pytest.approx(expected_max_load(16, links, 4))
        assert leaf["busiest_link_flows"] == pytest.approx(expected_max_load(16, 128, 8))
        busbw[over] = ring_busbw(s)
    # one flow per channel at a port's rate over the busiest link's flows
    port = 2 * s.port_GBps
    assert busbw[1.0] == pytest.approx(port / expected_max_load(16, 128, 8))
    assert busbw[7.0] == pytest.approx(port / expected_max_load(16, 37, 4))


@pytest.mark.parametrize(("share", "slow"), [(0.005, 0.10), (0.02, 0.25), (0.0, 0.5)])
@pytest.mark.parametrize("nodes", [1, 16, 512, 3072])
def test_straggler_fleet_expected_step_slowdown(share: float, slow: float, nodes: int) -> None:
    fleet = FleetSpec(slow_node_share=share, slow_node_slowdown=slow)
    assert fleet.step_slowdown(nodes, nodes * 8) == pytest.approx(slow * (1 - (1 - share) ** nodes))
    if share == 0:
        assert fleet.step_slowdown(nodes, nodes * 8) == 0.0


def test_gpu_spread_adds_the_expected_slowest_gpu() -> None:
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-6)
    assert expected_max_normal(1) == 0.0
    rng = np.random.default_rng(7)
    simulated = rng.standard_normal((4000, 512)).max(axis=1).mean()
    assert expected_max_normal(512) == pytest.approx(simulated, rel=0.01)
    fleet = FleetSpec(gpu_speed_spread=0.01)
    assert fleet.step_slowdown(64, 512) == pytest.approx(0.01 * expected_max_normal(512))
    # a slow node and the spread add: 0.25 x 0.02 on one node, 0.01 / sqrt(pi) for 2 GPUs
    both = FleetSpec(slow_node_share=0.02, slow_node_slowdown=0.25, gpu_speed_spread=0.01)
    assert both.step_slowdown(1, 2) == pytest.approx(0.005 + 0.01 / math.sqrt(math.pi))


def test_straggler_term_in_the_step_time() -> None:
    model = load_model("llama3-70b")
    layout = Layout(tp=8, pp=4, dp=8, seq=4096, gbs=256, distributed_optimizer=True)
    calm = load_cluster("dgx-h100", nodes=32)
    assert calm.fleet.name == "well-run"
    base = estimate(model, calm, layout)
    assert base["breakdown"]["straggler_s"] == 0.0
    slow = calm.model_copy(update={"fleet": FleetSpec.model_validate("megascale-nsdi24")})
    r = estimate(model, slow, layout)
    expect = 0.10 * (1 - (1 - 0.005) ** 32) * r["breakdown"]["compute_s"]
    assert r["breakdown"]["straggler_s"] == pytest.approx(expect)
    assert r["step_time_s"] == pytest.approx(base["step_time_s"] + expect)


def test_fleet_names_and_errors() -> None:
    assert FleetSpec.model_validate("megascale-nsdi24").slow_node_share == 0.005
    with pytest.raises(ValueError, match="unknown fleet"):
        FleetSpec.model_validate("nope")


def test_collective_explain_reports_the_busiest_uplink() -> None:
    out = cli_json(
        "collective", "--cluster", "mi300x-8", "--nodes", "64", "-b", "1G", "-e", "1G",
        "--explain", "--qps-per-connection", "4",
    )  # fmt: skip
    assert set(out["priced_algos"]) == {r["algo"] for r in out["rows"]}
    (leaf,) = out["busiest_links"]
    assert leaf["algo"] == out["rows"][0]["algo"]
    assert leaf["level"] == "leaf" and leaf["routing"] == "ecmp"
    assert leaf["flows"] == 16 * 4 and leaf["uplinks"] == 16 * 8 and leaf["switches"] == 4
    assert leaf["busiest_link_flows"] == pytest.approx(expected_max_load(64, 128, 8))
    assert leaf["one_switch_busiest_flows"] == pytest.approx(expected_max_load(64, 128))
    assert leaf["busiest_link_share"] == pytest.approx(leaf["busiest_link_flows"] / 64)


def test_collective_explain_shows_what_the_priced_algorithm_loads() -> None:
    """An alltoall loads every pair's connections, not a ring's channels; a collective inside
    one node loads no uplink at all."""
    out = cli_json(
        "collective", "--cluster", "dgx-h100", "--nodes", "512", "--routing", "ecmp",
        "--op", "alltoall", "-b", "1G", "-e", "1G", "--explain",
    )  # fmt: skip
    assert out["priced_algos"] == ["pairwise"]
    (leaf,) = out["busiest_links"]
    assert leaf["algo"] == "pairwise" and leaf["stage_ranks"] == 4096
    # one leaf's 256 ranks each hold a connection to each of the 3,840 outside it, over the
    # leaf's 8 rail switches
    assert leaf["flows"] == 256 * 3840 // 8 and leaf["switches"] == 16 * 8
    ring = cli_json(
        "collective", "--cluster", "dgx-h100", "--nodes", "512", "--routing", "ecmp",
        "-b", "1G", "-e", "1G", "--explain", "--algo", "ring",
    )  # fmt: skip
    assert ring["busiest_links"][0]["flows"] < leaf["flows"] / 100
    one = cli_json("collective", "--cluster", "dgx-h100", "--nodes", "1", "-b", "1G", "-e", "1G",
                   "--explain", "--routing", "ecmp")  # fmt: skip
    assert one["priced_algos"] and one["busiest_links"] == []


def test_alltoall_relayed_through_the_spine_hashes_its_connections() -> None:
    """Without NVLink a rail-optimized fabric sends rail-changing bytes up through the spine,
    also when both nodes sit under one leaf: each rank's 7 peers on other rails of the other
    node climb, 16 x 7 connections over the 8 rail switches = 14 flows a switch, hashed
    (was a ZeroDivisionError: no connection counted), slower than adaptive routing."""
    args = ("collective", "--intra", "pcie5", "--nodes", "2", "--op", "alltoall",
            "-b", "1G", "-e", "1G")  # fmt: skip
    out = cli_json(*args, "--routing", "ecmp", "--explain")
    (leaf,) = out["busiest_links"]
    assert leaf["level"] == "leaf" and leaf["flows"] == 16 * 7 // 8 and leaf["switches"] == 8
    assert leaf["busiest_link_flows"] == pytest.approx(expected_max_load(14, 2, 16))
    adaptive = cli_json(*args, "--routing", "adaptive")
    assert out["rows"][0]["time_us"] > adaptive["rows"][0]["time_us"]


def test_sweep_varies_the_fleet_and_routing() -> None:
    out = cli_json(
        "sweep", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "4",
        "--gbs", "64", "--seq", "4096", "--vary", "slow_node_share=0,0.05",
        "--vary", "slow_node_slowdown=0.2",
    )  # fmt: skip
    rows = out["rows"]
    assert out["notes"] == []  # each of the two changes the step with the other above 0
    assert [r["slow_node_share"] for r in rows] == [0.0, 0.05]
    expected = 1 + 0.2 * (1 - 0.95**4)
    assert rows[1]["step_time_s"] > rows[0]["step_time_s"]
    assert rows[1]["step_time_s"] <= rows[0]["step_time_s"] * expected * (1 + 1e-6)


_SWEEP = ("sweep", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "4", "--gbs", "64")


@pytest.mark.parametrize(
    ("varies", "idle", "other", "where"),
    [
        (["slow_node_slowdown=0.1,0.3"], "slow_node_slowdown", "slow_node_share", "on dgx-h100"),
        (
            ["slow_node_share=0.01,0.2", "slow_node_slowdown=0"],
            "slow_node_share",
            "slow_node_slowdown",
            "in every row",
        ),
    ],
)
def test_sweep_says_a_fleet_value_that_changes_nothing(
    varies: list[str], idle: str, other: str, where: str
) -> None:
    """A slow node needs a share and a slowdown: varying one while the other is 0 gave
    identical rows and said nothing."""
    out = cli_json(*_SWEEP, *(a for v in varies for a in ("--vary", v)))
    (note,) = out["notes"]
    assert note.startswith(f"--vary {idle} changes nothing: {other} is 0 {where}")
    assert len({r["step_time_s"] for r in out["rows"]}) == 1
    text = run_cli(*_SWEEP, *(a for v in varies for a in ("--vary", v))).stdout
    assert f"--vary {idle} changes nothing" in " ".join(text.split())


@pytest.mark.parametrize(
    ("varies", "said"),
    [
        (
            ["qps_per_connection=1,4", "nodes=4"],
            "--vary qps_per_connection changes nothing: dgx-h100 routes adaptively",
        ),
        (["routing=ecmp,static"], "--vary routing changes nothing: no traffic of dgx-h100"),
        (["oversubscription=1,2"], "--vary oversubscription changes nothing: all 4 node(s)"),
    ],
)
def test_sweep_says_a_fabric_value_that_changes_nothing(varies: list[str], said: str) -> None:
    """The option given once says so (`idle_overrides`); varied, it gave identical rows and
    said nothing."""
    base = (*_SWEEP, "--nodes-per-leaf", "2") if "nodes=4" in varies else _SWEEP
    out = cli_json(*base, *(a for v in varies for a in ("--vary", v)))
    assert [n for n in out["notes"] if n.startswith(said)], out["notes"]
    assert len({r["step_time_s"] for r in out["rows"]}) == 1
    spread = cli_json(*_SWEEP, "--nodes-per-leaf", "2", "--vary", "routing=ecmp,static")
    assert spread["notes"] == []  # 2 leaves: routing spreads the uplinks' flows


@pytest.mark.parametrize(
    ("varies", "needles"),
    [
        (["qps_per_connection=0"], ["--vary qps_per_connection: 0", "allowed: 1 to 128"]),
        (["slow_node_share=1,2", "nodes=2,4"], ["--vary slow_node_share: 1.0", "< 1.0"]),
        (["routing=fast"], ["--vary routing: 'fast'", "'ecmp', 'adaptive' or 'static'"]),
    ],
)
def test_sweep_of_only_invalid_values_is_a_user_error(
    varies: list[str], needles: list[str]
) -> None:
    """It exited 0 with nothing but error rows; now one line naming the input, the value and
    what is allowed, exit 2."""
    args = (a for v in varies for a in ("--vary", v))
    assert_user_error(run_cli(*_SWEEP, *args, check=False), *needles)


def test_sweep_with_some_valid_values_keeps_the_invalid_ones_as_rows() -> None:
    rows = cli_json(*_SWEEP, "--vary", "qps_per_connection=0,2")["rows"]
    assert rows[0]["error"].startswith("--vary qps_per_connection: 0; allowed: 1 to 128")
    assert rows[1]["tokens_per_s"] > 0
