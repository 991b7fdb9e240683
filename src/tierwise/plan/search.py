"""Search: evaluate every candidate layout vectorised, keep those that fit, rank them."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from tierwise import frameworks
from tierwise.errors import SpecError
from tierwise.frameworks import DUAL_SCHEDULES, PAIRED_SCHEDULE
from tierwise.hardware.cluster import ClusterSpec
from tierwise.perf.estimate import estimate, estimate_batch
from tierwise.perf.pipeline import dual_runs
from tierwise.perf.step import Flags, memory_terms
from tierwise.perf.train_time import checkpoint_terms, ettr
from tierwise.plan.diagnose import why_no_layout
from tierwise.plan.space import RECOMPUTE, Space, build_space
from tierwise.workload.checkpoint import checkpoint_bytes_per_gpu, state_replicas
from tierwise.workload.layout import Layout, middle_stage_layers
from tierwise.workload.memory import GiB
from tierwise.workload.precision import dtype_and_recipe
from tierwise.workload.recompute import mask_modules
from tierwise.workload.spec import ModelSpec

Objective = Literal["step_time", "tokens_per_dollar", "time_to_train"]
OBJECTIVES = ("step_time", "tokens_per_dollar", "time_to_train")
SMALLER_JOBS = ("tokens_per_dollar", "time_to_train")
"""Objectives a smaller job may win: cost per token, and days once failures dominate."""
# Step times within this relative distance count as a tie, broken by memory headroom.
TIE_TOLERANCE = 1e-3
_RECOMPUTE_NAMES = {v: k for k, v in RECOMPUTE.items()}


@dataclass(frozen=True)
class PlanResult:
    """Top plans (full estimates) and search statistics."""

    plans: list[dict[str, Any]]
    candidates_evaluated: int
    candidates_fitting: int
    search_time_s: float
    precisions: tuple[str, ...] = ()
    """The precisions searched (format names: bf16, fp8 with its recipe, ...)."""


def layout_at(arrays: Mapping[str, np.ndarray], i: int, layers: int) -> Layout:
    """Candidate i of a model with `layers` layers as a Layout."""
    pp = int(arrays["pp"][i])
    first, last = int(arrays["first_stage_layers"][i]), int(arrays["last_stage_layers"][i])
    middle = int(middle_stage_layers(layers, pp, first, last)) if pp > 2 else first
    uneven = pp > 1 and (first != middle or last != middle)
    dtype, recipe = dtype_and_recipe(int(arrays["precision"][i]))
    share = float(arrays["recompute_share"][i]) if "recompute_share" in arrays else 1.0
    block = round(share * layers / (pp * int(arrays["vpp"][i]))) if share < 1 else None
    full = arrays["recompute"][i] == RECOMPUTE["full"]
    dp = int(arrays["dp"][i])
    shard = int(arrays["dp_shard"][i]) if "dp_shard" in arrays else dp
    return Layout(
        tp=int(arrays["tp"][i]),
        cp=int(arrays["cp"][i]),
        ep=int(arrays["ep"][i]),
        pp=pp,
        pp_layers=(first, *[middle] * (pp - 2), last) if uneven else None,
        vpp=int(arrays["vpp"][i]),
        dp=dp,
        mbs=int(arrays["mbs"][i]),
        gbs=int(arrays["gbs"][i]),
        seq=int(arrays["seq"][i]),
        recompute=_RECOMPUTE_NAMES[int(arrays["recompute"][i])],
        recompute_modules=mask_modules(int(arrays["recompute_modules"][i])),
        recompute_method="block" if full and block else None,
        recompute_num_layers=block if full else None,
        zero=int(arrays["zero"][i]),
        sp=bool(arrays["sp"][i]),
        distributed_optimizer=bool(arrays["distributed_optimizer"][i]),
        grad_reduce_bf16=bool(arrays["grad_reduce_bf16"][i]),
        dtype=dtype,
        fp8_recipe=recipe,
        dp_shard_degree=shard if shard < dp else None,  # HSDP (`space.hsdp_degrees`)
    )


def tokens_per_dollar(tokens_per_s: Any, gpus: Any, cluster: ClusterSpec) -> Any:
    """Tokens trained per dollar of `gpus` GPUs at the cluster's price per GPU-hour."""
    return tokens_per_s * 3600 / (gpus * cluster.price_per_gpu_hour)


def job_sizes(cluster: ClusterSpec, gpus: int, objective: Objective) -> list[int]:
    """GPU counts a search covers: all `gpus` for step time; for tokens per dollar and time
    to train also every power-of-two number of whole nodes below it (a smaller job may cost
    less per token, or lose less to failures)."""
    if objective not in SMALLER_JOBS:
        return [gpus]
    per_node = cluster.gpus_per_node
    smaller = (2**i * per_node for i in range(max(gpus // per_node, 1).bit_length()))
    return sorted({gpus, *(n for n in smaller if n < gpus)})


def effective_tokens_per_s(
    terms: dict[str, Any],
    arrays: Mapping[str, np.ndarray],
    cluster: ClusterSpec,
    interval_min: float | None = None,
) -> np.ndarray:
    """Tokens per second of wall-clock time once failures, restarts and checkpoints take
    their share (tokens/s x ETTR, `tierwise.perf.train_time`), per candidate."""
    world = arrays["tp"] * arrays["cp"] * arrays["pp"] * arrays["dp"]
    replicas = state_replicas(
        arrays["zero"],
        arrays["distributed_optimizer"],
        arrays["dp"],
        arrays["cp"],
        arrays.get("dp_shard", 0),
    )
    saved = checkpoint_bytes_per_gpu(terms["memory"].optimizer, replicas)
    t = checkpoint_terms(cluster, saved, world, interval_min)
    share = ettr(t["rate"], t["restart_s"], t["interval_s"], t["write_s"], t["lag_s"])
    return terms["tokens_per_s"] * share


def _score(
    terms: dict[str, Any],
    arrays: Mapping[str, np.ndarray],
    objective: Objective,
    cluster: ClusterSpec,
    interval_min: float | None,
) -> np.ndarray:
    """Lower is better: step time, negated tokens per dollar, or seconds of wall-clock time
    per token (the expected days of any fixed number of tokens; inf: never finishes)."""
    if objective == "step_time":
        return terms["step_time_s"]
    if objective == "time_to_train":
        with np.errstate(divide="ignore"):
            return 1.0 / effective_tokens_per_s(terms, arrays, cluster, interval_min)
    world = arrays["tp"] * arrays["cp"] * arrays["pp"] * arrays["dp"]
    return -tokens_per_dollar(terms["tokens_per_s"], world, cluster)


def search(
    model: ModelSpec,
    cluster: ClusterSpec,
    gbs: int,
    seq: int,
    *,
    top: int = 5,
    fix: Mapping[str, str] | None = None,
    objective: Objective = "step_time",
    flags: Flags = Flags(),
    gpus: int | None = None,
    framework: str = "any",
    all_gpus: bool = False,
    interval_min: float | None = None,
    headroom_gib: float = 0.0,
) -> PlanResult:
    """Best `top` layouts of `model` on `gpus` (default: all) GPUs of `cluster` (or, for
    tokens per dollar and time to train unless `all_gpus`, on `gpus` or a power-of-two number
    of nodes fewer: `job_sizes`). `interval_min`: the checkpoint interval time to train is
    ranked with (None: Young-Daly's); a layout fits when it leaves `headroom_gib` of HBM
    free."""
    started = time.perf_counter()
    gpus = gpus or cluster.world
    for name, value in (("gbs", gbs), ("seq", seq), ("top", top)):
        if value < 1:
            raise SpecError(f"--{name}: {value}; allowed: a positive integer")
    group = flags.microbatch_group_size_per_vp_stage
    sizes = [gpus] if all_gpus else job_sizes(cluster, gpus, objective)
    space = Space.join(
        [build_space(model, cluster, n, gbs, seq, fix, framework, group=group) for n in sizes]
    )
    space = _schedule_runs(space, flags.pipeline_schedule)
    if space.size == 0:
        raise SpecError(why_no_layout(model, cluster, gpus, gbs, seq, dict(fix or {}), framework))
    space = _runs_flags(space, model, flags, framework)
    # Memory first (cheap): only the layouts that fit are priced.
    breakdown = memory_terms(model, space.arrays, flags)
    memory = breakdown.total_bytes
    fits = np.asarray(memory <= (cluster.gpu.hbm_gib - headroom_gib) * GiB, dtype=bool)
    if not fits.any():
        raise SpecError(_nothing_fits_message(model, cluster, space, memory, headroom_gib))
    arrays = {key: column[fits] for key, column in space.arrays.items()}
    terms = estimate_batch(model, cluster, arrays, flags, breakdown.take(fits))
    score = _score(terms, arrays, objective, cluster, interval_min)
    if not np.isfinite(score).any():  # no layout finishes a run: show the fastest steps
        score = terms["step_time_s"]
    headroom = cluster.gpu.hbm_gib * GiB - memory[fits]
    best_score = abs(score.min())  # the best plan's: step time or tokens per dollar
    order = np.lexsort((-headroom, np.round(score / best_score / TIE_TOLERANCE)))
    best = [int(i) for i in order[:top]]
    plans = []
    for i in best:
        layout = layout_at(arrays, i, model.layers)
        plans.append(estimate(model, cluster, layout, flags))
    elapsed = time.perf_counter() - started
    return PlanResult(plans, space.size, int(fits.sum()), elapsed, precisions_of(space))


def _schedule_runs(space: Space, schedule: str | None) -> Space:
    """The candidates a two-direction `schedule` runs: an even pp and the micro-batches it
    asks (`dual_runs`); every candidate for the others."""
    if schedule not in DUAL_SCHEDULES:
        return space
    a = space.arrays
    micro = a["gbs"] // (a["mbs"] * a["dp"])
    keep = (a["pp"] % 2 == 0) & dual_runs(schedule, a["pp"], micro)
    if space.size and not keep.any():
        even = " an even count of" if schedule == PAIRED_SCHEDULE else ""
        raise SpecError(
            f"--pipeline-schedule {schedule} needs an even pp and{even} at least 2*pp "
            "micro-batches per pipeline (gbs / (mbs*dp)); no candidate has them: raise --gbs "
            "or fix a smaller pp"
        )
    return Space({k: v[keep] for k, v in a.items()}, space.product)


def _runs_flags(space: Space, model: ModelSpec, flags: Flags, framework: str) -> Space:
    """The candidates `framework` runs with `flags` (`frameworks.flag_checks`; ``any``
    prices the generic model, which runs them all); a one-line error naming the rule when
    none is left."""
    fw = frameworks.launched(framework)
    if fw is None:
        return space
    a = space.arrays
    values = {
        "tp": a["tp"],
        "sp": a["sp"],
        "pp": a["pp"],
        "vpp": a["vpp"],
        "ep": a["ep"],
        "full": a["recompute"] == RECOMPUTE["full"],
        "sharded": a["distributed_optimizer"] | (a["zero"] >= 1),
        "zero": a["zero"],
    }
    keep, reason = frameworks.flags_mask(fw, flags, model, values)
    if reason is not None:
        raise SpecError(f"--framework {fw.name}: {reason}")
    if keep is True:
        return space
    keep = np.broadcast_to(np.asarray(keep, dtype=bool), a["tp"].shape)
    return Space({k: v[keep] for k, v in a.items()}, space.product)


def precisions_of(space: Space) -> tuple[str, ...]:
    """The precisions a space holds, by name (``fp8`` with a recipe other than the default
    as ``fp8/tensorwise``)."""
    named = []
    for code in sorted({int(c) for c in np.unique(space.arrays["precision"])}):
        dtype, recipe = dtype_and_recipe(code)
        named.append(dtype if recipe is None else f"{dtype}/{recipe}")
    return tuple(named)


def _nothing_fits_message(
    model: ModelSpec, cluster: ClusterSpec, space: Space, memory: np.ndarray, headroom: float
) -> str:
    mem = memory / GiB
    i = int(np.argmin(mem))
    layout = layout_at(space.arrays, i, model.layers)
    return (
        f"no layout of {model.name} fits {cluster.gpu.hbm_gib:g} GiB per GPU less "
        f"{headroom:.1f} GiB headroom on "
        f"{cluster.world} x {cluster.gpu.key}; closest: tp={layout.tp} cp={layout.cp} "
        f"pp={layout.pp} dp={layout.dp} mbs={layout.mbs} recompute={layout.recompute} "
        f"zero={layout.zero} needs {mem[i]:.1f} GiB per GPU; add nodes or GPUs with more HBM"
    )
