"""`tierwise lab ecmp`: ring placements under ECMP hashing, the model's price, and (root) a
measured colliding vs spread ring on two spines with no namespace left behind."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.test_lab_fabric import PREFIX, lab_env, leftovers  # noqa: F401
from tierwise.collectives.links import expected_max_load
from tierwise.errors import TierwiseError
from tierwise.lab import netns
from tierwise.lab.cluster import host_memory_bytes
from tierwise.lab.ecmp import (
    TCP_PAYLOAD_SHARE,
    EcmpRun,
    carried_flows,
    choose_rings,
    expected_ring_busbw,
    link_loads,
    link_name,
    predict_ring,
)
from tierwise.lab.fabric import FabricConfig
from tierwise.lab.ring_worker import RingTask

MBIT = 1_000_000
CFG = FabricConfig(nodes=8, rate_bit=100 * MBIT, oversubscription=2.0, spines=2, prefix=PREFIX)


def _by_source(src: int, dst: int) -> int | None:
    """A made-up hash: the spine is the source node's parity (None inside one leaf)."""
    return None if CFG.leaf_of(src) == CFG.leaf_of(dst) else src % 2


def test_spine_links_carry_their_share_of_the_leaf() -> None:
    assert CFG.leaves == 2 and CFG.nodes_per_leaf == 4
    assert CFG.spine_link_rate_bit == 100 * MBIT  # 4 x 100 Mbit / (2:1 x 2 spines)
    assert [CFG.node_addr(i) for i in (0, 3, 4, 7)] == [
        "192.0.2.2",
        "192.0.2.5",
        "192.0.2.66",
        "192.0.2.69",
    ]


def test_rings_are_chosen_by_their_busiest_link() -> None:
    rings = choose_rings(CFG, _by_source)
    # 4 -> 1 and 6 -> 0 both leave leaf 1 on spine 0: they collide
    assert rings["colliding"] == [0, 4, 1, 6]
    assert max(link_loads(CFG, rings["colliding"], _by_source).values()) == 2
    assert max(link_loads(CFG, rings["spread"], _by_source).values()) == 1


def test_prediction_halves_a_flow_sharing_its_spine_link() -> None:
    rings = choose_rings(CFG, _by_source)
    nic = 100 * MBIT / 8e9 * TCP_PAYLOAD_SHARE
    assert predict_ring(CFG, rings["spread"], _by_source)["busbw_GBps"] == pytest.approx(nic)
    assert predict_ring(CFG, rings["colliding"], _by_source)["busbw_GBps"] == pytest.approx(nic / 2)
    # unknown hashes: two flows over two spines collide half the time, E[max] = 1.5 at one
    # leaf; the ring's busiest link is that of both leaves: 2 unless neither collides (1/4)
    assert expected_max_load(2, 2) == pytest.approx(1.5)
    assert expected_max_load(2, 2, 2) == pytest.approx(1.75)
    assert expected_ring_busbw(CFG) == pytest.approx(nic / 1.75)


def test_link_counters_read_as_flows() -> None:
    task = RingTask(1 << 20, warmup=1, iters=3)
    flow_b = 4 * (1 << 20) / TCP_PAYLOAD_SHARE  # one flow's frames over 4 steps
    before = {("up", 0, 1): 1000, ("down", 1, 1): 0, ("up", 1, 0): 5}
    after = {("up", 0, 1): 1000 + int(2 * flow_b), ("down", 1, 1): int(flow_b), ("up", 1, 0): 5}
    carried = carried_flows(task, before, after)
    assert carried == {
        "leaf0>spine1": pytest.approx(2.0, abs=1e-6),
        "leaf1>spine0": 0.0,
        "spine1>leaf1": pytest.approx(1.0, abs=1e-6),
    }
    assert link_name(("up", 1, 0)) == "leaf1>spine0"


def test_bad_runs_are_one_line_errors() -> None:
    with pytest.raises(TierwiseError, match="--spines"):
        FabricConfig(nodes=8, rate_bit=100 * MBIT, spines=1)
    with pytest.raises(TierwiseError, match="even number of nodes >= 4"):
        FabricConfig(nodes=2, rate_bit=100 * MBIT, spines=2)
    with pytest.raises(TierwiseError, match="needs --spines"):
        EcmpRun(FabricConfig(nodes=4, rate_bit=100 * MBIT), RingTask(1 << 20))
    hashed_ports = FabricConfig(nodes=4, rate_bit=100 * MBIT, spines=2, hash_policy=1)
    with pytest.raises(TierwiseError, match="hash-policy"):
        EcmpRun(hashed_ports, RingTask(1 << 20))
    with pytest.raises(TierwiseError, match="--iters >= 1"):
        RingTask(1 << 20, iters=0)
    spined = FabricConfig(nodes=4, rate_bit=100 * MBIT, spines=2)
    with pytest.raises(TierwiseError, match=r"--size: \d+ B; allowed: .* \(4 ranks x 2 buffers"):
        EcmpRun(spined, RingTask(host_memory_bytes()))


@pytest.mark.lab
@pytest.mark.usefixtures("lab_env")
@pytest.mark.skipif(
    netns.missing_requirements() is not None,
    reason=f"lab unavailable: {netns.missing_requirements()}",
)
def test_colliding_ring_measured_slower_as_predicted() -> None:
    """At 100 Mbit spine links, flows hashed onto one spine share it: measured >= 1.5x apart,
    the model's ratio within 20% of the measured one, every link carrying the flows the
    hashes put on it; nothing left behind."""
    proc = run_cli(
        "lab", "ecmp", "--nodes", "8", "--inter-rate", "100mbit", "--spines", "2",
        "--size", "4M", "--iters", "2", "--json", timeout=240,
    )  # fmt: skip
    data = json.loads(proc.stdout)
    assert set(data["placements"]) == {"colliding", "spread"}
    assert data["placements"]["colliding"]["busiest_link_flows"] == 2
    assert data["measured_ratio"] >= 1.5
    assert data["predicted_ratio"] == pytest.approx(2.0)
    assert data["predicted_ratio"] == pytest.approx(data["measured_ratio"], rel=0.2)
    for name, placement in data["placements"].items():
        # the links' byte counters carried the flows the hashes put on them (+ ACKs, control)
        for link, flows in placement["measured_link_flows"].items():
            predicted = placement["link_flows"].get(link, 0.0)
            assert predicted - 0.05 < flows < predicted + 0.15, (name, link, flows)
    assert not leftovers()
