"""`tierwise doctor FILE...`: why the all-reduce is slow, from the logs of one run.

Exit code 0 when no finding, 1 when there are findings, 2 on unreadable input.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tierwise.cli.options import JsonOpt, cluster_choice_options

if TYPE_CHECKING:
    from tierwise.verify.doctor import Diagnosis

FilesArg = Annotated[
    list[Path],
    typer.Argument(
        help="Files of one run: NCCL_DEBUG=INFO output (as pasted: records run together are"
        " split), nccl-tests logs, ibstat/ibstatus/ibv_devinfo, ethtool/ip link, nvidia-smi"
        " (topo -m, -q), lspci -vvv, NCCL topology XML, env dumps, pip/conda/dpkg lists, ldd;"
        " or a training log (Megatron-LM, NeMo, MLPerf, torchtitan) first, then its configs."
    ),
]

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": ""}


def _facts_line(facts: dict) -> str:
    """One line of what the logs say: NCCL version, hosts, ranks, transports."""
    parts = [f"NCCL {facts['nccl_version']}"] if facts["nccl_version"] else []
    if facts["nodes"]:
        parts.append(f"{facts['nodes']} node(s), {len(facts['hosts'])} host(s) named")
    if facts["nranks"]:
        parts.append(f"{facts['nranks']} ranks")
    if facts["network"]:
        parts.append(f"network {facts['network']}")
    if facts["ib_nics"]:
        parts.append("NICs " + ", ".join(f"{n} ({k})" for n, k in facts["ib_nics"].items()))
    links = [
        f"{kind} x{t['connections']}"
        + (f" ({t['gdrdma']} GDRDMA)" if kind.startswith("NET") else "")
        for kind, t in facts["transports"].items()
    ]
    if links:
        parts.append("connections: " + ", ".join(links))
    return "read: " + ("; ".join(parts) if parts else "no NCCL setup lines")


def print_diagnosis(diagnosis: Diagnosis) -> None:
    from tierwise.cli.output import console, fmt, line, styled

    console.print(_facts_line(diagnosis.facts), markup=False, highlight=False)
    src = diagnosis.cluster_source
    console.print(
        f"compared with: {src['cluster']} ({src['nodes']} nodes, {src['nics_per_node']}x"
        f" {src['nic']}), by {src['chosen_by']}: {src['reason']}",
        markup=False,
        highlight=False,
    )
    gap = diagnosis.gap
    if gap is not None:
        console.print(
            f"{gap.op} on {gap.nranks} ranks, {gap.nodes} node(s), {gap.size_bytes} B:"
            f" measured busbw {fmt(gap.measured_busbw_GBps)} GB/s, model"
            f" {fmt(gap.expected_busbw_GBps)} GB/s, gap {fmt(gap.gap_GBps)} GB/s"
        )
    for note in diagnosis.facts["notes"]:
        console.print(f"note: {note}", markup=False, highlight=False)
    harmless: dict[tuple[str, str], list[str]] = {}
    for item in diagnosis.facts["harmless_lines"]:
        harmless.setdefault((item["why"], item["source"]), []).append(Path(item["line"]).name)
    for (why, source), where in harmless.items():
        console.print(
            f"harmless: {', '.join(where)}: {why} ({source})", markup=False, highlight=False
        )
    if not diagnosis.findings:
        console.print(
            line(styled("no finding", "green"), ": nothing in these files points at a known cause")
        )
        return
    for rank, finding in enumerate(diagnosis.findings, start=1):
        explains = (
            ""
            if finding.explains_GBps is None
            else f" (explains {fmt(finding.explains_GBps)} GB/s)"
        )
        console.print(
            line(
                "\n",
                styled(f"{rank}. {finding.title}", "bold"),
                f"{explains}\n   {finding.id} · {finding.category} · ",
                styled(finding.severity, _SEVERITY_STYLE[finding.severity]),
                f" · confidence {finding.confidence:.2f}",
            )
        )
        for ev in finding.evidence:
            console.print(
                f"   {Path(ev.file).name}:{ev.line}: {ev.text}", markup=False, highlight=False
            )
        if finding.confirm:
            console.print(f"   to confirm: {finding.confirm}", markup=False, highlight=False)
        console.print(f"   fix: {finding.fix}", markup=False, highlight=False)


@cluster_choice_options
def doctor(
    files: FilesArg,
    cluster_name: str | None,
    cluster_overrides: dict[str, Any],
    as_json: JsonOpt = False,
) -> None:
    """Read NCCL logs and tool output of one run; rank the causes of low bandwidth or failure.
    A training log (then its configs) is compared with tierwise's prediction of the same run.

    Without --cluster: the preset of the logs' GPU, node count and NIC rate (JSON cluster_source).
    """
    from tierwise.verify.trainlog.read import is_training_log

    if files and is_training_log(files[0]):
        from tierwise.cli.trainlog_view import doctor_training

        raise typer.Exit(doctor_training(files, cluster_name, cluster_overrides, as_json))
    if nccl_doctor(files, cluster_name, cluster_overrides, as_json):
        raise typer.Exit(1)


def nccl_doctor(
    files: list[Path], cluster_name: str | None, cluster_overrides: dict[str, Any], as_json: bool
) -> bool:
    """Diagnose NCCL logs and tool printouts of one run and print the findings (JSON or the
    human view); returns whether anything was found."""
    from tierwise.cli.output import print_json, say_notes
    from tierwise.verify.doctor import diagnose

    diagnosis = diagnose(files, cluster_name, cluster_overrides)
    say_notes(diagnosis.idle_overrides)
    if as_json:
        print_json(diagnosis.as_dict())
    else:
        print_diagnosis(diagnosis)
    return bool(diagnosis.findings)


def register(app: typer.Typer) -> None:
    """Add the `doctor` command."""
    app.command("doctor")(doctor)
