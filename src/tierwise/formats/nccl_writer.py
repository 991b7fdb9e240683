"""Print ``NcclTest``s exactly as nccl-tests does (``src/util.cu`` of NVIDIA/nccl-tests).

Widths and number formats are nccl-tests': ``%12li  %12li  %8s  %6s  %6s`` for
size/count/type/redop/root, then per half ``  %7s  %6s  %6s %6s`` for
time/algbw/busbw/#wrong (the spacing of the logs in ``shared/calibration``);
time ``%.2f`` below 100 us, ``%.1f`` below 10000 us and ``%.0f`` above;
bandwidths ``%.2f``; ``Avg bus bandwidth`` ``%g``. Columns only appear when
some row has them (redop, root, in-place half); a missing cell prints ``N/A``.
Extra columns (tierwise's ``algo``) follow the last half.
``parse_log(format_test(t)) == [t]`` for any test whose numbers are already at
that printed precision.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from tierwise.formats.nccl_tests import (
    NA,
    NcclHalf,
    NcclRank,
    NcclRow,
    NcclTest,
    placement_from_ranks,
)

# (header name, units line, width, spaces before); the first column has no gap
_PREFIX = (("size", "(B)", 12, 0), ("count", "(elements)", 12, 2), ("type", "", 8, 2))
_OPTIONAL = (("redop", "", 6, 2), ("root", "", 6, 2))
_HALF = (
    ("time", "(us)", 7, 2),
    ("algbw", "(GB/s)", 6, 2),
    ("busbw", "(GB/s)", 6, 2),
    ("#wrong", "", 6, 1),
)
_RESERVED = frozenset(
    {"size", "count", "type", "redop", "root", "time", "cputime", "algbw", "busbw"}
    | {"#wrong", "wrong", "error", "timestamp"}
)
_BARE_HEADER_KEYS = ("nThread", "nGpus", "minBytes", "maxBytes")  # printed 'key value'


def _finite(value: float) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"cannot print the non-finite number {value!r}")
    return value


def time_cell(value: float | None) -> str:
    """A time in us as nccl-tests prints it (13.67, 123.8, 15749); N/A for None."""
    if value is None:
        return NA
    value = _finite(value)
    if value >= 10000.0:
        return f"{value:.0f}"
    return f"{value:.1f}" if value >= 100.0 else f"{value:.2f}"


def bandwidth_cell(value: float | None) -> str:
    """A bandwidth in GB/s as nccl-tests prints it (%.2f); N/A for None."""
    return NA if value is None else f"{_finite(value):.2f}"


def wrong_cell(value: float | None) -> str:
    """A #wrong count (integral) or old-style max error; N/A for None."""
    if value is None:
        return NA
    value = _finite(value)
    return str(int(value)) if value.is_integer() else repr(value)


def _half_cells(half: NcclHalf | None) -> list[str]:
    if half is None:
        return [NA] * len(_HALF)
    return [
        time_cell(half.time_us),
        bandwidth_cell(half.algbw_GBps),
        bandwidth_cell(half.busbw_GBps),
        wrong_cell(half.wrong),
    ]


def _line(cells: Sequence[str], widths: Sequence[tuple[int, int]]) -> str:
    """Cells right-aligned in (width, gap) slots, trailing blanks dropped."""
    slots = zip(cells, widths, strict=True)
    return "".join(" " * gap + f"{c:>{w}}" for c, (w, gap) in slots).rstrip()


def _header_line(header: dict[str, str]) -> str:
    if next(iter(header)) != "nThread":
        raise ValueError("a test header must start with nThread (as nccl-tests prints it)")
    parts = []
    for key, value in header.items():
        if not value or any(ch.isspace() for ch in value) or value.endswith(":"):
            raise ValueError(f"header value {value!r} of {key!r} cannot be printed on one line")
        bare = key in _BARE_HEADER_KEYS and value[:1].isdigit()
        parts.append(f"{key} {value}" if bare else f"{key}: {value}")
    return "# " + " ".join(parts)


def _rank_line(rank: NcclRank) -> str:
    text = f"#  Rank {rank.rank:2d}"
    if rank.group is not None:
        text += f" Group {rank.group:2d}"
    if rank.pid is not None:
        text += f" Pid {rank.pid:6d}"
    text += f" on {rank.host:>10} device {rank.device:2d}"
    if rank.bus_id is not None:
        text += f" [{rank.bus_id}]"
    return f"{text} {rank.device_name}".rstrip()


def _extra_names(rows: Sequence[NcclRow], extra_columns: Sequence[str] | None) -> list[str]:
    if extra_columns is None:
        names = list(dict.fromkeys(k for r in rows for k in r.extra))
    else:
        names = list(extra_columns)
    for name in names:
        if name in _RESERVED or not name or any(ch.isspace() for ch in name):
            raise ValueError(f"{name!r} cannot be an extra column name")
    return names


def format_test(test: NcclTest, *, extra_columns: Sequence[str] | None = None) -> str:
    """nccl-tests text for one test: header comments, column header, rows, footer.

    ``extra_columns`` are the ``row.extra`` keys to print after the last half
    (default: every key any row has; ``()`` for none). Raises ValueError for
    values nccl-tests' format cannot carry (non-finite numbers, blanks in cells).
    """
    rows = test.rows
    optional = [c for c in _OPTIONAL if any(getattr(r, c[0]) is not None for r in rows)]
    halves = 2 if any(r.in_place is not None for r in rows) else 1
    extras = _extra_names(rows, extra_columns)
    extra_widths = [max([6, len(n), *(len(r.extra.get(n, NA)) for r in rows)]) for n in extras]
    columns = [*_PREFIX, *optional, *(_HALF * halves)]
    widths = [(w, gap) for _, _, w, gap in columns] + [(w, 2) for w in extra_widths]

    out: list[str] = []
    if test.op is not None:
        out.append(f"# Collective test starting: {test.op}_perf")
    if test.header:
        out.append(_header_line(dict(test.header)))
    placement = (test.nranks, test.nodes, test.gpus_per_node)
    if placement != placement_from_ranks(test.ranks):
        nranks, nodes, gpus = (NA if v is None else str(v) for v in placement)
        out.append(f"# tierwise placement: nranks {nranks} nodes {nodes} gpus_per_node {gpus}")
    if test.ranks:
        out += ["#", "# Using devices", *(_rank_line(r) for r in test.ranks)]
    prefix_width = sum(w + gap for w, gap in widths[: len(_PREFIX) + len(optional)])
    title = " " * (prefix_width - 1) + "           out-of-place"
    title += "                       in-place" if halves == 2 else ""
    out += ["#", "#" + title]
    header_widths = [(widths[0][0] - 2, 0), *widths[1:]]  # after the '# '
    out.append("# " + _line([c[0] for c in columns] + extras, header_widths))
    out.append("# " + _line([c[1] for c in columns] + [""] * len(extras), header_widths))
    for row in rows:
        cells = [str(row.size_bytes), str(row.count), row.type]
        for name, *_ in optional:
            value = getattr(row, name)
            cells.append(NA if value is None else str(value))
        cells += _half_cells(row.out_of_place)
        cells += _half_cells(row.in_place) if halves == 2 else []
        cells += [row.extra.get(name, NA) for name in extras]
        if any(not c or any(ch.isspace() for ch in c) for c in cells):
            raise ValueError(f"a cell of the {row.size_bytes} B row is blank or has spaces")
        out.append(_line(cells, widths))
    if not test.truncated:
        oob = test.out_of_bounds
        verdict = "" if oob is None else (" OK" if oob == 0 else " FAILED")
        avg = NA if test.avg_busbw_GBps is None else f"{_finite(test.avg_busbw_GBps):g}"
        out.append(f"# {'Out of bounds values':<20} : {NA if oob is None else oob}{verdict}")
        out.append(f"# {'Avg bus bandwidth':<20} : {avg}")
    return "\n".join(out) + "\n"


def format_tests(tests: Iterable[NcclTest]) -> str:
    """Several tests one after the other, as one log file holds them."""
    return "".join(format_test(t) for t in tests)
