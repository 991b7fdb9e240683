"""`tierwise report`: one self-contained HTML file with the topology, busbw, mapping and plan."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tierwise.cli import layout_options as L
from tierwise.cli.behaviour import behaviour_options
from tierwise.cli.options import JsonOpt, ModelOpt, cluster_options
from tierwise.cli.output import console, print_json, table, writable
from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.plan.request import Behaviour, PlanRequest, plan_request
from tierwise.workload.load import load_model

if TYPE_CHECKING:  # the report stack (matplotlib, networkx) loads only when a report is made
    from tierwise.report.inputs import ReportInputs

DoctorLogsOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--doctor-logs",
        help="NCCL_DEBUG output and tool printouts of the same run for the doctor section "
        "(--doctor-logs A B ...).",
    ),
]
LogsOpt = Annotated[
    list[Path] | None,
    typer.Option("--logs", help="nccl-tests logs to draw as measured points: --logs A B ..."),
]
MULTI_VALUE_OPTIONS = ("--logs", "--doctor-logs")
"""Options that take several values in a row (`--logs a.txt b.txt`), see `tierwise.cli.main`."""


def summary(inputs: ReportInputs, path: Path) -> dict:
    """JSON summary of a written report: its path and size, the best plan, the placement ratio."""
    best, naive = inputs.best, inputs.naive
    return {
        "report": str(path),
        "size_bytes": path.stat().st_size,
        "model": inputs.model.name,
        "cluster": inputs.cluster.name,
        "gpus": inputs.cluster.world,
        "plans": [
            {
                "layout": p.estimate["layout"],
                "order": "-".join(p.order),
                "step_time_s": p.estimate["step_time_s"],
                "tokens_per_s": p.estimate["tokens_per_s"],
                "mfu": p.estimate["mfu"],
                "memory_gib_per_gpu": p.estimate["memory_gib_per_gpu"],
            }
            for p in inputs.plans
        ],
        "naive_over_aware_step_time": (
            naive.estimate["step_time_s"] / best.estimate["step_time_s"] if best and naive else None
        ),
        "busbw_figures": len(inputs.busbw),
    }


def print_plans(inputs: ReportInputs) -> None:
    """The top plans as a rich table."""
    from tierwise.report.html import layout_text

    rows = [
        (
            i + 1,
            layout_text(p),
            p.estimate["step_time_s"],
            p.estimate["tokens_per_s"],
            p.estimate["mfu"] * 100,
            p.estimate["memory_gib_per_gpu"],
        )
        for i, p in enumerate(inputs.plans)
    ]
    console.print(
        table(
            f"top plans: {inputs.model.name} on {inputs.cluster.world} x "
            f"{inputs.cluster.gpu.key} ({inputs.cluster.name})",
            ["#", "layout", "step s", "tokens/s", "MFU % (bf16 peak)", "GiB/GPU"],
            rows,
        )
    )


def make_report(
    request: PlanRequest,
    out: Path,
    logs: list[Path],
    contract: Path | None,
    command: str,
    doctor_logs: list[Path] | None = None,
) -> ReportInputs:
    """Build the inputs and write the report to `out`."""
    from tierwise.report.html import write_report
    from tierwise.report.inputs import build_inputs

    if out.suffix.lower() not in {".html", ".htm"}:
        raise SpecError(f"--out: {str(out)!r} must end in .html")
    writable(out, "--out")
    inputs = build_inputs(
        request.model,
        request.cluster,
        gbs=request.gbs,
        seq=request.seq,
        command=command,
        logs=logs,
        contract_path=contract,
        doctor_logs=doctor_logs or [],
        flags=request.flags,
        framework=request.framework,
        headroom_gib=request.headroom_gib,
    )
    write_report(inputs, out)
    return inputs


@cluster_options
@behaviour_options
def report(
    cluster_spec: ClusterSpec,
    behaviour: Behaviour,
    model: ModelOpt = "llama3-70b",
    gbs: L.GbsOpt = 512,
    seq: L.SeqOpt = 4096,
    logs: LogsOpt = None,
    doctor_logs: DoctorLogsOpt = None,
    contract: Annotated[
        Path | None,
        typer.Option("--contract", help="Fabric contract YAML: its busbw floors are drawn."),
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="HTML file to write.")] = Path(
        "tierwise-report.html"
    ),
    as_json: JsonOpt = False,
) -> None:
    """Write one self-contained HTML report: topology, busbw per tier, mapping, plans, what-if."""
    command = shlex.join(["tierwise", *sys.argv[1:]])
    request = plan_request(load_model(model), cluster_spec, behaviour, gbs=gbs, seq=seq)
    inputs = make_report(request, out, logs or [], contract, command, doctor_logs)
    if as_json:
        print_json(summary(inputs, out))
        return
    print_plans(inputs)
    typer.echo(f"report written to {out}")


def register(app: typer.Typer) -> None:
    """Add `tierwise report`."""
    app.command("report")(report)
