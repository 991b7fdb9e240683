"""Contract evaluation on the published DGX H100 log and the synthetic bench/multi-node logs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tierwise.errors import ParseError
from tierwise.hardware.cluster import load_cluster
from tierwise.verify.checks import Row, evaluate, log_checks_skipped, passed
from tierwise.verify.contract import Contract, load_contract
from tierwise.verify.runs import load_runs

DATA = Path(__file__).parent / "data" / "verify"
NODE_CONTRACT = REPO / "examples" / "contract.yaml"
IB_CONTRACT = REPO / "examples" / "contract-ib-multinode.yaml"
NODE = load_cluster("dgx-h100", nodes=1)


def _rows(contract: Contract, *logs: Path, cluster=NODE) -> dict[str, list[Row]]:
    runs = [run for log in logs for run in load_runs(log, cluster)]
    out: dict[str, list[Row]] = {}
    for row in evaluate(contract, runs, cluster):
        out.setdefault(row.name, []).append(row)
    return out


def _one(rows: dict[str, list[Row]], name: str) -> Row:
    (row,) = rows[name]
    return row


def _strict(**limits: object) -> Contract:
    data = yaml.safe_load(NODE_CONTRACT.read_text())
    for check in data["checks"]:
        check.update(limits.get(check["name"], {}))
    return Contract.model_validate(data)


def test_published_dgx_h100_log_passes_the_sample_contract(calibration_dir: Path) -> None:
    log = calibration_dir / "nccl" / "dgx-h100_1x8_all_reduce.txt"
    rows = _rows(load_contract(NODE_CONTRACT), log)
    busbw = _one(rows, "nvlink-busbw")
    assert (busbw.status, busbw.tier, busbw.unit) == ("PASS", "intra", "% of model")
    # the model's NVLS (with its pipeline fill) is within 1% of the log from 1 GiB; the lowest
    # ratio is at 16 GiB
    assert busbw.measured == pytest.approx(100.2, abs=1.0)
    assert busbw.size_bytes == 16 << 30
    assert busbw.margin == pytest.approx(busbw.measured - 90)
    floor = _one(rows, "nvlink-busbw-floor")
    assert (floor.status, floor.measured, floor.size_bytes) == ("PASS", 477.24, 4 << 30)
    latency = _one(rows, "small-latency")
    assert (latency.status, latency.measured, latency.margin) == ("PASS", 13.03, 25 - 13.03)
    assert _one(rows, "tail").status == "SKIP"  # nccl-tests prints no percentiles
    assert _one(rows, "sustained-drift").status == "SKIP"
    assert _one(rows, "counters").status == "SKIP"
    assert passed([r for rs in rows.values() for r in rs])


def test_stricter_contract_fails_the_named_check(calibration_dir: Path) -> None:
    log = calibration_dir / "nccl" / "dgx-h100_1x8_all_reduce.txt"
    contract = _strict(
        **{"nvlink-busbw": {"min_pct_of_model": 101}, "small-latency": {"max_us": 10}}
    )
    rows = _rows(contract, log)
    failed = {name for name, rs in rows.items() if any(r.status == "FAIL" for r in rs)}
    assert failed == {"nvlink-busbw", "small-latency"}
    assert _one(rows, "nvlink-busbw").margin < 0
    assert _one(rows, "small-latency").margin == pytest.approx(10 - 13.03)
    assert not passed([r for rs in rows.values() for r in rs])


def test_p99_spike_fails_the_tail_check_only() -> None:
    rows = _rows(load_contract(NODE_CONTRACT), DATA / "bench_p99_spike.txt")
    tail = _one(rows, "tail")
    assert (tail.status, tail.size_bytes, tail.unit) == ("FAIL", 64 << 10, "x")
    assert tail.measured == pytest.approx(12.0, rel=0.05)
    others = {name: rs[0].status for name, rs in rows.items() if name not in ("tail", "counters")}
    assert set(others.values()) == {"PASS"}, others  # busbw, latency and the stable drift


def test_tail_ignores_sizes_outside_its_range() -> None:
    contract = _strict(tail={"min_size": "1M"})
    assert _one(_rows(contract, DATA / "bench_p99_spike.txt"), "tail").status == "PASS"


def test_bench_json_sustained_drift_fails() -> None:
    rows = _rows(load_contract(NODE_CONTRACT), DATA / "bench_sustained_drift.json")
    drift = _one(rows, "sustained-drift")
    assert (drift.status, drift.size_bytes, drift.unit) == ("FAIL", 1 << 30, "%")
    assert drift.measured > 25
    assert _one(rows, "tail").status == "PASS"
    assert _one(rows, "small-latency").status == "PASS"
    assert _one(rows, "nvlink-busbw").status == "SKIP"  # the sweep stops below 1 GiB


def test_multi_node_log_is_checked_on_the_leaf_tier() -> None:
    cluster = load_cluster("dgx-h100")  # 32 nodes; the log's rank lines say 2 x 8
    rows = _rows(load_contract(IB_CONTRACT), DATA / "h100_2x8_ndr_all_reduce.txt", cluster=cluster)
    for name in ("leaf-busbw", "leaf-busbw-floor", "leaf-latency"):
        row = _one(rows, name)
        assert (row.status, row.tier) == ("PASS", "leaf"), row
    # the model's NVLS-tree on 2 nodes predicts ~461 GB/s at 1 GiB; the log's lowest is 469
    assert _one(rows, "leaf-busbw").measured == pytest.approx(101.8, rel=0.01)
    assert {r.status for r in rows["node-busbw"] + rows["spine-busbw"]} == {"SKIP"}


def test_a_log_on_another_tier_is_not_checked(calibration_dir: Path) -> None:
    log = calibration_dir / "nccl" / "dgx-h100_1x8_all_reduce.txt"
    contract = load_contract(NODE_CONTRACT)
    cluster = load_cluster("dgx-h100")  # no rank lines: 32 nodes x 8 ranks, a spine-free leaf
    rows = evaluate(contract, load_runs(log, cluster), cluster)
    assert log_checks_skipped(contract, rows)
    assert passed(rows)


@pytest.mark.parametrize(
    ("text", "error", "needle"),
    [
        ("{not json", ParseError, "malformed JSON"),
        ('{"op": "all_reduce"}', ParseError, "not a `tierwise bench --json` object"),
        ("hello\n", ParseError, "no nccl-tests results"),
    ],
)
def test_bad_logs(tmp_path: Path, text: str, error: type, needle: str) -> None:
    path = tmp_path / "all_reduce.log"
    path.write_text(text)
    with pytest.raises(error, match=needle):
        load_runs(path, NODE)


def test_bad_sustained_line(tmp_path: Path) -> None:
    text = (DATA / "bench_p99_spike.txt").read_text()
    path = tmp_path / "bench.txt"
    path.write_text(text.replace("p99_drift", "p99_dr1ft"))
    with pytest.raises(ParseError, match="tierwise sustained"):
        load_runs(path, NODE)
