"""What a benchmark run measured, as plain data: rows per size, latency percentiles, series.

Pure Python (no torch): the launcher reads rank 0's JSON back into these types. Times in
microseconds, bandwidths in GB/s (1e9 B/s), as nccl-tests prints them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tierwise.formats.nccl_tests import NcclHalf, NcclRow, NcclTest
from tierwise.formats.nccl_writer import time_cell
from tierwise.formats.ops import BUSBW_FACTORS
from tierwise.runtime.options import BenchConfig

#: Fraction of the sustained run's iterations in the first/last window when none is given.
DEFAULT_WINDOW_FRACTION = 0.1


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation, as numpy's default."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def bandwidths(op: str, size_bytes: int, time_us: float, nranks: int) -> tuple[float, float]:
    """nccl-tests' ``(algbw, busbw)`` in GB/s for ``size_bytes`` moved in ``time_us``."""
    algbw = size_bytes / (time_us * 1e-6) / 1e9 if time_us > 0 else 0.0
    return algbw, algbw * BUSBW_FACTORS[op](nranks)


@dataclass(frozen=True)
class HalfResult:
    """One mode (out-of-place or in-place) at one size.

    ``time_us`` is nccl-tests' time: the mean over ranks of each rank's mean iteration.
    ``p50_us``/``p99_us``/``max_us`` are over iterations of the slowest rank's latency.
    ``wrong`` is the number of wrong result elements summed over ranks (None: not checked).
    """

    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    wrong: int | None
    p50_us: float
    p99_us: float
    max_us: float

    def as_nccl(self) -> NcclHalf:
        """The nccl-tests columns of this half (latency percentiles dropped)."""
        return NcclHalf(self.time_us, self.algbw_GBps, self.busbw_GBps, self.wrong)


@dataclass(frozen=True)
class BenchRow:
    """One size: ``size_bytes`` as nccl-tests prints it and ``count`` elements per rank chunk."""

    size_bytes: int
    count: int
    type: str
    redop: str
    root: int
    out_of_place: HalfResult
    in_place: HalfResult

    def as_dict(self) -> dict[str, Any]:
        """JSON form: out-of-place numbers at top level, ``in_place`` nested."""
        return {
            "size_bytes": self.size_bytes,
            "count": self.count,
            "type": self.type,
            "redop": self.redop,
            "root": self.root,
            **asdict(self.out_of_place),
            "in_place": asdict(self.in_place),
        }

    def as_nccl(self, extra: Mapping[str, str] | None = None) -> NcclRow:
        """The row as nccl-tests prints it, with optional extra columns."""
        return NcclRow(
            self.size_bytes,
            self.count,
            self.type,
            self.redop,
            self.root,
            self.out_of_place.as_nccl(),
            self.in_place.as_nccl(),
            dict(extra or {}),
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchRow:
        """Inverse of `as_dict`."""
        halves = {k: data[k] for k in HalfResult.__dataclass_fields__}
        return cls(
            size_bytes=data["size_bytes"],
            count=data["count"],
            type=data["type"],
            redop=data["redop"],
            root=data["root"],
            out_of_place=HalfResult(**halves),
            in_place=HalfResult(**data["in_place"]),
        )


@dataclass(frozen=True)
class Window:
    """Latency summary of iterations starting in ``[t_start_s, t_end_s)``."""

    t_start_s: float
    t_end_s: float
    iters: int
    p50_us: float
    p99_us: float
    max_us: float

    def as_nccl(self) -> NcclHalf:
        """The nccl-tests columns of this half (latency percentiles dropped)."""
        return NcclHalf(self.time_us, self.algbw_GBps, self.busbw_GBps, self.wrong)


@dataclass(frozen=True)
class Series:
    """A sustained run at one size: per-iteration start time (s) and slowest-rank latency.

    ``p99_drift`` = ``p99_last_us / p99_first_us - 1`` between the first and last window.
    """

    size_bytes: int
    count: int
    duration_s: float
    window_s: float
    t_s: tuple[float, ...]
    latency_us: tuple[float, ...]
    windows: tuple[Window, ...]
    p50_us: float
    p99_us: float
    max_us: float
    p99_first_us: float
    p99_last_us: float
    p99_drift: float

    @classmethod
    def build(
        cls,
        size_bytes: int,
        count: int,
        t_s: Sequence[float],
        latency_us: Sequence[float],
        window_s: float | None,
    ) -> Series:
        """Summarise a series; ``window_s`` defaults to a tenth of its length (>= 1 iteration)."""
        duration = (t_s[-1] + latency_us[-1] * 1e-6) if t_s else 0.0
        width = window_s or max(duration * DEFAULT_WINDOW_FRACTION, 1e-9)
        windows: list[Window] = []
        start = 0
        while start < len(t_s):
            w0 = math.floor(t_s[start] / width) * width
            end = start
            while end < len(t_s) and t_s[end] < w0 + width:
                end += 1
            chunk = latency_us[start:end]
            windows.append(
                Window(
                    t_start_s=w0,
                    t_end_s=w0 + width,
                    iters=len(chunk),
                    p50_us=percentile(chunk, 50),
                    p99_us=percentile(chunk, 99),
                    max_us=max(chunk),
                )
            )
            start = end
        first, last = windows[0].p99_us, windows[-1].p99_us
        return cls(
            size_bytes=size_bytes,
            count=count,
            duration_s=duration,
            window_s=width,
            t_s=tuple(t_s),
            latency_us=tuple(latency_us),
            windows=tuple(windows),
            p50_us=percentile(latency_us, 50),
            p99_us=percentile(latency_us, 99),
            max_us=max(latency_us),
            p99_first_us=first,
            p99_last_us=last,
            p99_drift=last / first - 1.0 if first > 0 else 0.0,
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON form (lists for the series)."""
        data = asdict(self)
        data["t_s"], data["latency_us"] = list(self.t_s), list(self.latency_us)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Series:
        """Inverse of `as_dict`."""
        fields = {**data, "windows": tuple(Window(**w) for w in data["windows"])}
        fields["t_s"], fields["latency_us"] = tuple(data["t_s"]), tuple(data["latency_us"])
        return cls(**fields)


@dataclass(frozen=True)
class BenchResult:
    """A whole `tierwise bench` run (what rank 0 reports)."""

    op: str
    nranks: int
    nodes: int
    gpus_per_node: int
    backend: str
    algo: str
    rows: tuple[BenchRow, ...]
    series: Series | None = None

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` object."""
        return {
            "op": self.op,
            "nranks": self.nranks,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "backend": self.backend,
            "algo": self.algo,
            "rows": [row.as_dict() for row in self.rows],
            "series": None if self.series is None else self.series.as_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchResult:
        """Inverse of `as_dict`."""
        return cls(
            op=data["op"],
            nranks=data["nranks"],
            nodes=data["nodes"],
            gpus_per_node=data["gpus_per_node"],
            backend=data["backend"],
            algo=data["algo"],
            rows=tuple(BenchRow.from_dict(r) for r in data["rows"]),
            series=None if data.get("series") is None else Series.from_dict(data["series"]),
        )

    def times_us(self, in_place: bool = False) -> dict[int, float]:
        """``{size_bytes: time_us}`` of one mode (the lab's flat vs hierarchical comparison)."""
        return {
            r.size_bytes: (r.in_place if in_place else r.out_of_place).time_us for r in self.rows
        }


#: Extra columns `to_nccl_test` adds after the in-place half (latencies in us).
LATENCY_COLUMNS = ("p50_us", "p99_us", "max_us", "ip_p50_us", "ip_p99_us", "ip_max_us")


def to_nccl_test(result: BenchResult, config: BenchConfig) -> NcclTest:
    """The run as an `NcclTest` (nccl-tests' header, rows and footer; latency and ``algo``
    as extra columns) for `tierwise.formats.nccl_writer.format_test`."""
    rows = []
    for r in result.rows:
        lat = [r.out_of_place.p50_us, r.out_of_place.p99_us, r.out_of_place.max_us]
        lat += [r.in_place.p50_us, r.in_place.p99_us, r.in_place.max_us]
        extra = {"algo": result.algo} | {
            name: time_cell(v) for name, v in zip(LATENCY_COLUMNS, lat, strict=True)
        }
        rows.append(r.as_nccl(extra))
    halves = [h for r in result.rows for h in (r.out_of_place, r.in_place)]
    wrong = [h.wrong for h in halves]
    header = {
        "nThread": "1",
        "nGpus": "1",
        "minBytes": str(config.min_bytes),
        "maxBytes": str(config.max_bytes),
        "step": f"{config.factor}(factor)",
        "warmup iters": str(config.warmup),
        "iters": str(config.iters),
        "agg iters": "1",
        "validation": str(int(config.check)),
        "graph": "0",
    }
    return NcclTest(
        op=result.op,
        rows=tuple(rows),
        nranks=result.nranks,
        nodes=result.nodes,
        gpus_per_node=result.gpus_per_node,
        header=header,
        avg_busbw_GBps=sum(h.busbw_GBps for h in halves) / len(halves) if halves else None,
        out_of_bounds=None if None in wrong else sum(w or 0 for w in wrong),
    )


def series_lines(series: Series) -> list[str]:
    """The sustained run as ``#`` comment lines (nccl-tests readers skip them)."""
    s = series
    lines = [
        f"# tierwise sustained: size_bytes {s.size_bytes} iters {len(s.latency_us)} "
        f"duration_s {s.duration_s:.3f} window_s {s.window_s:.3f} p50_us {s.p50_us:.2f} "
        f"p99_us {s.p99_us:.2f} max_us {s.max_us:.2f} p99_first_us {s.p99_first_us:.2f} "
        f"p99_last_us {s.p99_last_us:.2f} p99_drift {s.p99_drift:+.4f}",
        "# tierwise window:  t_start_s  t_end_s  iters   p50_us   p99_us   max_us",
    ]
    lines += [
        f"# tierwise window: {w.t_start_s:10.3f} {w.t_end_s:8.3f} {w.iters:6d} "
        f"{w.p50_us:8.2f} {w.p99_us:8.2f} {w.max_us:8.2f}"
        for w in s.windows
    ]
    return lines
