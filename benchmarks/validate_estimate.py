"""Predicted vs published step time for every calibration run in ../shared/calibration/.

training_runs.yaml (10 runs, 2021-24): each run is built from its stated fields; what the source
does not state (micro-batch, virtual pipeline, recompute where unstated) is chosen as the planner
would: the fastest layout that fits. The published number is converted into a step time in the
source's own FLOP convention. training_runs_modern.yaml (20 runs, 2025-26): every run states its
model (HF config), cluster, layout and step time, which are used as stated (modern_runs.py).
Prints JSON and writes docs/validation-estimate.md. `--fit` scans the fitted constants of
perf/efficiency.py and prints the mean and worst |step-time error| over all runs for each,
and the per-rank host time of legacy ZeRO-3 (`fit_legacy_zero3`).
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec, load_cluster
from tierwise.perf import efficiency
from tierwise.perf.estimate import estimate
from tierwise.perf.step import Flags
from tierwise.perf.terms import dp as dp_term
from tierwise.perf.terms import host
from tierwise.workload.flops import megatron_eq3_flops, model_flops_per_token
from tierwise.workload.layout import Layout
from tierwise.workload.params import param_counts
from tierwise.workload.spec import ModelSpec

sys.path.insert(0, str(Path(__file__).parent))
import at_scale_runs
import modern_runs

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO.parent / "shared" / "calibration" / "training_runs.yaml"

# Per family: cluster preset, fixed model fields, stated layout/framework facts.
FAMILY = {
    "sc21": {
        "cluster": "dgx-a100",
        "model": {"vocab": 51200, "activation": "gelu"},
        "seq": 2048,
        "recompute": ["full"],
        # Megatron-LM in 2021: no flash attention (scale-mask-softmax + dropout kernels);
        # pipeline sends scattered over the TP ranks (on by default from 2021-02, SC'21
        # section 4.1) and waited on (--overlap-p2p-communication arrived in 2023-05); the
        # column-parallel backward all-reduce waited on too (async from 2021-09-02).
        "flags": {
            "attention_backend": "unfused",
            "scatter_gather_tensors_in_pipeline": True,
            "overlap_p2p_communication": False,
            "async_tensor_model_parallel_allreduce": False,
        },
        "framework": "megatron",
        "fix": {"recompute": "full", "cp": "1", "sp": "false"},
        "sp": False,
        # fp16 training: Megatron then kept and all-reduced 16-bit grads (its fp32 grad
        # accumulation is only forced for bf16).
        "grad_reduce_bf16": True,
    },
    "mcore": {
        "cluster": "dgx-h100",
        "model": {"vocab": 131072, "activation": "gelu"},
        "seq": 4096,
        "recompute": ["none", "selective", "full"],
        "flags": {"tp_comm_overlap": True},
        "distributed_optimizer": True,
        "framework": "megatron",
        "fix": {},
    },
    "mpt": {
        "cluster": "dgx-h100",
        "model": {"vocab": 50368, "activation": "gelu"},
        "seq": 2048,
        "recompute": ["none"],
        "flags": {},
        "framework": "torchtitan",
        "fix": {"recompute": "none"},
    },
    "dgxc": {
        "cluster": "dgx-h100",
        "model": {},
        "recompute": ["none", "selective", "full"],
        "flags": {},
        "distributed_optimizer": True,
        # NeMo's performance recipes (nemo/collections/llm/recipes/*: performance mode) set
        # plugins.grad_reduce_in_fp32 = False: bf16 main grads and DP reduce.
        "grad_reduce_bf16": True,
        "framework": "megatron",
        "fix": {},
    },
}


# What the authors' own launch script states and the calibration file leaves out:
# NVIDIA/Megatron-LM examples/sc21/run_table_1.sh (MBS, --num-layers-per-virtual-pipeline-stage,
# DDP=torch, which overlaps the gradient all-reduce with backward, or DDP=local, which runs it
# after backward).
SCRIPT_FACTS: dict[str, dict[str, Any]] = {
    "sc21-1.7b": {"mbs": 16, "vpp": 1, "flags": {"overlap_grad_reduce": True}},
    "sc21-18.4b": {"mbs": 8, "vpp": 1, "flags": {"overlap_grad_reduce": True}},
    "sc21-145.6b": {"mbs": 2, "vpp": 2, "flags": {"overlap_grad_reduce": False}},
    "sc21-1008b": {"mbs": 1, "vpp": 1, "flags": {"overlap_grad_reduce": False}},
}


def family(run_id: str) -> str:
    return next(k for k in FAMILY if run_id.startswith(k))


def model_of(run: dict[str, Any]) -> ModelSpec:
    fam = FAMILY[family(run["id"])]
    fields = {
        k: v
        for k, v in run.items()
        if k in {"layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "activation"}
    }
    fields = {**fam["model"], **fields}
    if str(fields.get("activation", "")).startswith("squared-relu"):
        fields["activation"] = "squared-relu"
    return ModelSpec.parse({"name": run["id"], **fields}, run["id"])


def candidates(run: dict[str, Any], model: ModelSpec) -> list[Layout]:
    fam = FAMILY[family(run["id"])]
    gpus = run["gpus"]
    tp, pp, cp = run.get("tp", 1), run.get("pp", 1), run.get("cp", 1)
    fsdp = run.get("fsdp")
    dp = run.get("dp") or gpus // (tp * pp * cp)
    seq = run.get("seq", fam.get("seq"))
    mbs_options = [run["mbs"]] if "mbs" in run else [1, 2, 4, 8]
    recompute = [run["recompute"]] if "recompute" in run else fam["recompute"]
    vpps = [1] + [v for v in (2, 3, 4, 5, 6, 8, 10, 12) if pp > 1 and model.layers % (pp * v) == 0]
    if "vpp" in run:
        vpps = [run["vpp"]]
    out = []
    for mbs, rc, vpp in itertools.product(mbs_options, recompute, vpps):
        try:
            layout = Layout(
                tp=tp,
                cp=cp,
                pp=pp,
                vpp=vpp,
                dp=dp,
                mbs=mbs,
                gbs=run["gbs"],
                seq=seq,
                recompute=rc,
                zero=3 if fsdp else 0,
                sp=fam.get("sp"),
                distributed_optimizer=fam.get("distributed_optimizer", False),
                grad_reduce_bf16=fam.get("grad_reduce_bf16", False),
            )
            out.append(layout.validate_for(model, gpus))
        except (SpecError, ValueError):
            continue
    return out


def published_step_s(run: dict[str, Any], model: ModelSpec, seq: int) -> tuple[float, str]:
    """The step time the source's number implies, in its own FLOP convention."""
    gpus, gbs = run["gpus"], run["gbs"]
    if "tflops_per_gpu_eq3" in run:
        flops = megatron_eq3_flops(gbs, seq, model.layers, model.hidden, model.vocab)
        return flops / (run["tflops_per_gpu_eq3"] * 1e12 * gpus), "tflops_per_gpu_eq3"
    if "step_time_s" in run:
        return run["step_time_s"], "step_time_s"
    if "tokens_per_s_per_gpu" in run:
        return gbs * seq / (run["tokens_per_s_per_gpu"] * gpus), "tokens_per_s_per_gpu"
    return None, "tflops_per_gpu"  # converted with the model's own FLOPs below


def cluster_for(preset: str, gpus: int) -> ClusterSpec:
    """The preset with enough whole leaves for `gpus`; the job takes the first nodes."""
    base = load_cluster(preset)
    nodes = -(-gpus // base.gpus_per_node)
    npl = base.topology.nodes_per_leaf or nodes
    return load_cluster(preset, nodes=nodes if nodes <= npl else -(-nodes // npl) * npl)


def context(run: dict[str, Any]) -> tuple[dict[str, Any], ModelSpec, ClusterSpec, Flags]:
    """The run with its script facts, its model, the cluster it ran on and its flags."""
    fam = FAMILY[family(run["id"])]
    facts = SCRIPT_FACTS.get(run["id"], {})
    run = {**run, **facts}
    flags = Flags(**fam["flags"], **facts.get("flags", {}), framework=fam["framework"])
    return run, model_of(run), cluster_for(fam["cluster"], run["gpus"]), flags


def fastest_published(
    run: dict[str, Any], model: ModelSpec, cluster: ClusterSpec, flags: Flags
) -> tuple[Layout, dict[str, Any]]:
    """The fastest fitting layout consistent with what the source states (any, if none fits)."""
    results = [
        (layout, estimate(model, cluster, layout, flags)) for layout in candidates(run, model)
    ]
    fitting = [r for r in results if r[1]["fits"]] or results
    return min(fitting, key=lambda r: r[1]["step_time_s"])


def evaluate(run: dict[str, Any]) -> dict[str, Any]:
    run, model, cluster, flags = context(run)
    layout, best = fastest_published(run, model, cluster, flags)
    seq = layout.seq
    pub_step, metric = published_step_s(run, model, seq)
    if pub_step is None:  # Megatron-core: model TFLOP/s without recompute, full s^2 core
        # (Megatron-LM counted the causal half only from 8873b55d6a, 2025-03-06)
        full = model_flops_per_token(model, seq, causal=False) / model_flops_per_token(model, seq)
        pred_metric, pub_metric = best["tflops_per_gpu"] * full, run["tflops_per_gpu"]
    elif metric == "tflops_per_gpu_eq3":
        flops = megatron_eq3_flops(run["gbs"], seq, model.layers, model.hidden, model.vocab)
        pred_metric = flops / (best["step_time_s"] * run["gpus"]) / 1e12
        pub_metric = run["tflops_per_gpu_eq3"]
    else:
        pred_metric, pub_metric = best["step_time_s"], pub_step
    # Compare on TFLOP/s: a step-time error e is a throughput error 1/(1+e) - 1.
    err = (
        pred_metric / pub_metric - 1
        if metric != "step_time_s" and metric != "tokens_per_s_per_gpu"
        else pub_metric / pred_metric - 1
    )
    return {
        "id": run["id"],
        "metric": metric,
        "published": pub_metric,
        "predicted": round(float(pred_metric), 3),
        "throughput_error": round(float(err), 4),
        **_estimate_fields(model, layout, best),
    }


def _estimate_fields(model: ModelSpec, layout: Layout, best: dict[str, Any]) -> dict[str, Any]:
    """What every row reports of the estimate it compares."""
    return {
        "layout": {k: v for k, v in layout.model_dump().items() if v not in (None, False)},
        "fits": best["fits"],
        "memory_gib_per_gpu": round(best["memory_gib_per_gpu"], 1),
        "mfu": round(best["mfu"], 3),
        "breakdown": {k: round(v, 4) for k, v in best["breakdown"].items()},
        "params_B": round(param_counts(model).total / 1e9, 2),
    }


def evaluate_stated(run: dict[str, Any], source: Any) -> dict[str, Any]:
    """A run that states its model, cluster, layout (and recipe), read by `source`
    (`modern_runs` or `at_scale_runs`), estimated as stated."""
    model = source.model_of(run)
    cluster = source.cluster_of(run)
    layout = source.layout_of(run, model)
    best = estimate(model, cluster, layout, source.flags_of(run))
    pub = run["published"]["step_time_s"]
    pred = best["step_time_s"]
    row = {
        "id": run["id"],
        "metric": "step_time_s",
        "published": pub,
        "predicted": round(pred, 3),
        "throughput_error": round(pub / pred - 1, 4),
        "step_time_error": round(pred / pub - 1, 4),
        **_estimate_fields(model, layout, best),
        "confidence": run.get("confidence"),
    }
    return row | ({"at_scale": True} if source is at_scale_runs else {})


def run_all() -> list[dict[str, Any]]:
    runs = yaml.safe_load(RUNS.read_text())["runs"]
    old = [evaluate(r) for r in runs]
    for row in old:  # a throughput error e is a step-time error 1/(1+e) - 1
        row["step_time_error"] = round(1 / (1 + row["throughput_error"]) - 1, 4)
    modern = [evaluate_stated(r, modern_runs) for r in modern_runs.load_runs()]
    return old + modern + [evaluate_stated(r, at_scale_runs) for r in at_scale_runs.load_runs()]


# Why a run misses by more than the model's usual spread: what the model lacks or the source
# leaves open (docs/validation.md has the longer story). Every other row's explanation is its
# largest predicted terms.
KNOWN_CAUSES = {
    "sc21-zero3-530b-640": "DeepSpeed ZeRO-3 before 0.5.5 (--legacy-zero3): every gather "
    "and gradient reduce-scatter exposed, with per-rank host time; the errors are flat in "
    "dp, the ~21% left is not explained (NCCL at 640-2,240 ranks of 2021 uncalibrated)",
    "sc21-zero3-530b-1120": "as sc21-zero3-530b-640",
    "sc21-zero3-530b-2240": "as sc21-zero3-530b-640",
    "bloom-176b-384": "Omni-Path 4 x 100 Gb/s encoded as 2 x HDR 200 (no catalog NIC); "
    "DeepSpeed's pipeline engine: fp32 gradient accumulation and all-reduce priced",
    "mlperf40-gpt3-175b-eos-512-mbs2": "the v4.0 submission (NeMo 24.04, FP8 parameters, "
    "mbs 2) runs 12% faster per sequence than v3.1's mbs 1 rows on the same layout; the "
    "model finds 4% of it (larger GEMMs, a bubble at vpp 4), nothing of the release's own "
    "kernel gains",
}
TERMS = {
    "compute_s": "compute",
    "tp_comm_s": "TP",
    "cp_comm_s": "CP",
    "ep_comm_s": "EP",
    "pp_comm_s": "PP",
    "pipeline_bubble_s": "bubble",
    "dp_comm_s": "DP",
    "offload_s": "offload",
    "optimizer_s": "optimizer",
    "overlap_interference_s": "overlap interference",
}


def explanation(r: dict[str, Any]) -> str:
    """The run's known cause, else its three largest predicted terms (share of the step)."""
    if r["id"] in KNOWN_CAUSES:
        return KNOWN_CAUSES[r["id"]]
    step = sum(r["breakdown"].values()) or 1.0
    parts = sorted(r["breakdown"].items(), key=lambda kv: -kv[1])[:3]
    return ", ".join(f"{TERMS[k]} {v / step:.0%}" for k, v in parts if v > 0)


def _table(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| run | published | predicted | step-time error | layout | MFU (bf16 peak) | GiB/GPU "
        "| explanation |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lay = ", ".join(f"{k}={v}" for k, v in r["layout"].items() if k not in {"seq", "gbs"})
        fits = "" if r["fits"] else " (over HBM)"
        lines.append(
            f"| {r['id']} | {r['published']:.4g} {r['metric']} | {r['predicted']:.4g} | "
            f"{r['step_time_error'] * 100:+.1f}% | {lay} | {r['mfu']} | "
            f"{r['memory_gib_per_gpu']}{fits} | {explanation(r)} |"
        )
    return lines


def gpus_of(r: dict[str, Any]) -> int:
    """GPUs of a row's layout."""
    lay = r["layout"]
    return lay.get("tp", 1) * lay.get("cp", 1) * lay.get("pp", 1) * lay.get("dp", 1)


def markdown(rows: list[dict[str, Any]]) -> str:
    mean, worst = score(rows)
    old = [r for r in rows if "confidence" not in r]
    modern = [r for r in rows if "confidence" in r and not r.get("at_scale")]
    scale = [r for r in rows if r.get("at_scale")]
    large = [r for r in rows if gpus_of(r) >= LARGE_GPUS]
    small = [r for r in rows if gpus_of(r) < LARGE_GPUS]
    constants = ", ".join(f"{name} {get_constant(name):.3g}" for name in FITTED)

    def pair(group: list[dict[str, Any]]) -> str:
        m, w = score(group)
        return f"{m * 100:.1f}% / {w * 100:.1f}%"

    lines = [
        "## Step time: predicted vs published",
        "",
        "Generated by `benchmarks/validate_estimate.py` from `../shared/calibration/"
        "training_runs.yaml`, `training_runs_modern.yaml` and `training_runs_at_scale.yaml`; "
        f"every run uses the same constants ({constants}; `perf/efficiency.py`). Errors are "
        "predicted / published step time - 1 (the older runs' TFLOP/s and tokens/s turned "
        "into a step time in the source's own FLOP convention). The explanation column names "
        "a run's known cause where one is, else its largest predicted terms.",
        "",
        f"All {len(rows)} runs: mean |step-time error| {mean * 100:.1f}%, worst "
        f"{worst * 100:.1f}%. Older runs: {pair(old)}; modern runs: {pair(modern)}; at-scale "
        f"runs: {pair(scale)}. Runs of {LARGE_GPUS:,} GPUs and more ({len(large)}): "
        f"{pair(large)}; smaller ({len(small)}): {pair(small)}.",
        "",
        "### training_runs.yaml (unstated micro-batch, interleaving and recompute chosen as "
        "the planner would: the fastest layout that fits)",
        "",
        *_table(old),
        "",
        "### training_runs_modern.yaml (model, cluster and layout as stated)",
        "",
        *_table(modern),
        "",
        "### training_runs_at_scale.yaml (model, cluster, layout and recipe as stated)",
        "",
        *_table(scale),
    ]
    return "\n".join(lines) + "\n"


# The fitted constants of perf/efficiency.py: (table, key) for a dict entry, (name, None) for a
# module constant. The FP8 recipes share one efficiency.
FITTED: dict[str, tuple[str, str | None]] = {
    "blackwell": ("ARCH_PEAK_FRACTION", "blackwell"),
    "blackwell-ultra": ("ARCH_PEAK_FRACTION", "blackwell-ultra"),
    "fp8": ("FORMAT_EFFICIENCY", "fp8-tensorwise"),
    "mxfp8": ("FORMAT_EFFICIENCY", "mxfp8"),
    "ridge": ("GEMM_RIDGE_MULTIPLE", None),
    "grouped_tokens": ("GROUPED_GEMM_TOKENS", None),
    "attention": ("ATTENTION_RELATIVE_EFFICIENCY", None),
    "elementwise": ("ELEMENTWISE_TRAFFIC_FACTOR", None),
    "elementwise_unfused": ("UNFUSED_ELEMENTWISE_RATIO", None),
    "moe_host_per_expert": ("MOE_HOST_PER_EXPERT_S", None),
}
# Each constant stays inside what it can physically mean.
BOUNDS = {
    "blackwell": (0.5, 0.95),
    "blackwell-ultra": (0.5, 0.95),
    "fp8": (0.5, 1.0),
    "mxfp8": (0.5, 1.0),
    "ridge": (0.1, 4.0),
    "grouped_tokens": (0.0, 256.0),  # 128-row tiles: at most two tiles of padding per expert
    "attention": (0.3, 1.0),  # the attention core reaches at most the GEMMs' share of peak
    "elementwise": (0.5, 4.0),
    "elementwise_unfused": (1.0, 3.0),  # unfused kernels move at least the fused traffic
    "moe_host_per_expert": (0.0, 1e-3),  # a handful of launches per expert
}


def _module(name: str) -> Any:
    return host if name == "moe_host_per_expert" else efficiency


def get_constant(name: str) -> float:
    table, key = FITTED[name]
    value = getattr(_module(name), table)
    return value[key] if key else value


def set_constant(name: str, value: float) -> None:
    table, key = FITTED[name]
    if key is None:
        setattr(_module(name), table, value)
    else:
        getattr(efficiency, table)[key] = value
        if key == "fp8-tensorwise":  # every FP8 recipe: scaling only changes the casts
            efficiency.FORMAT_EFFICIENCY["fp8-delayed"] = value
            efficiency.FORMAT_EFFICIENCY["fp8-blockwise"] = value
    efficiency._format_rates.cache_clear()


LARGE_GPUS = 2048
"""Runs of this many GPUs and more are reported apart (the issue's large-scale bar)."""
WORST_WEIGHT = 0.25
"""Weight of the worst run in the fit objective (mean + WORST_WEIGHT * worst)."""


def score(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """Mean and worst |step-time error|."""
    errs = np.abs([r["step_time_error"] for r in rows])
    return float(errs.mean()), float(errs.max())


def fit(rounds: int = 6) -> dict[str, Any]:
    """Coordinate descent on mean + worst/4 |step-time error| over all calibration runs, each
    constant within BOUNDS; multiplicative steps that halve each round."""

    def objective() -> float:
        mean, worst = score(run_all())
        return mean + worst * WORST_WEIGHT

    best = objective()
    step = 0.2
    for _ in range(rounds):
        for name in FITTED:
            lo, hi = BOUNDS[name]
            for direction in (1 + step, 1 / (1 + step)):
                while True:
                    old = get_constant(name)
                    new = min(max(old * direction if old else step * hi, lo), hi)
                    if new == old:
                        break
                    set_constant(name, new)
                    trial = objective()
                    if trial >= best:
                        set_constant(name, old)
                        break
                    best = trial
        step /= 2
    mean, worst = score(run_all())
    return {
        "constants": {name: float(f"{get_constant(name):.4g}") for name in FITTED},
        "mean_abs_step_error": round(mean, 4),
        "max_abs_step_error": round(worst, 4),
    }


# DeepSpeed's ZeRO-3 before 0.5.5 pays host time per rank per collective
# (perf/terms/dp.py LEGACY_ZERO3_PER_RANK_S): a Python narrow plus one copy launch, 2-30 us.
LEGACY_PER_RANK_GRID_S = np.arange(2.0, 30.01, 0.5) * 1e-6


def fit_legacy_zero3() -> dict[str, Any]:
    """The per-rank host time of legacy ZeRO-3 is the slope of its runs' step time in dp:
    the value (on `LEGACY_PER_RANK_GRID_S`) that leaves their errors flattest in dp (least
    spread). Their common offset is what the mechanism does not explain: reported, never
    absorbed into the slope (that would trade the dp trend for one run's level)."""
    rows = [r for r in at_scale_runs.load_runs() if r["id"] in at_scale_runs.LEGACY_ZERO3]
    old = dp_term.LEGACY_ZERO3_PER_RANK_S
    spreads = []
    for value in LEGACY_PER_RANK_GRID_S:
        dp_term.LEGACY_ZERO3_PER_RANK_S = float(value)
        errors = [evaluate_stated(r, at_scale_runs)["step_time_error"] for r in rows]
        spreads.append((float(np.std(errors)), float(value), errors))
    dp_term.LEGACY_ZERO3_PER_RANK_S = old
    spread, value, errors = min(spreads)
    return {
        "legacy_zero3_per_rank_s": float(f"{value:.3g}"),
        "error_spread": round(spread, 4),
        "errors": dict(zip([r["id"] for r in rows], errors, strict=True)),
    }


def main() -> None:
    if "--fit" in sys.argv:
        print(json.dumps({**fit(), "legacy_zero3": fit_legacy_zero3()}, indent=2))
        return
    rows = run_all()
    (REPO / "docs" / "validation-estimate.md").write_text(markdown(rows))
    mean, worst = score(rows)
    print(json.dumps({"runs": rows, "mean_abs_step_error": mean, "max_abs_step_error": worst}))


if __name__ == "__main__":
    main()
