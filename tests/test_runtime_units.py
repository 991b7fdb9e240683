"""Pure-Python parts of `tierwise.runtime` (no torch): sizes, env detection, placement,
series statistics and the launcher's watchdog."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.errors import TierwiseError
from tierwise.runtime.faults import HEARTBEAT_PERIOD_S, Heartbeat, RankFailure
from tierwise.runtime.launch import (
    detect_env,
    launch,
    slurm_first_host,
    slurm_tasks_per_node,
)
from tierwise.runtime.options import BenchConfig
from tierwise.runtime.placement import Placement
from tierwise.runtime.results import Series, percentile
from tierwise.units import parse_duration, parse_size


@pytest.mark.parametrize(
    ("text", "value"),
    [("8", 8), ("1K", 1024), ("64M", 64 << 20), ("8G", 8 << 30), ("1.5k", 1536), ("2MiB", 2 << 20)],
)
def test_parse_size(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "M", "-1", "1X", "0.3"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(TierwiseError, match="size"):
        parse_size(text)


@pytest.mark.parametrize(
    ("text", "seconds"), [("60s", 60), ("500ms", 0.5), ("2m", 120), ("1h", 3600), ("1.5", 1.5)]
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_counts_follow_nccl_tests_conventions() -> None:
    reduce = BenchConfig(op="all_reduce", min_bytes=4, max_bytes=64, factor=4)
    assert list(reduce.counts(4)) == [(4, 1), (16, 4), (64, 16)]
    gather = BenchConfig(op="all_gather", min_bytes=4, max_bytes=100, factor=5)
    # 4 B holds no float per rank on 4 ranks; 20 B -> 1 per rank; 100 B -> 6 per rank
    assert list(gather.counts(4)) == [(16, 1), (96, 6)]


def test_config_json_round_trip() -> None:
    config = BenchConfig(op="alltoall", algo="hierarchical", dtype="half", duration_s=2.0)
    assert BenchConfig.from_json(config.to_json()) == config
    listed = BenchConfig(size_list=(4096, 8, 1000))
    assert list(listed.sizes()) == [8, 1000, 4096] and listed.max_bytes == 4096
    assert BenchConfig.from_json(listed.to_json()) == listed


def test_torchrun_env() -> None:
    env = detect_env(
        {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
         "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    )  # fmt: skip
    assert env is not None
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size) == (5, 8, 1, 4)
    assert (env.node_rank, env.master, env.launcher) == (1, "10.0.0.1:29500", "torchrun")


def test_slurm_env() -> None:
    env = detect_env(
        {"SLURM_PROCID": "9", "SLURM_NTASKS": "11", "SLURM_LOCALID": "1", "SLURM_NODEID": "2",
         "SLURM_TASKS_PER_NODE": "4(x2),3", "SLURM_JOB_NODELIST": "gpu[007-009,012],cpu1",
         "SLURM_JOB_ID": "123456"}
    )  # fmt: skip
    assert env is not None
    assert (env.rank, env.world_size, env.local_rank, env.local_world_size) == (9, 11, 1, 3)
    assert (env.node_rank, env.master_addr, env.launcher) == (2, "gpu007", "slurm")
    assert env.master_port == 20000 + 123456 % 20000
    assert detect_env({}) is None


def test_slurm_lists() -> None:
    assert slurm_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert slurm_first_host("rack[1-2]-n[01-04]") == "rack1-n01"
    assert slurm_first_host("a1,b[2-3]") == "a1"
    with pytest.raises(TierwiseError, match="SLURM_TASKS_PER_NODE"):
        slurm_tasks_per_node("four")


@pytest.mark.parametrize(
    "env",
    [
        {"RANK": "4", "WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
        {"RANK": "0", "WORLD_SIZE": "4", "MASTER_PORT": "1"},
        {"RANK": "x", "WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "1"},
    ],
)
def test_bad_rank_env(env: dict[str, str]) -> None:
    with pytest.raises(TierwiseError):
        detect_env(env)


def test_placement() -> None:
    p = Placement.from_node_ids([1, 0, 1, 0])
    assert p.mesh == ((0, 2), (1, 3)) and (p.nodes, p.ranks_per_node) == (2, 2)
    assert p.coords(3) == (1, 1)
    assert Placement.contiguous(8, 4).mesh == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert Placement.from_env(6, {"LOCAL_WORLD_SIZE": "3"}).nodes == 2
    with pytest.raises(TierwiseError, match="same number of ranks"):
        Placement.from_node_ids([0, 0, 1])
    with pytest.raises(TierwiseError, match="divide"):
        Placement.contiguous(6, 4)


@settings(max_examples=30)
@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=50), st.floats(0, 100))
def test_percentile_is_bounded_and_monotone(values: list[float], q: float) -> None:
    p = percentile(values, q)
    assert min(values) <= p <= max(values)
    assert percentile(values, 0) == min(values) and percentile(values, 100) == max(values)
    assert percentile(values, min(100.0, q + 10)) >= p


def test_series_windows_and_drift() -> None:
    t_s = [i * 0.1 for i in range(20)]  # 2 s of iterations
    latency = [10.0] * 10 + [30.0] * 10  # p99 triples in the second second
    s = Series.build(4096, 1024, t_s, latency, window_s=0.5)
    assert [w.iters for w in s.windows] == [5, 5, 5, 5]
    assert (s.p99_first_us, s.p99_last_us) == (10.0, 30.0)
    assert s.p99_drift == pytest.approx(2.0)
    assert Series.from_dict(s.as_dict()) == s


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_launcher_stops_all_ranks_when_one_fails(tmp_path) -> None:
    code = (
        "import os, sys, time\n"
        "if os.environ['RANK'] == '2':\n"
        "    open(os.environ['TIERWISE_ERROR_FILE'], 'w').write('boom on purpose')\n"
        "    sys.exit(3)\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    result = launch([sys.executable, "-c", code], 4, ranks_per_node=2, log_dir=tmp_path)
    assert time.monotonic() - start < 20
    assert result.failure == "rank 2 failed: boom on purpose; stopped the other 3 rank(s)"
    assert [e.returncode for e in result.exits][2] == 3
    assert all(_gone(pid) for pid in result.pids)
    with pytest.raises(RankFailure, match="boom"):
        result.raise_for_failure()


def test_launcher_env_and_stale_heartbeat(tmp_path) -> None:
    code = (
        "import os, pathlib, time\n"
        "print(os.environ['RANK'], os.environ['LOCAL_RANK'], os.environ['GROUP_RANK'],\n"
        "      os.environ['LOCAL_WORLD_SIZE'], os.environ['WORLD_SIZE'], flush=True)\n"
        "pathlib.Path(os.environ['TIERWISE_HEARTBEAT_DIR'], 'rank' + os.environ['RANK']).touch()\n"
        "time.sleep(60)\n"
    )
    result = launch(
        [sys.executable, "-c", code], 4, ranks_per_node=2, heartbeat_timeout_s=1.0,
        log_dir=tmp_path,
    )  # fmt: skip
    assert result.failure is not None and "made no progress" in result.failure
    assert all(e.returncode == -signal.SIGTERM for e in result.exits)
    lines = [(tmp_path / f"rank{r}.out").read_text().split() for r in range(4)]
    assert lines == [[str(r), str(r % 2), str(r // 2), "2", "4"] for r in range(4)]
    assert all(_gone(pid) for pid in result.pids)


def test_launcher_deadline_and_signal_names(tmp_path) -> None:
    code = (
        "import os, signal, time\n"
        "os.kill(os.getpid(), signal.SIGSEGV) if os.environ['RANK'] == '1' else time.sleep(60)"
    )
    result = launch([sys.executable, "-c", code], 2, log_dir=tmp_path)
    assert result.failure == "rank 1 was killed by SIGSEGV; stopped the other 1 rank(s)"
    slow = launch([sys.executable, "-c", "import time; time.sleep(60)"], 1, deadline_s=0.5)
    assert slow.failure is not None and "0.5 s deadline" in slow.failure
    assert all(_gone(pid) for pid in [*result.pids, *slow.pids])


def test_duration_keeps_every_size_of_the_sweep() -> None:
    sustained = BenchConfig(min_bytes=8, max_bytes=1024, duration_s=5.0)
    assert list(sustained.sizes()) == [8 * 2**i for i in range(8)]  # was [1024]


def test_heartbeat_beats_during_a_long_block(tmp_path: Path) -> None:
    beat = Heartbeat(3, str(tmp_path))
    with beat.during():
        first = (tmp_path / "rank3").stat().st_mtime
        time.sleep(3 * HEARTBEAT_PERIOD_S)  # one long collective: no beat() from the loop
        assert (tmp_path / "rank3").stat().st_mtime > first
