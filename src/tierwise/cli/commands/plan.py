"""`tierwise plan`: the best layouts, their mapping onto nodes, and the flags to launch them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tierwise.cli import layout_options as L
from tierwise.cli import train_options as T
from tierwise.cli.behaviour import behaviour_options
from tierwise.cli.options import JsonOpt, ModelOpt, cluster_options
from tierwise.cli.output import print_json, write_files
from tierwise.cli.plan_output import plan_json, print_plan
from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.perf.train_time import TrainRequest
from tierwise.plan.emit import EMIT_FILES
from tierwise.plan.mapping import mapping_json
from tierwise.plan.outcome import run_plan
from tierwise.plan.request import DEFAULT_HEADROOM, EMIT_KINDS, Behaviour, plan_request
from tierwise.plan.space import FIX_HELP
from tierwise.workload.load import load_model

MAPPING_FILE = "mapping.json"
"""Written to --out: every TP/CP/EP/DP/PP group of the best plan as its GPUs."""
EmitOpt = Annotated[
    list[str] | None,
    typer.Option("--emit", help=f"{'|'.join(EMIT_KINDS)} (repeatable)"),
]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out", help="Write the emitted files and mapping.json (every group of 2+ GPUs)."
    ),
]


@cluster_options
@behaviour_options
@T.train_options
def plan_command(
    cluster_spec: ClusterSpec,
    behaviour: Behaviour,
    train: TrainRequest,
    model: ModelOpt = "llama3-70b",
    gbs: L.GbsOpt = None,
    seq: L.SeqOpt = 4096,
    top: Annotated[int, typer.Option("--top", help="How many plans to show.")] = 5,
    fix: Annotated[list[str] | None, typer.Option("--fix", help=FIX_HELP)] = None,
    objective: Annotated[
        str,
        typer.Option(
            "--objective",
            help="step_time | tokens_per_dollar | time_to_train (wall-clock time per token once "
            "failures, restarts and checkpoints take their share; fewer nodes are tried too)",
        ),
    ] = "step_time",
    emit_kinds: EmitOpt = None,
    out: OutOpt = None,
    dtype: L.DtypeOpt = None,
    fp8_recipe: L.Fp8RecipeOpt = None,
    mem_headroom: L.MemHeadroomOpt = DEFAULT_HEADROOM,
    as_json: JsonOpt = False,
) -> None:
    """Search layouts for a fixed global batch and sequence; show the best, map them, emit;
    with --train-tokens, each plan's days, cost and ETTR."""
    cluster_spec = train.on(cluster_spec)
    request = plan_request(
        load_model(model),
        cluster_spec,
        behaviour,
        gbs=gbs,
        seq=seq,
        fix=fix,
        objective=objective,
        top=top,
        emit=emit_kinds or [],
        dtype=dtype,
        fp8_recipe=fp8_recipe,
        mem_headroom=mem_headroom,
        train=train,
    )
    outcome = run_plan(request)
    written = []
    if out is not None and outcome.refused is None:
        files = {EMIT_FILES[kind]: text for kind, text in outcome.emitted.items()}
        files[MAPPING_FILE] = mapping_json(outcome.members)
        written = write_files(out, files, "--out")
    if as_json:
        print_json(plan_json(outcome, written))
    else:
        print_plan(outcome, written)
    if outcome.refused is not None:  # after the plan: the one line of what cannot launch
        raise SpecError(outcome.refused)


def register(app: typer.Typer) -> None:
    """Add `tierwise plan`."""
    app.command("plan")(plan_command)
