"""Pipeline schedule: which rank sets the pace, and the idle time (bubble) of a step.

Rank r's time per micro-batch is its decoder layers' time plus the embedding (first rank)
or the logits and loss (last rank) plus its point-to-point sends. The slowest rank sets the
steady state; filling and draining the pipeline costs the other ranks' time once:
T = m * t_max + (sum_r t_r - t_max) / v * share, which for equal stages is the textbook
(pp-1)/m (1F1B, PipeDream-Flush: Narayanan et al., SC'21) and (pp-1)/(v*m) with v virtual
stages per rank (interleaved 1F1B, ibid.). With uneven stages (interleaved or not) the same
sum is the approximation.

The zero-bubble schedules (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024) split
the backward into the input gradient B and the weight gradient W and fill the bubble with
W: 1F1B idles (p-1)(T_F + T_B + T_W), ZB-H1 (torchtitan's InterleavedZeroBubble, the ZB1P
schedule) (p-1)(T_F + T_B - T_W), the V-shaped ZB-V (ZBVZeroBubble, two stages per rank)
(p-1)(T_F + T_B - 2 T_W), each at 1F1B's activation memory. T_F = T_B = T_W per micro-batch
(backward = 2 x forward); full recompute reruns the forward inside B.
Schedule names are torchtitan's (`pipeline_parallel_schedule`); Megatron-LM runs 1F1B and,
with virtual stages, Interleaved1F1B.
"""

from __future__ import annotations

from typing import NamedTuple

from tierwise.errors import SpecError
from tierwise.frameworks import row
from tierwise.workload.flops import Array, maximum

# Virtual stages per rank each schedule runs: None = any.
SCHEDULE_VPP: dict[str, int | None] = {
    "1F1B": 1,
    "Interleaved1F1B": None,
    "InterleavedZeroBubble": None,
    "ZBVZeroBubble": 2,
}
# Weight-gradient passes (in units of T_W) each schedule moves into the bubble.
W_FILLED = {"1F1B": 0, "Interleaved1F1B": 0, "InterleavedZeroBubble": 1, "ZBVZeroBubble": 2}


def schedule_for(schedule: str | None, pp: int, vpp: int, framework: str | None = None) -> str:
    """The schedule a layout runs: `schedule`, or 1F1B (Interleaved1F1B with vpp > 1); one
    that cannot run `vpp` virtual stages, or that `framework` lacks, is a one-line error."""
    if schedule is None:
        schedule = "Interleaved1F1B" if vpp > 1 else "1F1B"
    allowed = row(framework).schedules  # what the framework runs (tierwise.frameworks)
    if schedule not in allowed:
        runs = f" --framework {framework} runs" if framework else " allowed:"
        raise SpecError(f"--pipeline-schedule: {schedule!r};{runs} {', '.join(allowed)}")
    need = SCHEDULE_VPP[schedule]
    if pp > 1 and need is not None and vpp != need:
        raise SpecError(
            f"--pipeline-schedule {schedule} runs {need} virtual stage(s) per rank; the layout "
            f"has vpp {vpp}"
        )
    return schedule


def bubble_share(schedule: str, full_recompute: Array) -> Array:
    """Share of the 1F1B bubble left by `schedule` (T_F = T_W = 1, T_B = 1 + full recompute)."""
    filled = W_FILLED[schedule]
    if filled == 0:
        return 1.0
    backward = 1 + full_recompute
    return maximum(1 + backward - filled, 0) / (2 + backward)


class Ranks(NamedTuple):
    """The pipeline ranks of one layout: the slowest one's time per micro-batch (`busiest_s`)
    and what it holds (`layers`, `embedding` and `loss` 0/1), and all ranks' time summed."""

    busiest_s: Array
    layers: Array
    embedding: Array
    loss: Array
    total_s: Array


def ranks(
    pp: Array,
    layers: int,
    first: Array,
    middle: Array,
    last: Array,
    layer_s: Array,
    embedding_s: Array,
    loss_s: Array,
    p2p_s: Array,
) -> Ranks:
    """Per micro-batch: rank 0 runs `first` layers and the embedding, the last rank `last`
    layers and the loss, the others at most `middle` (`layers` in all), each `layer_s` per
    layer plus `p2p_s` of sends (one rank: everything)."""
    single = pp == 1
    t_first = first * layer_s + embedding_s + single * loss_s + p2p_s
    t_last = last * layer_s + loss_s + p2p_s
    t_middle = (pp > 2) * (middle * layer_s + p2p_s)
    is_first = (t_first >= t_last) * (t_first >= t_middle)
    is_last = (1 - is_first) * (t_last >= t_middle)
    is_middle = (1 - is_first) * (1 - is_last)
    return Ranks(
        busiest_s=maximum(maximum(t_first, t_last), t_middle),
        layers=is_first * first + is_last * last + is_middle * middle,
        embedding=is_first,
        loss=is_last + is_first * single,
        total_s=layers * layer_s + embedding_s + loss_s + pp * p2p_s,
    )


def bubble_seconds(r: Ranks, vpp: Array, schedule: str, full_recompute: Array) -> Array:
    """Idle seconds per step: the other ranks' time once, over vpp, times the schedule's
    share of the 1F1B bubble."""
    return (r.total_s - r.busiest_s) / vpp * bubble_share(schedule, full_recompute)
