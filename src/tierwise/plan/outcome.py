"""Run a `PlanRequest`: search, map the best plan onto the cluster, score the rank orders and
emit its launch. A refused emission keeps the plan and carries the one-line reason."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tierwise import frameworks
from tierwise.errors import SpecError
from tierwise.frameworks import frameworks_for, sharding_name
from tierwise.hardware.cluster import ClusterSpec
from tierwise.perf.estimate import estimate
from tierwise.perf.flags import Flags
from tierwise.perf.groups import ORDERS
from tierwise.perf.train_time import run_train_time
from tierwise.plan.behaviour import idle_options
from tierwise.plan.emit import emit
from tierwise.plan.mapping import group_members, group_summary
from tierwise.plan.placement import placement_ratios
from tierwise.plan.request import PlanRequest
from tierwise.plan.search import PlanResult, search, tokens_per_dollar
from tierwise.plan.why import why
from tierwise.workload.layout import Layout

PLAN_KEYS = (
    "tp",
    "cp",
    "ep",
    "pp",
    "vpp",
    "dp",
    "mbs",
    "recompute",
    "zero",
    "distributed_optimizer",
    "grad_reduce_bf16",
    "dtype",
)
"""Layout fields of a plan row, in the order the table shows them."""


@dataclass(frozen=True)
class PlanOutcome:
    """The searched plans and what was made of the best one."""

    request: PlanRequest
    result: PlanResult
    layout: Layout
    mapping: list[dict[str, Any]]
    placement: dict[str, Any]
    emitted: dict[str, str]
    refused: str | None
    order: tuple[str, ...] = ORDERS["tp-cp-ep-dp-pp"]
    """The rank order the best plan runs (and is emitted) in."""
    runs: list[dict[str, Any]] = field(default_factory=list)
    """Each plan's whole run with --train-tokens (`perf.train_time`; empty dicts without)."""
    notes: list[str] = field(default_factory=list)
    """The behaviour options given that change nothing for the best plan (`idle_options`)."""

    @property
    def members(self) -> dict[str, list[list[str]]]:
        """Every process group of the best plan as its GPUs (mapping.json; built on demand:
        a 100,000-node cluster has ~10^6 names per group kind)."""
        return group_members(self.request.cluster, self.layout, self.order)


def run_plan(request: PlanRequest) -> PlanOutcome:
    """Search `request`, then map, score and emit its best plan."""
    result = search(
        request.model,
        request.cluster,
        request.gbs,
        request.seq,
        top=request.top,
        fix=request.fixes,
        objective=request.objective,  # type: ignore[arg-type]
        flags=request.flags,
        framework=request.framework,
        headroom_gib=request.headroom_gib,
        interval_min=request.train.interval_min,
    )
    layout = Layout(**result.plans[0]["layout"])
    placement = placement_ratios(request.model, request.cluster, layout, request.flags)
    flags = fastest_order(request, layout, placement)
    if flags != request.flags:  # the best plan as it launches, in its fastest rank order
        result.plans[0] = estimate(request.model, request.cluster, layout, flags)
    closed_form = replace(request.train, simulate=False)  # the first plan alone is simulated
    runs = [
        run_train_time(request.cluster, request.train if i == 0 else closed_form, p)
        for i, p in enumerate(result.plans)
    ]
    emitted, refused = {}, None
    try:
        for kind in request.emit:
            emitted[kind] = emit(
                kind, request.model, request.cluster, layout, flags, framework=request.runner.name
            )
    except SpecError as exc:  # the plan stands; the launch it cannot have is said
        refused = str(exc)
    return PlanOutcome(
        request=request,
        result=result,
        layout=layout,
        mapping=group_summary(request.cluster, layout, flags.order),
        placement=placement,
        emitted=emitted,
        refused=refused,
        order=flags.order,
        runs=runs,
        notes=idle_options(request.given, flags, layout, request.model),
    )


def fastest_order(request: PlanRequest, layout: Layout, placement: dict[str, Any]) -> Flags:
    """The request's flags in the fastest rank order the launching framework can ask for
    (`Framework.rank_orders`; its default where it cannot run the layout)."""
    runner = request.runner
    group = request.flags.microbatch_group_size_per_vp_stage
    if frameworks.refusal(runner, layout, group, request.flags, request.model) is not None:
        return request.flags
    times = {ORDERS[name]: t for name, t in placement["orders_step_time_s"].items()}
    allowed = [o for o in runner.rank_orders if o in times]
    best = min(allowed, key=lambda o: times[o], default=request.flags.order)
    if best == request.flags.order or times[best] >= times.get(request.flags.order, float("inf")):
        return request.flags
    return replace(request.flags, order=best)


def plan_row(
    p: dict[str, Any], cluster: ClusterSpec, flags: Flags | None = None, model: Any = None
) -> dict[str, Any]:
    """A plan as the JSON row `tierwise plan --json` prints; `flags`, `model`: what it was
    priced with (the frameworks listed run the layout with them)."""
    lay = p["layout"]
    layout = Layout(**lay)
    pipeline = p["pipeline"]
    return {
        **{k: lay[k] for k in PLAN_KEYS},
        "sharding": sharding_name(layout),
        # HSDP: the dp ranks sharding one replica (torchtitan's data_parallel_shard_degree);
        # null where the states are sharded over every dp rank or not at all
        "dp_shard": lay.get("dp_shard_degree"),
        "pp_layers": lay.get("pp_layers"),
        "recompute_modules": lay.get("recompute_modules"),
        "recompute_method": lay.get("recompute_method"),
        "recompute_num_layers": lay.get("recompute_num_layers"),
        "frameworks": frameworks_for(layout, pipeline["microbatch_group_size"], flags, model),
        "pipeline_schedule": pipeline["schedule"],
        "microbatch_group_size": pipeline["microbatch_group_size"],
        "overlap": p["overlap"],
        "moe_a2a_overlap": None if p["moe"] is None else p["moe"]["a2a_overlap"],
        "gbs": lay["gbs"],
        "seq": lay["seq"],
        "gpus": p["gpus"],
        "step_time_s": p["step_time_s"],
        "tokens_per_s": p["tokens_per_s"],
        "tokens_per_dollar": tokens_per_dollar(p["tokens_per_s"], p["gpus"], cluster),
        "tflops_per_gpu": p["tflops_per_gpu"],
        "mfu": p["mfu"],
        "mfu_at_dtype_peak": p["mfu_at_dtype_peak"],
        "memory_gib_per_gpu": p["memory_gib_per_gpu"],
        "fits": p["fits"],
        "why": why(p),
        "comm_tiers": p["comm_tiers"],
        "breakdown": p["breakdown"],
    }
