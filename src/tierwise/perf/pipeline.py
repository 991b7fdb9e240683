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
deepseek-ai/DualPipe, dualpipe.py DualPipe.step) feeds half the micro-batches from each end of
the pipeline: rank r holds stage r and stage pp-1-r (a second copy of every stage, its
gradients reduced with the other copy's), so rank 0 (and pp-1) runs the embedding for half
its micro-batches and the loss for the other half; a rank's time per micro-batch is the mean
of its two stages'. DualPipeV (dualpipev.py, the "cut-in-half" variant; torchtitan's
ScheduleDualPipeV) runs every micro-batch down a V of 2*pp stages: rank r holds stage r and
stage 2pp-1-r, rank 0 the embedding and the loss. Both pair one micro-batch's forward chunk
with another's backward so each hides the other's all-to-all and sends (where the runtime
overlaps them: `tierwise.frameworks.Framework.overlapped_f_b`), and idle
(S/2 - 1)(F&B + B - 3W) over S stages (S = pp for DualPipe, 2*pp for DualPipeV; F&B = F + B,
B the full backward, W its weight part; the repository's README), chunk times being a stage's.
DualPipe asserts an even count of at least 2*pp micro-batches, DualPipeV at least 2*pp
(its stages).
"""

from __future__ import annotations

from typing import NamedTuple

from tierwise.errors import SpecError
from tierwise.frameworks import DUAL_SCHEDULES, PAIRED_SCHEDULE, V_SCHEDULES, row
from tierwise.records import record
from tierwise.workload.flops import Array, maximum, minimum, pos

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


def schedule_for(
    schedule: str | None,
    pp: int,
    vpp: int,
    framework: str | None = None,
    micro: int | None = None,
) -> str:
    """The schedule a layout runs: `schedule`, or 1F1B (Interleaved1F1B with vpp > 1); one
    that cannot run `vpp` virtual stages or `micro` micro-batches per pipeline, or that
    `framework` lacks, is a one-line error."""
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
    if micro is not None and pp > 1 and not dual_runs(schedule, pp, micro):
        even = " an even count of" if schedule == PAIRED_SCHEDULE else ""
        raise SpecError(
            f"--pipeline-schedule {schedule} needs{even} at least 2*pp = {2 * pp} micro-batches "
            f"per pipeline (gbs / (mbs*dp)); the layout has {micro}"
        )
    return schedule


def dual_runs(schedule: str, pp: Array, micro: Array) -> Array:
    """Whether `schedule` runs `micro` micro-batches per pipeline on `pp` ranks (python or
    numpy values): DualPipe.step asserts an even count of at least 2*pp, DualPipeV.step at
    least 2*pp (deepseek-ai/DualPipe dualpipe.py, dualpipev.py; torch's ScheduleDualPipeV
    asks as many as its 2*pp stages). True for every other schedule."""
    if schedule not in DUAL_SCHEDULES:
        return micro == micro
    enough = micro >= 2 * pp
    return enough & (micro % 2 == 0) if schedule == PAIRED_SCHEDULE else enough


def bubble_share(schedule: str, full_recompute: Array, pp: Array = 2) -> Array:
    """Share of the 1F1B bubble left by `schedule` (T_F = T_W = 1, T_B = 1 + full recompute);
    the two-direction schedules: their (S/2 - 1)(F&B + B - 3W) over 1F1B's (pp-1)(F + B + W)
    on the same pp ranks and layers (`dual_bubble_chunks`)."""
    if schedule in DUAL_SCHEDULES:
        stages = pp * (1 + (schedule in V_SCHEDULES))
        chunk = 1 / (1 + (schedule in V_SCHEDULES))  # a stage's time, in a rank's
        idle = (stages / 2 - 1) * dual_bubble_chunks(full_recompute) * chunk
        return idle / maximum(pp - 1, 1)
    filled = W_FILLED[schedule]
    if filled == 0:
        return 1.0
    backward = 1 + full_recompute
    return maximum(1 + backward - filled, 0) / (2 + backward)


def dual_bubble_chunks(full_recompute: Array) -> Array:
    """DualPipe's F&B + B - 3W per bubble step, in chunk times F + B (a stage's forward and
    full backward): F = W = 1, B = 2 + full recompute (input and weight gradient, the
    recompute forward), F&B = F + B: 2/3 without recompute."""
    backward = 2 + full_recompute
    return (1 + 2 * backward - 3) / (1 + backward)


class Ranks(NamedTuple):
    """The pipeline ranks of one layout: the slowest one's time per micro-batch (`busiest_s`)
    and what it holds per micro-batch (`layers`; `embedding`, `loss` and `mtp`: the share
    of micro-batches it runs them for, 0, 1/2 or 1), and all stages' time summed."""

    busiest_s: Array
    layers: Array
    embedding: Array
    loss: Array
    total_s: Array
    mtp: Array = 0.0


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
    schedule: str = "1F1B",
    mtp: tuple[int, int, float] | None = None,
) -> Ranks:
    """Per micro-batch: rank 0 runs `first` layers and the embedding, the last rank `last`
    layers and the loss, the others at most `middle` (`layers` in all), each `layer_s` per
    layer plus `p2p_s` of sends (one rank: everything). DualPipe: ranks 0 and pp-1 hold the
    first and the last stage, a micro-batch costing their mean; a V schedule runs the loss on
    rank 0 (module docstring). `mtp`: (rank, its decoder layers, MTP seconds) where a layout
    places the MTP layers on a rank of their own, one layout (python numbers); None: they are
    in `loss_s`."""
    if schedule == PAIRED_SCHEDULE:
        t_ends = (first + last) / 2 * layer_s + (embedding_s + loss_s) / 2 + p2p_s
        t_middle = (pp > 2) * (middle * layer_s + p2p_s)
        is_ends = 1 * (t_ends >= t_middle)
        held = is_ends * (first + last) / 2 + (1 - is_ends) * middle
        total = layers * layer_s + embedding_s + loss_s + pp * p2p_s
        edges = is_ends * 0.5
        return record(Ranks, (maximum(t_ends, t_middle), held, edges, edges, total, 0.0))
    single = pp == 1
    v = schedule in V_SCHEDULES
    loss_first = True if v else single
    if mtp is not None:
        return _ranks_with_mtp(pp, layers, first, middle, last, layer_s, embedding_s, loss_s,
                               p2p_s, v, mtp)  # fmt: skip
    t_first = first * layer_s + embedding_s + loss_first * loss_s + p2p_s
    t_last = last * layer_s + (not v) * loss_s + p2p_s
    t_middle = (pp > 2) * (middle * layer_s + p2p_s)
    is_first = (t_first >= t_last) * (t_first >= t_middle)
    is_last = (1 - is_first) * (t_last >= t_middle)
    is_middle = (1 - is_first) * (1 - is_last)
    busiest = maximum(maximum(t_first, t_last), t_middle)
    held = is_first * first + is_last * last + is_middle * middle
    total = layers * layer_s + embedding_s + loss_s + pp * p2p_s
    loss = is_last * (not v) + is_first * loss_first
    return record(Ranks, (busiest, held, is_first, loss, total, 0.0))


def _ranks_with_mtp(
    pp: int,
    layers: int,
    first: int,
    middle: int,
    last: int,
    layer_s: float,
    embedding_s: float,
    loss_s: float,
    p2p_s: float,
    v: bool,
    mtp: tuple[int, int, float],
) -> Ranks:
    """`ranks` of one layout whose MTP layers sit on rank `mtp[0]` (`mtp[1]` decoder layers)
    rather than with the loss: (time, layers, embedding, loss, mtp) of each kind of rank."""
    rank, held, mtp_s = mtp
    loss_first = v or pp == 1
    kinds = [
        [first * layer_s + embedding_s + loss_first * loss_s, first, 1, loss_first, 0],
        [last * layer_s + (not v) * loss_s, last, 0, not v, 0],
    ]
    if pp > 2:
        kinds.append([middle * layer_s, middle, 0, 0, 0])
    if rank == 0:
        kinds[0][0] += mtp_s
        kinds[0][4] = 1
    else:
        kinds.append([held * layer_s + mtp_s, held, 0, 0, 1])
    busiest = max(kinds, key=lambda kind: kind[0])
    total = layers * layer_s + embedding_s + loss_s + mtp_s + pp * p2p_s
    t, n, embedding, loss, on = busiest
    return record(Ranks, (t + p2p_s, n, embedding, 1 * loss, total, on))


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
    (`group`: Megatron's group size, default pp) each chunk change idles too; the
    two-direction schedules (S/2 - 1)(F&B + B - 3W) over their S = pp*vpp stages, a chunk
    the mean stage's time (module docstring)."""
    if schedule in DUAL_SCHEDULES:
        stages = pp * vpp
        return (stages / 2 - 1) * dual_bubble_chunks(full_recompute) * r.total_s / stages
    fill = (r.total_s - r.busiest_s) / vpp * bubble_share(schedule, full_recompute, pp)
    g = minimum(pp if group is None else group, micro)
    waits = (vpp - 1) * pos(pp - g) * r.busiest_s / vpp  # (pp - g) chunk times per change
    return fill + waits
