"""`tierwise lab up|down|status|run`: the emulated fabric lab (network namespaces, tc)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tierwise.cli.options import JsonOpt
from tierwise.cli.output import console, fmt, percent, print_json, table
from tierwise.errors import TierwiseError
from tierwise.textio import ascii_int
from tierwise.units import parse_duration, parse_size, size_sweep

lab_app = typer.Typer(
    help="Emulated multi-node fabric on one Linux box (needs root and iproute2).",
    no_args_is_help=True,
)

NodesOpt = Annotated[int, typer.Option("--nodes", help="Emulated nodes (namespaces).")]
RateOpt = Annotated[
    str, typer.Option("--inter-rate", help="Each node's NIC rate, e.g. 100mbit, 1gbit.")
]
OverOpt = Annotated[
    float,
    typer.Option("--oversubscription", help="Two leaves joined by an uplink shaped to R:1."),
]
QdiscOpt = Annotated[str, typer.Option("--qdisc", help="Shaper: htb or tbf.")]
DEFAULT_RATE = "100mbit"
SIZES_PARTS = ("--sizes MIN", "--sizes MAX", "--sizes FACTOR")
"""How a bad sweep of --sizes MIN:MAX:FACTOR names its parts."""


def _config(nodes: int, rate: str, over: float, qdisc: str) -> Any:
    from tierwise.lab.fabric import FabricConfig
    from tierwise.lab.netns import lab_prefix
    from tierwise.lab.shaping import parse_rate

    return FabricConfig(
        nodes=nodes,
        rate_bit=parse_rate(rate),
        oversubscription=over,
        qdisc=qdisc,
        prefix=lab_prefix(),
    )


def parse_sizes(text: str) -> tuple[int, ...]:
    """``1M:64M`` (x2), ``1M:64M:4`` (x4) or a list ``1M,16M``; bytes."""
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise TierwiseError(f"--sizes: {text!r} must be MIN:MAX[:FACTOR] or a list A,B,...")
        try:
            factor = ascii_int(parts[2], 6) if len(parts) == 3 else 2
        except ValueError:
            raise TierwiseError(
                f"--sizes: factor {parts[2][:20]!r} must be an integer >= 2"
            ) from None
        low, high = (parse_size(part, "--sizes") for part in parts[:2])
        return tuple(size_sweep(low, high, factor, SIZES_PARTS))
    return tuple(sorted({parse_size(p, "--sizes") for p in text.split(",") if p.strip()}))


@lab_app.command("up")
def up(
    nodes: NodesOpt = 2,
    inter_rate: RateOpt = DEFAULT_RATE,
    oversubscription: OverOpt = 1.0,
    qdisc: QdiscOpt = "htb",
    as_json: JsonOpt = False,
) -> None:
    """Create the lab and leave it up (remove it with `tierwise lab down`)."""
    from tierwise.lab import fabric

    cfg = _config(nodes, inter_rate, oversubscription, qdisc)
    fabric.up(cfg)
    _print_status(fabric.status(cfg.prefix).as_dict(), as_json)


@lab_app.command("down")
def down(as_json: JsonOpt = False) -> None:
    """Remove the lab and any leftovers of crashed runs."""
    from tierwise.lab import fabric

    removed = fabric.teardown()
    if as_json:
        print_json({"removed": removed})
    else:
        console.print(
            f"removed {len(removed)}: {', '.join(removed)}" if removed else "nothing to remove"
        )


@lab_app.command("status")
def status(as_json: JsonOpt = False) -> None:
    """Show the lab, or the leftovers of earlier runs."""
    from tierwise.lab import fabric

    _print_status(fabric.status().as_dict(), as_json)


def _print_status(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(data)
        return
    state = (
        "up"
        if data["up"]
        else "stale leftovers (run `tierwise lab down`)"
        if data["stale"]
        else "down"
    )
    console.print(f"lab {data['prefix']!r}: {state}")
    cfg = data["config"]
    if cfg and data["up"]:
        console.print(
            f"{cfg['nodes']} nodes, {cfg['rate_bit'] / 1e6:g} Mbit/s ({cfg['qdisc']}), "
            f"oversubscription {cfg['oversubscription']:g}:1"
        )
    for name in data["namespaces"] + data["links"]:
        console.print(f"  {name}")


@lab_app.command("run")
def run(
    nodes: NodesOpt = 2,
    ranks_per_node: Annotated[int, typer.Option("--ranks-per-node", help="Ranks per node.")] = 2,
    inter_rate: RateOpt = DEFAULT_RATE,
    oversubscription: OverOpt = 1.0,
    op: Annotated[
        str, typer.Option("--op", help="all_reduce, all_gather, reduce_scatter, alltoall")
    ] = "all_reduce",
    sizes: Annotated[
        str, typer.Option("--sizes", help="MIN:MAX[:FACTOR] or A,B,... (nccl-tests -b/-e bytes).")
    ] = "1M:16M:4",
    placement: Annotated[
        str,
        typer.Option(
            "--placement", help="aware (blocks of K per node) or naive (round-robin over nodes)."
        ),
    ] = "aware",
    warmup: Annotated[int, typer.Option("--warmup", help="Untimed iterations per size.")] = 1,
    iters: Annotated[int, typer.Option("--iters", help="Timed iterations per size.")] = 3,
    qdisc: QdiscOpt = "htb",
    timeout: Annotated[str, typer.Option("--timeout", help="Whole-run deadline.")] = "300s",
    step: Annotated[
        bool,
        typer.Option("--step/--no-step", help="Also time a toy TP x DP transformer training step."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run flat vs hierarchical collectives in a fresh lab; measured vs predicted."""
    from tierwise.lab.run import LabRun, run_lab
    from tierwise.lab.step import StepConfig

    spec = LabRun(
        fabric=_config(nodes, inter_rate, oversubscription, qdisc),
        ranks_per_node=ranks_per_node,
        op=op,
        sizes=parse_sizes(sizes),
        placement=placement,
        warmup=warmup,
        iters=iters,
        timeout_s=parse_duration(timeout, "--timeout"),
        step=StepConfig().to_dict() if step else None,
    )
    report = run_lab(spec).as_dict()
    if as_json:
        print_json(report)
        return
    print_report(
        report,
        f"{op} on {nodes} nodes x {ranks_per_node} ranks, {inter_rate}, "
        f"{oversubscription:g}:1, placement {placement}",
    )


def print_report(report: dict[str, Any], title: str) -> None:
    """The human tables of a lab run: measured vs predicted per algorithm and size, errors in
    percent as `calibrate` prints them."""
    rows = []
    for algo in ("flat", "hierarchical"):
        for r in report[algo]:
            m, p = r["measured"], r["predicted"]
            rows.append(
                (
                    algo,
                    r["size_bytes"],
                    m["time_us"],
                    p["time_us"],
                    m["busbw_GBps"],
                    p["busbw_GBps"],
                    percent(p["time_us"] / m["time_us"] - 1),
                )
            )
    title = f"{title} (time error = predicted / measured - 1)"
    console.print(
        table(
            title,
            [
                "algo",
                "size B",
                "measured us",
                "predicted us",
                "measured busbw GB/s",
                "predicted busbw GB/s",
                "time error",
            ],
            rows,
        )
    )
    console.print(
        f"flat / hierarchical at {report['flat'][-1]['size_bytes']} B: measured "
        f"{fmt(report['measured_ratio'])}, predicted {fmt(report['predicted_ratio'])}"
    )
    if report["step"]:
        st = report["step"]
        console.print(
            f"toy training step (TP={st['tp']} x DP={st['dp']}): measured "
            f"{fmt(st['measured_step_time_s'])} s, tierwise estimate "
            f"{fmt(st['estimated_step_time_s'])} s ({percent(st['error'])})"
        )


@lab_app.command("ecmp")
def ecmp(
    nodes: NodesOpt = 8,
    inter_rate: RateOpt = DEFAULT_RATE,
    oversubscription: Annotated[
        float,
        typer.Option(
            "--oversubscription",
            help="Leaf uplinks R:1; each of the S spine links carries nodes/2 x rate / (R x S).",
        ),
    ] = 2.0,
    spines: Annotated[int, typer.Option("--spines", help="Spine switches (2-4).")] = 2,
    size: Annotated[
        str, typer.Option("--size", help="Bytes each rank sends per ring step.")
    ] = "8M",
    warmup: Annotated[int, typer.Option("--warmup", help="Untimed ring steps.")] = 1,
    iters: Annotated[int, typer.Option("--iters", help="Timed ring steps.")] = 3,
    qdisc: QdiscOpt = "htb",
    timeout: Annotated[str, typer.Option("--timeout", help="Whole-run deadline.")] = "300s",
    as_json: JsonOpt = False,
) -> None:
    """Two leaves over spines with the kernel's ECMP: a ring whose flows collide on one spine
    vs one whose flows spread, measured (gloo) beside the model."""
    from dataclasses import replace

    from tierwise.lab.ecmp import EcmpRun, run_ecmp
    from tierwise.lab.ring_worker import RingTask

    fabric = replace(_config(nodes, inter_rate, oversubscription, qdisc), spines=spines)
    task = RingTask(parse_size(size, "--size"), warmup, iters, parse_duration(timeout, "--timeout"))
    spec = EcmpRun(fabric, task)
    report = run_ecmp(spec).as_dict()
    if as_json:
        print_json(report)
        return
    rows = [
        (
            name,
            " ".join(map(str, p["ring_nodes"])),
            " ".join("-" if s is None else str(s) for s in p["ring_step_spines"]),
            p["busiest_link_flows"],
            p["measured_busiest_link_flows"],
            p["measured_busbw_GBps"] * 1e3,
            p["predicted_busbw_GBps"] * 1e3,
        )
        for name, p in report["placements"].items()
    ]
    console.print(
        table(
            f"ring step of {report['size_bytes']} B over {spines} spines, {inter_rate} NICs, "
            f"{report['spine_link_rate_Gbps'] * 1e3:g} Mbit/s spine links",
            ["placement", "ring nodes", "spine per step", "busiest link flows",
             "measured busiest link flows", "measured busbw MB/s", "predicted busbw MB/s"],
            rows,
        )
    )  # fmt: skip
    console.print(
        f"spread / colliding: measured {fmt(report['measured_ratio'])}, predicted "
        f"{fmt(report['predicted_ratio'])}; ECMP expectation over random hashes "
        f"{fmt(report['ecmp_expected_busbw_GBps'] * 1e3)} MB/s"
    )


def register(app: typer.Typer) -> None:
    """Add `tierwise lab`."""
    app.add_typer(lab_app, name="lab")
