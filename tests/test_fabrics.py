"""Rail-only and multi-plane fabrics: which steps change rail, what that costs on each fabric
kind (PXN hop over NVLink, the spine of a rail-optimized fabric, nothing on a fat-tree), and
how planes widen a leaf. Values are hand-computed from the formulas in collectives/model.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tierwise.collectives import model as M
from tierwise.collectives import tables as T
from tierwise.collectives.predict import group_shape
from tierwise.collectives.shape import Shape, relay_of
from tierwise.hardware.cluster import ClusterSpec, load_cluster
from tierwise.hardware.placement import Placement
from tierwise.hardware.tiers import EXTRA_LEVEL_LATENCY_US, tiers

DIAG = [n * 8 + n for n in range(4)]  # one GPU per node, local rank = node: four rails
SAME = [n * 8 for n in range(4)]  # one GPU per node, all on rail 0


def _dgx(kind: str, intra: str = "nvlink4", nodes: int = 4, **extra: object) -> ClusterSpec:
    return load_cluster("dgx-h100", nodes=nodes, topology=kind, intra=intra, **extra)


def _shape(c: ClusterSpec, ranks: list[int] | None = None) -> Shape:
    return group_shape(c, ranks, placement=Placement.contiguous(c))


def _cand(op: str, s: Shape, algo: str, proto: str) -> M.Candidate:
    return next(x for x in M.candidates(op, s) if x.algo == algo and x.proto == proto)


def test_rail_changes_of_groups() -> None:
    p = Placement.contiguous(_dgx("rail-only"))
    diag, same, full = p.span(DIAG), p.span(SAME), p.span(range(32))
    assert (diag.rail_changes, diag.pair_rail_changes, diag.cross_rail_share) == (4.0, 4, 1.0)
    assert (same.rail_changes, same.pair_rail_changes, same.cross_rail_share) == (0.0, 0, 0.0)
    # Full nodes: NCCL picks each ring's ends on one rail (no change); rank order steps 7 -> 8,
    # 15 -> 16, ... change rail (4 of them); an alltoall's remote peers sit on the sender's rail
    # 3 times out of 24: 1 - 3/24 = 7/8.
    assert (full.rail_changes, full.pair_rail_changes) == (0.0, 4)
    assert full.cross_rail_share == pytest.approx(7 / 8)
    # Two GPUs per node on rails {0, 1} then {1, 2}: each crossing keeps one of two rails.
    half = p.span([0, 1, 9, 10])
    assert half.rail_changes == pytest.approx(0.5 + 0.5)
    # pairs across nodes: 8; same rail: (0->none) rail 1 twice (1<->9 both ways) = 2 -> 1 - 2/8
    assert half.cross_rail_share == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("kind", "intra", "relay"),
    [
        ("rail-only", "nvlink4", "pxn"),
        ("rail-only", "pcie5", "pxn"),
        ("rail-optimized", "nvlink4", "pxn"),
        ("rail-optimized", "pcie5", "spine"),
        ("fat-tree", "nvlink4", "none"),
        ("spine-leaf", "pcie5", "none"),
    ],
)
def test_relay_by_fabric(kind: str, intra: str, relay: str) -> None:
    assert relay_of(_dgx(kind, intra)) == relay


def test_sendrecv_across_rails_pays_one_hop() -> None:
    """nccl-tests sendrecv over one GPU per node on four rails: PXN adds one NVLink LL step
    (0.6 us), the spine one switch level (0.5 us), a fat-tree nothing; the same rail costs
    nothing extra anywhere."""
    hop = T.STEP_LAT_US["nvlink"]["ring"]["LL"]
    base = _cand("sendrecv", _shape(_dgx("fat-tree"), DIAG), "ring", "LL").lat_us
    for kind, intra, extra in [
        ("rail-only", "nvlink4", hop),
        ("rail-optimized", "pcie5", EXTRA_LEVEL_LATENCY_US),
        ("fat-tree", "pcie5", 0.0),
    ]:
        c = _dgx(kind, intra)
        assert _cand("sendrecv", _shape(c, DIAG), "ring", "LL").lat_us == pytest.approx(
            base + extra
        )
        assert _cand("sendrecv", _shape(c, SAME), "ring", "LL").lat_us == pytest.approx(base)


def test_ring_across_rails_pays_one_hop_per_network_step() -> None:
    """LL ring all_reduce over the DIAG group: 2(p - 1) = 6 network steps, each changing rail,
    each one NVLink LL hop (0.6 us) more on a rail-only fabric."""
    ro = _cand("all_reduce", _shape(_dgx("rail-only"), DIAG), "ring", "LL").lat_us
    ft = _cand("all_reduce", _shape(_dgx("fat-tree"), DIAG), "ring", "LL").lat_us
    assert ro - ft == pytest.approx(6 * T.STEP_LAT_US["nvlink"]["ring"]["LL"])
    # Tree: log2(4) = 2 levels up and down, each hop one NVLink LL step.
    ro_t = _cand("all_reduce", _shape(_dgx("rail-only"), DIAG), "tree", "LL").lat_us
    ft_t = _cand("all_reduce", _shape(_dgx("fat-tree"), DIAG), "tree", "LL").lat_us
    assert ro_t - ft_t == pytest.approx(2 * 2 * T.STEP_LAT_US["nvlink"]["ring"]["LL"])


def test_full_node_rings_are_unaffected_by_rail_only() -> None:
    """One channel per rail: a ring over full nodes never changes rail."""
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        ro = M.candidates(op, _shape(_dgx("rail-only", nodes=8)))
        ft = M.candidates(op, _shape(_dgx("fat-tree", nodes=8)))
        assert ro == ft


def test_alltoall_relays_cross_rail_bytes_over_nvlink() -> None:
    """32 ranks on 4 full nodes. Per byte of the alltoall, each GPU sends 7/32 to its own node
    and 24/32 off it; 7/8 of that changes rail, and PXN moves it over NVLink first (each GPU
    relays as much for others as it hands off): NVLink carries 7/32 + 7/8 x 24/32 = 7/8 per
    byte. With a 10 GB/s NVLink that bounds it: 0.0875 ns per byte, against 7/32 / 10 on a
    fat-tree (where the NIC bound 24/32 / 47 is then the larger)."""
    ro = replace(_shape(_dgx("rail-only")), intra_GBps=10.0)
    ft = replace(_shape(_dgx("fat-tree")), intra_GBps=10.0)
    assert M._alltoall_bytes_time_per_byte(ro) == pytest.approx((7 / 8) / 10 / 1e3)
    net = (24 / 32) / ft.port_GBps
    assert M._alltoall_bytes_time_per_byte(ft) == pytest.approx(max(7 / 32 / 10, net) / 1e3)


def test_rail_optimized_without_nvlink_relays_through_the_spine() -> None:
    """PCIe nodes cannot PXN: a rail-changing ring on a rail-optimized fabric climbs to the
    spine, whose uplinks (2:1 oversubscribed) bound it; on a fat-tree it stays on the leaf."""
    over = {"oversubscription": 2.0}
    spine = _shape(_dgx("rail-optimized", "pcie5", **over), DIAG)
    leaf = _shape(_dgx("fat-tree", "pcie5", **over), DIAG)
    # ring: 4 nodes x one NIC's uplink share (port / 2) over 4 rail-changing crossings
    assert M.ring_busbw(spine) == pytest.approx(4 * spine.port_GBps / 2 / 4)
    assert M.ring_busbw(leaf) == pytest.approx(leaf.port_GBps)


def test_rail_only_job_beyond_one_rail_switch_crosses_the_rail_spine() -> None:
    c = _dgx("rail-only", nodes=64)  # 32 nodes per rail leaf
    p = Placement.contiguous(c)
    assert p.span(range(32 * 8)).top.name == "leaf"
    assert p.span(range(64 * 8)).top.name == "spine"


def test_planes_widen_the_leaf() -> None:
    """ConnectX-8 as two 400G planes: each plane's leaf reaches 2 x 32 nodes, so a 64-node job
    stays under one leaf (no spine, no oversubscription) where one plane needs the spine."""
    one = load_cluster("dgx-b300", nodes=128, oversubscription=4.0)
    two = load_cluster("dgx-b300", nodes=128, oversubscription=4.0, planes=2)
    assert one.leaf_sizes == (32, 32, 32, 32) and two.leaf_sizes == (64, 64)
    assert [t.name for t in tiers(two)] == ["intra", "leaf", "spine"]
    assert "2 planes of 400G" in tiers(two)[1].medium
    # The NIC rate is the sum over planes: the leaf tier is unchanged.
    assert tiers(two)[1].eff_GBps == tiers(one)[1].eff_GBps
    s1 = _shape(one, list(range(64 * 8)))
    s2 = _shape(two, list(range(64 * 8)))
    assert (s1.top_tier, s2.top_tier) == ("spine", "leaf")
    # alltoall over 64 nodes: half the bytes leave the 32-node leaf through uplinks of a
    # quarter of the NICs' rate (1 / port x 2 per byte against 1 / port at the NICs).
    port = s1.port_GBps
    assert M._alltoall_bytes_time_per_byte(s1) == pytest.approx((256 / 512) / (port / 4) / 1e3)
    assert M._alltoall_bytes_time_per_byte(s2) == pytest.approx((504 / 512) / port / 1e3)


def test_planes_scale_gpus_per_leaf_and_keep_listed_leaves() -> None:
    c = load_cluster("dgx-h100", nodes=64, planes=2)
    assert c.leaf_sizes == (64,)
    topo = {"kind": "rail-optimized", "gpus_per_leaf": 128, "planes": 4}
    by_gpus = c.model_validate({**c.model_dump(), "topology": topo})
    assert by_gpus.leaf_sizes == (64,)
    listed = c.model_validate({**c.model_dump(), "topology": {"leaf_sizes": [16, 48], "planes": 2}})
    assert listed.leaf_sizes == (16, 48)
