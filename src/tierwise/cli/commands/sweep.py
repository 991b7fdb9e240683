"""`tierwise sweep`: best plan as cluster parameters vary; bandwidth a workload needs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tierwise.cli import layout_options as L
from tierwise.cli.options import JsonOpt, ModelOpt, cluster_options
from tierwise.cli.output import console, print_json, table
from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.plan.search import search
from tierwise.plan.sweep import needed_bandwidth, parse_vary, sweep
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model


@cluster_options
def sweep_command(
    cluster_spec: ClusterSpec,
    model: ModelOpt = "llama3-70b",
    gbs: L.GbsOpt = None,
    seq: L.SeqOpt = 4096,
    vary: Annotated[
        list[str] | None,
        typer.Option(
            "--vary",
            help="KEY=V1,V2 (nodes, gpus_per_node, nics_per_node, nic, intra, "
            "oversubscription); give it once or twice",
        ),
    ] = None,
    within: Annotated[
        float, typer.Option("--within", help="Bandwidth needed to stay within this % of the best.")
    ] = 10.0,
    framework: Annotated[str, typer.Option("--framework")] = "any",
    plot: Annotated[Path | None, typer.Option("--plot", help="Write tokens/s per value.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Vary one or two cluster parameters; print the best layout's tokens/s and MFU for each."""
    spec = load_model(model)
    varies = [parse_vary(v) for v in vary or []]
    if len(varies) > 2:
        raise SpecError("--vary: give at most two parameters")
    gbs = gbs or cluster_spec.world
    rows = sweep(spec, cluster_spec, gbs, seq, varies, framework=framework) if varies else []
    best = search(spec, cluster_spec, gbs, seq, top=1, framework=framework).plans[0]
    need = needed_bandwidth(spec, cluster_spec, Layout(**best["layout"]), within / 100)
    if plot is not None and rows:
        from tierwise.report.figures import sweep_figure_file

        sweep_figure_file(rows, [k for k, _ in varies], plot)
    if as_json:
        print_json(
            {
                "model": spec.name,
                "cluster": cluster_spec.name,
                "rows": rows,
                "best_layout": {
                    k: best["layout"][k] for k in ("tp", "cp", "ep", "pp", "vpp", "dp", "mbs")
                },
                **need,
            }
        )
        return
    keys = [k for k, _ in varies]
    if rows:
        console.print(
            table(
                "best plan per value",
                [*keys, "tokens/s", "MFU", "layout"],
                [
                    (
                        *(r[k] for k in keys),
                        f"{r['tokens_per_s']:,.0f}",
                        f"{r['mfu']:.1%}",
                        " ".join(f"{k}={v}" for k, v in r["layout"].items()),
                    )
                    for r in rows
                ],
            )
        )
    console.print(
        f"the best layout on {cluster_spec.name} needs >= "
        f"{need['needed_Gbps_per_gpu']:.0f} Gb/s per GPU across nodes to stay within "
        f"{within:g}% of its step time on an unlimited network"
    )


def register(app: typer.Typer) -> None:
    """Add `tierwise sweep`."""
    app.command("sweep")(sweep_command)
