"""Printing a training-log record (`tierwise ingest training-log`, `tierwise doctor LOG`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tierwise import frameworks
from tierwise.cli.output import console, fmt, line, print_json, say_notes, styled, table
from tierwise.hardware.cluster import ClusterSpec
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


def doctor_training(
    files: list[Path], cluster: str | None, overrides: dict[str, Any], as_json: bool
) -> int:
    """`tierwise doctor LOG [CONFIG...]` on a training log; the exit code (1: findings)."""
    from tierwise.hardware.cluster import idle_overrides
    from tierwise.verify.runcheck.diagnose import compare
    from tierwise.verify.runcheck.price import CannotPrice, price
    from tierwise.verify.trainlog.read import read_run

    log, configs = files[0], files[1:]
    record = read_run(log, configs)
    if record.measured.get("step_time_s") is None:
        raise CannotPrice(f"{log}: the log states no step time to compare with")
    priced = price(record, cluster, overrides)
    say_notes(idle_overrides(priced.cluster, overrides))
    result = compare(priced)
    nccl = _nccl(log, cluster, overrides)
    out = {
        "kind": "training-log",
        "log": str(log),
        **result,
        "record": record.as_dict(),
        "nccl": nccl.as_dict() if nccl is not None else None,
    }
    if as_json:
        print_json(out)
    else:
        _print_doctor(out)
        if nccl is not None:
            from tierwise.cli.commands.doctor import print_diagnosis

            console.print("\nNCCL lines in the same log:")
            print_diagnosis(nccl)
    acted = any(f["severity"] != "info" for f in out["findings"])
    return 1 if acted or (nccl is not None and nccl.findings) else 0


def _nccl(log: Path, cluster: str | None, overrides: dict[str, Any]) -> Any:
    """The NCCL doctor's diagnosis of NCCL lines in a training log (None when it has none)."""
    from tierwise.errors import TierwiseError
    from tierwise.textio import read_text
    from tierwise.verify.doctor import diagnose

    text = read_text(log)
    if "NCCL INFO" not in text and "NCCL WARN" not in text:
        return None
    try:
        return diagnose([log], cluster, overrides)
    except TierwiseError:
        return None


def _print_doctor(out: dict[str, Any]) -> None:
    run, priced, src = out["run"], out["priced_as"], out["cluster_source"]
    console.print(
        f"compared with: {src['cluster']}, by {src['chosen_by']}: {src['reason']}",
        markup=False,
        highlight=False,
    )
    lay = priced["layout"]
    console.print(
        f"priced as: {priced['model']} tp={lay['tp']} pp={lay['pp']} vpp={lay['vpp']} "
        f"cp={lay['cp']} ep={lay['ep']} dp={lay['dp']} mbs={lay['mbs']} gbs={lay['gbs']} "
        f"seq={lay['seq']} recompute={lay['recompute']} dtype={lay['dtype']} "
        f"framework={priced['framework'] or frameworks.GENERIC.name}",
        markup=False,
        highlight=False,
    )
    rows = [
        (
            "step time (s)",
            run["measured_step_time_s"],
            run["predicted_step_time_s"],
            run["error_pct"],
        ),
        (
            "memory per GPU (GiB)",
            run["measured_peak_memory_gib"],
            run["predicted_memory_gib"],
            run["memory_error_pct"],
        ),
        ("TFLOP/s per GPU", run["measured_tflops_per_gpu"], run["predicted_tflops_per_gpu"], None),
    ]
    console.print(
        table(
            "measured vs predicted (error = predicted / measured - 1)",
            ["", "measured", "predicted", "error %"],
            rows,
        )
    )
    if run["step_time_method"]:
        console.print(f"measured step: {run['step_time_method']}", markup=False, highlight=False)
    for note in priced["assumed"]:
        console.print(line(styled("assumed", "yellow"), f" {note}"))
    if priced["not_modelled"]:
        console.print(
            line(styled("not modelled", "yellow"), " " + ", ".join(priced["not_modelled"]))
        )
    if not out["findings"]:
        console.print(line(styled("no finding", "green"), ": the run is what the model expects"))
    for rank, f in enumerate(out["findings"], start=1):
        explains = "" if f["explains_s"] is None else f" (explains {f['explains_s']:.3f} s)"
        console.print(
            line(
                "\n",
                styled(f"{rank}. {f['title']}", "bold"),
                f"{explains}\n   {f['id']} · term {f['term']} · flag {f['flag']} · {f['severity']}",
            )
        )
        console.print(f"   fix: {f['fix']}", markup=False, highlight=False)


def calibrate_training(
    logs: list[Path], cluster: ClusterSpec, out: Path | None, as_json: bool
) -> None:
    """`tierwise calibrate LOG... -c CLUSTER` on training logs: fit, report, write the spec."""
    import yaml

    from tierwise.hardware.cluster import dump_cluster
    from tierwise.verify.runcheck.fit import calibrated, fit
    from tierwise.verify.runcheck.price import CannotPrice, price
    from tierwise.verify.trainlog.read import is_training_log, read_run

    groups: list[list[Path]] = []
    for path in logs:  # a training log, then its configs (files that are not training logs)
        if is_training_log(path) or not groups:
            groups.append([path])
        else:
            groups[-1].append(path)
    runs = []
    for log, *configs in groups:
        record = read_run(log, configs)
        if record.measured.get("step_time_s") is None:
            raise CannotPrice(f"{log}: the log states no step time to fit on")
        runs.append(price(record, cluster))
    result = fit(runs)
    spec = calibrated(cluster, result.calibration)
    if out is not None:
        out.write_text(yaml.safe_dump(dump_cluster(spec), sort_keys=False))
    if as_json:
        print_json({"cluster": spec.name, "out": str(out) if out else None, **result.as_dict()})
        return
    cal = result.calibration
    inter = "model's" if cal.overlap_interference is None else f"{cal.overlap_interference:.3f}"
    console.print(
        line(
            styled(spec.name, "bold"),
            f": compute_scale {cal.compute_scale:.3f}, overlap_interference {inter} "
            f"(fitted: {', '.join(result.fitted)}; {len(runs)} run(s))",
        )
    )
    for note in result.notes:
        console.print(f"  {note}", markup=False, highlight=False)
    rows = [
        (
            "/".join(Path(r["log"]).parts[-2:]),
            r["measured_step_time_s"],
            r["before_step_time_s"],
            r["error_before_pct"],
            r["after_step_time_s"],
            r["error_after_pct"],
            r["error_leave_one_out_pct"],
        )
        for r in (run.as_dict() for run in result.runs)
    ]
    console.print(
        table(
            "step time per run (error = predicted / measured - 1, %)",
            ["log", "measured s", "catalog s", "error", "calibrated s", "error", "leave-one-out"],
            rows,
        )
    )
    summary = result.as_dict()
    console.print(
        f"mean |error|: {_pct(summary['mean_abs_error_before_pct'])} before, "
        f"{_pct(summary['mean_abs_error_after_pct'])} after, "
        f"{_pct(summary['mean_abs_error_leave_one_out_pct'])} leave-one-out",
        markup=False,
        highlight=False,
    )
    console.print(f"wrote {out}" if out else "use --out mine.yaml to write the calibrated spec")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"
