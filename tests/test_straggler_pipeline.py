"""A slow node on one pipeline stage: what 1F1B and interleaved 1F1B lose, by simulation.

A small discrete-event simulation runs Megatron's schedules (1F1B; interleaved with groups of
`min(pp, m)` micro-batches, megatron-core `schedules.py` `get_pp_rank_microbatches` and
`get_model_chunk_id`): each rank runs its forward (F) and backward (B) chunks in the
schedule's order, a chunk starts when its rank is free and its inputs have arrived. With
equal stages it gives the pipeline model's step time (`perf.pipeline`); with one stage slowed
it shows what the straggler term (`perf.terms.straggler`, `straggler_s`) must price.
"""

from __future__ import annotations

import pytest

from tierwise.perf.pipeline import bubble_seconds, ranks

Chunk = tuple[str, int, int]  # (F or B, virtual stage, micro-batch)


def _order(pp: int, vpp: int, micro: int, rank: int) -> list[Chunk]:
    """The chunks `rank` runs, in Megatron's order: warm-up forwards, then one forward and
    one backward in turn, then the cool-down backwards."""
    group = min(pp, micro)
    total = micro * vpp

    def chunk(kind: str, k: int) -> Chunk:
        model_chunk = (k // group) % vpp
        if kind == "B":
            model_chunk = vpp - 1 - model_chunk
        return kind, model_chunk * pp + rank, (k // (group * vpp)) * group + k % group

    warmup = pp - rank - 1 if vpp == 1 else (pp - rank - 1) * 2 + (vpp - 1) * group
    warmup = min(warmup, total)
    order = [chunk("F", k) for k in range(warmup)]
    forward, backward = warmup, 0
    while backward < total:
        if forward < total:
            order.append(chunk("F", forward))
            forward += 1
        order.append(chunk("B", backward))
        backward += 1
    return order


def simulate(pp: int, vpp: int, micro: int, stage_s: list[float]) -> float:
    """Step seconds of the schedule when rank r spends `stage_s[r]` per micro-batch (forward
    one third, backward two thirds, split evenly over its `vpp` chunks)."""
    orders = [_order(pp, vpp, micro, r) for r in range(pp)]
    stages = pp * vpp
    done: dict[Chunk, float] = {}
    free = [0.0] * pp
    nxt = [0] * pp
    progress = True
    while progress:
        progress = False
        for r in range(pp):
            while nxt[r] < len(orders[r]):
                kind, stage, mb = orders[r][nxt[r]]
                if kind == "F":
                    needs = [("F", stage - 1, mb)] if stage else []
                else:
                    needs = [("F", stage, mb)]
                    needs += [("B", stage + 1, mb)] if stage < stages - 1 else []
                if not all(n in done for n in needs):
                    break
                start = max([free[r]] + [done[n] for n in needs])
                share = 1 / 3 if kind == "F" else 2 / 3
                free[r] = done[(kind, stage, mb)] = start + share * stage_s[r] / vpp
                nxt[r] += 1
                progress = True
    assert all(nxt[r] == len(orders[r]) for r in range(pp)), "schedule deadlocked"
    return max(free)


def _model_step(pp: int, vpp: int, micro: int, stage_s: float) -> float:
    """The pipeline model's step seconds for `pp` equal stages of `stage_s` per micro-batch."""
    layers = 4 * pp
    r = ranks(pp, layers, 4, 4, 4, stage_s / 4, 0.0, 0.0, 0.0)
    schedule = "1F1B" if vpp == 1 else "Interleaved1F1B"
    return micro * r.busiest_s + bubble_seconds(r, pp, vpp, micro, schedule, 0)


CASES = [(2, 1, 6), (4, 1, 8), (8, 1, 16), (4, 2, 8), (8, 2, 16), (4, 4, 16), (4, 2, 2)]


@pytest.mark.parametrize(("pp", "vpp", "micro"), CASES)
def test_simulated_schedules_match_the_pipeline_model(pp: int, vpp: int, micro: int) -> None:
    assert simulate(pp, vpp, micro, [3.0] * pp) == pytest.approx(_model_step(pp, vpp, micro, 3.0))


@pytest.mark.parametrize(("pp", "vpp", "micro"), CASES)
@pytest.mark.parametrize("slowdown", [0.1, 0.5])
def test_a_slow_stage_stretches_its_own_compute_not_the_bubble(
    pp: int, vpp: int, micro: int, slowdown: float
) -> None:
    """One stage `slowdown` slower adds at most slowdown x its own compute (m x t), exactly
    that on the last stage when m >= pp; warm-up and cool-down run at the other stages' pace,
    so the step grows by less than slowdown x the whole step (bubble included). This is why
    `straggler_s` is the slowdown times the compute seconds and leaves the bubble alone."""
    t = 3.0
    base = simulate(pp, vpp, micro, [t] * pp)
    extra = []
    for slow in range(pp):
        stage_s = [t * (1 + slowdown) if r == slow else t for r in range(pp)]
        extra.append(simulate(pp, vpp, micro, stage_s) - base)
    own = slowdown * micro * t  # what straggler_s adds: slowdown x compute seconds
    assert max(extra) <= own * (1 + 1e-9)
    if micro >= pp:
        assert extra[-1] == pytest.approx(own)
    assert max(extra) < slowdown * base * (1 - 1e-6)  # the bubble does not stretch


def test_estimate_prices_the_slow_stage_as_the_simulation_bounds_it() -> None:
    """`estimate` with a straggler fleet on a pipelined layout: slowdown x compute seconds,
    the bound above, with no share of the bubble."""
    from tierwise.hardware.cluster import load_cluster
    from tierwise.hardware.fleet import FleetSpec
    from tierwise.perf.estimate import estimate
    from tierwise.workload.layout import Layout
    from tierwise.workload.load import load_model

    fleet = FleetSpec(slow_node_share=0.02, slow_node_slowdown=0.25)
    cluster = load_cluster("dgx-h100", nodes=16).model_copy(update={"fleet": fleet})
    layout = Layout(tp=8, pp=4, vpp=2, dp=4, seq=4096, gbs=64, distributed_optimizer=True)
    terms = estimate(load_model("llama3-70b"), cluster, layout)["breakdown"]
    slowdown = fleet.step_slowdown(16, 128)
    assert slowdown == pytest.approx(0.25 * (1 - 0.98**16))
    assert terms["pipeline_bubble_s"] > 0
    assert terms["straggler_s"] == pytest.approx(slowdown * terms["compute_s"])
