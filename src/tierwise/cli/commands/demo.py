"""`tierwise demo`: the plan and the HTML report for an embedded default (what `make demo` runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tierwise.cli.commands.report import make_report, print_plans, summary
from tierwise.cli.options import JsonOpt
from tierwise.cli.output import print_json
from tierwise.hardware.cluster import load_cluster
from tierwise.plan.request import Behaviour, plan_request
from tierwise.workload.load import load_model

DEMO_MODEL = "llama3-70b"
DEMO_CLUSTER = "dgx-h100"
DEMO_NODES = 16
DEMO_GBS = 512
DEMO_SEQ = 8192


def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="HTML file to write.")] = Path(
        "tierwise-report.html"
    ),
    as_json: JsonOpt = False,
) -> None:
    """Plan llama3-70b on 16 DGX H100 nodes (gbs 512, seq 8192) and write its report."""
    cluster = load_cluster(DEMO_CLUSTER, nodes=DEMO_NODES)
    command = (
        f"tierwise report --model {DEMO_MODEL} --cluster {DEMO_CLUSTER} --nodes "
        f"{DEMO_NODES} --gbs {DEMO_GBS} --seq {DEMO_SEQ} --out {out}"
    )
    request = plan_request(load_model(DEMO_MODEL), cluster, Behaviour(), gbs=DEMO_GBS, seq=DEMO_SEQ)
    inputs = make_report(request, out, [], None, command)
    if as_json:
        print_json(summary(inputs, out))
        return
    print_plans(inputs)
    typer.echo(str(out.resolve()))


def register(app: typer.Typer) -> None:
    """Add `tierwise demo`."""
    app.command("demo")(demo)
