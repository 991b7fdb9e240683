"""Fit per-tier alpha (us), beta (GB/s) and overhead (us) from nccl-tests logs, honestly.

For each log, the tier its group tops out on (intra for one NVLink domain, leaf/spine across
domains) is fitted by least squares on relative time residuals: beta on the bandwidth-bound
sizes (>= BULK_MIN_BYTES where the log has them), the bandwidth-protocol overhead on sizes >=
LARGE_MIN_BYTES, alpha (one LL step) on sizes <= SMALL_MAX_BYTES, alternating a few times.
Single-domain logs are fitted first so multi-domain fits see a calibrated intra tier.

A parameter is fitted only where the log pins it: beta needs large messages whose predicted
time moves with the tier's bandwidth (a two-node all_reduce bound by NVLS inside the node says
nothing about the NICs), alpha needs small messages whose time moves with its latency. A tier
with neither is refused with the reason. Every fit reports its error per size before and
after, and the calibrated cluster reproduces those errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tierwise.collectives import tables as T
from tierwise.collectives.predict import predict
from tierwise.collectives.shape import intra_class
from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec, TierCalibration
from tierwise.hardware.tiers import tier
from tierwise.verify.measured import Measured, measured_shape

SMALL_MAX_BYTES = 64 << 10
LARGE_MIN_BYTES = 1 << 20
BULK_MIN_BYTES = 256 << 20
# Search ranges: beta as a multiple of the catalog's effective bandwidth, alpha as a multiple
# of NCCL's LL step latency for the link class, overhead in us.
BETA_SCALES = np.linspace(0.3, 1.5, 121)
ALPHA_SCALES = np.linspace(0.0, 8.0, 161)
OVERHEADS_US = np.concatenate([np.linspace(0, 50, 26), np.linspace(55, 500, 90)])
ROUNDS = 3
# Sizes still off by more than this after the fit are listed (relative time error).
WARN_ERROR = 0.15
# A parameter is pinned when scaling it by PROBE moves some predicted time in its size range
# by at least PINNED of what a fully bound time would move (|1/PROBE - 1| for beta).
PROBE = 0.8
PINNED = 0.3
# Overhead: +PROBE_OVERHEAD_US must move some large-message time by PINNED_OVERHEAD x PINNED;
# alpha: doubling it must move some small-message time by PINNED_ALPHA x PINNED.
PROBE_OVERHEAD_US = 50.0
PINNED_OVERHEAD = 0.1
PINNED_ALPHA = 0.1


class CalibrationRefused(SpecError):
    """A log that cannot pin the tier it reaches (the message says why)."""


@dataclass(frozen=True)
class TierFit:
    """The fit of one tier and its residuals (relative, predicted/measured - 1) per size.

    `fitted` names the parameters the logs pinned (beta_GBps, overhead_us, alpha_us); the
    others keep their catalog values. `notes` says why a parameter was not fitted."""

    tier: str
    calibration: TierCalibration
    fitted: tuple[str, ...]
    notes: tuple[str, ...]
    size_bytes: np.ndarray
    measured_us: np.ndarray
    before_us: np.ndarray
    after_us: np.ndarray

    @property
    def residual(self) -> np.ndarray:
        """predicted / measured time - 1 after the fit."""
        return self.after_us / self.measured_us - 1

    @property
    def residual_before(self) -> np.ndarray:
        """predicted / measured time - 1 with the catalog's constants."""
        return self.before_us / self.measured_us - 1

    def rows(self) -> list[dict[str, float | int]]:
        """Per size: measured and predicted times, time and busbw errors before and after."""
        return [
            {
                "size_bytes": int(n),
                "measured_us": float(m),
                "before_us": float(b),
                "after_us": float(a),
                "error_before": float(b / m - 1),
                "error_after": float(a / m - 1),
                "busbw_error_before": float(m / b - 1),
                "busbw_error_after": float(m / a - 1),
            }
            for n, m, b, a in zip(
                self.size_bytes, self.measured_us, self.before_us, self.after_us, strict=True
            )
        ]

    def sizes_off(self, limit: float = WARN_ERROR) -> list[int]:
        """Sizes whose predicted time is still more than `limit` off after the fit."""
        return [
            int(n) for n, r in zip(self.size_bytes, self.residual, strict=True) if abs(r) > limit
        ]

    @property
    def max_error_after(self) -> float:
        """Largest |predicted/measured time - 1| after the fit, over every size."""
        return float(np.max(np.abs(self.residual)))


def fitted_tier(m: Measured, cluster: ClusterSpec) -> str:
    """The tier a log's group tops out on."""
    return measured_shape(m, cluster).top_tier


def _with(cluster: ClusterSpec, name: str, cal: TierCalibration) -> ClusterSpec:
    return cluster.model_copy(update={"calibration": {**cluster.calibration, name: cal}})


def _times(m: Measured, cluster: ClusterSpec) -> np.ndarray:
    return predict(m.op, measured_shape(m, cluster), m.size_bytes).time_us


def _loss(pred: np.ndarray, meas: np.ndarray, mask: np.ndarray) -> float:
    return float(np.sum((pred[mask] / meas[mask] - 1) ** 2)) if mask.any() else 0.0


def _large(m: Measured) -> np.ndarray:
    return m.size_bytes >= LARGE_MIN_BYTES


def _bulk(m: Measured) -> np.ndarray:
    """Bandwidth-bound sizes: >= BULK_MIN_BYTES where the log has them, else the large ones."""
    bulk = m.size_bytes >= BULK_MIN_BYTES
    return bulk if bulk.any() else _large(m)


def _small(m: Measured) -> np.ndarray:
    return m.size_bytes <= SMALL_MAX_BYTES


RANGES = {"small": _small, "large": _large, "bulk": _bulk}
SIZES_TEXT = {"small": "<= 64 KiB", "large": ">= 1 MiB", "bulk": ">= 1 MiB"}


def _sensitivity(
    points: Sequence[Measured],
    cluster: ClusterSpec,
    name: str,
    cal: TierCalibration,
    probe: TierCalibration,
    rng: str,
) -> float:
    """Largest relative change of predicted time in the size range when `cal` -> `probe`."""
    base, moved = _with(cluster, name, cal), _with(cluster, name, probe)
    best = 0.0
    for m in points:
        mask = RANGES[rng](m)
        base_us = _times(m, base)
        mask &= base_us > 0  # one rank moves nothing: its predicted times are 0
        if mask.any():
            change = np.abs(_times(m, moved)[mask] / base_us[mask] - 1)
            best = max(best, float(change.max()))
    return best


def fit_tier(points: Sequence[Measured], cluster: ClusterSpec, source: str = "log") -> TierFit:
    """Least-squares fit of the tier all `points` top out on (they must share it); only the
    parameters the points pin are fitted. Raises CalibrationRefused when none is."""
    name = fitted_tier(points[0], cluster)
    base = tier(cluster, name)
    cls = "net" if name != "intra" else intra_class(cluster.intra.kind)
    ll_step = T.STEP_LAT_US[cls]["ring"]["LL"]
    uncal = cluster.model_copy(
        update={"calibration": {k: v for k, v in cluster.calibration.items() if k != name}}
    )
    ref_eff = tier(uncal, name).eff_GBps
    cal = TierCalibration(
        alpha_us=ll_step + max(0.0, base.latency_us - _reference(cls)),
        beta_GBps=ref_eff,
        overhead_us=0.0,
    )
    grids = {
        "beta_GBps": (BETA_SCALES * ref_eff, "bulk", PROBE * ref_eff, 1 / PROBE - 1),
        "overhead_us": (OVERHEADS_US, "large", PROBE_OVERHEAD_US, PINNED_OVERHEAD),
        "alpha_us": (ALPHA_SCALES * ll_step, "small", 2 * cal.alpha_us, PINNED_ALPHA),
    }
    fitted, notes = [], []
    for param, (_, rng, probe, full) in grids.items():
        move = _sensitivity(points, cluster, name, cal, cal.model_copy(update={param: probe}), rng)
        if move >= PINNED * full:
            fitted.append(param)
            continue
        sizes = SIZES_TEXT[rng]
        has = any(RANGES[rng](m).any() for m in points)
        notes.append(
            f"{param} not fitted: "
            + (
                f"changing it moves the predicted times of sizes {sizes} by {100 * move:.1f}%"
                " (another tier or algorithm bounds them)"
                if has
                else f"no sizes {sizes}"
            )
        )
    if not fitted:
        raise CalibrationRefused(
            f"{source}: cannot pin tier {name!r}: "
            + "; ".join(notes)
            + "; allowed: a log whose large or small messages this tier bounds"
            " (e.g. NCCL_ALGO=Ring across >= 4 nodes, sizes from 8 B)"
        )

    def total(c: TierCalibration, rng: str) -> float:
        trial = _with(cluster, name, c)
        return sum(_loss(_times(m, trial), m.time_us, RANGES[rng](m)) for m in points)

    for _ in range(ROUNDS):
        for param in fitted:
            grid, rng = grids[param][0], grids[param][1]
            best = min(grid, key=lambda v: total(cal.model_copy(update={param: v}), rng))
            cal = cal.model_copy(update={param: float(best)})
    after = _with(cluster, name, cal)
    return TierFit(
        tier=name,
        calibration=cal,
        fitted=tuple(fitted),
        notes=tuple(notes),
        size_bytes=np.concatenate([m.size_bytes for m in points]),
        measured_us=np.concatenate([m.time_us for m in points]),
        before_us=np.concatenate([_times(m, uncal) for m in points]),
        after_us=np.concatenate([_times(m, after) for m in points]),
    )


def _reference(cls: str) -> float:
    return T.NET_REFERENCE_LATENCY_US if cls == "net" else T.INTRA_REFERENCE_LATENCY_US[cls]


def calibrate(
    points: Sequence[Measured], cluster: ClusterSpec, source: str = "log"
) -> tuple[ClusterSpec, list[TierFit]]:
    """Fit every tier the logs reach, fastest tier first; returns the calibrated cluster."""
    if all(m.nranks < 2 for m in points):
        raise CalibrationRefused(
            f"{source}: a log of one rank moves no data between GPUs; allowed: logs of 2 or "
            "more ranks"
        )
    by_tier: dict[str, list[Measured]] = {}
    for m in points:
        by_tier.setdefault(fitted_tier(m, cluster), []).append(m)
    fits = []
    for name in ("intra", "leaf", "spine", "core"):
        if name in by_tier:
            fit = fit_tier(by_tier[name], cluster, source)
            cluster = _with(cluster, name, fit.calibration)
            fits.append(fit)
    return cluster, fits
