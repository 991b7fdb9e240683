"""`tierwise bench` end to end: nccl-tests table round trip, #wrong, faults, errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import assert_user_error
from tierwise.formats import bandwidth_cell, parse_log, time_cell

pytestmark = pytest.mark.runtime
CLI = [sys.executable, "-c", "from tierwise.cli.main import main; main()", "bench"]


def bench(*args: str, env: dict[str, str] | None = None, timeout: float = 180):
    """Run `tierwise bench ARGS` with extra env and a unique tag to find its processes."""
    tag = uuid.uuid4().hex
    full_env = {**os.environ, "TIERWISE_TEST_TAG": tag, "GLOO_SOCKET_IFNAME": "lo", **(env or {})}
    start = time.monotonic()
    proc = subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=full_env, timeout=timeout
    )
    return proc, time.monotonic() - start, tag


def tagged_processes(tag: str) -> list[int]:
    """Pids of live processes whose environment carries ``TIERWISE_TEST_TAG=tag``."""
    needle = f"TIERWISE_TEST_TAG={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    return lines[0]


def test_table_reads_back_with_identical_numbers(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    log = tmp_path / "ar.log"
    proc, _, tag = bench(
        "--nproc", "4", "--op", "all_reduce", "-b", "8", "-e", "256K", "-f", "8",
        "-w", "1", "-n", "3", "--json", "--out", str(log),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["op"], data["nranks"], data["nodes"], data["gpus_per_node"]) == (
        "all_reduce", 4, 1, 4,
    )  # fmt: skip
    assert data["backend"] == "gloo" and data["algo"] == "flat"
    [test] = parse_log(log.read_text())
    assert test.op == "all_reduce" and test.nranks == 4
    assert [r.size_bytes for r in test.rows] == [8 * 8**k for k in range(6)]
    assert len(test.rows) == len(data["rows"])
    for parsed, row in zip(test.rows, data["rows"], strict=True):
        assert parsed.size_bytes == row["size_bytes"] and parsed.count == row["size_bytes"] // 4
        assert (parsed.type, parsed.redop, parsed.root) == ("float", "sum", -1)
        for half, src in ((parsed.out_of_place, row), (parsed.in_place, row["in_place"])):
            assert half.time_us == float(time_cell(src["time_us"]))
            assert half.algbw_GBps == float(bandwidth_cell(src["algbw_GBps"]))
            assert half.busbw_GBps == float(bandwidth_cell(src["busbw_GBps"]))
            assert half.wrong == src["wrong"] == 0
            assert src["busbw_GBps"] == pytest.approx(src["algbw_GBps"] * 2 * 3 / 4)
            assert src["p50_us"] <= src["p99_us"] <= src["max_us"]
        assert float(parsed.extra["p99_us"]) == float(time_cell(row["p99_us"]))
        assert parsed.extra["algo"] == "flat"
    assert test.out_of_bounds == 0
    assert tagged_processes(tag) == []


def test_corrupt_rank_makes_wrong_nonzero(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    log = tmp_path / "bad.log"
    proc, _, _ = bench(
        "--nproc", "4", "--ranks-per-node", "2", "--algo", "hierarchical",
        "-b", "1K", "-e", "1K", "-w", "0", "-n", "1", "--out", str(log),
        env={"TIERWISE_BENCH_CORRUPT_RANK": "1"},
    )  # fmt: skip
    assert proc.returncode == 1
    assert "512 wrong" in one_error_line(proc.stderr)
    [test] = parse_log(log.read_text())
    assert [(r.out_of_place.wrong, r.in_place.wrong) for r in test.rows] == [(256, 256)]
    assert test.out_of_bounds == 512


def test_sustained_mode_records_a_series() -> None:
    pytest.importorskip("torch")
    proc, _, _ = bench(
        "--nproc", "2", "--op", "all_reduce", "-e", "4K", "--duration", "1.5s",
        "--window", "0.5s", "-w", "1", "-n", "2", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [r["size_bytes"] for r in result["rows"]] == [8 * 2**i for i in range(10)]  # all kept
    series = result["series"]
    assert series["size_bytes"] == 4096
    assert series["duration_s"] >= 1.5
    assert len(series["t_s"]) == len(series["latency_us"]) >= 2
    assert series["t_s"] == sorted(series["t_s"])
    assert len(series["windows"]) >= 3 and series["window_s"] == 0.5
    assert series["p50_us"] <= series["p99_us"] <= series["max_us"]
    drift = series["p99_last_us"] / series["p99_first_us"] - 1
    assert series["p99_drift"] == pytest.approx(drift)


@pytest.mark.parametrize("fault", ["kill", "hang"])
def test_dead_or_hung_rank_ends_the_run(fault: str) -> None:
    pytest.importorskip("torch")
    timeout = 4
    proc, elapsed, tag = bench(
        "--nproc", "4", "-b", "1K", "-e", "64K", "-w", "1", "-n", "2",
        "--timeout", f"{timeout}s",
        env={"TIERWISE_BENCH_FAULT": f"{fault}:1"},
    )  # fmt: skip
    assert proc.returncode == 1
    line = one_error_line(proc.stderr)
    if fault == "kill":
        assert "rank 1 was killed by SIGKILL" in line
    else:
        assert f"within the {timeout} s timeout" in line
    assert "stopped the other 3 rank(s)" in line
    assert elapsed < 30 + timeout
    assert tagged_processes(tag) == []


def test_mismatched_sizes_across_ranks(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from tierwise.runtime.launch import free_port

    port = str(free_port())
    procs = []
    for rank, max_bytes in ((0, "1K"), (1, "2K")):
        env = {
            **os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port, "GLOO_SOCKET_IFNAME": "lo",
        }  # fmt: skip
        procs.append(
            subprocess.Popen(
                [*CLI, "-b", "1K", "-e", max_bytes, "--timeout", "20s"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2
        assert "ranks disagree on max_bytes" in one_error_line(err)


def test_wrong_world_size_and_unreachable_master() -> None:
    pytest.importorskip("torch")
    from tierwise.runtime.launch import free_port

    base = {
        **os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": "2", "GLOO_SOCKET_IFNAME": "lo",
    }  # fmt: skip
    ports = {"0": base["MASTER_PORT"], "1": str(free_port())}  # rank 1 looks elsewhere
    start = time.monotonic()
    procs = {
        rank: subprocess.Popen(
            [*CLI, "--timeout", "2s"],
            env={**base, "RANK": rank, "MASTER_PORT": port},
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        for rank, port in ports.items()
    }
    errors = {rank: p.communicate(timeout=60)[1] for rank, p in procs.items()}
    assert time.monotonic() - start < 25
    assert all(p.returncode == 1 for p in procs.values())
    assert "not all of the 2 ranks joined" in one_error_line(errors["0"])
    assert "cannot reach master 127.0.0.1:" in one_error_line(errors["1"])


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--op", "gather"], ["op", "gather"]),
        (["-b", "1X"], ["min-bytes", "1X"]),
        (["-b", "1M", "-e", "1K"], ["min-bytes"]),
        (["--algo", "hierarchical", "--op", "sendrecv"], ["sendrecv"]),
        (["--redop", "avg", "-d", "int32"], ["avg", "int32"]),
        (["--duration", "soon"], ["duration", "soon"]),
        (["--nproc", "3", "--ranks-per-node", "2"], ["nproc 3", "ranks-per-node 2"]),
        (["--nproc", "2", "--op", "broadcast", "--root", "5"], ["root 5"]),
    ],
)
def test_bad_input_is_one_line(args: list[str], needles: list[str]) -> None:
    proc, _, _ = bench(*args)
    assert_user_error(proc, *needles)


def test_missing_torch_is_one_line() -> None:
    code = "import sys; sys.modules['torch'] = None; from tierwise.cli.main import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "bench", "--nproc", "2"], capture_output=True, text=True
    )
    assert_user_error(proc, "pip install 'tierwise[runtime]'")


def test_ctrl_c_stops_every_rank() -> None:
    pytest.importorskip("torch")
    tag = uuid.uuid4().hex
    env = {**os.environ, "TIERWISE_TEST_TAG": tag, "GLOO_SOCKET_IFNAME": "lo"}
    proc = subprocess.Popen(
        [*CLI, "--nproc", "2", "-b", "1K", "-e", "1K", "--duration", "60s"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while len(tagged_processes(tag)) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "stopped and reaped all 2 rank(s)" in one_error_line(err)
    assert tagged_processes(tag) == []
