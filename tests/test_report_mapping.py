"""The mapping figure's groups are the layout's process groups, on the tiers the estimate uses."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.hardware.cluster import load_cluster
from tierwise.perf.groups import Degrees
from tierwise.report.inputs import ReportPlan, plans_from_search
from tierwise.report.mapping import mapping_data
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model

ORDER = ("tp", "cp", "dp", "pp")


def expected_groups(d: Degrees) -> dict[str, list[list[int]]]:
    """Megatron-core's rule, written independently: ranks = arange reshaped (pp, dp, cp, tp)
    (tp innermost); a group varies one axis; ep = `ep` consecutive (cp + cp*dp) indices."""
    r = np.arange(d.world).reshape(d.pp, d.dp, d.cp, d.tp)
    axes = {"tp": 3, "cp": 2, "dp": 1, "pp": 0}
    out = {}
    for kind, axis in axes.items():
        moved = np.moveaxis(r, axis, -1).reshape(-1, r.shape[axis])
        out[kind] = sorted(sorted(g.tolist()) for g in moved)
    flat = np.moveaxis(r, 3, 0).reshape(d.tp, d.pp, d.dp * d.cp)  # (t, p, c + cp*d)
    eps = flat.reshape(d.tp, d.pp, -1, d.ep)
    out["ep"] = sorted(sorted(g.tolist()) for g in eps.reshape(-1, d.ep))
    return out


def _check(d: Degrees, nodes: int) -> None:
    data = mapping_data(load_cluster("dgx-h100", nodes=nodes), d, ORDER)
    want = expected_groups(d)
    drawn = {m.kind: m for m in data.maps}
    assert set(drawn) == {k for k in want if getattr(d, k) > 1}
    for kind, m in drawn.items():
        assert sorted(m.groups) == want[kind], kind
        grid = data.grid(m)
        for rank, gid in enumerate(m.ids):  # the grid cell of each rank shows its group
            assert grid[data.local_of[rank], data.node_of[rank]] == gid


@settings(max_examples=25, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    cp=st.sampled_from([1, 2]),
    pp=st.sampled_from([1, 2, 4]),
    dp=st.sampled_from([1, 2, 4]),
    ep_pow=st.integers(0, 3),
)
def test_groups_equal_megatron_rank_order(tp: int, cp: int, pp: int, dp: int, ep_pow: int) -> None:
    ep = min(2**ep_pow, cp * dp)
    d = Degrees(tp=tp, cp=cp, ep=ep, dp=dp, pp=pp)
    _check(d, nodes=max(1, d.world // 8))


def test_best_plan_mapping_matches_plan_groups_and_tiers() -> None:
    model, cluster = load_model("llama3-70b"), load_cluster("dgx-h100", nodes=16)
    best = plans_from_search(model, cluster, 512, 8192, top=1)[0]
    lay = best.layout
    d = Degrees(lay.tp, lay.cp, lay.ep, lay.dp, lay.pp)
    data = best.mapping(cluster)
    want = expected_groups(d)
    for m in data.maps:
        assert sorted(m.groups) == want[m.kind]
        assert m.tier == best.estimate["comm_tiers"][m.kind], m.kind


def test_tp8_on_dgx_is_intra_and_dp_crosses_leaves() -> None:
    cluster = load_cluster("dgx-h100", nodes=64)
    plan = ReportPlan.of(
        load_model("llama3-8b"), cluster, Layout(tp=8, pp=1, dp=64, gbs=512, seq=4096)
    )
    tiers = {m.kind: m.tier for m in plan.mapping(cluster).maps}
    assert tiers == {"tp": "intra", "dp": "spine"}
