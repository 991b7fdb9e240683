"""`tierwise doctor LOG` on a training log: the prediction beside the measurement, findings
ranked by the seconds the flag they name would save, the cluster the log states."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SHARED, assert_user_error, run_cli
from tests.trainlog_gen import LLAMA8B_ARGS, megatron_log, model_step
from tierwise.hardware.cluster import load_cluster
from tierwise.verify.runcheck.price import price
from tierwise.verify.trainlog.read import read_run

DATA = Path(__file__).parent / "data" / "trainlog"


def _overlaps_off_log(tmp_path: Path) -> Path:
    """A 32-GPU data-parallel run with --overlap-grad-reduce off, its step time the model's."""
    args = {
        **LLAMA8B_ARGS,
        "tensor_model_parallel_size": 1,
        "pipeline_model_parallel_size": 1,
        "data_parallel_size": 32,
        "global_batch_size": 32,
        "overlap_grad_reduce": False,
        "use_distributed_optimizer": False,
    }
    log = megatron_log(tmp_path / "run.log", args, 1.0)
    step = model_step(log, load_cluster("dgx-h100", nodes=4))
    return megatron_log(log, args, step)


def test_overlap_off_is_the_first_finding(tmp_path: Path) -> None:
    log = _overlaps_off_log(tmp_path)
    proc = run_cli("doctor", str(log), "-c", "dgx-h100", "--nodes", "4", "--json", check=False)
    assert proc.returncode == 1
    import json

    out = json.loads(proc.stdout)
    assert out["run"]["error_pct"] == pytest.approx(0, abs=0.5)
    first = out["findings"][0]
    assert first["id"] == "overlap-grad-reduce-off"
    assert first["flag"] == "--overlap-grad-reduce" and first["term"] == "dp_comm_s"
    assert first["explains_s"] > 0
    # turning the overlap on is what the model then predicts
    text = run_cli("doctor", str(log), "-c", "dgx-h100", "--nodes", "4", check=False).stdout
    assert "1. gradient reduce is not overlapped" in text


def test_fully_stated_log_prints_prediction_beside_measurement() -> None:
    proc = run_cli("doctor", str(DATA / "megatron_2024_llama8b.log"), "-c", "dgx-h100", check=False)
    assert proc.returncode in (0, 1), proc.stderr
    assert "measured vs predicted" in proc.stdout
    assert "step time (s)" in proc.stdout and "5.00" in proc.stdout
    out = cli_json_any("doctor", str(DATA / "megatron_2024_llama8b.log"), "-c", "dgx-h100")
    run = out["run"]
    assert run["measured_step_time_s"] == pytest.approx(5.002, abs=1e-3)
    assert run["predicted_step_time_s"] > 0
    assert run["error_pct"] == pytest.approx(
        (run["predicted_step_time_s"] / run["measured_step_time_s"] - 1) * 100
    )
    assert run["measured_peak_memory_gib"] == pytest.approx(44000 / 1024)
    assert out["cluster_source"]["chosen_by"] == "--cluster"


def cli_json_any(*args: str) -> dict:
    """`--json` output whatever the exit code (doctor exits 1 with findings)."""
    import json

    proc = run_cli(*args, "--json", check=False)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def test_without_cluster_the_log_chooses_and_says_so() -> None:
    log = SHARED / "training_logs" / "mlperf41-nvidia-gpt3-175b-h100-256"
    if not log.exists():
        pytest.skip("../shared/training_logs is not present")
    configs = sorted(str(p) for p in (log / "config").iterdir())
    out = cli_json_any("doctor", str(log / "log.txt"), *configs)
    src = out["cluster_source"]
    assert src["chosen_by"] == "log" and "h100-sxm" in src["reason"] and "32 node" in src["reason"]
    assert out["priced_as"]["layout"]["vpp"] == 6
    assert "defer_embedding_wgrad_compute=True" in out["priced_as"]["not_modelled"]
    assert abs(out["run"]["error_pct"]) < 30


def test_a_log_without_model_dims_is_one_line(tmp_path: Path) -> None:
    proc = run_cli("doctor", str(DATA / "deepspeed.log"), check=False)
    assert_user_error(proc, "deepspeed.log", "states no model")


def test_nccl_logs_still_go_to_the_nccl_doctor() -> None:
    nccl = Path(__file__).parent / "data" / "doctor" / "nccl-1412-no-gdrdma.log"
    out = cli_json_any("doctor", str(nccl))
    assert "facts" in out and "kind" not in out


def test_calibrate_hint_names_the_command() -> None:
    out = cli_json_any("doctor", str(DATA / "megatron_2024_llama8b.log"), "-c", "dgx-h100")
    assert any("tierwise calibrate" in f["fix"] for f in out["findings"])


@pytest.mark.parametrize(
    ("printed", "priced", "said"),
    [("['allgather']", "allgather", False), ("a2a", "a2a", False), ("['a2a+p2p']", "p2p", True)],
)
def test_a_logged_cp_comm_type_is_priced(
    tmp_path: Path, printed: str, priced: str, said: bool
) -> None:
    args = LLAMA8B_ARGS | {"context_parallel_size": 2, "data_parallel_size": 4}
    args |= {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 1}
    args |= {"global_batch_size": 16}
    log = megatron_log(tmp_path / "cp.log", args | {"cp_comm_type": printed}, 2.0)
    run = price(read_run(log), load_cluster("dgx-h100", nodes=2))
    assert run.layout.cp == 2 and run.flags.cp_comm == priced
    assert any("cp_comm_type" in a and "priced as p2p" in a for a in run.assumed) == said
    assert not any(n.startswith("cp_comm_type") for n in run.not_modelled)


def test_a_log_prices_its_fp8_recipe_recompute_modules_p2p_overlap_and_capacity(
    tmp_path: Path,
) -> None:
    args = LLAMA8B_ARGS | {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2}
    args |= {
        "data_parallel_size": 2,
        "global_batch_size": 16,
        "num_layers_per_virtual_pipeline_stage": 8,
    }
    args |= {"fp8": "hybrid", "fp8_recipe": "tensorwise", "overlap_p2p_comm": False}
    args |= {"recompute_granularity": "selective", "recompute_modules": "['mlp', 'layernorm']"}
    run = price(read_run(megatron_log(tmp_path / "a.log", args, 2.0)), load_cluster("dgx-h100"))
    assert (run.layout.dtype, run.layout.fp8_recipe) == ("fp8", "tensorwise")
    assert run.layout.recompute_modules == ("layernorm", "mlp")
    assert run.layout.vpp == 2 and run.flags.overlap_p2p_communication is False
    assert not any(n.split("=")[0] in ("fp8_recipe", "recompute_modules", "overlap_p2p_comm")
                   for n in run.not_modelled)  # fmt: skip
    mx = args | {"fp8_recipe": "mxfp8", "recompute_modules": "['mlp', 'shared_stuff']"}
    mx |= {"num_experts": 8, "moe_router_topk": 2, "moe_expert_capacity_factor": 1.25}
    run = price(read_run(megatron_log(tmp_path / "b.log", mx, 2.0)), load_cluster("dgx-b200"))
    assert run.layout.dtype == "mxfp8" and run.layout.recompute_modules == ("mlp",)
    assert run.model.moe is not None and run.model.moe.capacity_factor == 1.25
    assert any("shared_stuff not priced" in a for a in run.assumed)


def test_a_log_prices_its_partial_recompute(tmp_path: Path) -> None:
    args = LLAMA8B_ARGS | {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2}
    args |= {"data_parallel_size": 2, "global_batch_size": 16, "recompute_granularity": "full"}
    args |= {"recompute_method": "block", "recompute_num_layers": 4}
    run = price(read_run(megatron_log(tmp_path / "a.log", args, 2.0)), load_cluster("dgx-h100"))
    assert (run.layout.recompute, run.layout.recompute_method) == ("full", "block")
    assert run.layout.recompute_num_layers == 4
    assert not any(n.startswith("recompute_") for n in run.not_modelled)


@pytest.mark.skipif(not SHARED.exists(), reason="needs ../shared")
def test_a_2021_megatron_log_runs_its_pipeline_scatter_gather_without_sp() -> None:
    log = SHARED / "training_logs" / "megatron-log2021-gpt13b-tp2pp4-8gpu" / "log.txt"
    run = price(read_run(log), load_cluster("dgx-a100", nodes=1))
    assert run.flags.scatter_gather_tensors_in_pipeline  # printed True, before 2023-03
    assert run.layout.tp == 2 and run.layout.pp == 4 and not run.layout.sp_enabled
    # no async_tensor_model_parallel_allreduce printed: before 2021-09, every TP collective
    # waited on
    assert not run.flags.async_tp_backward
    assert any(a.startswith("async_tensor_model_parallel_allreduce False") for a in run.assumed)


def test_a_log_that_turned_the_async_tp_backward_off_is_priced_so(tmp_path: Path) -> None:
    args = LLAMA8B_ARGS | {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 1}
    args |= {"data_parallel_size": 4, "global_batch_size": 16}
    cluster = load_cluster("dgx-h100")
    on = price(read_run(megatron_log(tmp_path / "a.log", args, 2.0)), cluster)
    off_args = args | {"async_tensor_model_parallel_allreduce": False}
    off = price(read_run(megatron_log(tmp_path / "b.log", off_args, 2.0)), cluster)
    assert on.flags.async_tp_backward and not off.flags.async_tp_backward


@pytest.mark.parametrize("sp", [True, False])
def test_the_tp_overlap_is_advised_only_where_megatron_runs_it(tmp_path: Path, sp: bool) -> None:
    """--tp-comm-overlap needs sequence parallelism (Megatron-LM's validate_args): a log
    without SP is not told to add it (`frameworks.flag_checks`)."""
    args = {
        **LLAMA8B_ARGS,
        "tensor_model_parallel_size": 8,
        "pipeline_model_parallel_size": 1,
        "data_parallel_size": 4,
        "global_batch_size": 32,
        "sequence_parallel": sp,
        "tp_comm_overlap": False,
    }
    log = megatron_log(tmp_path / "run.log", args, 1.0)
    log = megatron_log(log, args, model_step(log, load_cluster("dgx-h100", nodes=4)))
    proc = run_cli("doctor", str(log), "-c", "dgx-h100", "--nodes", "4", "--json", check=False)
    import json

    ids = {f["id"] for f in json.loads(proc.stdout)["findings"]}
    assert ("tp-comm-overlap-off" in ids) is sp


def test_a_cluster_option_that_changes_nothing_is_said_for_a_training_log() -> None:
    log = str(DATA / "megatron_2024_llama8b.log")
    out = cli_json_any("doctor", log, "-c", "dgx-h100", "--nodes", "1", "--routing", "ecmp")
    assert out["notes"][0].startswith("--routing ecmp changes nothing: no traffic of dgx-h100")
