"""Process-group shapes: the cached shape of each kind is that of its slowest instance, as
placing every real group (every stage-boundary pair for pp) and taking the worst gives."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.collectives.shape import shape_of
from tierwise.hardware.cluster import ClusterSpec, load_cluster
from tierwise.hardware.placement import SMALL_WORLD, GroupSpan, nic_sharing
from tierwise.perf.groups import (
    GROUP_KINDS,
    ORDERS,
    Degrees,
    _cache_for,
    _Jumps,
    _pattern,
    _worst_row_large,
    _worst_small,
    group_ids,
    group_ranks,
    group_shape_of,
    placement_for,
    worst_group,
)


def _pods(name: str, nodes: int, **topology: object) -> ClusterSpec:
    """A preset with its leaves (and pods) set by `topology`."""
    base = load_cluster(name, nodes=nodes)
    return base.model_copy(update={"topology": base.topology.model_copy(update=topology)})


CLUSTERS = {
    **{name: load_cluster(name, nodes=16) for name in ("dgx-h100", "pcie-h100", "gb200-nvl72")},
    # leaves of 2 nodes in pods of 3 leaves, then 1: boundaries inside later groups and stages
    "dgx-h100-pods": _pods("dgx-h100", 16, nodes_per_leaf=2, pod_sizes=(3, 5), leaf_sizes=None),
}


@st.composite
def layouts(draw: st.DrawFn) -> Degrees:
    tp, cp, dp, pp = (draw(st.sampled_from([1, 2, 4, 8])) for _ in range(4))
    ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if (cp * dp) % e == 0]))
    dp_shard = draw(st.sampled_from([0, *(s for s in (1, 2, 4) if dp % s == 0 and s < dp)]))
    ranks = tp * cp * dp
    etp = draw(st.sampled_from([0, *(e for e in (1, 2, 4) if e != tp and ranks % (e * ep) == 0)]))
    return Degrees(tp=tp, cp=cp, ep=ep, dp=dp, pp=pp, dp_shard=dp_shard, etp=etp)


def _level_key(span: GroupSpan) -> tuple[int, ...]:
    return (
        span.pods,
        span.pod_crossings,
        span.leaves,
        span.leaf_crossings,
        span.domains,
        span.domain_crossings,
    )


def _brute_force_shape(
    cluster: ClusterSpec, d: Degrees, order: tuple[str, ...], kind: str, scatter: bool
) -> object:
    """Every instance placed one by one: groups by first rank (pp: the pairs of each stage
    boundary in turn); the worst by pods, then crossings, leaves, domains (first of equals);
    NIC sharing by its set's instances with a rank on its first rank's node."""
    placement = placement_for(cluster, scatter)
    gid = group_ids(d, order, kind)
    groups = sorted(np.flatnonzero(gid == g).tolist() for g in set(gid.tolist()))
    pairs = [[g[s : s + 2] for g in groups] for s in range(d.pp - 1)]
    sets = pairs if kind == "pp" else [groups]
    best = None
    for t, rows in enumerate(sets):
        for row in rows:
            key = _level_key(placement.span(row))
            if best is None or key > best[0]:
                best = (key, t, row)
    assert best is not None
    _, t, row = best
    slot = row[0] // cluster.gpus_per_node
    siblings = [r for r in sets[t] if any(x // cluster.gpus_per_node == slot for x in r)]
    return shape_of(
        cluster, placement.span(row), nic_sharing(placement, siblings), siblings=len(siblings)
    )


@settings(max_examples=200, deadline=None)
@given(
    layouts(),
    st.sampled_from(sorted(ORDERS.values())),
    st.sampled_from(GROUP_KINDS),
    st.booleans(),
    st.sampled_from(sorted(CLUSTERS)),
)
def test_cached_group_shape_is_the_slowest_placed_instance(
    d: Degrees, order: tuple[str, ...], kind: str, scatter: bool, cluster_name: str
) -> None:
    cluster = CLUSTERS[cluster_name]
    if d.world > cluster.world or d.group_size(kind) < 2:
        return
    expected = _brute_force_shape(cluster, d, order, kind, scatter)
    assert group_shape_of(cluster, d, kind, order, scatter) == expected


@settings(max_examples=60, deadline=None)
@given(layouts(), st.sampled_from(sorted(ORDERS.values())), st.sampled_from(GROUP_KINDS))
def test_plain_python_and_numpy_scans_pick_the_same_instance(
    d: Degrees, order: tuple[str, ...], kind: str
) -> None:
    """The small-world scan (node slots, plain Python) and the vectorised one (ranks, with and
    without the ascending shortcut, gathering every rank or a row's ends only, every row or one
    per node slot's bases) agree on the worst row and on the rows crossing pods."""
    cluster = CLUSTERS["dgx-h100-pods"]
    if d.world > cluster.world or d.group_size(kind) < 2:
        return
    pattern = _pattern(d, order, kind)
    if pattern is None:
        return
    cache = _cache_for(cluster)
    for scatter in (False, True):
        t, b, crossing = _worst_small(pattern, cluster.gpus_per_node, cache.slot_labels(scatter))
        labels, min_blocks = cache.label_arrays(scatter), cache.min_blocks(scatter)
        for step in {1, pattern.slot_step(cluster.gpus_per_node)}:
            rows = pattern.rows(step)
            assert pattern.firsts(step).tolist() == rows[:, 0].tolist()
            jumps = _Jumps(rows[:, 0], pattern.stride, pattern.stride * (pattern.width - 1))
            for ascending, jump in ((False, None), (True, None), (True, jumps)):
                if ascending and scatter:
                    continue
                best, crossing_large = _worst_row_large(
                    lambda rows=rows: rows, labels, ascending, jump, min_blocks
                )
                assert rows[best].tolist() == pattern.row(t, b)
                assert crossing_large * step == crossing


def test_a_later_group_crossing_a_pod_is_the_one_priced() -> None:
    """Pods of 3 and 1 leaves of 16 nodes: with tp 8, pp 2, dp 32, the second stage's dp group
    and the stage pairs of nodes 16-31 -> 48-63 cross the pod boundary; the first dp group and
    the first pair do not."""
    c = _pods("dgx-h100", 64, nodes_per_leaf=16, pod_sizes=(3, 1), pod_oversubscription=15.0)
    d = Degrees(tp=8, cp=1, ep=1, dp=32, pp=2)
    placement = placement_for(c)
    assert placement.span(group_ranks(d, ORDERS["tp-cp-ep-dp-pp"], "dpcp").tolist()).pods == 1
    assert placement.span([0, 256]).pods == 1
    dp, pp = worst_group(c, d, "dpcp"), worst_group(c, d, "pp")
    assert dp.span.pods == 2 and dp.ranks[0] == 256
    assert dp.crossing_pods == 8 and dp.instances == 16  # one per tp rank of the 2nd stage
    assert pp.span.pods == 2 and pp.ranks == (128, 384)
    assert pp.crossing_pods == 128 and pp.instances == 256
    for kind in ("dpcp", "pp"):
        assert group_shape_of(c, d, kind).top_tier == "core"
    # the same cluster with its pods as one: the first instances price it, as before
    one = _pods("dgx-h100", 64, nodes_per_leaf=16)
    assert worst_group(one, d, "pp").ranks == (0, 256)
    assert worst_group(one, d, "dpcp").ranks[0] == 0


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


def test_large_world_path_matches_the_plain_python_scan() -> None:
    """Above SMALL_WORLD ranks the vectorised path (a row's ends only where no block fits
    between its ranks) finds the instance the plain-Python scan finds: 8,200 GPUs in uneven
    leaves and pods, boundaries inside later groups and stages."""
    c = _pods("dgx-h100", 1025, nodes_per_leaf=41, pod_sizes=(7, 11, 7), leaf_sizes=None)
    gpn = c.gpus_per_node
    for d in (
        Degrees(tp=8, cp=1, ep=1, dp=256, pp=4),
        Degrees(tp=2, cp=2, ep=4, dp=256, pp=8),
        Degrees(tp=1, cp=1, ep=1, dp=1024, pp=8),
    ):
        for kind in ("tp", "cp", "ep", "dpcp", "pp", "edp"):
            pattern = _pattern(d, ORDERS["tp-cp-ep-dp-pp"], kind)
            if d.group_size(kind) < 2 or pattern is None:
                continue
            assert d.world > SMALL_WORLD
            worst = worst_group(c, d, kind)
            t, b, crossing = _worst_small(pattern, gpn, _cache_for(c).slot_labels(False))
            assert list(worst.ranks) == pattern.row(t, b), (d, kind)
            assert worst.crossing_pods == crossing
