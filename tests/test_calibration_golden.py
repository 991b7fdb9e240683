"""Golden tests against ../shared/calibration/nccl: uncalibrated and calibrated error bounds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import cli_json, run_cli
from tierwise.formats.nccl_reader import parse_file
from tierwise.hardware.cluster import load_cluster
from tierwise.verify.calibrate import calibrate
from tierwise.verify.measured import measured


def _fit(calibration_dir: Path):
    log = calibration_dir / "nccl" / "dgx-h100_1x8_all_reduce.txt"
    cluster = load_cluster("dgx-h100", nodes=1)
    m = measured(parse_file(log)[0], cluster, str(log))
    calibrated, fits = calibrate([m], cluster)
    return m, calibrated, fits[0]


def test_uncalibrated_and_calibrated_errors(calibration_dir: Path) -> None:
    m, _, fit = _fit(calibration_dir)
    large = m.size_bytes >= 256 << 20
    small = m.size_bytes <= 64 << 10
    assert large.sum() == 7 and small.sum() == 14
    before = fit.before_us / m.time_us
    after = fit.after_us / m.time_us
    assert np.all(np.abs(1 / before[large] - 1) <= 0.15)  # busbw error = inverse time ratio
    assert np.all(np.abs(1 / after[large] - 1) <= 0.08)
    assert np.all((before[small] <= 1.5) & (before[small] >= 1 / 1.5))
    assert fit.tier == "intra"
    assert 300 < fit.calibration.beta_GBps < 450


def test_calibrate_cli_writes_a_spec_the_model_uses(calibration_dir: Path, tmp_path: Path) -> None:
    log = calibration_dir / "nccl" / "dgx-h100_1x8_all_reduce.txt"
    out = tmp_path / "cal.yaml"
    result = cli_json(
        "calibrate", str(log), "--cluster", "dgx-h100", "--nodes", "1", "--out", str(out)
    )
    assert result["tiers"][0]["tier"] == "intra"
    spec = yaml.safe_load(out.read_text())
    assert set(spec["calibration"]) == {"intra"}
    rows = cli_json("collective", "--cluster", str(out), "-b", "16G", "-e", "16G")["rows"]
    measured_busbw = 479.9
    assert rows[0]["busbw_GBps"] == pytest.approx(measured_busbw, rel=0.03)
    human = run_cli("calibrate", str(log), "--cluster", "dgx-h100", "--nodes", "1").stdout
    assert "alpha" in human and "residual" in human
