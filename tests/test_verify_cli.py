"""`tierwise verify` end to end: exit 0 / 1 / 2, the JSON rows, counters, bench output."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, assert_user_error, run_cli

DATA = Path(__file__).parent / "data" / "verify"
CONTRACT = str(REPO / "examples" / "contract.yaml")


def _verify(*args: str) -> tuple[int, dict]:
    proc = run_cli("verify", *args, "--json", check=False)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _status(result: dict) -> dict[str, str]:
    return {c["name"]: c["status"] for c in result["checks"]}


def test_published_log_passes(calibration_dir: Path) -> None:
    log = str(calibration_dir / "nccl" / "dgx-h100_1x8_all_reduce.txt")
    code, result = _verify(log, "--contract", CONTRACT, "--cluster", "dgx-h100", "--nodes", "1")
    assert code == 0 and result["passed"] is True
    assert _status(result) == {
        "nvlink-busbw": "PASS",
        "nvlink-busbw-floor": "PASS",
        "small-latency": "PASS",
        "tail": "SKIP",
        "sustained-drift": "SKIP",
        "counters": "SKIP",
    }
    assert result["logs"] == [
        {"log": log, "op": "all_reduce", "nranks": 8, "nodes": 1, "tier": "intra"}
    ]
    row = result["checks"][0]
    assert set(row) >= {
        "name",
        "op",
        "tier",
        "metric",
        "measured",
        "limit",
        "margin",
        "unit",
        "status",
    }
    human = run_cli("verify", log, "--contract", CONTRACT, "--nodes", "1")
    assert "PASS" in human.stdout and "PASSED" in human.stdout


def test_stricter_contract_exits_1(calibration_dir: Path, tmp_path: Path) -> None:
    data = yaml.safe_load(Path(CONTRACT).read_text())
    data["checks"][2]["max_us"] = 10  # small-latency: the log has 13.03 us at 8 B
    strict = tmp_path / "strict.yaml"
    strict.write_text(yaml.safe_dump(data))
    log = str(calibration_dir / "nccl" / "dgx-h100_1x8_all_reduce.txt")
    code, result = _verify(log, "--contract", str(strict), "--nodes", "1")
    assert code == 1 and result["passed"] is False
    assert [c["name"] for c in result["checks"] if c["status"] == "FAIL"] == ["small-latency"]
    human = run_cli("verify", log, "--contract", str(strict), "--nodes", "1", check=False)
    assert human.returncode == 1 and "FAILED" in human.stdout and not human.stderr


def test_spike_and_counter_flags() -> None:
    code, result = _verify(
        str(DATA / "bench_p99_spike.txt"),
        "--contract",
        CONTRACT,
        "--counters-before",
        str(DATA / "roce_before.txt"),
        "--counters-after",
        str(DATA / "roce_after_storm.txt"),
    )
    assert code == 1
    failed = {name for name, s in _status(result).items() if s == "FAIL"}
    assert failed == {
        "tail",
        "counters.drops",
        "counters.retransmits",
        "counters.out_of_sequence",
        "counters.pause_storm",
        "counters.pause_storm_events",
    }
    assert result["interval_s"] == pytest.approx(60.0)
    moved = {(c["device"], c["counter"]): c for c in result["counters"]}
    assert moved["eth1", "rx_prio3_pause"]["per_s"] > 1000
    assert moved["eth0", "rx_discards_phy"]["delta"] == 1234


@pytest.mark.parametrize(
    ("check", "needles"),
    [
        (
            {"op": "allreduce_x", "metric": "latency", "max_size": 8, "max_us": 25},
            ["checks.0.op", "allreduce_x"],
        ),
        (
            {"op": "all_reduce", "metric": "latency", "max_size": 8, "max_us": -1},
            ["checks.0.max_us", "-1"],
        ),
        ({"op": "all_reduce", "metric": "p95", "max_ratio": 2}, ["checks.0.metric", "p95"]),
    ],
)
def test_bad_contract_is_one_line(tmp_path: Path, check: dict, needles: list[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "bad", "checks": [check]}))
    proc = run_cli("verify", str(DATA / "bench_p99_spike.txt"), "--contract", str(bad), check=False)
    assert_user_error(proc, "bad.yaml", *needles)


def test_bad_input_exits_2(calibration_dir: Path) -> None:
    log = str(calibration_dir / "nccl" / "dgx-h100_1x8_all_reduce.txt")
    # without --nodes the log (no rank lines) ran on the preset's 32 nodes: no check applies
    assert_user_error(
        run_cli("verify", log, "--contract", CONTRACT, check=False),
        "no check could be evaluated",
        "tier leaf",
        "--nodes",
    )
    assert_user_error(
        run_cli(
            "verify",
            log,
            "--contract",
            CONTRACT,
            "--nodes",
            "1",
            "--counters-before",
            str(DATA / "ib_before.txt"),
            check=False,
        ),
        "--counters-after",
    )


@pytest.mark.runtime
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_reads_what_tierwise_bench_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text, as_json = tmp_path / "bench.txt", tmp_path / "bench.json"
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    proc = run_cli(
        "bench",
        "--nproc",
        "2",
        "-b",
        "1K",
        "-e",
        "4K",
        "-f",
        "4",
        "--iters",
        "5",
        "--duration",
        "1s",
        "--out",
        str(text),
        "--json",
        timeout=180,
    )
    as_json.write_text(proc.stdout)
    contract = tmp_path / "loose.yaml"
    contract.write_text(
        yaml.safe_dump(
            {
                "name": "loose",
                "checks": [
                    {"op": "all_reduce", "tier": "intra", "metric": "p99_p50", "max_ratio": 1e6},
                    {"op": "all_reduce", "metric": "p99_drift", "max_drift_pct": 1e6},
                    {"op": "all_reduce", "metric": "latency", "max_size": "4K", "max_us": 1e7},
                ],
            }
        )
    )
    for log in (text, as_json):
        code, result = _verify(str(log), "--contract", str(contract))
        assert code == 0, result
        assert set(_status(result).values()) == {"PASS"}, result
        assert all(c["measured"] is not None for c in result["checks"])
