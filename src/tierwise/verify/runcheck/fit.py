"""Fit a cluster's step-time constants on the user's own training runs.

The step-time model exposes two constants a cluster can differ in (`StepCalibration` in the
cluster spec's `calibration.step`): `compute_scale`, the achieved compute rate over the
model's (clocks, power caps, kernels the efficiency law does not know), and
`overlap_interference`, the share of overlapped (hidden) communication that still lands on the
step. Both are fitted by minimising the squared log error of the predicted step times; a
constant is fitted only where the runs pin it (overlap interference needs runs with hidden
communication). Every fit reports the error on each run before and after, and leave-one-out:
each run predicted by the constants fitted on the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tierwise.hardware.cluster import ClusterSpec, StepCalibration
from tierwise.perf.step import OVERLAP_INTERFERENCE
from tierwise.verify.runcheck.diagnose import predict
from tierwise.verify.runcheck.price import PricedRun

# Search ranges: compute_scale as a multiple of the model's compute rate; interference as a
# share of the hidden communication time.
SCALE_RANGE = (0.2, 3.0)
INTERFERENCE_RANGE = (0.0, 1.0)
# Runs needed to fit both constants (one more than the constants, so a fit can be wrong).
MIN_RUNS_TWO_CONSTANTS = 3
# Gauss-Newton: finite-difference step, damping, iterations and the move that ends them.
STEP = 1e-4
DAMPING = 1e-9
MAX_STEPS = 30
TOLERANCE = 1e-6
# overlap_interference is pinned when moving it over its whole range moves some run's predicted
# step by at least this share.
PINNED = 0.01


@dataclass(frozen=True)
class RunFit:
    """One run's measured step and its predictions before, after and held out (s)."""

    log: str
    measured_s: float
    before_s: float
    after_s: float
    held_out_s: float | None

    def as_dict(self) -> dict[str, Any]:
        def err(x: float | None) -> float | None:
            return None if x is None else (x / self.measured_s - 1) * 100

        return {
            "log": self.log,
            "measured_step_time_s": self.measured_s,
            "before_step_time_s": self.before_s,
            "after_step_time_s": self.after_s,
            "leave_one_out_step_time_s": self.held_out_s,
            "error_before_pct": err(self.before_s),
            "error_after_pct": err(self.after_s),
            "error_leave_one_out_pct": err(self.held_out_s),
        }


@dataclass(frozen=True)
class StepFit:
    """The fitted constants, which were pinned, and the per-run errors."""

    calibration: StepCalibration
    fitted: tuple[str, ...]
    notes: tuple[str, ...]
    runs: tuple[RunFit, ...]

    def mean_abs_error_pct(self, which: str) -> float | None:
        errs = [r.as_dict()[f"error_{which}_pct"] for r in self.runs]
        vals = [abs(e) for e in errs if e is not None]
        return sum(vals) / len(vals) if vals else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "calibration": self.calibration.model_dump(),
            "fitted": list(self.fitted),
            "not_fitted": list(self.notes),
            "runs": [r.as_dict() for r in self.runs],
            "mean_abs_error_before_pct": self.mean_abs_error_pct("before"),
            "mean_abs_error_after_pct": self.mean_abs_error_pct("after"),
            "mean_abs_error_leave_one_out_pct": self.mean_abs_error_pct("leave_one_out"),
        }


def calibrated(cluster: ClusterSpec, cal: StepCalibration) -> ClusterSpec:
    """``cluster`` with step constants ``cal`` (its tier calibrations kept)."""
    return cluster.model_copy(update={"calibration": {**cluster.calibration, "step": cal}})


def _steps(runs: Sequence[PricedRun], cal: StepCalibration) -> list[float]:
    return [
        float(predict(replace(r, cluster=calibrated(r.cluster, cal)))["step_time_s"]) for r in runs
    ]


def _pins_interference(runs: Sequence[PricedRun], base: StepCalibration) -> bool:
    lo = _steps(runs, base.model_copy(update={"overlap_interference": 0.0}))
    hi = _steps(runs, base.model_copy(update={"overlap_interference": 1.0}))
    return any(abs(h / max(low, 1e-12) - 1) >= PINNED for low, h in zip(lo, hi, strict=True))


def _residuals(runs: Sequence[PricedRun], params: np.ndarray, free: int) -> np.ndarray:
    """log(predicted / measured) per run at params = (1 / compute_scale, interference)."""
    cal = _calibration(params, free)
    predicted = np.array(_steps(runs, cal))
    measured = np.array([r.record.measured["step_time_s"] for r in runs])
    return np.log(predicted / measured)


def _calibration(params: np.ndarray, free: int) -> StepCalibration:
    inter = round(float(params[1]), 6) if free == 2 else None
    return StepCalibration(
        compute_scale=round(1.0 / float(params[0]), 6), overlap_interference=inter
    )


def fit_constants(
    runs: Sequence[PricedRun],
) -> tuple[StepCalibration, tuple[str, ...], tuple[str, ...]]:
    """(constants, fitted names, notes on what was not fitted) over ``runs``: damped
    Gauss-Newton on the log step-time errors, in 1 / compute_scale (time scales with it) and
    the interference share, each kept in its range."""
    fitted = ["compute_scale"]
    notes = []
    pinned = _pins_interference(runs, StepCalibration())
    free = 2 if pinned and len(runs) >= MIN_RUNS_TWO_CONSTANTS else 1
    if free == 2:
        fitted.append("overlap_interference")
    else:
        why = (
            "no run hides enough communication to pin it"
            if not pinned
            else f"fewer than {MIN_RUNS_TWO_CONSTANTS} runs: two constants would fit any two"
        )
        notes.append(f"overlap_interference: kept at the model's {OVERLAP_INTERFERENCE} ({why})")
    lo = np.array([1 / SCALE_RANGE[1], INTERFERENCE_RANGE[0]])[:free]
    hi = np.array([1 / SCALE_RANGE[0], INTERFERENCE_RANGE[1]])[:free]
    params = np.array([1.0, OVERLAP_INTERFERENCE])[:free]
    r = _residuals(runs, params, free)
    for _ in range(MAX_STEPS):
        jac = np.empty((len(runs), free))
        for j in range(free):
            bumped = params.copy()
            step = STEP if params[j] + STEP <= hi[j] else -STEP  # stay inside the range
            bumped[j] += step
            jac[:, j] = (_residuals(runs, bumped, free) - r) / step
        normal = jac.T @ jac + DAMPING * np.eye(free)
        delta = np.linalg.lstsq(normal, -jac.T @ r, rcond=None)[0]
        new = np.clip(params + delta, lo, hi)
        r_new = _residuals(runs, new, free)
        if float(r_new @ r_new) > float(r @ r):
            break
        moved = float(np.max(np.abs(new - params)))
        params, r = new, r_new
        if moved < TOLERANCE:
            break
    return _calibration(params, free), tuple(fitted), tuple(notes)


def fit(runs: Sequence[PricedRun], leave_one_out: bool = True) -> StepFit:
    """Fit on every run; with ``leave_one_out``, each run also predicted from the others."""
    if not runs:
        raise ValueError("no runs to fit")
    cal, fitted, notes = fit_constants(runs)
    before = _steps(runs, StepCalibration())
    after = _steps(runs, cal)
    held: list[float | None] = [None] * len(runs)
    if leave_one_out and len(runs) > 1:
        for k, run in enumerate(runs):
            others = [r for i, r in enumerate(runs) if i != k]
            cal_k, _, _ = fit_constants(others)
            held[k] = _steps([run], cal_k)[0]
    rows = tuple(
        RunFit(r.record.source, r.record.measured["step_time_s"], b, a, h)
        for r, b, a, h in zip(runs, before, after, held, strict=True)
    )
    return StepFit(cal, fitted, notes, rows)
