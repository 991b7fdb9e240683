"""Golden: predicted vs published step time for every run of ../shared/calibration/."""

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
    """All 42 calibration runs on one set of constants (docs/validation-estimate.md). The 30 of
    training_runs.yaml and training_runs_modern.yaml: issue 21's must-show, mean |step-time
    error| <= 7% and none worse than 15% (docs/validation.md); the MoE runs no worse on
    average than twice the dense ones. The 12 at-scale runs: the MLPerf and BLOOM rows within
    13%; the three SC'21 ZeRO-3 rows are the known miss (predicted 31-58% fast: the 2021
    gathers ran at a quarter of NCCL's ring bandwidth, docs/validation.md), kept visible."""
    all_rows = _validator().run_all()
    assert len(all_rows) == 42
    scale = [r for r in all_rows if r.get("at_scale")]
    assert len(scale) == 12 and all(r["fits"] for r in scale)
    zero3 = [r for r in scale if "zero3" in r["id"]]
    assert len(zero3) == 3 and all(-0.7 < r["step_time_error"] < 0 for r in zero3)
    assert max(abs(r["step_time_error"]) for r in scale if r not in zero3) <= 0.13
    rows = [r for r in all_rows if not r.get("at_scale")]
    step = {r["id"]: abs(r["step_time_error"]) for r in rows}
    assert np.mean(list(step.values())) <= 0.07, step
    assert max(step.values()) <= 0.15, step
    older = [r for r in rows if "confidence" not in r]
    assert len(older) == 10 and all(r["fits"] for r in older)
    assert np.mean([step[r["id"]] for r in older]) <= 0.07
    dense = [r for r in rows if not _is_moe(r["id"])]
    moe = [r for r in rows if _is_moe(r["id"])]
    assert len(moe) == 8
    mean_dense = np.mean([step[r["id"]] for r in dense])
    assert np.mean([step[r["id"]] for r in moe]) <= 2 * mean_dense, step


def _is_moe(run_id: str) -> bool:
    return any(name in run_id for name in ("qwen3", "gpt-oss", "mixtral"))
