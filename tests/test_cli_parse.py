"""`tierwise parse` end to end: JSON shape, tables, truncation warning, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import assert_user_error, cli_json, run_cli

DATA = Path(__file__).parent / "data" / "nccl"


def test_json_for_several_logs() -> None:
    out = cli_json(
        "parse",
        str(DATA / "h100_2x8_all_reduce_mpi.txt"),
        str(DATA / "v100_1x8_all_gather_alltoall_old.txt"),
    )
    tests = out["tests"]
    assert [t["op"] for t in tests] == ["all_reduce", "all_gather", "alltoall"]
    first = tests[0]
    assert (first["nranks"], first["nodes"], first["gpus_per_node"]) == (16, 2, 8)
    assert first["avg_busbw_GBps"] == 125.98 and first["source"].endswith("mpi.txt")
    row = first["rows"][-1]
    assert set(row) >= {"size_bytes", "count", "type", "redop", "root", "time_us"}
    assert (row["size_bytes"], row["time_us"], row["busbw_GBps"], row["wrong"]) == (
        8589934592,
        44248.0,
        364.0,
        0,
    )
    assert row["in_place"] == {
        "time_us": 44050.0,
        "algbw_GBps": 195.0,
        "busbw_GBps": 365.63,
        "wrong": 0,
    }
    assert tests[1]["rows"][0]["redop"] is None and tests[1]["rows"][0]["root"] is None


def test_real_calibration_log_json(calibration_dir: Path) -> None:
    (test,) = cli_json("parse", str(calibration_dir / "nccl" / "dgx-h100_1x8_all_reduce.txt"))[
        "tests"
    ]
    assert len(test["rows"]) == 32 and test["avg_busbw_GBps"] == 159.151
    assert test["rows"][0]["time_us"] == 13.67 and test["rows"][0]["in_place"]["time_us"] == 13.03


def test_human_table_and_truncation_warning() -> None:
    proc = run_cli(
        "parse",
        str(DATA / "a100_1x8_broadcast_reduce_srun.txt"),
        str(DATA / "h100pcie_1x4_reduce_scatter_truncated.txt"),
    )
    assert "test 1: broadcast, 8 ranks on 1 node(s) x 8 GPUs" in proc.stdout
    assert "test 2: reduce" in proc.stdout and "reduce_scatter" in proc.stdout
    assert "18820" in proc.stdout and "N/A" in proc.stdout  # integer time, #wrong N/A
    assert "cut-off row at line 35 left out" in proc.stderr


def test_user_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    assert_user_error(run_cli("parse", str(tmp_path / "nope.txt"), check=False), "nope.txt")
    garbled = run_cli("parse", str(DATA / "garbled_row_all_reduce.txt"), "--json", check=False)
    assert_user_error(garbled, "garbled_row_all_reduce.txt:35:", "busbw")
    assert json.loads(garbled.stdout) == {"error": garbled.stderr.strip(), "exit_code": 2}
    junk = tmp_path / "junk.log"
    junk.write_text("this is not\nan nccl-tests log\n")
    assert_user_error(run_cli("parse", str(junk), check=False), "no nccl-tests results")
