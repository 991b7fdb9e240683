"""`tierwise parse LOG...`: read nccl-tests logs into tables or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tierwise.cli.options import JsonOpt, LogOpOpt
from tierwise.cli.output import console, err_console, print_json, table
from tierwise.formats import (
    NA,
    NcclHalf,
    NcclTest,
    bandwidth_cell,
    canonical_op,
    parse_file,
    time_cell,
    wrong_cell,
)

LogsArg = Annotated[
    list[Path], typer.Argument(help="nccl-tests output files (*_perf stdout); - reads stdin.")
]


def _title(source: str, index: int, test: NcclTest) -> str:
    placement = f"{test.nranks if test.nranks is not None else '?'} ranks"
    if test.nodes is not None:
        placement += f" on {test.nodes} node(s)"
        if test.gpus_per_node is not None:
            placement += f" x {test.gpus_per_node} GPUs"
    avg = "" if test.avg_busbw_GBps is None else f", avg busbw {test.avg_busbw_GBps:g} GB/s"
    op = test.op or "unknown op"
    if test.op_source == "table":
        op += " (inferred from the table)"
    return f"{source} test {index}: {op}, {placement}{avg}"


def _half(half: NcclHalf | None) -> list[str]:
    if half is None:
        return [NA] * 4
    return [
        time_cell(half.time_us),
        bandwidth_cell(half.algbw_GBps),
        bandwidth_cell(half.busbw_GBps),
        wrong_cell(half.wrong),
    ]


def _print_test(source: str, index: int, test: NcclTest) -> None:
    """One rich table in nccl-tests' columns and number formats."""
    rows = test.rows
    prefix = ["redop", "root"]
    prefix = [name for name in prefix if any(getattr(r, name) is not None for r in rows)]
    in_place = any(r.in_place is not None for r in rows)
    extras = list(dict.fromkeys(k for r in rows for k in r.extra))
    half = ["time", "algbw", "busbw", "#wrong"]
    columns = ["size", "count", "type", *prefix, *half]
    columns += [f"{c}*" for c in half] if in_place else []
    cells = []
    for row in rows:
        line = [str(row.size_bytes), str(row.count), row.type]
        line += [
            str(getattr(row, name) if getattr(row, name) is not None else NA) for name in prefix
        ]
        line += _half(row.out_of_place) + (_half(row.in_place) if in_place else [])
        cells.append(line + [row.extra.get(name, NA) for name in extras])
    out = table(_title(source, index, test), [*columns, *extras], cells)
    out.caption = "size in bytes, time in us, algbw/busbw in GB/s" + (
        "; * in-place" if in_place else ""
    )
    console.print(out)


def _warn_truncated(source: str, index: int, test: NcclTest) -> None:
    if not test.truncated:
        return
    cut = (
        ""
        if test.partial_row_line is None
        else f"; cut-off row at line {test.partial_row_line} left out"
    )
    err_console.print(f"warning: {source} test {index}: log ends before the test's footer{cut}")


def parse(logs: LogsArg, op: LogOpOpt = None, as_json: JsonOpt = False) -> None:
    """Read nccl-tests logs: ops, placement (ranks, nodes, GPUs per node) and every row."""
    forced = None if op is None else canonical_op(op)
    parsed = [("<stdin>" if str(p) == "-" else str(p), parse_file(p, op=forced)) for p in logs]
    for source, tests in parsed:
        for index, test in enumerate(tests, start=1):
            _warn_truncated(source, index, test)
    if as_json:
        print_json({"tests": [{"source": s, **t.as_dict()} for s, tests in parsed for t in tests]})
        return
    for source, tests in parsed:
        for index, test in enumerate(tests, start=1):
            _print_test(source, index, test)


def register(app: typer.Typer) -> None:
    """Add the `parse` command."""
    app.command("parse")(parse)
