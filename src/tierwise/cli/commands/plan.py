"""`tierwise plan`: the best layouts, their mapping onto nodes, and the flags to launch them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from tierwise.cli import layout_options as L
from tierwise.cli import train_options as T
from tierwise.cli.moe_routing import resolve_routing
from tierwise.cli.options import JsonOpt, ModelOpt, cluster_options
from tierwise.cli.output import RULE_WIDTH, console, line, print_json, styled, table, write_files
from tierwise.cli.overlap_options import overlap_options
from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.perf.pipeline import FRAMEWORK_SCHEDULES, SCHEDULE_VPP, schedule_for
from tierwise.perf.step import Flags
from tierwise.perf.train_time import run_train_time
from tierwise.plan.emit import EMIT_FILES, EMITTERS, emit
from tierwise.plan.mapping import group_members, group_summary
from tierwise.plan.placement import placement_ratios
from tierwise.plan.search import OBJECTIVES, search, tokens_per_dollar
from tierwise.plan.space import (
    FIX_HELP,
    FRAMEWORK_NAMES,
    frameworks_for,
    parse_fix,
    sharding_name,
)
from tierwise.plan.why import why
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model
from tierwise.workload.precision import check_supported

MAPPING_FILE = "mapping.json"
"""Written to --out: every TP/CP/EP/DP/PP group of the best plan as its GPUs."""
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


def plan_row(p: dict[str, Any], cluster: ClusterSpec) -> dict[str, Any]:
    """A plan as the JSON row `tierwise plan --json` prints."""
    lay = p["layout"]
    return {
        **{k: lay[k] for k in PLAN_KEYS},
        "sharding": sharding_name(Layout(**lay)),
        "pp_layers": lay.get("pp_layers"),
        "recompute_modules": lay.get("recompute_modules"),
        "frameworks": frameworks_for(Layout(**lay)),
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


def schedule_fixes(schedule: str, framework: str, fixes: dict[str, str]) -> str:
    """Pin the virtual stages `schedule` runs into `fixes` and return the framework to search:
    a schedule only torchtitan runs narrows `any` to it; a clash is a one-line error."""
    if framework == "any" and schedule not in FRAMEWORK_SCHEDULES["megatron"]:
        framework = "torchtitan"
    need = SCHEDULE_VPP.get(schedule)
    schedule_for(schedule, 2, need or 2, None if framework == "any" else framework)
    if need is not None and fixes.setdefault("vpp", str(need)) != str(need):
        raise SpecError(
            f"--pipeline-schedule {schedule} runs vpp {need}; --fix has vpp={fixes['vpp']}"
        )
    return framework


def framework_for(framework: str, emit_kinds: list[str]) -> str:
    """The framework to search: the one given, else the one the emitted configs are for
    (a Slurm script alone launches Megatron); one-line error if they need several."""
    if framework != "any":
        return framework
    implied = sorted({kind for kind in emit_kinds if kind != "slurm"})
    if len(implied) > 1:
        raise SpecError(
            f"--emit: {', '.join(implied)} need plans of different frameworks; give one "
            "--framework (megatron, torchtitan, deepspeed) and emit its config"
        )
    return implied[0] if implied else ("megatron" if emit_kinds else "any")


def with_launched_config(framework: str, emit_kinds: list[str]) -> list[str]:
    """The emitted kinds plus the config file a torchtitan or DeepSpeed sbatch script reads."""
    if "slurm" in emit_kinds and framework in {"torchtitan", "deepspeed"}:
        return list(dict.fromkeys([*emit_kinds, framework]))
    return emit_kinds


def write_out(out: Path, emitted: dict[str, str], members: Any) -> list[str]:
    """Write the emitted configs and mapping.json into `out`; the paths written."""
    files = {EMIT_FILES[kind]: text for kind, text in emitted.items()}
    files[MAPPING_FILE] = json.dumps(members, indent=1) + "\n"
    return write_files(out, files, "--out")


@cluster_options
@overlap_options
def plan_command(
    cluster_spec: ClusterSpec,
    model: ModelOpt = "llama3-70b",
    gbs: L.GbsOpt = None,
    seq: L.SeqOpt = 4096,
    top: Annotated[int, typer.Option("--top", help="How many plans to show.")] = 5,
    fix: Annotated[str | None, typer.Option("--fix", help=FIX_HELP)] = None,
    objective: Annotated[
        str,
        typer.Option(
            "--objective",
            help="step_time | tokens_per_dollar | time_to_train (wall-clock time per token once "
            "failures, restarts and checkpoints take their share; fewer nodes are tried too)",
        ),
    ] = "step_time",
    framework: Annotated[
        str, typer.Option("--framework", help="any|megatron|torchtitan|deepspeed")
    ] = "any",
    emit_kinds: Annotated[
        list[str] | None,
        typer.Option("--emit", help="megatron|torchtitan|slurm|deepspeed (repeatable)"),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Write the emitted files and mapping.json (every group of 2+ GPUs)."
        ),
    ] = None,
    dtype: L.DtypeOpt = None,
    fp8_recipe: L.Fp8RecipeOpt = None,
    cp_comm: L.CpCommOpt = "p2p",
    attention_backend: L.AttentionBackendOpt = "flash",
    pipeline_schedule: L.PipelineScheduleOpt = None,
    moe_token_dispatcher_type: L.MoeDispatcherOpt = "alltoall",
    moe_routing: L.MoeRoutingOpt = None,
    moe_router_force_load_balancing: L.MoeForceBalanceOpt = False,
    moe_expert_capacity_factor: L.MoeCapacityOpt = None,
    overlap_moe_expert_parallel_comm: L.MoeA2aOverlapOpt = False,
    enable_cuda_graph: L.CudaGraphOpt = False,
    fp8_dot_product_attention: L.Fp8AttentionOpt = False,
    fp8_param_gather: L.Fp8ParamGatherOpt = True,
    train_tokens: T.TrainTokensOpt = None,
    node_failure_rate: T.NodeFailureRateOpt = None,
    checkpoint_interval: T.CheckpointIntervalOpt = "auto",
    simulate: T.SimulateOpt = False,
    simulate_trials: T.TrialsOpt = 200,
    seed: T.SeedOpt = 0,
    as_json: JsonOpt = False,
    overlap_flags: dict[str, Any] | None = None,
) -> None:
    """Search layouts for a fixed global batch and sequence; show the best, map them, emit;
    with --train-tokens, each plan's days, cost and ETTR."""
    train = T.train_request(
        train_tokens, node_failure_rate, checkpoint_interval, simulate, simulate_trials, seed
    )
    cluster_spec = train.on(cluster_spec)
    spec, force_balance = resolve_routing(
        load_model(model), moe_routing, moe_router_force_load_balancing, moe_expert_capacity_factor
    )
    if objective not in OBJECTIVES:
        raise SpecError(f"--objective: {objective!r}; allowed: {', '.join(OBJECTIVES)}")
    if framework not in FRAMEWORK_NAMES:
        raise SpecError(f"--framework: {framework!r}; allowed: {', '.join(FRAMEWORK_NAMES)}")
    for kind in emit_kinds or []:
        if kind not in EMITTERS:
            raise SpecError(f"--emit: {kind!r}; allowed: {', '.join(EMITTERS)}")
    framework = framework_for(framework, emit_kinds or [])
    fixes = parse_fix(fix)
    if pipeline_schedule is not None:
        framework = schedule_fixes(pipeline_schedule, framework, fixes)
    emit_kinds = with_launched_config(framework, emit_kinds or [])
    # One framework: its layouts are priced as it runs them (as `estimate --framework`).
    flags = Flags(
        **(overlap_flags or {}),
        cp_comm=cp_comm,
        framework=None if framework == "any" else framework,
        attention_backend=attention_backend,
        pipeline_schedule=pipeline_schedule,
        moe_token_dispatcher_type=moe_token_dispatcher_type,
        moe_router_force_load_balancing=force_balance,
        overlap_moe_expert_parallel_comm=overlap_moe_expert_parallel_comm,
        cuda_graphs=enable_cuda_graph,
        fp8_dot_product_attention=fp8_dot_product_attention,
        fp8_param_gather=fp8_param_gather,
    )
    gbs = cluster_spec.world if gbs is None else gbs
    if dtype is not None:
        check_supported(cluster_spec.gpu, dtype, fp8_recipe)
        fixes["dtype"] = dtype
    if fp8_recipe is not None:
        fixes["fp8_recipe"] = fp8_recipe
    result = search(
        spec,
        cluster_spec,
        gbs,
        seq,
        top=top,
        fix=fixes,
        objective=objective,
        flags=flags,
        framework=framework,
        interval_min=train.interval_min,
    )  # type: ignore[arg-type]
    best = result.plans[0]
    closed_form = replace(train, simulate=False)  # the first plan alone is simulated
    runs = [
        run_train_time(cluster_spec, train if i == 0 else closed_form, p)
        for i, p in enumerate(result.plans)
    ]
    layout = Layout(**best["layout"])
    mapping = group_summary(cluster_spec, layout)
    ratios = placement_ratios(spec, cluster_spec, layout, flags)
    emitted = {
        kind: emit(kind, spec, cluster_spec, layout, flags, framework=framework)
        for kind in emit_kinds or []
    }
    written = [] if out is None else write_out(out, emitted, group_members(cluster_spec, layout))
    if as_json:
        print_json(
            {
                "model": spec.name,
                "cluster": cluster_spec.name,
                "gpus": cluster_spec.world,
                "plans": [
                    plan_row(p, cluster_spec) | run
                    for p, run in zip(result.plans, runs, strict=True)
                ],
                "candidates_evaluated": result.candidates_evaluated,
                "candidates_fitting": result.candidates_fitting,
                "search_time_s": result.search_time_s,
                "mapping": mapping,
                "placement": ratios,
                "emitted": emitted,
                "written": written,
            }
        )
        return
    console.print(
        line(
            styled(str(spec.name), "bold"),
            f" on {cluster_spec.world} x {cluster_spec.gpu.key} "
            f"({cluster_spec.name}), gbs {gbs}, seq {seq}: {result.candidates_evaluated:,} "
            f"layouts evaluated, {result.candidates_fitting:,} fit, "
            f"{result.search_time_s:.2f} s",
        )
    )
    shown = (*PLAN_KEYS[:8], "sharding", "dtype", "grads", "runs in")  # + precision, frameworks
    by_cost = objective == "tokens_per_dollar"  # the job may use fewer GPUs than the cluster
    rows = []
    for i, p in enumerate(result.plans, 1):
        r = plan_row(p, cluster_spec)
        r["grads"] = "bf16" if r["grad_reduce_bf16"] else "fp32"
        r["runs in"] = ", ".join(r["frameworks"])
        if r["recompute_modules"]:  # Megatron's modules instead of its default (core_attn)
            r["recompute"] = f"{r['recompute']} ({','.join(r['recompute_modules'])})"
        if r["pp_layers"]:  # uneven split: first and last stage's layers
            r["pp"] = f"{r['pp']} ({r['pp_layers'][0]}..{r['pp_layers'][-1]})"
        cost = (r["gpus"], f"{r['tokens_per_dollar']:,.0f}") if by_cost else ()
        if runs[i - 1]:  # the whole run: GPUs (the search may take fewer), days, ETTR
            days = runs[i - 1]["time_to_train_days"]
            ettr = runs[i - 1]["ettr"]
            cost = (r["gpus"], "never" if days is None else f"{days:.1f}", f"{ettr:.1%}")
        rows.append(
            (
                i,
                *(r[k] for k in shown),
                *cost,
                r["step_time_s"],
                f"{r['tokens_per_s']:,.0f}",
                f"{r['mfu']:.1%}",
                r["memory_gib_per_gpu"],
                r["why"],
            )
        )
    cost_header = ["GPUs", "tokens/$"] if by_cost else []
    if train.tokens is not None:
        cost_header = ["GPUs", "days", "ETTR"]
    header = ["#", *shown, *cost_header, "step s", "tokens/s", "MFU (bf16 peak)", "GiB", "why"]
    console.print(table("top plans", header, rows))
    if runs[0]:
        T.print_train(runs[0], "plan 1: time to train")
    console.print(
        table(
            "mapping of plan 1 onto the cluster",
            [
                "group",
                "size",
                "groups",
                "tier",
                "nodes/group",
                "leaves/group",
                "groups per NIC",
                "example GPUs",
            ],
            [
                (
                    m["kind"],
                    m["size"],
                    m["groups"],
                    m["tier"],
                    m["nodes_per_group"],
                    m["leaves_per_group"],
                    m["groups_sharing_a_nic"],
                    " ".join(m["examples"][0][:8]) + (" ..." if m["size"] > 8 else ""),
                )
                for m in mapping
            ],
        )
    )
    console.print(
        f"naive placement of the same layout: DP innermost "
        f"{ratios['naive_dp_innermost_ratio']:.2f}x slower, nodes scattered over "
        f"leaves {ratios['scattered_nodes_ratio']:.2f}x"
    )
    aware = ratios["aware_step_time_s"]
    console.print(
        "rank orders (step time / the planned order's): "
        + ", ".join(f"{name} {t / aware:.2f}x" for name, t in ratios["orders_step_time_s"].items())
    )
    from rich.rule import Rule

    for kind, text in emitted.items():
        console.print(Rule(kind), width=min(console.width, RULE_WIDTH))
        typer.echo(text)
    if written:
        console.print(f"wrote {', '.join(written)}")


def register(app: typer.Typer) -> None:
    """Add `tierwise plan`."""
    app.command("plan")(plan_command)
