"""`tierwise calibrate LOG...`: fit per-tier alpha/beta from nccl-tests logs, or the step-time
constants from training logs; write a spec."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

from tierwise.cli.options import JsonOpt, cluster_options
from tierwise.cli.output import console, line, percent, print_json, styled, table, writable
from tierwise.formats.nccl_reader import parse_file
from tierwise.hardware.cluster import ClusterSpec, dump_cluster
from tierwise.verify.calibrate import calibrate
from tierwise.verify.measured import measured


@cluster_options
def calibrate_command(
    cluster_spec: ClusterSpec,
    logs: Annotated[
        list[Path],
        typer.Argument(
            help="nccl-tests logs, or training logs of this cluster (Megatron-LM, NeMo, MLPerf, "
            "torchtitan), each followed by its config files; their step times fit "
            "compute_scale and overlap_interference."
        ),
    ],
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the calibrated cluster YAML.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Fit alpha (us per LL step), beta (GB/s per GPU) and overhead (us) per tier from
    nccl-tests logs; from training logs, the cluster's step-time constants."""
    writable(out, "--out")
    from tierwise.verify.trainlog.read import is_training_log

    if logs and is_training_log(logs[0]):
        from tierwise.cli.trainlog_view import calibrate_training

        calibrate_training(logs, cluster_spec, out, as_json)
        return
    points = [measured(test, cluster_spec, str(log)) for log in logs for test in parse_file(log)]
    calibrated, fits = calibrate(points, cluster_spec, ", ".join(str(log) for log in logs))
    if out is not None:
        out.write_text(yaml.safe_dump(dump_cluster(calibrated), sort_keys=False))
    if as_json:
        print_json(
            {
                "cluster": calibrated.name,
                "out": str(out) if out else None,
                "tiers": [
                    {
                        "tier": f.tier,
                        **f.calibration.model_dump(),
                        "fitted": list(f.fitted),
                        "not_fitted": list(f.notes),
                        "max_error_after": f.max_error_after,
                        "sizes_off_by_more_than_15pct": f.sizes_off(),
                        "rows": f.rows(),
                    }
                    for f in fits
                ],
            }
        )
        return
    for f in fits:
        c = f.calibration
        console.print(
            line(
                styled(str(f.tier), "bold"),
                f": alpha {c.alpha_us:.2f} us per LL step, "
                f"beta {c.beta_GBps:.1f} GB/s per GPU, overhead {c.overhead_us:.0f} us "
                f"(fitted: {', '.join(f.fitted)})",
            )
        )
        for note in f.notes:
            console.print(f"  {note}")
        rows = [
            (
                r["size_bytes"],
                r["measured_us"],
                r["before_us"],
                percent(r["error_before"]),
                r["after_us"],
                percent(r["error_after"]),
            )
            for r in f.rows()
        ]
        console.print(
            table(
                f"{f.tier} fit per size (time error = predicted / measured - 1)",
                ["size B", "measured us", "catalog us", "error", "calibrated us", "error"],
                rows,
            )
        )
        console.print(f"largest error after the fit: {f.max_error_after * 100:.1f}%")
        if f.sizes_off():
            console.print(
                line(
                    styled(f"still off by more than 15% at {len(f.sizes_off())} sizes:", "yellow"),
                    " " + ", ".join(str(n) for n in f.sizes_off()),
                )
            )
    if out is not None:
        console.print(f"wrote {out}")


def register(app: typer.Typer) -> None:
    """Add `tierwise calibrate`."""
    app.command("calibrate")(calibrate_command)
