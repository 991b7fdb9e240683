"""How `tierwise plan` prints a `PlanOutcome`: one JSON object, or the header, the plans
table, the mapping table, the placement lines and the emitted launches."""

from __future__ import annotations

from typing import Any

import typer

from tierwise.cli.output import RULE_WIDTH, console, line, recompute_label, styled, table
from tierwise.perf.groups import ORDERS
from tierwise.plan.outcome import PLAN_KEYS, PlanOutcome, plan_row


def order_name(order: tuple[str, ...]) -> list[str]:
    """The ORDERS name of a rank order, as its parts."""
    return next(name for name, o in ORDERS.items() if o == order).split("-")


MAPPING_HEADER = [
    "group",
    "size",
    "groups",
    "tier",
    "nodes/group",
    "leaves/group",
    "pods/group",
    "groups crossing pods",
    "groups per NIC",
    "GPUs of the slowest group",
]


def plan_json(outcome: PlanOutcome, written: list[str]) -> dict[str, Any]:
    """The object `tierwise plan --json` prints."""
    req, result = outcome.request, outcome.result
    return {
        "model": req.model.name,
        "cluster": req.cluster.name,
        "gpus": req.cluster.world,
        "framework": req.framework,
        "plans": [
            plan_row(p, req.cluster, req.flags, req.model) | run
            for p, run in zip(result.plans, outcome.runs or [{}] * len(result.plans), strict=True)
        ],
        "candidates_evaluated": result.candidates_evaluated,
        "candidates_fitting": result.candidates_fitting,
        "search_time_s": result.search_time_s,
        "precisions_searched": list(result.precisions),
        "mapping": outcome.mapping,
        "placement": outcome.placement,
        "rank_order": "-".join(order_name(outcome.order)),
        "emitted": outcome.emitted,
        "emit_refused": outcome.refused,
        "notes": outcome.notes,
        "written": written,
    }


def _plan_cells(i: int, p: dict[str, Any], outcome: PlanOutcome, by_cost: bool) -> tuple:
    r = plan_row(p, outcome.request.cluster, outcome.request.flags, outcome.request.model)
    r["grads"] = "bf16" if r["grad_reduce_bf16"] else "fp32"
    r["runs in"] = ", ".join(r["frameworks"]) or "none"  # priced by the generic model only
    r["recompute"] = recompute_label(r)
    if r["dp_shard"]:  # HSDP: sharded over dp_shard ranks, replicated dp/dp_shard times
        r["sharding"] = f"{r['sharding']} hsdp {r['dp_shard']}x{r['dp'] // r['dp_shard']}"
    if r["pp_layers"]:  # uneven split: first and last stage's layers
        r["pp"] = f"{r['pp']} ({r['pp_layers'][0]}..{r['pp_layers'][-1]})"
    cost = (r["gpus"], f"{r['tokens_per_dollar']:,.0f}") if by_cost else ()
    run = outcome.runs[i - 1] if outcome.runs else {}
    if run:  # the whole run: GPUs (the search may take fewer), days, ETTR
        days = run["time_to_train_days"]
        cost = (r["gpus"], "never" if days is None else f"{days:.1f}", f"{run['ettr']:.1%}")
    return (
        i,
        *(r[k] for k in SHOWN),
        *cost,
        r["step_time_s"],
        f"{r['tokens_per_s']:,.0f}",
        f"{r['mfu']:.1%}",
        r["memory_gib_per_gpu"],
        r["why"],
    )


SHOWN = (*PLAN_KEYS[:8], "sharding", "dtype", "grads", "runs in")


def print_plan(outcome: PlanOutcome, written: list[str]) -> None:
    """The human view of a plan."""
    req, result = outcome.request, outcome.result
    cluster = req.cluster
    console.print(
        line(
            styled(str(req.model.name), "bold"),
            f" on {cluster.world} x {cluster.gpu.key} ({cluster.name}), gbs {req.gbs}, seq "
            f"{req.seq}: {result.candidates_evaluated:,} layouts evaluated, "
            f"{result.candidates_fitting:,} fit, {result.search_time_s:.2f} s; precisions "
            f"searched: {', '.join(result.precisions)}",
        )
    )
    by_cost = req.objective == "tokens_per_dollar"  # the job may use fewer GPUs
    rows = [_plan_cells(i, p, outcome, by_cost) for i, p in enumerate(result.plans, 1)]
    cost_header = ["GPUs", "tokens/$"] if by_cost else []
    if req.train.tokens is not None:
        cost_header = ["GPUs", "days", "ETTR"]
    header = ["#", *SHOWN, *cost_header, "step s", "tokens/s", "MFU (bf16 peak)", "GiB", "why"]
    console.print(table("top plans", header, rows))
    if outcome.runs and outcome.runs[0]:
        from tierwise.cli.train_options import print_train

        print_train(outcome.runs[0], "plan 1: time to train")
    mapping_rows = [
        (
            m["kind"],
            m["size"],
            m["groups"],
            m["tier"],
            m["nodes_per_group"],
            m["leaves_per_group"],
            m["pods_per_group"],
            f"{m['groups_crossing_pods']} of {m['priced_groups']}"
            if m["groups_crossing_pods"]
            else "none",
            m["groups_sharing_a_nic"],
            " ".join(m["slowest_group"][:8]) + (" ..." if len(m["slowest_group"]) > 8 else ""),
        )
        for m in outcome.mapping
    ]
    console.print(table("mapping of plan 1 onto the cluster", MAPPING_HEADER, mapping_rows))
    ratios = outcome.placement
    console.print(
        f"naive placement of the same layout: DP innermost "
        f"{ratios['naive_dp_innermost_ratio']:.2f}x slower, nodes scattered over "
        f"leaves {ratios['scattered_nodes_ratio']:.2f}x"
    )
    aware = ratios["aware_step_time_s"]
    chosen = "-".join(order_name(outcome.order))
    console.print(
        f"rank order of plan 1: {chosen} (the fastest its launcher can ask for); "
        "others (step time / tp-cp-ep-dp-pp's): "
        + ", ".join(f"{name} {t / aware:.2f}x" for name, t in ratios["orders_step_time_s"].items())
    )
    for note in outcome.notes:
        console.print(line(styled("note:", "yellow"), f" plan 1: {note}"))
    from rich.rule import Rule

    for kind, text in outcome.emitted.items():
        console.print(Rule(kind), width=min(console.width, RULE_WIDTH))
        typer.echo(text)
    if written:
        console.print(f"wrote {', '.join(written)}")
