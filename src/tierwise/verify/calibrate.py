"""Fit per-tier alpha (us), beta (GB/s) and overhead (us) from nccl-tests logs.

For each log, the tier its group tops out on (intra for one node, leaf/spine across nodes) is
fitted by least squares on relative time residuals: beta and the bandwidth-protocol overhead on
sizes >= LARGE_MIN_BYTES, alpha (one LL step) on sizes <= SMALL_MAX_BYTES, alternating a few
times. Single-node logs are fitted first so multi-node fits see a calibrated intra tier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tierwise.collectives import tables as T
from tierwise.collectives.predict import predict
from tierwise.collectives.shape import intra_class
from tierwise.hardware.cluster import ClusterSpec, TierCalibration
from tierwise.hardware.tiers import tier
from tierwise.verify.measured import Measured, measured_shape

SMALL_MAX_BYTES = 64 << 10
LARGE_MIN_BYTES = 1 << 20
# Search ranges: beta as a multiple of the catalog's effective bandwidth, alpha as a multiple
# of NCCL's LL step latency for the link class, overhead in us.
BETA_SCALES = np.linspace(0.3, 1.5, 121)
ALPHA_SCALES = np.linspace(0.0, 8.0, 161)
OVERHEADS_US = np.concatenate([np.linspace(0, 50, 26), np.linspace(55, 500, 90)])
ROUNDS = 3


@dataclass(frozen=True)
class TierFit:
    """The fit of one tier and its residuals (relative, predicted/measured - 1) per size."""

    tier: str
    calibration: TierCalibration
    size_bytes: np.ndarray
    measured_us: np.ndarray
    before_us: np.ndarray
    after_us: np.ndarray

    @property
    def residual(self) -> np.ndarray:
        """predicted / measured - 1 after the fit."""
        return self.after_us / self.measured_us - 1


def fitted_tier(m: Measured, cluster: ClusterSpec) -> str:
    """The tier a log's group tops out on."""
    return measured_shape(m, cluster).top_tier


def _with(cluster: ClusterSpec, name: str, cal: TierCalibration) -> ClusterSpec:
    return cluster.model_copy(update={"calibration": {**cluster.calibration, name: cal}})


def _times(m: Measured, cluster: ClusterSpec) -> np.ndarray:
    return predict(m.op, measured_shape(m, cluster), m.size_bytes).time_us


def _loss(pred: np.ndarray, meas: np.ndarray, mask: np.ndarray) -> float:
    return float(np.sum((pred[mask] / meas[mask] - 1) ** 2)) if mask.any() else 0.0


def fit_tier(points: Sequence[Measured], cluster: ClusterSpec) -> TierFit:
    """Least-squares fit of the tier all `points` top out on (they must share it)."""
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

    def total(c: TierCalibration, small: bool) -> float:
        trial = _with(cluster, name, c)
        return sum(
            _loss(
                _times(m, trial),
                m.time_us,
                m.size_bytes <= SMALL_MAX_BYTES if small else m.size_bytes >= LARGE_MIN_BYTES,
            )
            for m in points
        )

    for _ in range(ROUNDS):
        beta = min(
            BETA_SCALES * ref_eff,
            key=lambda b: total(cal.model_copy(update={"beta_GBps": b}), small=False),
        )
        cal = cal.model_copy(update={"beta_GBps": float(beta)})
        over = min(
            OVERHEADS_US,
            key=lambda o: total(cal.model_copy(update={"overhead_us": o}), small=False),
        )
        cal = cal.model_copy(update={"overhead_us": float(over)})
        alpha = min(
            ALPHA_SCALES * ll_step,
            key=lambda a: total(cal.model_copy(update={"alpha_us": a}), small=True),
        )
        cal = cal.model_copy(update={"alpha_us": float(alpha)})
    after = _with(cluster, name, cal)
    sizes = np.concatenate([m.size_bytes for m in points])
    return TierFit(
        tier=name,
        calibration=cal,
        size_bytes=sizes,
        measured_us=np.concatenate([m.time_us for m in points]),
        before_us=np.concatenate([_times(m, uncal) for m in points]),
        after_us=np.concatenate([_times(m, after) for m in points]),
    )


def _reference(cls: str) -> float:
    return T.NET_REFERENCE_LATENCY_US if cls == "net" else T.INTRA_REFERENCE_LATENCY_US[cls]


def calibrate(
    points: Sequence[Measured], cluster: ClusterSpec
) -> tuple[ClusterSpec, list[TierFit]]:
    """Fit every tier the logs reach, fastest tier first; returns the calibrated cluster."""
    by_tier: dict[str, list[Measured]] = {}
    for m in points:
        by_tier.setdefault(fitted_tier(m, cluster), []).append(m)
    fits = []
    for name in ("intra", "leaf", "spine"):
        if name in by_tier:
            fit = fit_tier(by_tier[name], cluster)
            cluster = _with(cluster, name, fit.calibration)
            fits.append(fit)
    return cluster, fits
