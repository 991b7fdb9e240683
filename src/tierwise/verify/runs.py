"""Benchmark runs to verify: nccl-tests text logs and `tierwise bench` text or ``--json`` output.

A run has the measured points of one test (sizes, best times, busbw), the tier its group tops
out on, and, when `tierwise bench` wrote it, per-size latency percentiles (the ``p50_us``/
``p99_us`` and ``ip_p50_us``/``ip_p99_us`` columns) and the sustained run of ``--duration``
(the ``# tierwise sustained:`` line). Times in us.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
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
from tierwise.specio import parse_json
from tierwise.textio import read_input
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


def _text_runs(
    text: str, source: str, path: Path, cluster: ClusterSpec, op: str | None
) -> list[Run]:
    tests = parse_log(text, source=source, default_op=op_in_name(path.name), op=op)
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


_SIGNED = ("p99_drift",)  # a relative change: negative when the tail got better


def _check_fields(obj: Any, source: str, where: str = "") -> None:
    """Every field of a bench result dataclass holds its declared type: finite numbers >= 0
    (``root`` may be -1, a drift any sign), strings, tuples of those, nested results; else a
    ParseError."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value, name = getattr(obj, f.name), f"{where}{f.name}"
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, hint):
                raise ParseError(
                    f"field {name}: expected an object, got {value!r:.40}", None, source
                )
            _check_fields(value, source, f"{name}.")
            continue
        optional = type(None) in typing.get_args(hint)
        if value is None and optional:
            continue
        items = value if typing.get_origin(hint) is tuple else (value,)
        kind = next(a for a in (typing.get_args(hint) or (hint,)) if a not in (type(None), ...))
        if dataclasses.is_dataclass(kind):
            for i, item in enumerate(items):
                _check_fields(item, source, f"{name}.{i}." if items is value else f"{name}.")
            continue
        for item in items:
            _check_value(item, kind, name, source)


def _check_value(value: Any, kind: Any, name: str, source: str) -> None:
    if kind is str:
        ok = isinstance(value, str)
    elif isinstance(value, bool) or not isinstance(value, int | float):
        ok = False
    else:
        ok = (kind is float or isinstance(value, int)) and math.isfinite(value)
        ok = ok and (name.endswith(_SIGNED) or value >= (-1 if name.endswith("root") else 0))
    if not ok:
        allowed = "a string" if kind is str else f"a finite {kind.__name__} >= 0"
        raise ParseError(f"field {name}: {value!r:.40} is not {allowed}", None, source)


def _json_run(data: Any, source: str, cluster: ClusterSpec) -> Run:
    try:
        result = BenchResult.from_dict(data)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ParseError(
            f"not a `tierwise bench --json` object ({type(exc).__name__}: {exc})", source=source
        ) from None
    _check_fields(result, source)
    for name in ("nranks", "nodes", "gpus_per_node"):
        if getattr(result, name) < 1:
            raise ParseError(
                f"field {name}: must be >= 1, got {getattr(result, name)}", None, source
            )
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


def load_runs(path: Path, cluster: ClusterSpec, op: str | None = None) -> list[Run]:
    """The runs in one file (``-``: stdin): a `tierwise bench --json` object, else nccl-tests
    text; ``op`` (``--op``) names the collective of logs that do not."""
    text, source = read_input(path)
    if text.lstrip().startswith("{"):
        return [_json_run(parse_json(text, source, ParseError), source, cluster)]
    return _text_runs(text, source, path, cluster, op)
