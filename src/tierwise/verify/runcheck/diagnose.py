"""Measured vs predicted for a logged run, and what explains the gap.

Each what-if flips one flag or layout field the log states (an overlap off, full recompute,
too few micro-batches for the pipeline, the MoE dispatcher) and prices the run again: the
seconds it saves rank the findings. Terms no flag changes (DP over a slow tier, memory near
the limit, compute slower or faster than the model) are findings with the term's seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tierwise import frameworks
from tierwise.errors import SpecError
from tierwise.perf.estimate import estimate
from tierwise.verify.runcheck.price import CannotPrice, PricedRun

# A what-if or term worth a finding saves at least this share of the step.
MIN_SHARE = 0.01
# Measured memory above this share of the GPU's HBM leaves too little headroom (allocator
# fragmentation, a longer sequence or a bigger micro-batch runs out of memory).
MEMORY_HEADROOM = 0.92
# A measured step this much slower or faster than the prediction is a finding of its own.
RESIDUAL = 0.10
# A pipeline with fewer micro-batches than this many per stage loses much to its bubble.
MICROBATCHES_PER_STAGE = 4


@dataclass(frozen=True)
class RunFinding:
    """One cause of the gap: the term it is in, the flag that changes it, the seconds it
    explains (None: not priced)."""

    id: str
    term: str
    flag: str
    title: str
    explains_s: float | None
    severity: str
    fix: str

    def as_dict(self, step_s: float) -> dict[str, Any]:
        share = None if self.explains_s is None else self.explains_s / step_s
        return {
            "id": self.id,
            "term": self.term,
            "flag": self.flag,
            "title": self.title,
            "explains_s": self.explains_s,
            "explains_share_of_step": share,
            "severity": self.severity,
            "fix": self.fix,
        }


def predict(run: PricedRun) -> dict[str, Any]:
    """tierwise's estimate of the run as priced (raises CannotPrice for a layout it refuses)."""
    try:
        return estimate(run.model, run.cluster, run.layout, run.flags)
    except CannotPrice:
        raise
    except SpecError as exc:
        raise CannotPrice(f"{run.record.source}: cannot price the logged run: {exc}") from None


@dataclass(frozen=True)
class _WhatIf:
    id: str
    term: str
    flag: str
    applies: Callable[[PricedRun], bool]
    change: Callable[[PricedRun], PricedRun]
    title: str
    fix: str
    # torchtitan's name for the same change (its JobConfig), where it has one.
    titan: tuple[str, str] | None = None

    def flag_and_fix(self, framework: str | None) -> tuple[str, str]:
        dotted = frameworks.row(framework).dotted_options
        return self.titan if dotted and self.titan else (self.flag, self.fix)


def _dp(run: PricedRun) -> bool:
    return run.layout.dp * run.layout.cp > 1


WHAT_IFS = (
    _WhatIf(
        "overlap-grad-reduce-off",
        "dp_comm_s",
        "--overlap-grad-reduce",
        lambda r: (
            _dp(r)
            and not r.flags.overlap_grad_reduce
            and not frameworks.row(r.flags.framework).grad_reduce_always_overlapped
        ),
        lambda r: r.with_flags(overlap_grad_reduce=True),
        "gradient reduce is not overlapped with the backward pass",
        "add --overlap-grad-reduce (Megatron-LM; NeMo/Bridge: ddp.overlap_grad_reduce=True)",
    ),
    _WhatIf(
        "overlap-param-gather-off",
        "dp_comm_s",
        "--overlap-param-gather",
        lambda r: _dp(r) and r.layout.distributed_optimizer and not r.flags.overlap_param_gather,
        lambda r: r.with_flags(overlap_param_gather=True),
        "distributed-optimizer parameter all-gather is not overlapped with the forward pass",
        "add --overlap-param-gather (with --use-distributed-optimizer)",
    ),
    _WhatIf(
        "tp-comm-overlap-off",
        "tp_comm_s",
        "--tp-comm-overlap",
        lambda r: r.layout.tp > 1 and not r.flags.tp_comm_overlap,
        lambda r: r.with_flags(tp_comm_overlap=True),
        "tensor-parallel communication is not overlapped with the GEMMs",
        "add --tp-comm-overlap (Transformer Engine userbuffers; needs --sequence-parallel)",
        (  # torchtitan 0.3.0 CompileConfig: async TP only under torch.compile of the model
            "--compile.enable_async_tensor_parallel",
            "add --compile.enable_async_tensor_parallel (with --compile.enable and model in "
            "--compile.components; needs sequence parallelism)",
        ),
    ),
    _WhatIf(
        "full-recompute",
        "compute_s",
        "--recompute-granularity selective",
        lambda r: r.layout.recompute == "full",
        lambda r: r.with_layout(recompute="selective"),
        "full activation recompute repeats the whole forward pass",
        "use --recompute-granularity selective (if memory allows: see the memory finding)",
        (
            "--activation_checkpoint.mode selective",
            "use --activation_checkpoint.mode selective (if memory allows: see the memory finding)",
        ),
    ),
    _WhatIf(
        "moe-allgather-dispatcher",
        "ep_comm_s",
        "--moe-token-dispatcher-type alltoall",
        lambda r: (
            r.model.moe is not None
            and r.layout.ep > 1
            and r.flags.moe_token_dispatcher_type == "allgather"
        ),
        lambda r: r.with_flags(moe_token_dispatcher_type="alltoall"),
        "the allgather token dispatcher moves every token to every expert rank",
        "use --moe-token-dispatcher-type alltoall",
    ),
    _WhatIf(
        "moe-a2a-not-overlapped",
        "ep_comm_s",
        "--overlap-moe-expert-parallel-comm",
        lambda r: (
            r.model.moe is not None
            and r.layout.ep > 1
            and not r.flags.overlap_moe_expert_parallel_comm
        ),
        lambda r: r.with_flags(overlap_moe_expert_parallel_comm=True),
        "expert-parallel all-to-alls are not overlapped",
        "add --overlap-moe-expert-parallel-comm (with --delay-wgrad-compute)",
    ),
    _WhatIf(
        "pipeline-bubble",
        "pipeline_bubble_s",
        "--num-layers-per-virtual-pipeline-stage",
        lambda r: (
            r.layout.pp > 1
            and r.layout.vpp == 1
            and r.layout.num_microbatches < MICROBATCHES_PER_STAGE * r.layout.pp
            and r.model.layers % (2 * r.layout.pp) == 0
        ),
        lambda r: r.with_layout(vpp=2),
        "too few micro-batches for the pipeline: its bubble is a large share of the step",
        "interleave the pipeline (--num-layers-per-virtual-pipeline-stage, 2 chunks per rank) "
        "or raise --global-batch-size",
    ),
)


def _flag_refusals(run: PricedRun) -> set[str]:
    """The rules of the run's framework its flags break (`frameworks.flag_checks`)."""
    row = frameworks.row(run.flags.framework)
    values = frameworks.layout_values(run.layout)
    return {
        why for failed, why in frameworks.flag_checks(row, run.flags, run.model, values) if failed
    }


def _what_ifs(run: PricedRun, base: dict[str, Any]) -> list[RunFinding]:
    step = base["step_time_s"]
    out = []
    refused = _flag_refusals(run)
    for w in WHAT_IFS:
        if not w.applies(run):
            continue
        changed = w.change(run)
        if _flag_refusals(changed) - refused:  # a change the run's framework would refuse
            continue
        try:
            alt = predict(changed)
        except SpecError:
            continue
        saved = step - alt["step_time_s"]
        if saved < MIN_SHARE * step:
            continue
        detail = ""
        if w.id == "full-recompute" and not alt["fits"]:
            detail = f" (selective needs {alt['memory_gib_per_gpu']:.0f} GiB: does not fit)"
        if w.id == "pipeline-bubble":
            bubble = base["pipeline"]["bubble_fraction"]
            detail = (
                f" ({run.layout.num_microbatches} micro-batches on {run.layout.pp} stages,"
                f" bubble {bubble:.0%} of the step)"
            )
        flag, fix = w.flag_and_fix(run.flags.framework)
        out.append(RunFinding(w.id, w.term, flag, w.title + detail, saved, "warning", fix))
    return out


def _terms(run: PricedRun, base: dict[str, Any], measured: dict[str, Any]) -> list[RunFinding]:
    step = base["step_time_s"]
    out = []
    dp_s = base["breakdown"].get("dp_comm_s", 0.0)
    tier = base["comm_tiers"].get("dp", "none")
    if (
        run.flags.overlap_grad_reduce
        and tier in ("leaf", "spine", "core")
        and dp_s > MIN_SHARE * step
    ):
        out.append(
            RunFinding(
                "dp-slow-tier",
                "dp_comm_s",
                "--overlap-grad-reduce / layout",
                f"DP gradient traffic crosses the {tier} tier and stays exposed after overlap",
                dp_s,
                "warning",
                "keep DP inside fewer domains (more TP/PP per node, fewer DP ranks across "
                "leaves), a larger --ddp-bucket-size, or a faster inter-node fabric",
            )
        )
    hbm = run.cluster.gpu.hbm_gib
    peak = measured.get("peak_memory_gib")
    used = peak if peak is not None else base["memory_gib_per_gpu"]
    if used > MEMORY_HEADROOM * hbm:
        what = "measured" if peak is not None else "predicted"
        out.append(
            RunFinding(
                "memory-headroom",
                "memory_gib_per_gpu",
                "--recompute-granularity / --use-distributed-optimizer",
                f"{what} memory {used:.1f} GiB is {used / hbm:.0%} of the GPU's {hbm:g} GiB",
                None,
                "warning" if peak is not None else "info",
                "free memory before scaling up: selective or full recompute, "
                "--use-distributed-optimizer, more pipeline stages",
            )
        )
    return out


def _residual(step_meas: float, step_pred: float, base: dict[str, Any]) -> RunFinding | None:
    gap = step_meas - step_pred
    if abs(gap) <= RESIDUAL * step_meas:
        return None
    if gap > 0:
        return RunFinding(
            "slower-than-model",
            "compute_s",
            "tierwise calibrate",
            f"the run is {gap:.2f} s per step ({gap / step_pred:.0%}) slower than the model on"
            " this cluster; no flag in the log explains it",
            gap,
            "warning",
            "check clocks and power caps (nvidia-smi -q -d PERFORMANCE), stragglers and "
            "data loading; if the cluster is simply slower, fit it with `tierwise calibrate "
            "LOG... -c CLUSTER --out mine.yaml`",
        )
    return RunFinding(
        "faster-than-model",
        "compute_s",
        "tierwise calibrate",
        f"the run is {-gap:.2f} s per step faster than the model predicts: the model is "
        "pessimistic here (a kernel or an overlap it does not know)",
        None,
        "info",
        "fit this cluster's constants with `tierwise calibrate LOG... -c CLUSTER --out mine.yaml`",
    )


def compare(run: PricedRun) -> dict[str, Any]:
    """JSON-ready comparison: `run` (measured vs predicted), the prediction, ranked findings."""
    base = predict(run)
    m = run.record.measured
    step_meas = m["step_time_s"]
    step_pred = base["step_time_s"]
    peak = m.get("peak_memory_gib")
    mem_pred = base["memory_gib_per_gpu"]
    summary = {
        "measured_step_time_s": step_meas,
        "predicted_step_time_s": step_pred,
        "error_pct": None if not step_meas else (step_pred / step_meas - 1) * 100,
        "measured_peak_memory_gib": peak,
        "predicted_memory_gib": mem_pred,
        "memory_error_pct": None if not peak else (mem_pred / peak - 1) * 100,
        "measured_tflops_per_gpu": m.get("tflops_per_gpu"),
        "predicted_tflops_per_gpu": base["tflops_per_gpu"],
        "step_time_method": m.get("step_time_method"),
    }
    findings = _what_ifs(run, base) + _terms(run, base, m)
    findings.sort(key=lambda f: -(f.explains_s or 0.0))
    if step_meas:
        residual = _residual(step_meas, step_pred, base)
        if residual is not None:
            findings.append(residual)
    return {
        "run": summary,
        "cluster_source": run.cluster_source,
        "priced_as": run.as_dict(),
        "prediction": base,
        "findings": [f.as_dict(step_pred) for f in findings],
    }
