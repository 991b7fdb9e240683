"""nccl-tests' message sizes: what runs for each `-b/-e` size (no numpy: `bench --help` reads
it)."""

from __future__ import annotations

from collections.abc import Iterable

SPLIT_OPS: frozenset[str] = frozenset({"all_gather", "reduce_scatter", "alltoall"})
"""Ops whose `-b/-e` size is the whole buffer, split evenly over the ranks (nccl-tests'
`*GetCollByteCount` in src/all_gather.cu, reduce_scatter.cu, alltoall.cu); the others'
size is each rank's buffer."""


def ranks_sharing(op: str, nranks: int) -> int:
    """Ranks one `-b/-e` size is split over: all of them for `SPLIT_OPS`, else 1."""
    return nranks if op in SPLIT_OPS else 1


def whole_element_sizes(
    op: str, sizes: Iterable[int], nranks: int, elem_bytes: int
) -> list[tuple[int, int]]:
    """`(bytes, elements per rank)` that run for each requested size: as nccl-tests, a size
    is cut to whole elements (whole elements per rank for `SPLIT_OPS`); a size that holds
    none, or repeats the previous count, is left out."""
    per_count = elem_bytes * ranks_sharing(op, nranks)  # bytes of one element per rank
    seen: set[int] = set()
    runs = []
    for size in sizes:
        count = size // per_count
        if count == 0 or count in seen:
            continue
        seen.add(count)
        runs.append((count * per_count, count))
    return runs
