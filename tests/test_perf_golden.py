"""Golden: predicted vs published throughput for ../shared/calibration/training_runs.yaml."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from tests.conftest import REPO


def _validator():
    path = REPO / "benchmarks" / "validate_estimate.py"
    spec = importlib.util.spec_from_file_location("validate_estimate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_training_runs_within_error_budget(calibration_dir: Path) -> None:
    rows = _validator().run_all()
    assert len(rows) == 10
    errors = np.array([abs(r["throughput_error"]) for r in rows])
    assert errors.mean() <= 0.10, {r["id"]: r["throughput_error"] for r in rows}
    # Worst run (dgxc-llama3.1-8b) is the memory model forcing full recompute: see
    # docs/validation.md. Every other run is within 20%.
    assert sorted(errors)[-2] <= 0.20
    assert errors.max() <= 0.40
    assert all(r["fits"] for r in rows)
