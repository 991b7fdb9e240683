"""The collective model against NCCL's tuner (tuning.cc, NCCL 2.30.7): hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.collectives import tables as T
from tierwise.collectives.model import (
    auto_candidates,
    bus_factor,
    candidates,
    channels,
    graph_channels,
    run_channels,
    tree_correction,
)
from tierwise.collectives.predict import group_shape, predict, predicted_busbw
from tierwise.hardware.cluster import load_cluster
from tierwise.hardware.placement import Placement

GIB = 1 << 30
NDR = 50 * 0.94  # one NDR port, effective GB/s
NVLS_H100 = 0.85 * 0.717 * 450  # NCCL's Hopper NVLS efficiency x fitted line share x NVLink 4


def _shape(cluster: str, nodes: int, k: int | None = None, inr: str | None = None):
    c = load_cluster(cluster, nodes=nodes)
    if inr:
        c = c.model_copy(update={"in_network_reduction": inr})
    k = k or c.gpus_per_node
    return group_shape(c, placement=Placement.contiguous(c, nodes * k, ranks_per_node=k))


def _busbw(cluster: str, nodes: int, algo: str = "auto", size: int = 8 * GIB, **kw) -> float:
    return float(predict("all_reduce", _shape(cluster, nodes, **kw), [size], algo).busbw_GBps[0])


def _cand(op: str, shape, algo: str, proto: str):
    return next(c for c in candidates(op, shape) if (c.algo, c.proto) == (algo, proto))


def test_nvls_tree_gain_on_two_nodes_does_not_carry_to_four() -> None:
    # 2 nodes: the tree sends n per node, NVLS in the node bounds it (published ~470 GB/s)
    two = _busbw("dgx-h100", 2)
    assert predict("all_reduce", _shape("dgx-h100", 2), [8 * GIB]).algo == ["nvls_tree"]
    assert two == pytest.approx(NVLS_H100 * 0.91 * 2 * 15 / 16, rel=0.01)
    # 4 nodes: each node is inner in one of the two trees: 2n through 8 NICs
    tree4 = _busbw("dgx-h100", 4, "nvls_tree")
    assert tree4 == pytest.approx(8 * NDR / 2 * 2 * 31 / 32, rel=0.01)
    four = _busbw("dgx-h100", 4)
    assert four < 0.8 * two and four < 400  # NVIDIA: "peak would be about 400"
    assert four == pytest.approx(366, rel=0.03)


def test_tree_on_a100_nodes_is_bound_by_nccls_per_channel_cap() -> None:
    # NCCL's graph: 8 channels (one per HDR NIC at 24 GB/s); the tuner caps the tree at
    # 8 x perChMaxTreeBw (Ampere 23.6 on 2 nodes, 17.8 on >= 4), algbw half of it, below the
    # NVLink chain (234 / 2 x 0.92 x 2) and the NICs
    assert _busbw("dgx-a100", 2, "tree") == pytest.approx(8 * 23.6 / 2 * 2 * 15 / 16, rel=0.01)
    assert _busbw("dgx-a100", 4, "tree") == pytest.approx(8 * 17.8 / 2 * 2 * 31 / 32, rel=0.01)


@pytest.mark.parametrize(
    ("cluster", "nodes", "extra", "expected"),
    [
        ("dgx-h100", 1, {}, 12),  # 370.8 GB/s NVLink: 6 channels at 60, doubled
        ("dgx-h100", 2, {}, 8),  # 8 NDR NICs at 45 (7 x 48 fit NVLink), not doubled below 50
        ("dgx-h100", 2, {"nics_per_node": 4}, 8),  # 4 at 48, doubled (4 channels only)
        ("dgx-a100", 1, {}, 12),  # 240 GB/s: 6 at 40, doubled
        ("dgx-a100", 2, {}, 8),  # 8 HDR NICs at 24, not doubled below 25
        # 4 HDR NICs: 4 at 24 (one per NIC); the search stops at 12 (0.49 x 24), so never
        # reaches 20 channels at 5 GB/s, which would fit 100 GB/s in total
        ("dgx-a100", 2, {"nics_per_node": 4}, 4),
        ("dgx-b200", 1, {}, 16),  # 720 GB/s: 8 at 90, doubled
        ("dgx-b200", 2, {}, 8),  # 8 NICs at 48
        ("gb200-nvl72", 18, {}, 16),  # one rack is one node to NCCL (MNNVL clique)
        ("gb200-nvl72", 36, {}, 15),  # two racks: 15 x 48 fill one GPU's 720, of 72 NICs
    ],
)
def test_graph_channels_follow_nccls_search(
    cluster: str, nodes: int, extra: dict, expected: int
) -> None:
    c = load_cluster(cluster, nodes=nodes, **extra)
    assert graph_channels(group_shape(c)) == expected


@pytest.mark.parametrize(
    ("arch", "nvlink", "nics", "nic", "expected"),
    [
        # start at the first speed a GPU's NIC carries (24 of 25), stop at 0.49 of the best
        ("ampere", 240.0, 4, 25.0, (4, 24.0)),
        # 4 NDR NICs: 4 at 48 (192 GB/s), 24 and 22 give no more; 4 channels are doubled
        ("hopper", 370.8, 4, 50.0, (8, 24.0)),
        # one GPU's NVLink filled at the first speed (8 x 90 = 720): stop, then doubled
        ("blackwell", 720.0, 0, 0.0, (16, 45.0)),
        # 15 x 48 = 720 fills it across racks: stop at once, not doubled (< 50 GB/s, > 4)
        ("blackwell", 720.0, 72, 50.0, (15, 48.0)),
    ],
)
def test_search_walks_speeds_as_nccl(
    arch: str, nvlink: float, nics: int, nic: float, expected: tuple[int, float]
) -> None:
    from tierwise.collectives.model import searched_graph

    assert searched_graph(arch, nvlink, nics, nic) == expected


@pytest.mark.parametrize(
    ("cluster", "nodes", "extra", "inr", "expected"),
    [
        # connect.cc ncclTopoPostset: twice the graph's channels across nodes
        ("gb200-nvl72", 36, {}, "none", 30),  # 2 x 15, not 2 per NIC (64)
        ("gb200-nvl72", 36, {}, None, 32),  # NVLS on: raised to the 32 NVLS channels (sm100)
        ("gb200-nvl72", 18, {}, "none", 32),  # one rack: one node, 32
        ("dgx-h100", 2, {}, None, 16),  # 2 x 8 (= 2 per rail, as before)
        ("dgx-h100", 5, {"nics_per_node": 4}, None, 16),  # 2 x 8 (the graph was doubled)
        ("dgx-a100", 2, {"nics_per_node": 4}, None, 8),  # 2 x 4, Ampere: no second doubling
        ("dgx-b200", 2, {}, None, 32),  # 2 x 8 = 16, raised to the 32 NVLS channels
        ("dgx-b200", 2, {}, "none", 16),
    ],
)
def test_run_channels_follow_nccls_postset(
    cluster: str, nodes: int, extra: dict, inr: str | None, expected: int
) -> None:
    c = load_cluster(cluster, nodes=nodes, **extra)
    if inr:
        c = c.model_copy(update={"in_network_reduction": inr})
    assert channels(group_shape(c)) == expected


def test_compute_channels_double_a_fast_narrow_graph_on_sm90() -> None:
    # "4 compute channels per search channel": sm90+, graph above 45 GB/s, fewer than 16
    assert run_channels("blackwell", 6, 48.0) == 24  # 2 x 6 = 12 < 16: doubled again
    assert run_channels("hopper", 6, 48.0) == 24
    assert run_channels("ampere", 6, 48.0) == 12  # sm80: no
    assert run_channels("blackwell", 6, 45.0) == 12  # not above 45 GB/s
    assert run_channels("blackwell", 8, 48.0) == 16  # 16 is not fewer than 16
    assert run_channels("blackwell", 40, 24.0) == 64  # MAXCHANNELS


def test_a100_four_nics_cap_the_two_node_tree() -> None:
    # 4 channels x NCCL's Ampere 2-node tree cap 23.6 GB/s = 94.4 GB/s busbw: the tree's
    # two-node gain (2 x 96 x 0.92) is gone, and the ring (4 NICs x 24 GB/s) is as fast
    c = load_cluster("dgx-a100", nodes=2, nics_per_node=4)
    s = group_shape(c)
    tree = _cand("all_reduce", s, "tree", "Simple")
    assert tree.algbw_GBps * 2 == pytest.approx(4 * 23.6)
    busbw = predicted_busbw(c, "all_reduce", 8 << 30)
    assert 90.0 < busbw <= 4 * 24.0


def test_ll_ceiling_by_node_count() -> None:
    # llMaxBws: Hopper one node 141 GB/s; Intel hosts 39 on 2 nodes, 20.4 on >= 4
    for nodes, cap in ((1, 141.0), (2, 39.0), (4, 20.4), (16, 20.4)):
        s = _shape("dgx-h100", nodes)
        ll = _cand("all_reduce", s, "ring", "LL")
        assert ll.algbw_GBps * bus_factor("all_reduce", s.p) == pytest.approx(cap)


def test_ring_latency_is_the_tuners() -> None:
    s = _shape("dgx-h100", 2)  # 16 ranks: 30 steps, 2 across the network (IB at reference)
    simple = _cand("all_reduce", s, "ring", "Simple")
    # base 8.4 + 28 intra steps x max(NVLink 3.4, net overhead 1 x 3) + 2 x 14; ring plateau 1.4
    assert simple.lat_us == pytest.approx(1.4 * (8.4 + 28 * 3.4 + 2 * 14.0))
    ll = _cand("all_reduce", s, "ring", "LL")
    assert ll.lat_us == pytest.approx(6.6 + 28 * 1.0 + 2 * 2.7)  # intra max(0.6, 1 us overhead)
    one = _cand("all_reduce", _shape("dgx-h100", 1), "ring", "Simple")
    assert one.lat_us == pytest.approx(8.4 + 14 * 3.4)  # no plateau inside one node


def test_pat_runs_all_gather_with_one_gpu_per_node_only() -> None:
    s = _shape("dgx-h100", 8, k=1)
    pat = _cand("all_gather", s, "pat", "Simple")
    # base 8 + log2(8) x net tree latency 14 / 3.5 + 8 ranks x 2.8
    assert pat.lat_us == pytest.approx(8.0 + 3 * 14.0 / 3.5 + 8 * 2.8)
    ring = _cand("all_gather", s, "ring", "Simple")
    assert pat.algbw_GBps == pytest.approx(ring.algbw_GBps * 0.75 * 7 / 8)
    assert "pat" not in {c.algo for c in candidates("all_gather", _shape("dgx-h100", 8, k=2))}
    assert "pat" not in {c.algo for c in candidates("all_reduce", s)}


def test_collnet_needs_sharp_and_chain_is_nvlink_bound() -> None:
    assert not {"collnet_chain", "collnet_direct"} & {
        c.algo for c in candidates("all_reduce", _shape("dgx-h100", 8))
    }
    s = _shape("dgx-h100", 8, inr="sharp")
    chain = _cand("all_reduce", s, "collnet_chain", "Simple")
    assert chain.algbw_GBps == pytest.approx(450 * 0.82 / 2)  # chain: 2n per GPU on NVLink
    assert chain.lat_us == pytest.approx(2 * 7 * 2.8 + 30.0)  # 2(k-1) intra + net latency
    direct = _cand("all_reduce", s, "collnet_direct", "Simple")
    assert direct.algbw_GBps == pytest.approx(450 * 0.82 * 8 / 14 * 0.85)  # one NIC per GPU


def test_tree_correction_is_ncclss_table_at_powers_of_two() -> None:
    for proto, table in T.TREE_CORRECTION.items():
        sizes = 64 * 2.0 ** np.arange(23)
        assert tree_correction(proto, sizes) == pytest.approx(table[:23])
        assert tree_correction(proto, [1 << 29, 1 << 34]) == pytest.approx([1.0, 1.0])


def test_one_nvl72_rack_ring_matches_the_published_835() -> None:
    # CoreWeave, one GB200 NVL72 rack, NVLS and CollNet off: 834.6 GB/s at 8 GiB
    rack = _busbw("gb200-nvl72", 18, inr="none")
    assert rack == pytest.approx(835, rel=0.08)
    assert predict("all_reduce", _shape("gb200-nvl72", 18, inr="none"), [8 * GIB]).algo == ["ring"]


def test_auto_is_nccls_choice_hierarchical_only_for_scattered_orders() -> None:
    s = _shape("dgx-h100", 2)
    assert "hierarchical" in {c.algo for c in candidates("all_reduce", s)}
    assert "hierarchical" not in {c.algo for c in auto_candidates("all_reduce", s)}
    c = load_cluster("dgx-h100", nodes=2)
    scattered = np.arange(16).reshape(2, 8).T.ravel().tolist()  # every step crosses nodes
    shape = group_shape(c, scattered, Placement.contiguous(c))
    assert "hierarchical" in {x.algo for x in auto_candidates("all_reduce", shape)}


def test_predicted_busbw_is_the_public_expectation() -> None:
    c = load_cluster("dgx-h100")  # 32 nodes; ask about 2 of them
    assert predicted_busbw(c, "all_reduce", 8 * GIB, nodes=2) == pytest.approx(
        _busbw("dgx-h100", 2)
    )
    assert predicted_busbw(c, "all_reduce", 8 * GIB, nodes=64) > 0  # more nodes than the spec


def test_nvls_pipeline_fill_follows_nccls_chunk_rules() -> None:
    # DGX H100 1x8: 16 NVLS channels x 8 heads = 128 chunks in flight; 128 KiB chunks from
    # 64 x 128 x 128 KiB = 1 GiB, 64 KiB below, 32 KiB below 64 MiB, 16 KiB below 8 MiB
    shape = _shape("dgx-h100", 1)
    nvls = _cand("all_reduce", shape, "nvls", "Simple")
    assert nvls.pipeline is not None and nvls.pipeline.ops == 128
    kib, mib = 1024, 1 << 20
    for size, chunk in ((GIB, 128 * kib), (512 * mib, 64 * kib), (32 * mib, 32 * kib)):
        fill = T.NVLS_FILL_LOOPS * 128 * chunk
        expected = nvls.lat_us + (size + fill) / (1e3 * nvls.algbw_GBps)
        assert nvls.time_scalar_us(size) == pytest.approx(expected)
        assert float(nvls.time_us(np.array([size]))[0]) == pytest.approx(expected)
    # 4 MiB: 16 KiB chunks, a 2 MiB loop filled twice
    small = 4 * mib
    assert nvls.time_scalar_us(small) == pytest.approx(
        nvls.lat_us + (small + 2 * 2 * mib) / (1e3 * nvls.algbw_GBps)
    )
    # a message smaller than one loop fills with its own bytes: 2 x n more
    tiny = 64 * kib
    assert nvls.time_scalar_us(tiny) == pytest.approx(
        nvls.lat_us + 3 * tiny / (1e3 * nvls.algbw_GBps)
    )


def test_nvls_tree_chunk_is_64k_from_four_nodes() -> None:
    two = _cand("all_reduce", _shape("dgx-h100", 2), "nvls_tree", "Simple").pipeline
    four = _cand("all_reduce", _shape("dgx-h100", 4), "nvls_tree", "Simple").pipeline
    assert two is not None and four is not None
    assert (two.ops, two.chunk, four.chunk) == (128, 128 * 1024, 64 * 1024)
    # 2 nodes at 1 GiB: 128 KiB chunks (16 MiB loop); below 4 x 16 MiB: 64 KiB
    assert two.fill_bytes(GIB) == T.NVLS_FILL_LOOPS * 128 * 128 * 1024
    assert two.fill_bytes(32 << 20) == T.NVLS_FILL_LOOPS * 128 * 64 * 1024


def test_nvls_tree_fill_is_two_loops_per_tree_level() -> None:
    # log2i(domains) levels (NCCL's tuner's tree depth): 1 at 2 and 3 nodes, 2 at 4-7, 3 at 8;
    # NCCL's 64 KiB chunk from 4 nodes halves the loop where the levels double
    pipes = {
        n: _cand("all_reduce", _shape("dgx-h100", n), "nvls_tree", "Simple").pipeline
        for n in (2, 3, 4, 7, 8)
    }
    loops = {n: p.loops for n, p in pipes.items() if p is not None}
    assert loops == {2: 2.0, 3: 2.0, 4: 4.0, 7: 4.0, 8: 6.0}
    assert pipes[4].fill_bytes(GIB) == pipes[2].fill_bytes(GIB) == 2 * 128 * 128 * 1024
    assert pipes[8].fill_bytes(GIB) == 6 * 128 * 64 * 1024
    # NVLS in one domain keeps the fitted 2 loops
    nvls = _cand("all_reduce", _shape("dgx-h100", 1), "nvls", "Simple").pipeline
    assert nvls is not None and nvls.loops == T.NVLS_FILL_LOOPS


def test_nvl72_busbw_falls_from_two_racks_to_four() -> None:
    # what `collective -c gb200-nvl72 --nodes 36 / 72` printed: 555 and 647 GB/s at 512 MiB,
    # 676 and 741 at 1 GiB, four racks faster than two
    two = predict("all_reduce", _shape("gb200-nvl72", 36), [512 << 20, GIB]).busbw_GBps
    four = predict("all_reduce", _shape("gb200-nvl72", 72), [512 << 20, GIB]).busbw_GBps
    assert np.all(np.asarray(four) < np.asarray(two))


@settings(max_examples=60, deadline=None)
@given(
    racks=st.integers(1, 23),
    more=st.integers(1, 8),
    size_log2=st.integers(27, 34),
    inr=st.sampled_from(["nvls", "none"]),
)
def test_busbw_does_not_grow_as_nvl72_racks_are_added(
    racks: int, more: int, size_log2: int, inr: str
) -> None:
    """At a fixed size (128 MiB-16 GiB) adding GB200 NVL72 racks never shortens an all_reduce,
    NVLS on or off; busbw falls but for nccl-tests' factor 2(n-1)/n, which alone grows with
    the ranks n (a time that stays put reads as a slightly higher busbw)."""
    size = [float(1 << size_log2)]
    few = predict("all_reduce", _shape("gb200-nvl72", 18 * racks, inr=inr), size)
    many = predict("all_reduce", _shape("gb200-nvl72", 18 * (racks + more), inr=inr), size)
    assert float(many.time_us[0]) >= float(few.time_us[0]) * (1 - 1e-12)
    factor = bus_factor("all_reduce", 72 * (racks + more)) / bus_factor("all_reduce", 72 * racks)
    assert float(many.busbw_GBps[0]) <= float(few.busbw_GBps[0]) * factor * (1 + 1e-12)


def test_pipeline_fill_scalar_and_array_agree_and_grow_with_size() -> None:
    pipe = _cand("all_reduce", _shape("dgx-b200", 2), "nvls_tree", "Simple").pipeline
    assert pipe is not None
    sizes = np.unique(np.geomspace(8, 32 * GIB, 400).astype(np.int64)).astype(float)
    arr = pipe.fill_bytes_array(sizes)
    assert np.allclose(arr, [pipe.fill_bytes(float(n)) for n in sizes])
    assert np.all(np.diff(arr) >= 0)


def test_two_nvl72_racks_price_nccls_tree_and_ring_not_one_channel_per_nic() -> None:
    # NVLS off: 15 graph channels cap the 2-node tree at 15 x 42.8 GB/s (Blackwell, NCCL
    # 2.30.7), so the ring takes over at large sizes; with 64 channels (2 per NIC) the tree
    # looked 27% faster than measured at 512 MiB
    shape = _shape("gb200-nvl72", 36, k=4, inr="none")
    tree = _cand("all_reduce", shape, "tree", "Simple")
    assert tree.algbw_GBps == pytest.approx(0.5 * 15 * T.PER_CH_MAX_TREE["blackwell"][1])
    pred = predict("all_reduce", shape, [512 << 20, 4 * GIB])
    assert list(pred.algo) == ["tree", "ring"]


def test_tree_between_hgx_nodes_of_hopper_is_nccls_plain_tree_pattern() -> None:
    # 5 H100 nodes, 4 NDR NICs each (NVIDIA/nccl issue 1368's shape): each NIC sits under one
    # GPU's PCIe switch, so NCCL's sm90 search takes the plain TREE pattern and its tuner
    # prices the tree x0.85: 0.5 x 0.85 x min(0.92 x 2 x (4 x 47 / 2), 8 ch x 36.0)
    s = group_shape(load_cluster("dgx-h100", nodes=5, nics_per_node=4))
    assert s.simple_tree
    tree = _cand("all_reduce", s, "tree", "Simple")
    assert tree.algbw_GBps == pytest.approx(0.5 * 0.85 * 0.92 * 2 * (4 * NDR / 2))
    ll128 = _cand("all_reduce", s, "tree", "LL128")  # every protocol: 120/128 of Simple
    assert ll128.algbw_GBps == pytest.approx(tree.algbw_GBps * 120 / 128)
    # inside one node there is no NIC to balance: the chain bound, no factor
    one = _shape("dgx-h100", 1)
    assert not one.simple_tree
    chain = _cand("all_reduce", one, "tree", "Simple")
    assert chain.algbw_GBps == pytest.approx(0.5 * 0.92 * 2 * (450 * 0.82 / 2))


@pytest.mark.parametrize(
    ("cluster", "nodes", "expected"),
    [
        ("dgx-h100", 2, True),
        ("dgx-b200", 2, True),  # sm100: the same fallback (ccMin >= 90)
        ("dgx-a100", 2, False),  # sm80 keeps searching the balanced tree
        ("gb200-nvl72", 36, False),  # NVLink domain over trays: no source on its NIC layout
        ("pcie-h100", 2, False),  # no NVLink: two GPUs and a NIC may share a switch
        ("dgx-h100", 1, False),  # one node: no network in the tree
    ],
)
def test_which_nodes_take_the_plain_tree_pattern(cluster: str, nodes: int, expected: bool) -> None:
    assert group_shape(load_cluster(cluster, nodes=nodes)).simple_tree is expected


def test_four_roce_nics_bound_the_ring_at_what_a_connectx7_carries() -> None:
    # NVIDIA/nccl issue 1368's nodes: 4 x 400 Gb/s RoCE for 8 H100, 2 queue pairs per
    # connection; RoCE 400 at NDR's 0.94 (the same ConnectX-7): 4 x 47 GB/s bound the ring
    from tierwise.collectives.model import ring_busbw

    c = load_cluster("dgx-h100", nodes=5, nic="roce400", nics_per_node=4, qps_per_connection=2)
    s = group_shape(c)
    assert s.port_GBps == pytest.approx(0.94 * 50) and s.qps == 2
    assert ring_busbw(s) == pytest.approx(4 * 0.94 * 50)
    tree = _cand("all_reduce", s, "tree", "Simple")  # 2n per inner node through the 4 NICs
    assert tree.algbw_GBps == pytest.approx(0.5 * 0.85 * 0.92 * 2 * (4 * 47.0 / 2))
