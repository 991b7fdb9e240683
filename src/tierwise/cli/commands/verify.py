"""`tierwise verify LOG... --contract C.yaml`: PASS/FAIL of a fabric contract on benchmark logs.

Exit code 0 when every check passes (or is skipped for lack of data), 1 when one fails, 2 on
bad input (as pytest does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tierwise.cli.options import JsonOpt, LogOpOpt, cluster_options
from tierwise.cli.output import console, fmt, line, print_json, styled, table
from tierwise.errors import TierwiseError
from tierwise.formats.ops import canonical_op
from tierwise.hardware.cluster import ClusterSpec
from tierwise.units import parse_duration
from tierwise.verify.checks import Row, evaluate, log_checks_skipped, passed
from tierwise.verify.contract import load_contract
from tierwise.verify.counters import Delta, deltas, interval_s, read_snapshot
from tierwise.verify.runs import Run, load_runs

_STATUS_STYLE = {"PASS": "green", "FAIL": "bold red", "SKIP": "yellow"}


def _counter_deltas(
    before: Path | None, after: Path | None, interval: str | None
) -> tuple[list[Delta] | None, float | None]:
    if (before is None) != (after is None):
        missing = "--counters-after" if after is None else "--counters-before"
        raise TierwiseError(f"{missing}: counter snapshots come in pairs (before and after a run)")
    if before is None or after is None:
        if interval is not None:
            raise TierwiseError("--interval: applies to counter snapshots; none were given")
        return None, None
    b, a = read_snapshot(before), read_snapshot(after)
    seconds = interval_s(b, a, parse_duration(interval, "--interval") if interval else None)
    return deltas(b, a, seconds), seconds


def _placement(run: Run) -> str:
    return f"{run.op} on {run.points.nranks} ranks, {run.points.nodes} node(s), tier {run.tier}"


def _print(name: str, rows: list[Row], moved: list[Delta]) -> None:
    """The PASS/FAIL table (a log column when several logs), notes, moved counters, verdict."""
    logs = list(dict.fromkeys(r.log for r in rows if r.log))
    by_log = len(logs) > 1
    columns = [
        "check",
        *(["log"] * by_log),
        "op",
        "tier",
        "metric",
        "size B",
        "measured",
        "limit",
        "margin",
        "unit",
        "status",
    ]
    cells = [
        (
            r.name,
            *([Path(r.log).name if r.log else "-"] * by_log),
            r.op or "-",
            r.tier or "-",
            r.metric,
            r.size_bytes,
            r.measured,
            r.limit,
            r.margin,
            r.unit,
            styled(r.status, _STATUS_STYLE[r.status]),
        )
        for r in rows
    ]
    title = f"contract {name}" + (f" on {logs[0]}" if len(logs) == 1 else "")
    console.print(table(title, columns, cells))
    for note in dict.fromkeys(f"{r.name}: {r.note}" for r in rows if r.note):
        console.print(f"  {note}")
    if moved:
        console.print(
            table(
                "counters that moved",
                ["device", "counter", "category", "delta", "per s"],
                [(d.device, d.counter, d.category, fmt(d.delta), d.per_s) for d in moved],
            )
        )
    counts = {s: sum(r.status == s for r in rows) for s in _STATUS_STYLE}
    verdict = styled("PASSED", "green") if passed(rows) else styled("FAILED", "bold red")
    console.print(
        line(
            verdict,
            f": {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped",
        )
    )


@cluster_options
def verify(
    cluster_spec: ClusterSpec,
    logs: Annotated[
        list[Path],
        typer.Argument(help="nccl-tests logs, `tierwise bench` text or --json output; - is stdin."),
    ],
    contract: Annotated[Path, typer.Option("--contract", help="Contract YAML (see examples/).")],
    counters_before: Annotated[
        Path | None,
        typer.Option(
            "--counters-before",
            help="NIC counters before the run (ethtool -S, rdma statistic, sysfs).",
        ),
    ] = None,
    counters_after: Annotated[
        Path | None, typer.Option("--counters-after", help="NIC counters after the run.")
    ] = None,
    interval: Annotated[
        str | None,
        typer.Option(
            "--interval", help="Time between the snapshots (60s) when they have no '# time:' line."
        ),
    ] = None,
    op: LogOpOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check logs (and NIC counters) against a fabric contract: busbw, latency, tail, drift."""
    spec = load_contract(contract)
    forced = None if op is None else canonical_op(op)
    runs = [run for log in logs for run in load_runs(log, cluster_spec, forced)]
    items, seconds = _counter_deltas(counters_before, counters_after, interval)
    rows = evaluate(spec, runs, cluster_spec, items, seconds)
    names = {c.label for c in spec.checks}
    if log_checks_skipped(spec, rows):
        why = "; ".join(dict.fromkeys(r.note for r in rows if r.name in names and r.note))
        found = "; ".join(f"{r.source}: {_placement(r)}" for r in runs)
        raise TierwiseError(
            f"{contract}: no check could be evaluated ({why}); the logs: {found}. A log without "
            "rank lines ran on the cluster's nodes x GPUs per node (set --cluster/--nodes)"
        )
    moved = [d for d in items or [] if d.category is not None and d.delta > 0]
    ok = passed(rows)
    if as_json:
        print_json(
            {
                "contract": spec.name,
                "cluster": cluster_spec.name,
                "logs": [
                    {
                        "log": r.source,
                        "op": r.op,
                        "nranks": r.points.nranks,
                        "nodes": r.points.nodes,
                        "tier": r.tier,
                    }
                    for r in runs
                ],
                "checks": [r.as_dict() for r in rows],
                "counters": None if items is None else [d.as_dict() for d in moved],
                "interval_s": seconds,
                "passed": ok,
            }
        )
    else:
        _print(spec.name, rows, moved)
    if not ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `tierwise verify`."""
    app.command("verify")(verify)
