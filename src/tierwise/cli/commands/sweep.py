"""`tierwise sweep`: best plan as cluster parameters vary; bandwidth a workload needs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from tierwise.bounds import MAX_SWEEP_ROWS
from tierwise.cli import layout_options as L
from tierwise.cli import train_options as T
from tierwise.cli.behaviour import behaviour_options
from tierwise.cli.options import JsonOpt, ModelOpt, cluster_options
from tierwise.cli.output import console, print_json, table, writable
from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.plan.request import Behaviour, plan_request
from tierwise.plan.space import FIX_HELP
from tierwise.plan.sweep import (
    MIN_RATE_GBPS,
    fastest_run,
    idle_varies,
    parse_varies,
    sweep,
    workload_needed_bandwidth,
)
from tierwise.workload.load import load_model


@cluster_options
@behaviour_options
def sweep_command(
    cluster_spec: ClusterSpec,
    behaviour: Behaviour,
    model: ModelOpt = "llama3-70b",
    gbs: L.GbsOpt = None,
    seq: L.SeqOpt = 4096,
    vary: Annotated[
        list[str] | None,
        typer.Option(
            "--vary",
            help="KEY=V1,V2 (nodes, gpus_per_node, nics_per_node, nic, intra, "
            "oversubscription, nvlink_domain_gpus, nodes_per_leaf, leaves_per_pod, "
            "pod_oversubscription, routing, qps_per_connection, slow_node_share, "
            "slow_node_slowdown, gpu_speed_spread); give it once or twice",
        ),
    ] = None,
    within: Annotated[
        float, typer.Option("--within", help="Bandwidth needed to stay within this % of the best.")
    ] = 10.0,
    fix: Annotated[
        list[str] | None, typer.Option("--fix", help=f"In every search: {FIX_HELP}")
    ] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write tokens/s per value.")] = None,
    train_tokens: T.TrainTokensOpt = None,
    node_failure_rate: T.NodeFailureRateOpt = None,
    checkpoint_interval: T.CheckpointIntervalOpt = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Vary one or two cluster parameters; print the best layout's tokens/s and MFU for each
    (with --train-tokens: the days, ETTR and cost of the whole run, and where adding GPUs stops
    shortening it), and a line for a varied value that changes nothing."""
    writable(plot, "--plot")
    train = T.train_request(train_tokens, node_failure_rate, checkpoint_interval, False, 1, 0)
    cluster_spec = train.on(cluster_spec)
    req = plan_request(load_model(model), cluster_spec, behaviour, gbs=gbs, seq=seq, fix=fix)
    spec, gbs, pins, framework = req.model, req.gbs, req.fixes, req.framework
    same = {
        "flags": req.flags,
        "framework": framework,
        "fix": pins,
        "headroom_gib": req.headroom_gib,
    }
    varies = parse_varies(vary or [])
    rows_asked = math.prod(len(values) for _, values in varies)
    if rows_asked > MAX_SWEEP_ROWS:  # each row is a whole plan search
        raise SpecError(
            f"--vary: {rows_asked} combinations; allowed: at most {MAX_SWEEP_ROWS} (each is "
            "a plan search)"
        )
    notes = idle_varies(cluster_spec, varies)
    # (first: a sweep none of whose values is a valid cluster is the user's error)
    rows = (
        sweep(
            spec,
            cluster_spec,
            gbs,
            seq,
            varies,
            **same,
            train_tokens=train.tokens,
            interval_min=train.interval_min,
        )
        if varies
        else []
    )
    try:
        need: dict[str, Any] = workload_needed_bandwidth(
            spec, cluster_spec, gbs, seq, within / 100, **same
        )
    except SpecError as exc:  # nothing on the base cluster: the varied ones may still plan
        if not varies:
            raise
        need = {"needed_Gbps_per_gpu": None, "within_pct": within, "error": str(exc)}
    fastest = fastest_run(rows) if train.tokens is not None else None
    if plot is not None and rows:
        from tierwise.report.figures import sweep_figure_file

        sweep_figure_file(rows, [k for k, _ in varies], plot)
    if as_json:
        print_json(
            {
                "model": spec.name,
                "cluster": cluster_spec.name,
                "rows": rows,
                "notes": notes,
                **({} if train.tokens is None else {"train_tokens": train.tokens}),
                **({} if fastest is None else {"fastest_run": fastest}),
                **need,
            }
        )
        return
    if rows:
        _print_rows(rows, [k for k, _ in varies], train.tokens is not None)
    for note in notes:
        console.print(note)
    if fastest is not None:
        console.print(_fastest_line(fastest, train.tokens or 0.0))
    console.print(_need_line(spec.name, cluster_spec.name, within, need))


def _print_rows(rows: list[dict[str, Any]], keys: list[str], timed: bool) -> None:
    """The best plan per value as a table (with the run's days and cost when timed)."""
    run_header = ["days", "ETTR", "MTTF h", "cost $M"] if timed else []
    console.print(
        table(
            "best plan per value",
            [*keys, "GPUs", "gbs", "seq", "tokens/s", "MFU", *run_header, "layout"],
            [
                (
                    *(r[k] for k in keys),
                    r.get("gpus"),
                    r["gbs"],
                    r["seq"],
                    *_cells(r)[:2],
                    *(_run_cells(r) if timed else ()),
                    _cells(r)[2],
                )
                for r in rows
            ],
        )
    )


def _run_cells(row: dict[str, Any]) -> tuple[str, ...]:
    """Days, ETTR, MTTF and cost cells of a sweep row with a time to train."""
    if row.get("error") or row.get("time_to_train_days") is None:
        return ("never" if not row.get("error") else "-", "-", "-", "-")
    return (
        f"{row['time_to_train_days']:.1f}",
        f"{row['ettr']:.1%}",
        f"{row['mttf_h']:.2f}",
        f"{row['cost_usd'] / 1e6:,.1f}",
    )


def _fastest_line(fastest: dict[str, Any], tokens: float) -> str:
    """Where adding GPUs stops shortening the run, in words."""
    where = (
        "more GPUs make the run longer: failures and restarts eat the gain"
        if fastest["more_gpus_slower"]
        else "the largest value tried is still the fastest"
    )
    return (
        f"{tokens:.3g} tokens train fastest on {fastest['gpus']:,} GPUs "
        f"({fastest['time_to_train_days']:.1f} days, ETTR {fastest['ettr']:.1%}); {where}"
    )


def layout_text(layout: dict[str, Any]) -> str:
    """A sweep row's layout as ``key=value`` words (lists comma-joined)."""
    return " ".join(f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in layout.items())


def _need_line(model: str, cluster: str, within: float, need: dict[str, Any]) -> str:
    """The bandwidth answer in words."""
    if need["needed_Gbps_per_gpu"] is None:
        return f"no bandwidth answer on {cluster} itself: {need['error']}"
    layout = layout_text(need["layout_at_needed"])
    rate = need["needed_Gbps_per_gpu"]
    amount = (
        f"at most {MIN_RATE_GBPS:g} Gb/s per GPU across nodes (nothing it runs is bound by "
        "the fabric)"
        if rate <= MIN_RATE_GBPS
        else f">= {rate:.0f} Gb/s per GPU across nodes"
    )
    return (
        f"{model} on {cluster} needs {amount} to stay within {within:g}% of its best plan on "
        f"an unlimited network (best plan at that rate: {layout})"
    )


def _cells(row: dict[str, Any]) -> tuple[str, str, str]:
    """tokens/s, MFU and layout cells of a sweep row (the reason where nothing was planned)."""
    if row.get("error"):
        return "-", "-", row["error"]
    layout = layout_text(row["layout"])
    return f"{row['tokens_per_s']:,.0f}", f"{row['mfu']:.1%}", layout


def register(app: typer.Typer) -> None:
    """Add `tierwise sweep`."""
    app.command("sweep")(sweep_command)
