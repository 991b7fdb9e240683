"""Collective cost model: hand-computed values, physics shapes and properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.collectives.model import ALGOS, auto_candidates, candidates
from tierwise.collectives.predict import group_shape, predict, time_us
from tierwise.errors import SpecError
from tierwise.hardware.cluster import load_cluster
from tierwise.hardware.placement import Placement

BIG = 1 << 34  # 16 GiB, as the calibration log's last row
NVLINK4_RING = 450 * 0.82  # catalog line rate x Simple efficiency, GB/s
NDR_PORT = 50 * 0.94  # one NDR NIC's effective bandwidth, GB/s


def busbw(
    cluster: str,
    nodes: int,
    op: str = "all_reduce",
    algo: str = "auto",
    size: int = BIG,
    **kw: object,
) -> float:
    c = load_cluster(cluster, nodes=nodes, **kw)
    return float(predict(op, group_shape(c), [size], algo).busbw_GBps[0])


def test_single_node_ring_and_nvls_large_messages() -> None:
    c = load_cluster("dgx-h100", nodes=1)
    ring = next(
        x
        for x in candidates("all_reduce", group_shape(c))
        if x.algo == "ring" and x.proto == "Simple"
    )
    assert ring.lat_us == pytest.approx(8.4 + 14 * 3.4)  # base + 2(p-1) Simple NVLink steps
    assert ring.algbw_GBps == pytest.approx(NVLINK4_RING * 8 / 14)
    assert busbw("dgx-h100", 1, algo="ring") == pytest.approx(NVLINK4_RING, rel=0.01)
    nvls = busbw("dgx-h100", 1)
    assert nvls == pytest.approx(0.61 * 450 * 14 / 8, rel=0.01)  # 480 GB/s, NVLink-bound
    assert predict("all_reduce", group_shape(c), [BIG]).algo == ["nvls"]


def test_small_message_latency_is_ll_ring() -> None:
    c = load_cluster("dgx-h100", nodes=1)
    p = predict("all_reduce", group_shape(c), [8])
    assert p.time_us[0] == pytest.approx(6.6 + 14 * 0.6, rel=1e-3)  # LL base + 14 NVLink steps
    assert p.proto == ["LL"]


def test_multi_node_is_nic_bound() -> None:
    nic_bound = 8 * NDR_PORT  # 8 rails x 47 GB/s
    for nodes in (2, 16):
        ring = busbw("dgx-h100", nodes, algo="ring")
        assert ring == pytest.approx(min(NVLINK4_RING, nic_bound), rel=0.02)
    assert busbw("dgx-h100", 16) == pytest.approx(nic_bound, rel=0.08)
    # DGX A100 multi-node, 8 x HDR: 8 x 24 GB/s = 192 GB/s (shared/calibration points.yaml)
    assert busbw("dgx-a100", 4, algo="ring") == pytest.approx(192, rel=0.03)


def test_fewer_nics_than_gpus_drop_to_their_share() -> None:
    # pcie-h100: 2 x 200 Gb/s for 8 GPUs; the ring crosses nodes on 2 rails
    bw = busbw("pcie-h100", 4, algo="ring")
    assert bw == pytest.approx(2 * 25 * 0.92, rel=0.02)
    assert bw < busbw("dgx-h100", 4, algo="ring") / 5


def test_hierarchical_beats_flat_ring_when_ring_cannot_use_rails() -> None:
    c = load_cluster("dgx-h100", nodes=2)
    placement = Placement.contiguous(c)
    scattered = np.arange(16).reshape(2, 8).T.ravel()  # every ring step crosses nodes
    shape = group_shape(c, scattered.tolist(), placement)
    flat = predict("all_reduce", shape, [1 << 30], "ring")
    hier = predict("all_reduce", shape, [1 << 30], "hierarchical")
    assert flat.busbw_GBps[0] == pytest.approx(2 * 8 * NDR_PORT / 16, rel=0.05)  # one port each
    assert hier.time_us[0] < flat.time_us[0] / 3


def test_in_network_reduction_raises_large_message_busbw() -> None:
    plain = busbw("dgx-h100", 16, algo="ring")
    c = load_cluster("dgx-h100", nodes=16).model_copy(update={"in_network_reduction": "nvls+sharp"})
    # NVLS in the node + SHARP across: the NVLS stage (0.85 x 0.717 x 450 x 0.91) bounds algbw
    nvls = float(predict("all_reduce", group_shape(c), [BIG], "nvls").busbw_GBps[0])
    assert nvls == pytest.approx(0.85 * 0.717 * 450 * 0.91 * 2 * 127 / 128, rel=0.01)
    assert nvls > 1.3 * plain
    # CollNet chain: the chain through the node's GPUs moves 2n per GPU: NVLink / 2
    chain = float(predict("all_reduce", group_shape(c), [BIG], "sharp").busbw_GBps[0])
    assert chain == pytest.approx(NVLINK4_RING / 2 * 2 * 127 / 128, rel=0.01)
    a100 = load_cluster("dgx-a100", nodes=4).model_copy(update={"in_network_reduction": "sharp"})
    assert float(predict("all_reduce", group_shape(a100), [BIG], "sharp").busbw_GBps[0]) > 192


def test_alltoall_far_below_all_reduce_across_nodes() -> None:
    a2a = busbw("dgx-h100", 16, op="alltoall")
    assert a2a < busbw("dgx-h100", 16) / 5
    # nccl-tests maintainer: on 2 nodes alltoall busbw ~ 2 x per-GPU network bandwidth
    assert busbw("dgx-h100", 2, op="alltoall") == pytest.approx(2 * NDR_PORT, rel=0.1)


def test_oversubscription_slows_cross_leaf_alltoall_not_rings() -> None:
    flat = busbw("dgx-h100", 64, op="alltoall")
    over = busbw("dgx-h100", 64, op="alltoall", oversubscription=4.0)
    assert over < 0.5 * flat
    assert busbw("dgx-h100", 64, algo="ring", oversubscription=4.0) == pytest.approx(
        busbw("dgx-h100", 64, algo="ring"), rel=0.01
    )


def test_contention_of_concurrent_groups_on_shared_nics() -> None:
    c = load_cluster("pcie-h100", nodes=4)
    p = Placement.contiguous(c)
    one = group_shape(c, list(range(0, 32, 8)), p, nic_share=1)
    four = group_shape(c, list(range(0, 32, 8)), p, nic_share=4)
    assert time_us("all_reduce", four, 1 << 28) > 3.5 * time_us("all_reduce", one, 1 << 28)


def test_sendrecv_and_broadcast_factors() -> None:
    c = load_cluster("dgx-h100", nodes=2)
    s = group_shape(c)
    for op in ("sendrecv", "broadcast", "reduce"):
        p = predict(op, s, [1 << 30])
        assert p.busbw_GBps[0] == pytest.approx(p.algbw_GBps[0])


def test_one_rank_costs_nothing_and_bad_algo_is_an_error() -> None:
    c = load_cluster("dgx-h100", nodes=1)
    one = group_shape(c, [0])
    assert predict("all_reduce", one, [1024]).time_us[0] == 0
    with pytest.raises(SpecError, match="sharp"):
        predict("all_reduce", group_shape(c), [1024], "sharp")
    with pytest.raises(SpecError, match="allowed"):
        predict("all_reduce", group_shape(c), [1024], "magic")


CLUSTERS = ["dgx-h100", "dgx-a100", "pcie-h100", "gb200-nvl72", "mi300x-8", "dgx-b200"]
REDUCE_LIKE = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"]


@st.composite
def groups(draw: st.DrawFn) -> tuple[object, list[int]]:
    name = draw(st.sampled_from(CLUSTERS))
    c = load_cluster(name, nodes=draw(st.sampled_from([1, 2, 4, 16])))
    if draw(st.booleans()):
        c = c.model_copy(
            update={
                "in_network_reduction": draw(
                    st.sampled_from(["none", "nvls", "sharp", "nvls+sharp"])
                )
            }
        )
    world = c.world
    size = draw(st.integers(2, world))
    stride = draw(st.sampled_from([1, c.gpus_per_node])) if size * c.gpus_per_node <= world else 1
    ranks = list(range(0, size * stride, stride))
    return c, ranks


@settings(max_examples=60, deadline=None)
@given(groups(), st.sampled_from([*REDUCE_LIKE, "alltoall", "sendrecv"]))
def test_time_is_monotone_in_size_and_auto_is_fastest(group: tuple, op: str) -> None:
    c, ranks = group
    shape = group_shape(c, ranks)
    sizes = 2 ** np.arange(3, 36)
    auto = predict(op, shape, sizes)
    assert np.all(np.diff(auto.time_us) >= 0)
    nccl = {x.algo for x in auto_candidates(op, shape)}
    for algo in {x.algo for x in candidates(op, shape)}:
        one = predict(op, shape, sizes, algo)
        assert np.all(np.diff(one.time_us) >= 0)
        if algo in nccl:  # auto is NCCL's choice: the fastest of NCCL's algorithms
            assert np.all(auto.time_us <= one.time_us * (1 + 1e-12))


def test_every_algo_name_is_known() -> None:
    c = load_cluster("dgx-h100", nodes=16).model_copy(update={"in_network_reduction": "nvls+sharp"})
    for op in [*REDUCE_LIKE, "alltoall", "sendrecv"]:
        assert {x.algo for x in candidates(op, group_shape(c))} <= set(ALGOS)


def test_sendrecv_across_an_oversubscribed_spine_gets_the_uplink_share() -> None:
    c = load_cluster("dgx-h100", nodes=64, oversubscription=4.0)
    p = Placement.contiguous(c)
    same_leaf = group_shape(c, [0, 8], p)  # nodes 0 and 1
    across = group_shape(c, [0, 256], p)  # nodes 0 and 32: two leaves
    near = predict("sendrecv", same_leaf, [1 << 30]).busbw_GBps[0]
    far = predict("sendrecv", across, [1 << 30]).busbw_GBps[0]
    assert near == pytest.approx(NDR_PORT, rel=0.01)
    assert far == pytest.approx(NDR_PORT / 4, rel=0.01)
