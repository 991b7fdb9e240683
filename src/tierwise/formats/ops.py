"""Collective op names as nccl-tests uses them, and its bus-bandwidth factors.

nccl-tests reports ``algbw = size / time`` and ``busbw = algbw × factor`` where the
factor makes busbw comparable with the hardware link bandwidth whatever the op
(NVIDIA/nccl-tests ``doc/PERFORMANCE.md``; ``*GetBw`` in ``src/<op>.cu``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tierwise.errors import TierwiseError


def _all_reduce(n: int) -> float:
    return 2.0 * (n - 1) / n


def _one_to_all(n: int) -> float:
    return (n - 1) / n


def _unit(n: int) -> float:
    return 1.0


BUSBW_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": _all_reduce,  # 2(n-1)/n
    "all_gather": _one_to_all,  # (n-1)/n
    "reduce_scatter": _one_to_all,  # (n-1)/n
    "alltoall": _one_to_all,  # (n-1)/n
    "broadcast": _unit,  # 1
    "reduce": _unit,  # 1
    "sendrecv": _unit,  # 1
    "gather": _one_to_all,  # (n-1)/n, nccl-tests src/gather.cu
    "scatter": _one_to_all,  # (n-1)/n, nccl-tests src/scatter.cu
}
"""busbw / algbw as a function of the number of ranks, per canonical op."""

OPS: tuple[str, ...] = tuple(BUSBW_FACTORS)
"""Canonical op names, in nccl-tests' spelling without the ``_perf`` suffix."""

_ALIASES: dict[str, str] = {
    **{op.replace("_", ""): op for op in OPS},
    "bcast": "broadcast",
}

_OP_IN_TEXT = re.compile(r"(?<![A-Za-z0-9])([A-Za-z][A-Za-z0-9_]{0,40}?)_perf(?![A-Za-z0-9_])")


def _alias_key(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    key = key.removesuffix("_perf").removeprefix("nccl")
    return key.replace("_", "")


def lookup_op(name: str) -> str | None:
    """The canonical op for an alias (``allreduce``, ``all_reduce_perf``, ``ncclAllReduce``)."""
    return _ALIASES.get(_alias_key(name))


def canonical_op(name: str) -> str:
    """The canonical op for ``name``; raises TierwiseError naming the allowed ops."""
    op = lookup_op(name)
    if op is None:
        raise TierwiseError(f"op {name!r} is not a known collective; allowed: {', '.join(OPS)}")
    return op


def busbw_factor(op: str, nranks: int) -> float:
    """nccl-tests' busbw / algbw ratio for ``op`` on ``nranks`` ranks (dimensionless)."""
    if isinstance(nranks, bool) or not isinstance(nranks, int) or nranks < 1:
        raise TierwiseError(f"nranks must be an integer >= 1, got {nranks!r}")
    return BUSBW_FACTORS[canonical_op(op)](nranks)


def op_in_text(text: str) -> str | None:
    """The op of the first known ``<op>_perf`` binary named in ``text`` (a command line)."""
    for match in _OP_IN_TEXT.finditer(text):
        op = lookup_op(match.group(1))
        if op is not None:
            return op
    return None


def op_in_name(name: str) -> str | None:
    """The op a file name spells (``dgx_1x8_all_reduce.txt``) if exactly one op matches."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    found: set[str] = set()
    for start in range(len(words)):
        for stop in range(start + 1, min(start + 3, len(words)) + 1):
            op = lookup_op("_".join(words[start:stop]))
            if op is not None:
                found.add(op)
    # "all_reduce" also contains the word "reduce": keep only ops not inside a longer match
    found = {op for op in found if not any(op != o and op in o for o in found)}
    return found.pop() if len(found) == 1 else None
