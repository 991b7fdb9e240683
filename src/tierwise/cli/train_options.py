"""Time-to-train options of `estimate`, `plan` and `sweep` (--train-tokens, --node-failure-rate,
--checkpoint-interval, --simulate), parsed once into a `perf.train_time.TrainRequest`, and
their table; `train_options` gives a command the whole group."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from tierwise.cli.options import with_options
from tierwise.errors import SpecError

if TYPE_CHECKING:
    from tierwise.perf.train_time import TrainRequest

TrainTokensOpt = Annotated[
    str | None,
    typer.Option(
        "--train-tokens",
        help="Tokens to train (15T, 2.5e12, 300B): adds the expected days, GPU-hours, cost, "
        "energy, interruptions and checkpoint plan of the whole run.",
    ),
]
NodeFailureRateOpt = Annotated[
    str | None,
    typer.Option(
        "--node-failure-rate",
        help="Failures per 1,000 node-days, or a published rate: meta-rsc1, meta-rsc2, "
        "llama3-405b, llama3-405b-all (default: the cluster's reliability block).",
    ),
]
CheckpointIntervalOpt = Annotated[
    str,
    typer.Option(
        "--checkpoint-interval",
        help="Minutes of training between checkpoints, or auto (Young-Daly: sqrt(2 x write "
        "stall x MTTF)).",
    ),
]
SimulateOpt = Annotated[
    bool,
    typer.Option(
        "--simulate",
        help="Also simulate the run's failures, restarts and spares (Monte Carlo); it prices "
        "failures during restarts, rack failures and waits for spare nodes.",
    ),
]
TrialsOpt = Annotated[int, typer.Option("--simulate-trials", help="Runs the simulation draws.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed of the simulation.")]


TRAIN_OPTIONS: dict[str, tuple[Any, Any]] = {
    "train_tokens": (TrainTokensOpt, None),
    "node_failure_rate": (NodeFailureRateOpt, None),
    "checkpoint_interval": (CheckpointIntervalOpt, "auto"),
    "simulate": (SimulateOpt, False),
    "simulate_trials": (TrialsOpt, 200),
    "seed": (SeedOpt, 0),
}
"""The group `train_options` adds: option name -> (typer annotation, default)."""
F = TypeVar("F")


def train_options(func: F) -> F:
    """Give a command every time-to-train option; it receives `train` (a `TrainRequest`)."""
    return with_options(
        func,
        TRAIN_OPTIONS,
        lambda o: {
            "train": train_request(
                o["train_tokens"],
                o["node_failure_rate"],
                o["checkpoint_interval"],
                o["simulate"],
                o["simulate_trials"],
                o["seed"],
            )
        },
        ("train",),
    )


def train_request(
    tokens: str | None,
    failure_rate: str | None,
    interval: str,
    simulate: bool,
    trials: int,
    seed: int,
) -> TrainRequest:
    """The parsed options; one that would change nothing without --train-tokens is a one-line
    error, as is a rate that is neither a number >= 0 nor a published rate's name."""
    from tierwise.hardware.reliability import FAILURE_RATES
    from tierwise.hardware.reliability import failure_rate as named_rate
    from tierwise.perf.train_time import TrainRequest
    from tierwise.units import parse_count

    if tokens is None:
        given = [
            flag
            for flag, used in (
                ("--node-failure-rate", failure_rate is not None),
                ("--checkpoint-interval", interval != "auto"),
                ("--simulate", simulate),
            )
            if used
        ]
        if given:
            raise SpecError(f"{', '.join(given)}: only used with --train-tokens N (e.g. 15T)")
        return TrainRequest()
    if trials < 1:
        raise SpecError(f"--simulate-trials: {trials}; allowed: a positive integer")
    rate = None
    if failure_rate is not None:
        try:
            rate = float(named_rate(failure_rate, "--node-failure-rate"))
        except ValueError:
            rate = -1.0
        if not 0 <= rate < float("inf"):
            raise SpecError(
                f"--node-failure-rate: {failure_rate!r}; allowed: a number >= 0 (failures per "
                f"1,000 node-days) or {', '.join(FAILURE_RATES)}"
            )
    return TrainRequest(
        tokens=parse_count(tokens, "--train-tokens"),
        interval_min=parse_interval(interval),
        simulate=simulate,
        trials=trials,
        seed=seed,
        node_failure_rate=rate,
    )


def parse_interval(text: str) -> float | None:
    """``auto`` -> None (Young-Daly), else minutes > 0."""
    if text.strip().lower() == "auto":
        return None
    try:
        minutes = float(text)
    except ValueError:
        minutes = 0.0
    if not 0 < minutes < float("inf"):
        raise SpecError(f"--checkpoint-interval: {text!r}; allowed: auto or minutes > 0")
    return minutes


def train_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The time-to-train result as (quantity, value) rows for a table."""

    def num(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    sim = r.get("simulation")
    rows = [
        ("expected time to train", f"{num(r['time_to_train_days'], '.1f')} days"),
        ("GPU-hours", num(r["gpu_hours"], ",.0f")),
        ("cost", f"${num(r['cost_usd'], ',.0f')} at ${r['price_per_gpu_hour']:g}/GPU-hour"),
        ("energy", f"{num(r['energy_MWh'], ',.0f')} MWh"),
        (
            "interruptions (MTTF)",
            f"{num(r['interruptions'], ',.0f')} ({num(r['mttf_h'], '.2f')} h between, "
            f"{r['node_failures_per_1000_node_days']:.2f} per 1,000 node-days on "
            f"{r['job_nodes']:,} nodes)",
        ),
        (
            "checkpoint",
            f"every {r['checkpoint_interval_min']:.1f} min ({r['checkpoint_interval']}), "
            f"{r['checkpoint_gb_per_gpu']:.2f} GB per GPU, {r['checkpoint_write_s']:.1f} s stall"
            + (
                f" + {r['checkpoint_persist_s']:.1f} s in the background"
                if r["checkpoint_persist_s"]
                else ""
            ),
        ),
        (
            "restart",
            f"{r['restart_s'] / 60:.1f} min ("
            + ", ".join(f"{k.removesuffix('_s')} {v:.0f} s" for k, v in r["restart"].items())
            + ")",
        ),
        ("ETTR (closed form)", f"{r['ettr']:.1%}"),
    ]
    if sim is not None and "ettr" in sim:
        rows += [
            (
                f"simulated ({sim['trials']} runs)",
                f"{sim['time_to_train_days']:.1f} days (p10 {sim['time_to_train_days_p10']:.1f}, "
                f"p90 {sim['time_to_train_days_p90']:.1f}), ETTR {sim['ettr']:.1%}, "
                f"{sim['interruptions']:,.0f} interruptions, {sim['failed_restarts']:,.0f} "
                f"during restarts, {sim['spare_wait_h']:,.1f} h waiting for spares",
            )
        ]
    elif sim is not None:
        rows.append(("simulated", f"no run of {sim['trials']} finished"))
    return rows


def print_train(r: dict[str, Any], title: str = "time to train") -> None:
    """The time-to-train table of a result with `train_time`'s keys, and its notes."""
    from tierwise.cli.output import console, line, styled, table

    heading = f"{title} {r['train_tokens']:.4g} tokens"
    console.print(table(heading, ["quantity", "value"], train_rows(r)))
    for note in r["time_to_train_notes"]:
        console.print(line(styled("note", "yellow"), f" {note}"))
