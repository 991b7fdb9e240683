"""Training-log readers on small logs of each format (tests/data/trainlog): the values each
states, the warm-up rule, noise, and one-line errors for what is not a training log."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.errors import TierwiseError
from tierwise.verify.trainlog.read import read_run
from tierwise.verify.trainlog.shell import ShellVars
from tierwise.verify.trainlog.steps import Window, from_values, from_windows
from tierwise.verify.trainlog.text import clean, number

DATA = Path(__file__).parent / "data" / "trainlog"


def test_megatron_2024_log_states_the_whole_run() -> None:
    r = read_run(DATA / "megatron_2024_llama8b.log").as_dict()
    assert r["framework"] == "megatron-lm"
    assert r["layout"] == {
        "tp": 2, "pp": 2, "vpp": 1, "cp": 1, "ep": 1, "etp": 2, "dp": 4, "mbs": 1,
        "gbs": 256, "seq": 8192, "dtype": "bf16", "recompute": "none",
    }  # fmt: skip
    assert r["gpus"] == 16
    assert r["model"]["layers"] == 32 and r["model"]["kv_heads"] == 8
    # iteration 1 (9.8 s) is warm-up; the median of iterations 3..8 (log interval 1)
    assert r["measured"]["step_time_s"] == pytest.approx(5.0020, abs=1e-4)
    assert "left out" in r["measured"]["step_time_method"]
    # max reserved over the two rank reports that ran together on one line
    assert r["measured"]["peak_memory_gib"] == pytest.approx(44000 / 1024)
    assert r["measured"]["timers_ms"]["forward-backward"] == pytest.approx(4901.33)
    assert r["settings"]["overlap_grad_reduce"] is True
    assert r["settings"]["tp_comm_overlap"] is False
    assert "gpu" in r["unknown"] and "layout.tp" not in r["unknown"]


def test_megatron_v1_header_and_per_gpu_batch() -> None:
    r = read_run(DATA / "megatron_2020.log").as_dict()
    assert (r["layout"]["tp"], r["layout"]["pp"], r["layout"]["dp"]) == (2, 1, 8)
    assert r["layout"]["mbs"] == 8 and r["layout"]["gbs"] == 64  # batch_size x dp
    assert r["layout"]["dtype"] == "fp16" and r["layout"]["recompute"] == "full"
    assert r["measured"]["step_time_s"] == pytest.approx(1.9939)  # iteration 5 is warm-up
    assert r["sources"]["layout.gbs"].startswith("derived")


def test_megatron_deepspeed_iter_time() -> None:
    r = read_run(DATA / "deepspeed.log").as_dict()
    assert r["framework"] == "megatron-deepspeed"
    assert r["measured"]["step_time_s"] == pytest.approx(1.2)  # steps 4, 5 past 3 warm-up


def test_nemo_run_name_and_progress_lines() -> None:
    r = read_run(DATA / "nemo2_lightning.log").as_dict()
    assert r["framework"] == "nemo"
    assert (r["layout"]["cp"], r["layout"]["mbs"], r["layout"]["gbs"]) == (2, 1, 128)
    assert r["nodes"] == 2 and r["gpu"] == "NVIDIA H100"
    assert r["measured"]["step_time_s"] == pytest.approx(8.12)
    assert r["measured"]["peak_memory_gib"] == pytest.approx(70e9 / 2**30)
    assert r["layout"]["recompute"] is None  # not a Megatron pretrain_*.py command line
    assert "gpus" in r["unknown"]


def test_torchtitan_steps_with_toml() -> None:
    r = read_run(DATA / "torchtitan_2025.log", [DATA / "llama3_8b_titan.toml"]).as_dict()
    assert r["framework"] == "torchtitan"
    assert r["model"]["preset"] == "llama3-8b" and r["model"]["layers"] == 32
    assert (r["layout"]["mbs"], r["layout"]["seq"], r["layout"]["recompute"]) == (
        2,
        8192,
        "selective",
    )
    # rank copies of step 2 count once; timestamps 2.9 s apart past warm-up
    assert r["measured"]["step_time_s"] == pytest.approx(2.9, abs=1e-3)
    assert r["measured"]["tokens_per_s_per_gpu"] == pytest.approx(5650)
    assert r["gpu_memory_gib"] == pytest.approx(79.1, abs=0.1)  # 48.61 GiB is 61.45%
    assert "layout.dp" in r["unknown"]  # data_parallel_shard_degree -1 needs the GPU count


def test_mlperf_log_with_sourced_configs() -> None:
    configs = [DATA / "config_DGXH100_2x8x16xtp2pp1cp1.sh", DATA / "config_common_8b.sh"]
    r = read_run(DATA / "mlperf_result.log", configs).as_dict()
    assert r["layout"]["tp"] == 2  # the TP=8 inside `if` is not evaluated
    assert (r["gpus"], r["layout"]["dp"], r["layout"]["mbs"]) == (16, 4, 1)
    assert r["layout"]["dtype"] == "fp8" and r["model"]["preset"] == "llama3-8b"
    assert r["measured"]["step_time_s"] == pytest.approx(2.01)  # first 3 values are warm-up
    assert r["settings"] == {"tp_comm_overlap": True, "overlap_grad_reduce": True}
    assert any("conditional" in n for n in r["notes"])


def test_noise_is_skipped() -> None:
    text = "\x1b[32m[default3]:0:  iteration 5/10 | elapsed time per iteration (ms): 1.0/2.0\x1b[0m"
    assert clean(text) == " iteration 5/10 | elapsed time per iteration (ms): 1.0/2.0"
    assert number("13100.0/13240.9") == 13100.0
    assert number("2,793") == 2793.0


def test_warm_up_rule() -> None:
    windows = [Window(1, 5, 16.5), Window(6, 10, 2.0), Window(11, 15, 2.2)]
    assert from_windows(windows, "x").seconds == pytest.approx(2.1)
    only = from_windows([Window(1, 10, 4.6)], "x")
    assert only.seconds == 4.6 and "includes warm-up" in only.method
    assert from_values([9.0, 9.0, 9.0, 1.0, 3.0], "x").seconds == 2.0


def test_shell_evaluator_defaults_and_expansion() -> None:
    sh = ShellVars(
        {
            "a.sh": 'X="${X:=4}"\n: "${Y:=7}"\nexport Z="--tp ${X} \\\n --pp $Y"\nsource ./b.sh\n',
            "b.sh": "export W=$((1+1))\nexport V=${Q:-9}\n",
        }
    )
    sh.run("a.sh")
    assert sh.env == {"X": "4", "Y": "7", "Z": "--tp 4   --pp 7", "V": "9"}


@pytest.mark.parametrize(
    "content", ["", "hello world\n", "iteration x | loss: 1\n", ":::MLLOG {not json}\n"]
)
def test_not_a_training_log_is_one_line(tmp_path: Path, content: str) -> None:
    log = tmp_path / "run.log"
    log.write_text(content)
    if ":::MLLOG" in content:  # an MLLOG file with no event: read, every field unknown
        assert read_run(log).as_dict()["measured"]["step_time_s"] is None
        return
    with pytest.raises(TierwiseError, match="not a training log"):
        read_run(log)
    assert_user_error(run_cli("ingest", "training-log", str(log), check=False), "run.log")


def test_cli_json_and_table() -> None:
    r = cli_json("ingest", "training-log", str(DATA / "megatron_2024_llama8b.log"))
    assert r["measured"]["step_time_s"] == pytest.approx(5.002, abs=1e-3)
    assert set(r) >= {"framework", "model", "layout", "gpus", "gpu", "measured", "unknown"}
    out = run_cli("ingest", "training-log", str(DATA / "megatron_2024_llama8b.log")).stdout
    assert "run as stated" in out and "not stated" in out
    missing = run_cli("ingest", "training-log", "/nonexistent.log", check=False)
    assert_user_error(missing, "/nonexistent.log")


@pytest.mark.parametrize(
    "content",
    [
        " iteration 3/9 | elapsed time per iteration (ms): . | global batch size: 1e999 |",
        "after 1 iterations memory (MB) | allocated: . | max allocated: . | reserved: . | "
        "max reserved: .",
        "iteration " + "9" * 5000 + "/1 | elapsed time per iteration (ms): 1.0 |",
        "[titan] 2025-13-40 10:00:00,000 - root - INFO - step: 2 loss: 1 tps: 5 memory: 1GiB(0%)",
        ':::MLLOG {"key": "tracked_stats", "value": {"train_step_time": Infinity}}',
        "using world size: " + "a" * 20000 + " size: 3",
        "-------------------- arguments --------------------\n" * 2000,
    ],
)
def test_fuzz_regressions_read_or_fail_in_one_line(tmp_path: Path, content: str) -> None:
    """Inputs the fuzzer once turned into tracebacks or multi-second reads."""
    log = tmp_path / "run.log"
    log.write_text(content + "\n")
    try:
        record = read_run(log)
    except TierwiseError as exc:
        assert "\n" not in str(exc)
        return
    step = record.measured["step_time_s"]
    assert step is None or step > 0


def test_shell_sources_with_a_long_line_read_fast(tmp_path: Path) -> None:
    sh = ShellVars({"a.sh": "source $(dirname ${X[0" + "9" * 30000 + "]})/b.sh\nexport TP=2\n"})
    sh.run("a.sh")
    assert sh.env == {"TP": "2"}
