"""Which collective an nccl-tests table measured, when its log does not name the test.

Most logs pasted into NCCL's issue tracker lack the ``# Collective test starting`` banner and
the command line. The table itself still tells the op apart (NVIDIA/nccl-tests
``src/common.cu`` ``TimeTest`` and each ``src/<op>.cu``):

* ``size`` is ``max(sendBytes, recvBytes)`` and ``count`` the per-rank ``paramcount``:
  ``size = count x type size`` for all_reduce, broadcast, reduce and sendrecv;
  ``size = count x type size x nranks`` for all_gather, reduce_scatter, alltoall, gather and
  scatter (which so also gives the rank count).
* ``redop``: a reduction (``sum``, ``prod``, ``max``, ``min``, ``avg``) for all_reduce, reduce,
  reduce_scatter and sendrecv (which loops over the ops without using them); ``none`` or blank
  for the others.
* ``root``: a rank >= 0 for broadcast, reduce, gather and scatter (every version that has
  them prints the column); ``-1``, blank or no column otherwise.
* ``busbw / algbw`` is nccl-tests' bus factor of the op for the rank count (``ops.py``).
* alltoall never checks its in-place half (``#wrong`` ``N/A`` there, or garbage such as
  ``1e+00`` in old versions, while every out-of-place count is 0); the other ops print 0
  there on a clean validated run.
* The rank count comes from the rank lines only when they list ranks 0..n-1 (pasted logs
  often keep only the last line), else from the size relation above.

Each clue removes the ops it rules out; one op left is the answer, else the error lists the
ops that still fit (``--op`` settles it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tierwise.errors import ParseError
from tierwise.formats.nccl_tests import NcclRow, NcclTest
from tierwise.formats.ops import BUSBW_FACTORS, OPS

#: Bytes per element of nccl-tests' type names (``test_typenames`` in src/common.cu).
TYPE_BYTES = {
    "int8": 1,
    "uint8": 1,
    "char": 1,
    "f8e4m3": 1,
    "f8e5m2": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "int32": 4,
    "uint32": 4,
    "int": 4,
    "float": 4,
    "float32": 4,
    "int64": 8,
    "uint64": 8,
    "double": 8,
    "float64": 8,
}
REDUCTIONS = frozenset({"sum", "prod", "max", "min", "avg", "mulsum", "premulsum"})
WHOLE_BUFFER = frozenset({"all_reduce", "broadcast", "reduce", "sendrecv"})
REDUCING = frozenset({"all_reduce", "reduce", "reduce_scatter", "sendrecv"})
ROOTED = frozenset({"broadcast", "reduce", "gather", "scatter"})
#: busbw/algbw is only read from rows whose algbw has this many GB/s or more, so the two
#: decimals nccl-tests prints leave at most 1% error in the ratio.
MIN_ALGBW_GBPS = 0.5
#: Half the last printed digit of algbw and busbw (GB/s, printed with %.2f).
PRINT_STEP_GBPS = 0.005
#: Smallest relative tolerance between busbw/algbw and a bus factor (float noise).
MIN_TOLERANCE = 0.002
#: Rank counts tried when the log does not give one: 1..4096 one by one, and this one for
#: the limit the factors approach (2 for all_reduce, 1 for the (n-1)/n ops).
MAX_RANKS = 1 << 20
TRIED_RANKS = 4096


def _per_rank_ratio(rows: Iterable[NcclRow]) -> int | None:
    """size / (count x type size) shared by every row with count > 0; None if unknown."""
    ratios = set()
    for row in rows:
        width = TYPE_BYTES.get(row.type.lower())
        if width is None or row.count <= 0:
            continue
        whole, rest = divmod(row.size_bytes, row.count * width)
        if rest or whole < 1:
            return None
        ratios.add(whole)
    return ratios.pop() if len(ratios) == 1 else None


def _bus_ratio(rows: Iterable[NcclRow]) -> tuple[float, float] | None:
    """(busbw / algbw, its rounding tolerance) of the half with the largest algbw."""
    halves = [
        h
        for r in rows
        for h in (r.out_of_place, r.in_place)
        if h is not None and h.algbw_GBps is not None and h.busbw_GBps is not None
    ]
    best = max(halves, key=lambda h: h.algbw_GBps or 0.0, default=None)
    if best is None or (best.algbw_GBps or 0.0) < MIN_ALGBW_GBPS:
        return None
    algbw, busbw = best.algbw_GBps or 1.0, best.busbw_GBps or 0.0
    ratio = busbw / algbw
    # ratio of two numbers each off by up to PRINT_STEP: (b +- d) / (a -+ d)
    worst = (busbw + PRINT_STEP_GBPS) / (algbw - PRINT_STEP_GBPS) - ratio
    return ratio, max(worst, MIN_TOLERANCE * ratio, MIN_TOLERANCE)


def _fits(
    factor: Callable[[int], float], ratio: float, tolerance: float, nranks: int | None
) -> bool:
    """The bus factor gives ``ratio`` for ``nranks`` (for some rank count when unknown)."""
    close = lambda n: abs(factor(n) - ratio) <= tolerance  # noqa: E731
    if nranks is not None:
        return close(nranks)
    if close(MAX_RANKS):
        return True
    return any(close(n) for n in range(1, TRIED_RANKS + 1))


def _in_place_checked(rows: Iterable[NcclRow]) -> bool | None:
    """With every out-of-place #wrong 0: False when every in-place one is N/A or not 0
    (alltoall's unchecked half), True when every one is 0; None otherwise."""
    rows = list(rows)
    if not rows or any(r.out_of_place.wrong != 0 or r.in_place is None for r in rows):
        return None
    wrong = [r.in_place.wrong for r in rows if r.in_place is not None]
    if all(w == 0 for w in wrong):
        return True
    return False if all(w != 0 for w in wrong) else None


def _listed_ranks(test: NcclTest) -> int | None:
    """The rank count when the rank lines list ranks 0..n-1 (pasted logs often cut them)."""
    if test.ranks and sorted(r.rank for r in test.ranks) != list(range(len(test.ranks))):
        return None
    return test.nranks


def op_clues(test: NcclTest) -> list[tuple[str, frozenset[str]]]:
    """(clue, ops it leaves possible) for each clue the table gives."""
    rows = test.rows
    clues: list[tuple[str, frozenset[str]]] = []
    everything = frozenset(OPS)
    redops = {r.redop.lower() for r in rows if r.redop is not None}
    if redops and redops <= REDUCTIONS:
        clues.append((f"redop {'/'.join(sorted(redops))}", REDUCING))
    elif redops <= {"none"} and rows:  # sendrecv prints the op it loops over, or none
        clues.append(("no reduction", everything - (REDUCING - {"sendrecv"})))
    roots = {r.root for r in rows if r.root is not None}
    if roots and all(root >= 0 for root in roots):
        clues.append((f"root {min(roots)}", ROOTED))
    elif roots <= {-1} and rows:  # rooted tests always print their root
        clues.append(("root -1" if roots else "no root column", everything - ROOTED))
    nranks = _listed_ranks(test)
    per_rank = _per_rank_ratio(rows)
    if per_rank == 1 and nranks != 1:
        clues.append(("size = count x type size", WHOLE_BUFFER))
    elif per_rank is not None and per_rank > 1:
        clues.append((f"size = count x type size x {per_rank}", everything - WHOLE_BUFFER))
        nranks = nranks or per_rank
    measured = _bus_ratio(rows)
    if measured is not None:
        ratio, tol = measured
        fit = frozenset(op for op, f in BUSBW_FACTORS.items() if _fits(f, ratio, tol, nranks))
        ranks = f" on {nranks} ranks" if nranks is not None else ""
        clues.append((f"busbw/algbw {ratio:.3f}{ranks}", fit))
    checked = _in_place_checked(rows)
    if checked is not None:
        alltoall = frozenset({"alltoall"})
        clues.append(
            ("in-place #wrong 0", everything - alltoall)
            if checked
            else ("in-place unchecked", alltoall)
        )
    return clues


def infer_op(test: NcclTest, source: str | None = None) -> str:
    """The one op the table fits; a ParseError listing the clues and the ops left otherwise."""
    clues = op_clues(test)
    left = set(OPS)
    for _, ops in clues:
        left &= ops
    if len(left) == 1:
        return left.pop()
    said = "; ".join(c for c, _ in clues) or "no rows to read"
    fits = f"it fits {', '.join(o for o in OPS if o in left)}" if left else "it fits no collective"
    raise ParseError(
        f"the log does not name its test and the table does not settle it ({said}): {fits};"
        " pass --op",
        source=source,
    )
