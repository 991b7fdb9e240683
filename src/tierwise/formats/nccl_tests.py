"""The nccl-tests result table as data: one test = header, ranks, rows and footer.

Units follow nccl-tests: sizes in bytes, times in microseconds, bandwidths in
GB/s (1e9 B/s). ``nccl_reader`` builds these from logs, ``nccl_writer`` prints
them back in nccl-tests' exact text shape; tierwise's predictions and
measurements use the same types so both line up column by column.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NA = "N/A"
"""How nccl-tests prints a missing cell (``#wrong`` without validation)."""


@dataclass(frozen=True)
class NcclHalf:
    """One half of a result row: the out-of-place or the in-place run.

    ``wrong`` is the ``#wrong`` element count (the max error in the ``error``
    column of old nccl-tests versions); None where the log says ``N/A``.
    """

    time_us: float | None
    algbw_GBps: float | None
    busbw_GBps: float | None
    wrong: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON form with unit-suffixed keys; integral ``wrong`` as an int."""
        wrong = self.wrong
        if wrong is not None and float(wrong).is_integer():
            wrong = int(wrong)
        return {
            "time_us": self.time_us,
            "algbw_GBps": self.algbw_GBps,
            "busbw_GBps": self.busbw_GBps,
            "wrong": wrong,
        }


@dataclass(frozen=True)
class NcclRow:
    """One message size: ``size_bytes`` moved as ``count`` elements of ``type``.

    ``redop``/``root`` are None where the layout has no such column (old
    versions, all_gather before 2.x) or the cell is blank/``N/A``; newer
    versions print ``none``/``-1`` and those are kept as printed. ``extra``
    holds columns nccl-tests does not define, by header name (tierwise's
    ``algo``; a name repeated in the in-place half gets an ``in_place_`` prefix).
    """

    size_bytes: int
    count: int
    type: str
    redop: str | None
    root: int | None
    out_of_place: NcclHalf
    in_place: NcclHalf | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON form: out-of-place numbers at top level, ``in_place`` nested or null."""
        return {
            "size_bytes": self.size_bytes,
            "count": self.count,
            "type": self.type,
            "redop": self.redop,
            "root": self.root,
            **self.out_of_place.as_dict(),
            "in_place": None if self.in_place is None else self.in_place.as_dict(),
            "extra": dict(self.extra),
        }


@dataclass(frozen=True)
class NcclRank:
    """One ``#  Rank N Group G Pid P on HOST device D [BUS] NAME`` header line."""

    rank: int
    host: str
    device: int
    group: int | None = None
    pid: int | None = None
    bus_id: str | None = None
    device_name: str = ""


def avg_busbw(rows: Sequence[NcclRow]) -> float | None:
    """nccl-tests' ``Avg bus bandwidth`` (GB/s): the mean busbw over every half of every row."""
    values = [
        half.busbw_GBps
        for row in rows
        for half in (row.out_of_place, row.in_place)
        if half is not None and half.busbw_GBps is not None
    ]
    return sum(values) / len(values) if values else None


def placement_from_ranks(
    ranks: Sequence[NcclRank],
) -> tuple[int | None, int | None, int | None]:
    """(nranks, nodes, gpus_per_node) from rank lines; gpus_per_node None if hosts differ."""
    if not ranks:
        return None, None, None
    per_host = Counter(r.host for r in ranks)
    counts = set(per_host.values())
    return len(ranks), len(per_host), counts.pop() if len(counts) == 1 else None


@dataclass(frozen=True)
class NcclTest:
    """One nccl-tests run (one ``*_perf`` invocation's table).

    ``nranks``/``nodes``/``gpus_per_node`` left None are filled from ``ranks``.
    ``header`` holds the ``# nThread ...`` line (``nThread``, ``nGpus``,
    ``minBytes``, ``maxBytes``, ``step``, ``warmup iters``, ``iters``, ...) as
    printed. ``truncated``: the test's footer never came (the run or the log
    was cut off); ``partial_row_line`` is the 1-based line of a cut-off final
    row that was left out; ``op_source`` says where ``op`` came from: ``--op``,
    ``banner``, ``command line``, ``file name`` or ``table`` (inferred by
    ``formats.infer``). Neither is part of equality.
    """

    op: str | None
    rows: tuple[NcclRow, ...]
    nranks: int | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    ranks: tuple[NcclRank, ...] = ()
    header: Mapping[str, str] = field(default_factory=dict)
    avg_busbw_GBps: float | None = None
    out_of_bounds: int | None = None
    truncated: bool = False
    partial_row_line: int | None = field(default=None, compare=False)
    op_source: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", tuple(self.rows))
        object.__setattr__(self, "ranks", tuple(self.ranks))
        object.__setattr__(self, "header", dict(self.header))
        derived = placement_from_ranks(self.ranks)
        for name, value in zip(("nranks", "nodes", "gpus_per_node"), derived, strict=True):
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)

    @property
    def hosts(self) -> tuple[str, ...]:
        """Distinct host names of the rank lines, in order of first appearance."""
        return tuple(dict.fromkeys(r.host for r in self.ranks))

    def as_dict(self) -> dict[str, Any]:
        """JSON form used by ``tierwise parse --json``."""
        return {
            "op": self.op,
            "op_source": self.op_source,
            "nranks": self.nranks,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "hosts": list(self.hosts),
            "header": dict(self.header),
            "avg_busbw_GBps": self.avg_busbw_GBps,
            "out_of_bounds": self.out_of_bounds,
            "truncated": self.truncated,
            "rows": [row.as_dict() for row in self.rows],
        }
