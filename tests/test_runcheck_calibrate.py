"""`tierwise calibrate LOG... -c CLUSTER --out mine.yaml` on training logs: constants the model
generated logs with are recovered, real runs of one cluster predict each other better, and
the written cluster spec carries them into estimate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import SHARED, assert_user_error, run_cli
from tests.trainlog_gen import LLAMA8B_ARGS, megatron_log, model_step
from tierwise.hardware.cluster import StepCalibration, load_cluster
from tierwise.verify.runcheck.fit import calibrated, fit
from tierwise.verify.runcheck.price import price
from tierwise.verify.trainlog.read import read_run

TRUE = StepCalibration(compute_scale=0.8, overlap_interference=0.5)
# Layouts on 4 DGX H100 nodes: data parallel with the overlaps on (hidden DP traffic pins
# the interference), TP with its overlap on, a pipeline; four, so each leave-one-out fit
# has the three runs two constants need.
LAYOUTS = (
    {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "data_parallel_size": 32,
     "global_batch_size": 64, "overlap_grad_reduce": True, "use_distributed_optimizer": True,
     "overlap_param_gather": True},
    {"tensor_model_parallel_size": 4, "pipeline_model_parallel_size": 1, "data_parallel_size": 8,
     "global_batch_size": 64, "sequence_parallel": True, "tp_comm_overlap": True,
     "overlap_grad_reduce": True},
    {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 4, "data_parallel_size": 4,
     "global_batch_size": 128, "sequence_parallel": True, "overlap_grad_reduce": False},
    {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 1, "data_parallel_size": 16,
     "global_batch_size": 32, "sequence_parallel": True, "overlap_grad_reduce": True,
     "use_distributed_optimizer": True, "overlap_param_gather": True},
)  # fmt: skip


def _generated_logs(tmp_path: Path) -> list[Path]:
    """Logs whose step times are the model's on a cluster calibrated with TRUE."""
    cluster = calibrated(load_cluster("dgx-h100", nodes=4), TRUE)
    logs = []
    for i, layout in enumerate(LAYOUTS):
        args = {**LLAMA8B_ARGS, **layout}
        log = megatron_log(tmp_path / f"run{i}.log", args, 1.0)
        logs.append(megatron_log(log, args, model_step(log, cluster)))
    return logs


def test_recovers_the_constants_the_logs_were_generated_with(tmp_path: Path) -> None:
    cluster = load_cluster("dgx-h100", nodes=4)
    runs = [price(read_run(log), cluster) for log in _generated_logs(tmp_path)]
    result = fit(runs)
    assert result.fitted == ("compute_scale", "overlap_interference")
    assert result.calibration.compute_scale == pytest.approx(0.8, rel=0.02)
    assert result.calibration.overlap_interference == pytest.approx(0.5, abs=0.05)
    for run in result.runs:
        assert abs(run.as_dict()["error_after_pct"]) < 0.5
        assert abs(run.as_dict()["error_leave_one_out_pct"]) < 2
        assert abs(run.as_dict()["error_before_pct"]) > 5  # the catalog cluster is off


def test_cli_writes_the_calibration_that_estimate_then_uses(tmp_path: Path) -> None:
    logs = [str(p) for p in _generated_logs(tmp_path)]
    out = tmp_path / "mine.yaml"
    proc = run_cli(
        "calibrate", *logs, "-c", "dgx-h100", "--nodes", "4", "--out", str(out), "--json"
    )
    result = json.loads(proc.stdout)
    assert result["calibration"]["compute_scale"] == pytest.approx(0.8, rel=0.02)
    assert len(result["runs"]) == 4 and result["out"] == str(out)
    spec = yaml.safe_load(out.read_text())
    assert spec["calibration"]["step"]["compute_scale"] == pytest.approx(0.8, rel=0.02)
    layout = ["--model", "llama3-8b", "--tp", "1", "--dp", "32", "--gbs", "64", "--seq", "8192"]
    base = json.loads(
        run_cli("estimate", "-c", "dgx-h100", "--nodes", "4", *layout, "--json").stdout
    )
    mine = json.loads(run_cli("estimate", "-c", str(out), *layout, "--json").stdout)
    assert mine["step_time_s"] > base["step_time_s"] * 1.15  # 0.8x the compute rate
    text = run_cli("calibrate", *logs, "-c", "dgx-h100", "--nodes", "4").stdout
    assert "leave-one-out" in text and "compute_scale" in text


def test_real_runs_of_one_cluster_predict_each_other_better() -> None:
    """Eos (NVIDIA's DGX H100 cluster): MLPerf v4.1 GPT-3 175B on 256 GPUs and MLPerf v5.0
    Llama 3.1 405B on 512 GPUs; each predicted with the constants fitted on the other."""
    folders = [
        SHARED / "training_logs" / "mlperf41-nvidia-gpt3-175b-h100-256",
        SHARED / "training_logs" / "mlperf50-nvidia-llama31-405b-h100-512",
    ]
    if not all(f.exists() for f in folders):
        pytest.skip("../shared/training_logs is not present")
    cluster = load_cluster("dgx-h100")
    runs = [
        price(read_run(f / "log.txt", sorted((f / "config").iterdir())), cluster) for f in folders
    ]
    result = fit(runs)
    before = result.mean_abs_error_pct("before")
    held = result.mean_abs_error_pct("leave_one_out")
    assert held is not None and before is not None and held < before


def test_logs_that_cannot_be_priced_are_one_line(tmp_path: Path) -> None:
    data = Path(__file__).parent / "data" / "trainlog" / "deepspeed.log"
    proc = run_cli("calibrate", str(data), "-c", "dgx-h100", check=False)
    assert_user_error(proc, "deepspeed.log", "states no model")


def test_step_calibration_validates() -> None:
    with pytest.raises(ValueError):
        StepCalibration(compute_scale=0)
    with pytest.raises(ValueError):
        StepCalibration(overlap_interference=1.5)
