"""Benchmark runs to verify: nccl-tests text logs and `tierwise bench` text or ``--json`` output.

A run has the measured points of one test (sizes, best times, busbw), the tier its group tops
out on, and, when `tierwise bench` wrote it, per-size latency percentiles (the ``p50_us``/
``p99_us`` and ``ip_p50_us``/``ip_p99_us`` columns) and the sustained run of ``--duration``
(the ``# tierwise sustained:`` line). Times in us.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tierwise.errors import ParseError
from tierwise.formats.nccl_reader import parse_log
from tierwise.formats.nccl_tests import NcclTest
from tierwise.formats.ops import op_in_name
from tierwise.hardware.cluster import ClusterSpec
from tierwise.runtime.results import BenchResult
from tierwise.verify.calibrate import fitted_tier
from tierwise.verify.measured import Measured, measured

#: (p50, p99) column pairs of the two halves in `tierwise bench`'s text table.
LATENCY_COLUMNS = (("p50_us", "p99_us"), ("ip_p50_us", "ip_p99_us"))
_SUSTAINED = re.compile(r"^#\s*tierwise sustained:\s*(.*)$", re.MULTILINE)
_SUSTAINED_KEYS = (
    "size_bytes",
    "duration_s",
    "p50_us",
    "p99_us",
    "p99_first_us",
    "p99_last_us",
    "p99_drift",
)


@dataclass(frozen=True)
class Tail:
    """Per-size latency percentiles (us) of the half with the higher p99/p50."""

    size_bytes: np.ndarray
    p50_us: np.ndarray
    p99_us: np.ndarray

    @property
    def ratio(self) -> np.ndarray:
        """p99 / p50 per size."""
        return self.p99_us / self.p50_us


@dataclass(frozen=True)
class Sustained:
    """A ``--duration`` run at one size; p99_drift = p99 of the last window / first - 1."""

    size_bytes: int
    duration_s: float
    p50_us: float
    p99_us: float
    p99_first_us: float
    p99_last_us: float
    p99_drift: float


@dataclass(frozen=True)
class Run:
    """One test of one log, placed on the cluster."""

    source: str
    points: Measured
    tier: str
    tail: Tail | None = None
    sustained: Sustained | None = None

    @property
    def op(self) -> str:
        """Canonical op name."""
        return self.points.op


def _tail(pairs: list[tuple[int, list[tuple[float, float]]]]) -> Tail | None:
    """Worst half per size from ``(size, [(p50, p99), ...])``; None when nothing was timed."""
    kept = [(n, max(halves, key=lambda h: h[1] / h[0])) for n, halves in pairs if halves]
    if not kept:
        return None
    return Tail(
        np.array([n for n, _ in kept]),
        np.array([h[0] for _, h in kept]),
        np.array([h[1] for _, h in kept]),
    )


def _text_tail(test: NcclTest, source: str) -> Tail | None:
    pairs = []
    for row in test.rows:
        halves = []
        for p50_key, p99_key in LATENCY_COLUMNS:
            if p50_key in row.extra and p99_key in row.extra:
                try:
                    p50, p99 = float(row.extra[p50_key]), float(row.extra[p99_key])
                except ValueError:
                    raise ParseError(
                        f"size {row.size_bytes}: {p50_key}/{p99_key} are not numbers "
                        f"({row.extra[p50_key]!r}, {row.extra[p99_key]!r})",
                        source=source,
                    ) from None
                if p50 > 0:
                    halves.append((p50, p99))
        pairs.append((row.size_bytes, halves))
    return _tail(pairs)


def _text_sustained(text: str, source: str) -> Sustained | None:
    lines = _SUSTAINED.findall(text)
    if not lines:
        return None
    if len(lines) > 1:
        raise ParseError("more than one '# tierwise sustained:' line", source=source)
    tokens = lines[0].split()
    fields = dict(zip(tokens[::2], tokens[1::2], strict=False))
    try:
        values = {k: float(fields[k]) for k in _SUSTAINED_KEYS}
    except (KeyError, ValueError):
        raise ParseError(
            "cannot read the '# tierwise sustained:' line; expected "
            + " ".join(f"{k} N" for k in _SUSTAINED_KEYS),
            source=source,
        ) from None
    return Sustained(size_bytes=int(values.pop("size_bytes")), **values)


def _text_runs(text: str, source: str, path: Path, cluster: ClusterSpec) -> list[Run]:
    tests = parse_log(text, source=source, default_op=op_in_name(path.name))
    sustained = _text_sustained(text, source)
    if sustained is not None and len(tests) > 1:
        raise ParseError(
            "a '# tierwise sustained:' line in a log of several tests; "
            "keep one `tierwise bench` run per file",
            source=source,
        )
    runs = []
    for i, test in enumerate(tests):
        name = source if len(tests) == 1 else f"{source}#{i + 1}"
        points = measured(test, cluster, name)
        runs.append(
            Run(name, points, fitted_tier(points, cluster), _text_tail(test, source), sustained)
        )
    return runs


def _json_run(data: Any, source: str, cluster: ClusterSpec) -> Run:
    try:
        result = BenchResult.from_dict(data)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ParseError(
            f"not a `tierwise bench --json` object ({type(exc).__name__}: {exc})", source=source
        ) from None
    rows = tuple(r.as_nccl() for r in result.rows)
    test = NcclTest(result.op, rows, result.nranks, result.nodes, result.gpus_per_node)
    points = measured(test, cluster, source)
    tail = _tail(
        [
            (
                r.size_bytes,
                [(h.p50_us, h.p99_us) for h in (r.out_of_place, r.in_place) if h.p50_us > 0],
            )
            for r in result.rows
        ]
    )
    s = result.series
    sustained = (
        None
        if s is None
        else Sustained(
            s.size_bytes,
            s.duration_s,
            s.p50_us,
            s.p99_us,
            s.p99_first_us,
            s.p99_last_us,
            s.p99_drift,
        )
    )
    return Run(source, points, fitted_tier(points, cluster), tail, sustained)


def load_runs(path: Path, cluster: ClusterSpec) -> list[Run]:
    """The runs in one file: a `tierwise bench --json` object, else nccl-tests text."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ParseError(f"cannot read the log: {exc.strerror or exc}", source=source) from None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ParseError(f"malformed JSON ({exc.msg})", exc.lineno, source) from None
        return [_json_run(data, source, cluster)]
    return _text_runs(text, source, path, cluster)
