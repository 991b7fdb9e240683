"""Process-group shapes: the (stride, ranks) cache gives what placing the real groups gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.collectives.shape import shape_of
from tierwise.hardware.cluster import load_cluster
from tierwise.hardware.placement import nic_sharing
from tierwise.perf.groups import (
    GROUP_KINDS,
    ORDERS,
    Degrees,
    _concurrent_groups,
    _siblings,
    group_ranks,
    group_shape_of,
    placement_for,
)

CLUSTERS = {name: load_cluster(name, nodes=16) for name in ("dgx-h100", "pcie-h100", "gb200-nvl72")}


@st.composite
def layouts(draw: st.DrawFn) -> Degrees:
    tp, cp, dp, pp = (draw(st.sampled_from([1, 2, 4, 8])) for _ in range(4))
    ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if (cp * dp) % e == 0]))
    dp_shard = draw(st.sampled_from([0, *(s for s in (1, 2, 4) if dp % s == 0 and s < dp)]))
    ranks = tp * cp * dp
    etp = draw(st.sampled_from([0, *(e for e in (1, 2, 4) if e != tp and ranks % (e * ep) == 0)]))
    return Degrees(tp=tp, cp=cp, ep=ep, dp=dp, pp=pp, dp_shard=dp_shard, etp=etp)


@settings(max_examples=150, deadline=None)
@given(
    layouts(),
    st.sampled_from(sorted(ORDERS.values())),
    st.sampled_from(GROUP_KINDS),
    st.booleans(),
    st.sampled_from(sorted(CLUSTERS)),
)
def test_cached_group_shape_equals_the_placed_groups_shape(
    d: Degrees, order: tuple[str, ...], kind: str, scatter: bool, cluster_name: str
) -> None:
    cluster = CLUSTERS[cluster_name]
    if d.world > cluster.world or d.group_size(kind) < 2:
        return
    placement = placement_for(cluster, scatter)
    siblings = _siblings(d, order, kind, cluster.gpus_per_node)
    if kind == "pp":
        siblings = [g[:2] for g in siblings]
    assert siblings[0] == group_ranks(d, order, kind).tolist()[: len(siblings[0])]
    expected = shape_of(
        cluster,
        placement.span(siblings[0]),
        nic_sharing(placement, siblings),
        siblings=len(_concurrent_groups(d, order, kind, cluster.gpus_per_node)),
    )
    assert group_shape_of(cluster, d, kind, order, scatter) == expected


def test_expert_data_parallel_groups_by_hand() -> None:
    order = ORDERS["tp-cp-ep-dp-pp"]
    # GPT-OSS on 64 B200: ep 8 fills each node, so an edp group takes one GPU of every node.
    d = Degrees(tp=1, cp=1, ep=8, dp=64, pp=1)
    assert d.group_size("edp") == 8
    assert group_ranks(d, order, "edp").tolist() == [0, 8, 16, 24, 32, 40, 48, 56]
    # tp 2 (experts too), ep 4 over dp 8: expert index cp + cp*dp, every 4th, tp coordinate 0.
    d = Degrees(tp=2, cp=1, ep=4, dp=8, pp=1)
    assert group_ranks(d, order, "edp").tolist() == [0, 8]
    # Expert TP 1 under tp 2: the 16 ranks of a stage hold 4 expert groups of 4.
    d = Degrees(tp=2, cp=1, ep=4, dp=8, pp=1, etp=1)
    assert d.group_size("edp") == 4
    assert group_ranks(d, order, "edp").tolist() == [0, 4, 8, 12]
    # ep 1: the expert weights reduce over the same ranks as the dense ones.
    d = Degrees(tp=1, cp=2, ep=1, dp=4, pp=1)
    assert group_ranks(d, order, "edp").tolist() == group_ranks(d, order, "dpcp").tolist()
