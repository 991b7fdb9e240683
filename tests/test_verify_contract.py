"""Fabric contracts: the shipped examples load; every mistake is one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tierwise.errors import SpecError
from tierwise.verify.contract import Check, load_contract

EXAMPLES = sorted((REPO / "examples").glob("contract*.yaml"))


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _busbw(**over: object) -> dict[str, object]:
    return {"op": "all_reduce", "metric": "busbw", "min_size": "1G", "min_GBps": 100, **over}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_load(path: Path) -> None:
    contract = load_contract(path)
    assert contract.checks and contract.counters is not None
    assert len({c.label for c in contract.checks}) == len(contract.checks)


def test_examples_cover_single_and_multi_node() -> None:
    tiers = {c.tier for p in EXAMPLES for c in load_contract(p).checks}
    assert {"intra", "leaf", "spine"} <= tiers


def test_check_fields() -> None:
    check = Check.model_validate(_busbw(op="allreduce", min_pct_of_model=90, min_GBps=None))
    assert check.op == "all_reduce"
    assert check.min_size == 1 << 30
    assert (check.limit, check.unit, check.is_minimum) == (90.0, "% of model", True)
    assert check.label == "all_reduce.any.busbw"
    assert check.covers(1 << 30) and not check.covers((1 << 30) - 1)
    latency = Check.model_validate(
        {"op": "all_gather", "tier": "leaf", "metric": "latency", "max_size": "1K", "max_us": 20}
    )
    assert (latency.is_minimum, latency.unit, latency.max_size) == (False, "us", 1024)
    assert latency.covers(8) and not latency.covers(2048)


@pytest.mark.parametrize(
    ("check", "needles"),
    [
        (_busbw(op="allreduce_x"), ["checks.0.op", "unknown op", "allreduce_x"]),
        (_busbw(min_GBps=-5), ["checks.0.min_GBps", "greater than 0", "-5"]),
        (_busbw(metric="bandwidth"), ["checks.0.metric", "'busbw'", "bandwidth"]),
        (_busbw(tier="rack"), ["checks.0.tier", "'intra'", "rack"]),
        (_busbw(min_size="1Q"), ["checks.0.min_size", "1Q"]),
        (_busbw(min_size=None), ["checks.0", "needs min_size"]),
        (_busbw(min_pct_of_model=90), ["checks.0", "exactly one limit"]),
        (_busbw(max_us=10), ["checks.0", "does not take max_us"]),
        (_busbw(limit=10), ["checks.0.limit", "Extra inputs"]),
        (_busbw(max_size="64M"), ["checks.0", "min_size", "larger than max_size"]),
        (
            {"op": "all_reduce", "metric": "p99_drift", "max_drift_pct": 10, "min_size": 8},
            ["checks.0", "takes no sizes"],
        ),
        ({"op": "all_reduce", "metric": "p99_p50", "max_ratio": 0.5}, ["max_ratio", "0.5"]),
    ],
)
def test_bad_check_names_the_field(tmp_path: Path, check: dict, needles: list[str]) -> None:
    path = _write(tmp_path, {"name": "x", "checks": [check]})
    with pytest.raises(SpecError) as err:
        load_contract(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path))
    for needle in needles:
        assert needle in message, (needle, message)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"name": "x", "counters": {"drops": -1}}, "counters.drops"),
        ({"name": "x", "counters": {"dropz": 1}}, "counters.dropz"),
        ({"name": "x", "counters": {"pause_per_s": 0}}, "counters.pause_per_s"),
        ({"name": "x"}, "no checks and no counters"),
        ({"name": "x", "checks": [_busbw(), _busbw(min_size="2G")]}, "all_reduce.any.busbw"),
        ({"checks": [_busbw()]}, "field name"),
        (["not", "a", "mapping"], "expected a mapping"),
    ],
)
def test_bad_contract(tmp_path: Path, data: object, needle: str) -> None:
    with pytest.raises(SpecError, match=needle):
        load_contract(_write(tmp_path, data))
