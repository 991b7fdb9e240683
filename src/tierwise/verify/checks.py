"""Evaluate a contract on runs and counter deltas: one PASS/FAIL/SKIP row per check and run.

``margin`` is the headroom in the check's unit, positive when it passes: measured - limit for
minima (busbw), limit - measured for maxima. A check no run has data for is SKIP (it neither
passes nor fails the contract, and says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np

from tierwise.collectives.predict import predict
from tierwise.hardware.cluster import ClusterSpec
from tierwise.verify.contract import Check, Contract, CounterLimits
from tierwise.verify.counters import Delta, by_category
from tierwise.verify.measured import measured_shape
from tierwise.verify.runs import Run

Status = Literal["PASS", "FAIL", "SKIP"]


@dataclass(frozen=True)
class Row:
    """One evaluated check. ``size_bytes``: the size the measured value comes from."""

    name: str
    op: str | None
    tier: str | None
    metric: str
    measured: float | None
    limit: float | None
    margin: float | None
    unit: str
    status: Status
    log: str | None = None
    size_bytes: int | None = None
    note: str = ""

    def as_dict(self) -> dict[str, object]:
        """JSON form."""
        return asdict(self)


def _worst(values: np.ndarray, sizes: np.ndarray, lowest: bool) -> tuple[float, int]:
    i = int(np.argmin(values) if lowest else np.argmax(values))
    return float(values[i]), int(sizes[i])


def _measure(check: Check, run: Run, cluster: ClusterSpec) -> tuple[float, int | None] | str:
    """(measured value in the check's unit, size it comes from), or why there is none."""
    m = run.points
    if check.metric == "p99_drift":
        if run.sustained is None:
            return "no sustained run in the log (tierwise bench --duration)"
        return run.sustained.p99_drift * 100, run.sustained.size_bytes
    if check.metric == "p99_p50":
        sizes, ratio = np.empty(0, dtype=np.int64), np.empty(0)
        if run.tail is not None:
            sizes, ratio = run.tail.size_bytes, run.tail.ratio
        if run.sustained is not None and run.sustained.p50_us > 0:
            s = run.sustained
            sizes = np.append(sizes, s.size_bytes)
            ratio = np.append(ratio, s.p99_us / s.p50_us)
        if not len(sizes):
            return "no per-iteration latency in the log (tierwise bench writes p50/p99)"
        keep = np.array([check.covers(int(n)) for n in sizes], dtype=bool)
        if not keep.any():
            return "no latency percentiles at the sizes the check covers"
        return _worst(ratio[keep], sizes[keep], lowest=False)
    keep = np.array([check.covers(int(n)) for n in m.size_bytes], dtype=bool)
    if not keep.any():
        return "no measured size in the range the check covers"
    sizes = m.size_bytes[keep]
    if check.metric == "latency":
        return _worst(m.time_us[keep], sizes, lowest=False)
    if check.min_pct_of_model is None:
        return _worst(m.busbw_GBps[keep], sizes, lowest=True)
    model = predict(m.op, measured_shape(m, cluster), sizes).busbw_GBps
    if not np.all(model > 0):
        return "the model predicts no bus traffic for this group (one rank?)"
    return _worst(m.busbw_GBps[keep] / model * 100, sizes, lowest=True)


def _row(got: tuple[float, int | None] | str, limit: float, is_minimum: bool, **fields: Any) -> Row:
    """A judged row from a measurement, or a SKIP row from the reason there is none.

    ``fields``: the Row's name, op, tier, metric, unit and log."""
    if isinstance(got, str):
        return Row(**fields, limit=limit, measured=None, margin=None, status="SKIP", note=got)
    value, size = got
    margin = value - limit if is_minimum else limit - value
    status: Status = "PASS" if margin >= 0 else "FAIL"
    return Row(**fields, limit=limit, measured=value, margin=margin, size_bytes=size, status=status)


def evaluate_check(check: Check, runs: Sequence[Run], cluster: ClusterSpec) -> list[Row]:
    """Rows of one check: one per run of its op (and tier); one SKIP row when none applies."""
    matching = [r for r in runs if r.op == check.op and check.tier in (None, r.tier)]
    base: dict[str, Any] = {
        "name": check.label,
        "op": check.op,
        "metric": check.metric,
        "limit": check.limit,
        "unit": check.unit,
        "is_minimum": check.is_minimum,
    }
    if not matching:
        where = f" on tier {check.tier}" if check.tier else ""
        return [_row(f"no {check.op} log{where}", **base, tier=check.tier)]
    return [
        _row(_measure(check, run, cluster), **base, tier=run.tier, log=run.source)
        for run in matching
    ]


#: Counter categories in the order their rows are reported.
COUNTER_ROWS = (
    "drops",
    "errors",
    "retransmits",
    "out_of_sequence",
    "pause",
    "pause_storm_events",
    "congestion",
)
_TOP = 3  # counters named in a counter row's note


def _counter_value(
    name: str, moved: Sequence[Delta], seconds: float | None
) -> tuple[float, None] | str:
    """Summed delta of a category, or for pause the highest rate of one counter (frames/s)."""
    if name != "pause":
        return sum(d.delta for d in moved), None
    if seconds is None:
        return "no '# time:' lines or --interval: rates unknown"
    return max((d.per_s or 0.0 for d in moved), default=0.0), None


def _counter_note(name: str, moved: Sequence[Delta]) -> str:
    if name == "pause":
        top = sorted(moved, key=lambda d: -(d.per_s or 0.0))[:_TOP]
        return ", ".join(f"{d.device} {d.counter} {d.per_s or 0:,.0f}/s" for d in top)
    top = sorted(moved, key=lambda d: -d.delta)[:_TOP]
    return ", ".join(f"{d.device} {d.counter} +{d.delta:,}" for d in top)


def evaluate_counters(
    limits: CounterLimits, items: Sequence[Delta] | None, seconds: float | None
) -> list[Row]:
    """Counter rows: the summed delta per category against its limit, and the highest pause
    rate (frames/s of one counter) against ``pause_per_s``; one SKIP row without snapshots."""
    if items is None:
        return [
            Row(
                name="counters",
                op=None,
                tier=None,
                metric="counters",
                measured=None,
                limit=None,
                margin=None,
                unit="-",
                status="SKIP",
                note="no --counters-before/--counters-after snapshots",
            )
        ]
    rows = []
    groups = by_category(items)
    for name in COUNTER_ROWS:
        pause = name == "pause"
        limit = limits.pause_per_s if pause else getattr(limits, name)
        if limit is None:
            continue
        base: dict[str, Any] = {
            "name": "counters.pause_storm" if pause else f"counters.{name}",
            "op": None,
            "metric": "pause_per_s" if pause else name,
            "limit": limit,
            "unit": "frames/s" if pause else "count",
            "is_minimum": False,
        }
        row = _row(_counter_value(name, groups[name], seconds), **base, tier=None)
        if row.status != "SKIP":
            row = replace(row, note=_counter_note(name, groups[name]))
        rows.append(row)
    return rows


def evaluate(
    contract: Contract,
    runs: Sequence[Run],
    cluster: ClusterSpec,
    counter_deltas: Sequence[Delta] | None = None,
    seconds: float | None = None,
) -> list[Row]:
    """Every row of the contract: its checks on `runs`, then its counter limits (the defaults
    of CounterLimits when snapshots are given and the contract sets none)."""
    rows = [row for check in contract.checks for row in evaluate_check(check, runs, cluster)]
    limits = contract.counters
    if limits is None and counter_deltas is not None:
        limits = CounterLimits()
    if limits is not None:
        rows += evaluate_counters(limits, counter_deltas, seconds)
    return rows


def passed(rows: Sequence[Row]) -> bool:
    """No row failed (SKIP rows do not fail a contract)."""
    return all(r.status != "FAIL" for r in rows)


def log_checks_skipped(contract: Contract, rows: Sequence[Row]) -> bool:
    """True when the contract has log checks and none of them found data in any run."""
    names = {c.label for c in contract.checks}
    return bool(names) and all(r.status == "SKIP" for r in rows if r.name in names)
