"""Golden tests against ../shared/calibration/nccl: uncalibrated and calibrated error bounds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import assert_user_error, cli_json, run_cli
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
    assert "alpha" in human and "error" in human and "largest error after the fit" in human


def _two_node(calibration_dir: Path, *extra: str) -> dict:
    log = calibration_dir / "nccl" / "h100_2x8_ib_all_reduce.txt"
    return cli_json("calibrate", str(log), "--cluster", "dgx-h100", "--nodes", "2", *extra)


def test_two_node_fit_reports_every_size_and_what_it_could_not_pin(calibration_dir: Path) -> None:
    fit = _two_node(calibration_dir)["tiers"][0]
    assert fit["tier"] == "leaf"
    # NVLS inside the node bounds the 2-node NVLS-tree: the log says nothing about the NICs
    assert "beta_GBps" not in fit["fitted"] and "alpha_us" in fit["fitted"]
    assert any(note.startswith("beta_GBps not fitted") for note in fit["not_fitted"])
    rows = fit["rows"]
    assert len(rows) == 31  # 8 B .. 8 GiB
    worst = max(abs(r["error_after"]) for r in rows)
    assert fit["max_error_after"] == pytest.approx(worst)
    for r in rows:
        assert r["error_before"] == pytest.approx(r["before_us"] / r["measured_us"] - 1)
        assert r["error_after"] == pytest.approx(r["after_us"] / r["measured_us"] - 1)
    # nothing hidden: every size still more than 15% off is named
    off = [r["size_bytes"] for r in rows if abs(r["error_after"]) > 0.15]
    assert off and fit["sizes_off_by_more_than_15pct"] == off
    mid = next(r for r in rows if r["size_bytes"] == 2 << 20)  # was -28% (busbw +39%)
    assert abs(mid["error_after"]) < 0.5 * abs(mid["error_before"])
    big = next(r for r in rows if r["size_bytes"] == 8 << 30)
    assert abs(big["error_after"]) < 0.02


def test_calibrated_cluster_reproduces_the_fitted_log(
    calibration_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cal.yaml"
    fit = _two_node(calibration_dir, "--out", str(out))["tiers"][0]
    pred = cli_json("collective", "--cluster", str(out), "--nodes", "2", "-b", "8", "-e", "8G")
    by_size = {r["size_bytes"]: r["time_us"] for r in pred["rows"]}
    for r in fit["rows"]:
        again = by_size[r["size_bytes"]] / r["measured_us"] - 1
        assert again == pytest.approx(r["error_after"], abs=1e-9)


def test_a_log_that_cannot_pin_its_tier_is_refused(calibration_dir: Path, tmp_path: Path) -> None:
    # 8 nodes with NVLS + SHARP: large messages are bound by NVLS in the node, and the log
    # (512 MiB .. 8 GiB) has no small sizes: neither the NICs' bandwidth nor latency is pinned
    spec = tmp_path / "sharp.yaml"
    base = {**load_cluster("dgx-h100", nodes=8).model_dump(mode="json")}
    base["in_network_reduction"] = "nvls+sharp"
    spec.write_text(yaml.safe_dump(base))
    log = calibration_dir / "nccl" / "h100_8x8_ib_sharp_all_reduce.txt"
    proc = run_cli("calibrate", str(log), "--cluster", str(spec), check=False)
    assert_user_error(proc, "cannot pin tier 'leaf'", "no sizes <= 64 KiB", "allowed")
