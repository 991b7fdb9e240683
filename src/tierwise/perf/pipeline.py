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

Megatron's interleaved schedule runs micro-batches through each chunk in groups of
``--microbatch-group-size-per-virtual-pipeline-stage`` (default pp). With m >= pp the bubble
is (pp-1)/(v*m) of the step whether or not m is a multiple of pp (the last, smaller group
interleaves with the previous group's backward). With fewer micro-batches than pp (or a
smaller group) a group's micro-batches leave rank 0 before the first of them is back for the
next chunk: each of the v-1 chunk changes idles (pp - g) chunk times forward and backward,
(pp - 1 + (v-1)(pp - g)) / (v*m) in all with g = min(group, m).

DeepSeek's DualPipe (DeepSeek-V3 technical report, section 3.2.1, Table 2; github.com/
deepseek-ai/DualPipe) feeds micro-batches from both ends of the pipeline: each rank holds
two stages (DualPipe: stage r and pp-1-r, a second copy of the parameters; DualPipeV, the
"cut-in-half" variant: 2*pp chunks in a V, one copy), pairs one micro-batch's forward with
another's backward so each hides the other's all-to-all and sends, and idles
(pp/2 - 1)(F&B + B - 3W) with F&B = F + B, against 1F1B's (pp-1)(F + B); pp+1 micro-batches'
activations in flight.
"""

from __future__ import annotations

from typing import NamedTuple

from tierwise.errors import SpecError
from tierwise.frameworks import row
from tierwise.records import record
from tierwise.workload.flops import Array, maximum, minimum, pos

# The two-direction schedules: forward and backward chunks of two micro-batches paired, each
# hiding the other's all-to-all and pipeline sends.
DUAL_SCHEDULES = ("DualPipe", "DualPipeV")
# Copies of the stage parameters a rank holds under each schedule (DualPipe: two stages).
PARAM_COPIES = {"DualPipe": 2}
# Virtual stages per rank each schedule runs: None = any.
SCHEDULE_VPP: dict[str, int | None] = {
    "1F1B": 1,
    "Interleaved1F1B": None,
    "InterleavedZeroBubble": None,
    "ZBVZeroBubble": 2,
    "DualPipe": 1,
    "DualPipeV": 2,
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
    if schedule in DUAL_SCHEDULES and pp % 2:
        raise SpecError(f"--pipeline-schedule {schedule} needs an even pp; the layout has {pp}")
    return schedule


def bubble_share(schedule: str, full_recompute: Array, pp: Array = 2) -> Array:
    """Share of the 1F1B bubble left by `schedule` (T_F = T_W = 1, T_B = 1 + full recompute)."""
    if schedule in DUAL_SCHEDULES:  # (pp/2-1)(F + 2B - 3W) over (pp-1)(F + B + W)
        backward = 2 + full_recompute  # input and weight gradient, recompute forward
        return (pp / 2 - 1) * (1 + 2 * backward - 3) / (maximum(pp - 1, 1) * (1 + backward))
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
    busiest = maximum(maximum(t_first, t_last), t_middle)
    held = is_first * first + is_last * last + is_middle * middle
    total = layers * layer_s + embedding_s + loss_s + pp * p2p_s
    return record(Ranks, (busiest, held, is_first, is_last + is_first * single, total))


def bubble_seconds(
    r: Ranks,
    pp: Array,
    vpp: Array,
    micro: Array,
    schedule: str,
    full_recompute: Array,
    group: int | None = None,
) -> Array:
    """Idle seconds per step: the other ranks' time once, over vpp, times the schedule's
    share of the 1F1B bubble; interleaved with fewer than pp micro-batches per group
    (`group`: Megatron's group size, default pp) each chunk change idles too (module
    docstring)."""
    fill = (r.total_s - r.busiest_s) / vpp * bubble_share(schedule, full_recompute, pp)
    g = minimum(pp if group is None else group, micro)
    waits = (vpp - 1) * pos(pp - g) * r.busiest_s / vpp  # (pp - g) chunk times per change
    return fill + (schedule not in DUAL_SCHEDULES) * waits
