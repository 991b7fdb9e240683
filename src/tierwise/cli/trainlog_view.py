"""Printing a training-log record (`tierwise ingest training-log`, `tierwise doctor LOG`)."""

from __future__ import annotations

from typing import Any

from tierwise.cli.output import console, fmt, line, styled, table
from tierwise.verify.trainlog.record import RunRecord


def print_record(record: RunRecord) -> None:
    """What the log states: framework, model, layout, GPUs, measured values, what is unknown."""
    r = record.as_dict()
    gpus = r["gpus"]
    console.print(
        line(
            styled(r["log"], "bold"),
            f": {r['framework'] or 'framework not stated'} ({', '.join(r['formats'])}); "
            f"{gpus if gpus is not None else '?'} GPU(s) {r['gpu'] or '(GPU not named)'}",
        )
    )
    sources = r["sources"]
    rows = [
        (f"model.{k}", v, sources.get(f"model.{k}", ""))
        for k, v in r["model"].items()
        if v is not None
    ]
    rows += [(f"layout.{k}", v, sources.get(f"layout.{k}", "")) for k, v in r["layout"].items()]
    rows += [
        (k, r[k], sources.get(k, "")) for k in ("gpus", "gpu", "nodes", "gpus_per_node") if r[k]
    ]
    console.print(table("run as stated", ["field", "value", "read from"], rows))
    m = r["measured"]
    mrows: list[tuple[str, Any, str]] = [
        (k, m[k], sources.get(f"measured.{k}", ""))
        for k in ("step_time_s", "tflops_per_gpu", "tokens_per_s_per_gpu", "peak_memory_gib")
    ]
    console.print(table("measured", ["value", "", "read from"], mrows))
    if m.get("step_time_method"):
        console.print(f"step time: {m['step_time_method']}", markup=False, highlight=False)
    if r["settings"]:
        said = ", ".join(f"{k}={fmt(v)}" for k, v in r["settings"].items())
        console.print(f"settings: {said}", markup=False, highlight=False)
    if r["unknown"]:
        console.print(
            line(styled("not stated", "yellow"), ": " + ", ".join(r["unknown"])),
        )
    for note in r["notes"]:
        console.print(f"note: {note}", markup=False, highlight=False)
