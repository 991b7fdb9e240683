"""Read nccl-tests logs (every layout nccl-tests has printed) into ``NcclTest``s.

Rules, applied line by line after stripping an ``mpirun --tag-output``
(``[1,0]<stdout>:``) or ``srun --label`` (``0: ``) prefix:

* ``#`` lines are comments. Those nccl-tests defines are read: the
  ``nccl-tests version``/``Collective test starting``/``nThread``/``Using
  devices``/``Rank`` header, the column header (``size count type ...``),
  ``Out of bounds values``/``Avg bus bandwidth`` footer and tierwise's own
  ``tierwise placement:`` line. A recognised line that does not parse is an
  error. Other comments are skipped. The column header and the footer are also
  recognised without ``#`` (old versions and pasted logs).
* A line whose first word is an integer is a result row and must parse with
  the column layout (from the column header, else from its cell count); a
  blank ``redop`` cell (gather/scatter in some versions) is allowed.
* Any other line outside a results table (command lines, job scripts,
  environment dumps) is skipped. Inside a table (column header or first row up
  to ``Avg bus bandwidth``) only recognisable noise is skipped: NCCL debug lines
  (``NCCL INFO|WARN|TRACE``), lines starting with ``[`` (OpenMPI/PMIx/UCX
  ``[host:pid]``), ``srun:``/``slurmstepd:``/``mpirun``/``prterun``/``UCX``/
  ``PMIX``/``Open MPI`` messages and ``---``/``===`` banners. Anything else
  there is an error naming the line.
* Truncation: when the last non-blank line is a row with too few cells, the
  input was cut while nccl-tests was writing it; that row is left out and the
  test records it in ``partial_row_line``. A short row anywhere else is an
  error. A test whose footer (``Out of bounds values``/``Avg bus bandwidth``)
  never came, at the end of the input or before the next test's header, is
  ``truncated``.
* The op comes from ``# Collective test starting: <op>_perf``, else from the
  first ``<op>_perf`` named in a line before the table (the command line),
  else from ``default_op`` (``parse_file`` derives it from the file name).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from tierwise.errors import ParseError
from tierwise.formats.infer import infer_op
from tierwise.formats.nccl_tests import NA, NcclHalf, NcclRank, NcclRow, NcclTest
from tierwise.formats.ops import lookup_op, op_in_name, op_in_text
from tierwise.textio import read_input

_TAG_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+:(?=\s))")
_NOISE = re.compile(
    r"\bNCCL (?:INFO|WARN|TRACE)\b"
    r"|^\s*\["
    r"|^\s*(?:srun|slurmstepd|salloc|mpirun|mpiexec|prterun|orterun|UCX|PMIX|PMIx|Open MPI)\b"
    r"|^\s*(?:-{3,}|={3,})"
)
_DIGITS = re.compile(r"^\d+$")  # a line starting with one is a result row
_INT = re.compile(r"^\d{1,20}$")
_SIGNED = re.compile(r"^-?\d{1,12}$")
_FLOAT = re.compile(r"^[+-]?(?:\d{1,30}(?:\.\d{0,30})?|\.\d{1,30})(?:[eE][+-]?\d{1,3})?$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

_STARTING = re.compile(r"^Collective test starting:\s*(\S+)\s*$")
_RANK = re.compile(
    r"^Rank\s+(\d{1,9})(?:\s+Group\s+(\d{1,9}))?(?:\s+Pid\s+(\d{1,12}))?\s+on\s+(\S+)"
    r"\s+device\s+(\d{1,9})(?:\s+\[([^\]]*)\])?\s*(.*)$"
)


def rank_line(body: str) -> NcclRank | None:
    """The rank line ``Rank 0 Group 0 Pid 1 on HOST device 0 [0x1b] NAME`` (the text after
    its ``#``), or None when ``body`` is not one."""
    match = _RANK.match(body)
    if not match:
        return None
    rank, group, pid, host, device, bus, name = match.groups()
    return NcclRank(
        rank=int(rank),
        host=host,
        device=int(device),
        group=None if group is None else int(group),
        pid=None if pid is None else int(pid),
        bus_id=bus,
        device_name=name.strip(),
    )


_PLACEMENT = re.compile(
    r"^tierwise placement:\s+nranks\s+(\S+)\s+nodes\s+(\S+)\s+gpus_per_node\s+(\S+)\s*$"
)
_OOB = re.compile(r"^Out of bounds values\s*:\s*(\S+)(?:\s+(?:OK|FAILED))?\s*$")
_AVG = re.compile(r"^Avg bus bandwidth\s*:\s*(\S+)(?:\s+(?:OK|FAILED))?\s*$")

_PREFIX_KINDS = ("size", "count", "type", "redop", "root")
_HALF_KINDS = {"time": "time", "cputime": "time", "algbw": "algbw", "busbw": "busbw"}
_WRONG_NAMES = ("#wrong", "wrong", "error")
_TOKENS_PER_EXTRA = {"timestamp": 2}  # "%Y-%m-%d %H:%M:%S" printed with -T / report_timestamps
_INFERRED = {  # cells per row -> (redop column, root column, halves) when no header was seen
    7: (False, False, 1),
    8: (True, False, 1),
    9: (True, True, 1),
    11: (False, False, 2),
    12: (True, False, 2),
    13: (True, True, 2),
}


class _CellError(Exception):
    def __init__(self, column: str, token: str, expected: str):
        super().__init__(f"column {column!r} has {token[:40]!r}, expected {expected}")


@dataclass(frozen=True)
class _Column:
    kind: str  # size|count|type|redop|root|time|algbw|busbw|wrong|extra
    half: int  # -1 row prefix, 0 out-of-place, 1 in-place
    key: str  # header name; the extra's key
    tokens: int = 1


@dataclass(frozen=True)
class _Layout:
    columns: tuple[_Column, ...]

    @property
    def ncells(self) -> int:
        return sum(c.tokens for c in self.columns)

    @property
    def has_redop(self) -> bool:
        return any(c.kind == "redop" for c in self.columns)

    @property
    def halves(self) -> int:
        return sum(1 for c in self.columns if c.kind == "time")


def _header_layout(names: list[str]) -> _Layout:
    """Column layout from the header line's names; raises ValueError on a bad header."""
    columns: list[_Column] = []
    half = -1
    seen: set[tuple[int, str]] = set()
    extra_keys: set[str] = set()
    for name in names:
        if name in _HALF_KINDS and _HALF_KINDS[name] == "time":
            half += 1
            if half > 1:
                raise ValueError("more than two time columns")
        kind = _HALF_KINDS.get(name) or ("wrong" if name in _WRONG_NAMES else None)
        if kind is None and name in _PREFIX_KINDS:
            if half >= 0:
                raise ValueError(f"column {name!r} after the time column")
            kind = name
        if kind is None:
            key = name if name not in extra_keys else f"in_place_{name}"
            if key in extra_keys:
                raise ValueError(f"column {name!r} repeated")
            extra_keys.add(key)
            columns.append(_Column("extra", half, key, _TOKENS_PER_EXTRA.get(name, 1)))
            continue
        if kind not in _PREFIX_KINDS and half < 0:
            raise ValueError(f"column {name!r} before the time column")
        if (half, kind) in seen:
            raise ValueError(f"column {name!r} repeated")
        seen.add((half, kind))
        columns.append(_Column(kind, half, name))
    if [c.kind for c in columns[:3]] != ["size", "count", "type"]:
        raise ValueError("the first columns must be size count type")
    for h in range(half + 1):
        missing = {"algbw", "busbw"} - {k for hh, k in seen if hh == h}
        if missing:
            raise ValueError(f"no {' or '.join(sorted(missing))} column")
    if half < 0:
        raise ValueError("no time column")
    return _Layout(tuple(columns))


def _inferred_layout(ncells: int) -> _Layout | None:
    """The standard layout that has ``ncells`` cells, for rows without a column header."""
    if ncells not in _INFERRED:
        return None
    redop, root, halves = _INFERRED[ncells]
    names = ["size", "count", "type"] + ["redop"] * redop + ["root"] * root
    names += ["time", "algbw", "busbw", "#wrong"] * halves
    return _header_layout(names)


def _number(token: str, column: str) -> float | None:
    if token == NA:
        return None
    if not _FLOAT.match(token):
        raise _CellError(column, token, "a number or N/A")
    value = float(token)
    if not math.isfinite(value) or value < 0:
        raise _CellError(column, token, "a finite number >= 0")
    return value


def _cell(column: _Column, token: str) -> object:
    """One cell's value; raises _CellError."""
    kind = column.kind
    if kind in ("size", "count"):
        if not _INT.match(token):
            raise _CellError(column.key, token, "a non-negative integer")
        return int(token)
    if kind == "type":
        if not _NAME.match(token):
            raise _CellError(column.key, token, "a data type name")
        return token
    if kind == "redop":
        if token == NA:
            return None
        if not _NAME.match(token):
            raise _CellError(column.key, token, "a reduction name or N/A")
        return token
    if kind == "root":
        if token == NA:
            return None
        if not _SIGNED.match(token):
            raise _CellError(column.key, token, "an integer rank or N/A")
        return int(token)
    if kind == "extra":
        return token
    return _number(token, column.key)


def _row(layout: _Layout, tokens: list[str]) -> NcclRow:
    """Build a row from exactly ``layout.ncells`` tokens; raises _CellError."""
    prefix: dict[str, object] = {"redop": None, "root": None}
    halves: list[dict[str, float | None]] = [{} for _ in range(layout.halves)]
    extra: dict[str, str] = {}
    pos = 0
    for column in layout.columns:
        token = " ".join(tokens[pos : pos + column.tokens])
        pos += column.tokens
        value = _cell(column, token)
        if column.kind == "extra":
            if token != NA:
                extra[column.key] = token
        elif column.half < 0:
            prefix[column.kind] = value
        else:
            halves[column.half][column.kind] = value  # type: ignore[assignment]
    parts = [
        NcclHalf(h.get("time"), h.get("algbw"), h.get("busbw"), h.get("wrong")) for h in halves
    ]
    in_place = parts[1] if len(parts) > 1 else None
    if in_place == NcclHalf(None, None, None, None):
        in_place = None
    return NcclRow(
        size_bytes=prefix["size"],  # type: ignore[arg-type]
        count=prefix["count"],  # type: ignore[arg-type]
        type=prefix["type"],  # type: ignore[arg-type]
        redop=prefix["redop"],  # type: ignore[arg-type]
        root=prefix["root"],  # type: ignore[arg-type]
        out_of_place=parts[0],
        in_place=in_place,
        extra=extra,
    )


def _without_redop(layout: _Layout) -> _Layout:
    return _Layout(tuple(c for c in layout.columns if c.kind != "redop"))


def _header_fields(body: str) -> dict[str, str]:
    """``nThread 1 nGpus 1 ... step: 2(factor) warmup iters: 5 ...`` as {name: value}."""
    words = body.split()
    fields: dict[str, str] = {}
    label: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word.endswith(":") and i + 1 < len(words):
            fields[" ".join([*label, word[:-1]])] = words[i + 1]
            label, i = [], i + 2
        elif not label and i + 1 < len(words) and words[i + 1][:1].isdigit():
            fields[word] = words[i + 1]
            i += 2
        else:
            label.append(word)
            i += 1
    if label:
        raise ValueError(f"no value after {' '.join(label)!r}")
    return fields


def _optional_int(token: str) -> int | None:
    if token == NA:
        return None
    if not _INT.match(token):
        raise ValueError(f"{token!r} is not an integer")
    return int(token)


@dataclass
class _Builder:
    """A test being read."""

    op: str | None = None
    op_source: str | None = None
    header: dict[str, str] = field(default_factory=dict)
    ranks: list[NcclRank] = field(default_factory=list)
    rank_lines: dict[int, int] = field(default_factory=dict)
    placement: tuple[int | None, int | None, int | None] | None = None
    layout: _Layout | None = None
    rows: list[NcclRow] = field(default_factory=list)
    table_started: bool = False
    footer_seen: bool = False
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    partial_row_line: int | None = None

    @property
    def has_content(self) -> bool:
        return bool(self.header or self.ranks or self.placement or self.table_started)

    def build(self, default_op: str | None, forced_op: str | None, source: str | None) -> NcclTest:
        nranks, nodes, gpus_per_node = self.placement or (None, None, None)
        test = NcclTest(
            op=None,
            rows=tuple(self.rows),
            nranks=nranks,
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            ranks=tuple(self.ranks),
            header=self.header,
            avg_busbw_GBps=self.avg_busbw,
            out_of_bounds=self.out_of_bounds,
            truncated=not self.footer_seen,
            partial_row_line=self.partial_row_line,
        )
        op, how = forced_op, "--op"
        if op is None:
            op, how = self.op, self.op_source
        if op is None:
            op, how = default_op, "file name"
        if op is None and test.rows:
            try:
                op, how = infer_op(test, source), "table"
            except ParseError:
                op, how = None, None
        return replace(test, op=op, op_source=how if op is not None else None)


class _Reader:
    def __init__(
        self, text: str, source: str | None, default_op: str | None, forced_op: str | None
    ):
        self.lines = text.splitlines()
        self.source = source
        self.default_op = default_op
        self.forced_op = forced_op
        self.tests: list[NcclTest] = []
        self.current = _Builder()
        self.pending_op: str | None = None
        self.last_line = max(
            (i + 1 for i, line in enumerate(self.lines) if line.strip()), default=0
        )
        self.lineno = 0

    def error(self, message: str) -> ParseError:
        return ParseError(message, line=self.lineno, source=self.source)

    def read(self) -> list[NcclTest]:
        for lineno, raw in enumerate(self.lines, start=1):
            self.lineno = lineno
            self.line(_TAG_PREFIX.sub("", raw, count=1))
        self.finish()
        if not any(t.rows for t in self.tests):
            raise ParseError(
                "no nccl-tests results found (no complete result row under a"
                " '#  size count type ...' header)",
                source=self.source,
            )
        return self.tests

    # -- test boundaries -------------------------------------------------------------------

    def finish(self) -> None:
        if self.current.has_content:
            self.tests.append(self.current.build(self.default_op, self.forced_op, self.source))
        pending = self.pending_op
        self.current = _Builder(op=pending, op_source="command line" if pending else None)
        self.pending_op = None

    def header_line(self) -> _Builder:
        """The builder a header line belongs to: a new one once the current has a table."""
        if self.current.table_started:
            self.finish()
        return self.current

    def mention_op(self, text: str) -> None:
        op = op_in_text(text)
        if op is None:
            return
        if self.current.table_started:
            self.pending_op = op
        elif self.current.op is None:
            self.current.op, self.current.op_source = op, "command line"

    # -- line dispatch ---------------------------------------------------------------------

    def line(self, line: str) -> None:
        stripped = line.strip()
        if not stripped:
            return
        comment = stripped.startswith("#")
        body = stripped.lstrip("#").strip() if comment else stripped
        if self.known(body, comment):
            return
        if comment:
            self.mention_op(body)
        elif _DIGITS.match(body.split()[0]):
            self.result_row(body.split())
        elif self.current.table_started and not _NOISE.search(body):
            raise self.error(f"unexpected line inside the results table: {stripped[:80]!r}")
        else:
            self.mention_op(body)

    def known(self, body: str, comment: bool) -> bool:
        """Handle a line nccl-tests defines; False if ``body`` is none of them."""
        words = body.split()
        if not words:
            return True  # a bare '#'
        if words[:3] == ["size", "count", "type"]:
            self.column_header(words)
        elif body.startswith("(B)") or body.startswith("out-of-place"):
            pass
        elif body.startswith("Out of bounds values") or body.startswith("Avg bus bandwidth"):
            self.footer(body)
        elif not comment:
            return False
        elif body.startswith("nccl-tests version") or body == "Using devices":
            self.header_line()
        elif body.startswith("Collective test starting"):
            self.banner(body)
        elif body.startswith("Collective test concluded"):
            pass
        elif words[0] == "nThread":
            self.nthread(body)
        elif words[0] == "Rank" and len(words) > 1 and words[1][:1].isdigit():
            self.rank(body)
        elif body.startswith("tierwise placement"):
            self.placement(body)
        else:
            return False
        return True

    # -- header ----------------------------------------------------------------------------

    def banner(self, body: str) -> None:
        match = _STARTING.match(body)
        if not match:
            raise self.error(f"cannot read the test banner {body!r}")
        builder = self.header_line()
        name = match.group(1)
        builder.op = lookup_op(name) or name.removesuffix("_perf")
        builder.op_source = "banner"

    def nthread(self, body: str) -> None:
        builder = self.header_line()
        try:
            builder.header = _header_fields(body)
        except ValueError as exc:
            raise self.error(f"cannot read the nThread header: {exc}") from None

    def rank(self, body: str) -> None:
        rank = rank_line(body)
        if rank is None:
            raise self.error(f"cannot read the rank line {body!r}")
        builder = self.header_line()
        if rank.rank in builder.rank_lines:
            raise self.error(
                f"rank {rank.rank} listed twice (first at line {builder.rank_lines[rank.rank]}):"
                " the processes ran as separate jobs (nccl-tests built without MPI?)"
            )
        builder.rank_lines[rank.rank] = self.lineno
        builder.ranks.append(rank)

    def placement(self, body: str) -> None:
        match = _PLACEMENT.match(body)
        try:
            if not match:
                raise ValueError("expected 'nranks N nodes N gpus_per_node N'")
            values = tuple(_optional_int(v) for v in match.groups())
        except ValueError as exc:
            raise self.error(f"cannot read the tierwise placement line: {exc}") from None
        self.header_line().placement = values  # type: ignore[assignment]

    def column_header(self, words: list[str]) -> None:
        if self.current.rows or self.current.footer_seen:
            self.finish()
        try:
            layout = _header_layout(words)
        except ValueError as exc:
            raise self.error(f"cannot read the column header: {exc}") from None
        if self.current.layout is not None and self.current.layout != layout:
            raise self.error("a second, different column header before any result row")
        self.current.layout = layout
        self.current.table_started = True

    # -- table -----------------------------------------------------------------------------

    def footer(self, body: str) -> None:
        builder = self.current
        if not builder.table_started:
            raise self.error(f"footer line without a results table: {body[:60]!r}")
        avg = _AVG.match(body)
        oob = _OOB.match(body)
        try:
            if avg:
                builder.avg_busbw = _number(avg.group(1), "Avg bus bandwidth")
            elif oob:
                builder.out_of_bounds = _optional_int(oob.group(1))
            else:
                raise ValueError("expected ': <number>'")
        except (ValueError, _CellError) as exc:
            raise self.error(f"cannot read the footer {body[:60]!r}: {exc}") from None
        builder.footer_seen = True
        if avg:
            self.finish()

    def result_row(self, tokens: list[str]) -> None:
        builder = self.current
        if builder.footer_seen:
            raise self.error("result row after the test's footer")
        layout = builder.layout or _inferred_layout(len(tokens))
        final = self.lineno == self.last_line
        if layout is None:
            if final:
                builder.table_started = True
                builder.partial_row_line = self.lineno
                return
            raise self.error(
                f"result row with {len(tokens)} cells and no column header to say what they are"
            )
        try:
            row = self.fit_row(layout, tokens, final)
        except _CellError as exc:
            raise self.error(f"bad result row: {exc}") from None
        builder.layout = layout
        builder.table_started = True
        if row is None:
            builder.partial_row_line = self.lineno
        else:
            builder.rows.append(row)

    def fit_row(self, layout: _Layout, tokens: list[str], final: bool) -> NcclRow | None:
        """The row for ``tokens``, or None for a cut-off final line; raises _CellError."""
        expected = layout.ncells
        if len(tokens) == expected:
            return _row(layout, tokens)
        if len(tokens) == expected - 1 and layout.has_redop:
            try:  # gather/scatter print an empty redop cell in some versions
                return _row(_without_redop(layout), tokens)
            except _CellError:
                pass
        cells = [c for c in layout.columns for _ in range(c.tokens)]
        short = len(tokens) < expected and final
        # a cut-off final cell may be any prefix of a valid one, so it is not checked
        for column, token in zip(cells, tokens[:-1] if short else tokens, strict=False):
            if column.tokens == 1:
                _cell(column, token)
        if short:
            return None
        raise self.error(
            f"result row has {len(tokens)} cells, the column layout has {expected}"
            + (" (a cut-off line inside the file?)" if len(tokens) < expected else "")
        )


def parse_log(
    text: str, source: str | None = None, default_op: str | None = None, op: str | None = None
) -> list[NcclTest]:
    """All tests in an nccl-tests log, in order; raises ParseError naming the line.

    ``source`` names the input in errors. A test's op is ``op`` when given (``--op``), else
    the one the log names (banner, command line), else ``default_op``, else the one its table
    fits (``infer_op``); None when nothing settles it.
    """
    return _Reader(text, source, default_op, op).read()


def parse_file(path: str | Path, op: str | None = None) -> list[NcclTest]:
    """``parse_log`` of a file (``-``: stdin); the op defaults to the one its name spells."""
    text, source = read_input(path)
    return parse_log(text, source=source, default_op=op_in_name(Path(path).name), op=op)
