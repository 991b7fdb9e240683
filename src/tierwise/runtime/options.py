"""Benchmark settings: sizes (``8``, ``1K``, ``64M``), durations (``60s``) and `BenchConfig`.

Pure Python (no torch): the launcher validates a config before it starts any rank.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Literal

from tierwise.collectives.sizes import whole_element_sizes
from tierwise.errors import TierwiseError

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "sendrecv"]
Algo = Literal["flat", "hierarchical"]
Backend = Literal["gloo", "nccl", "auto"]
RedOp = Literal["sum", "avg", "max", "min"]

OPS: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "sendrecv",
)
ALGOS: tuple[str, ...] = ("flat", "hierarchical")
BACKENDS: tuple[str, ...] = ("gloo", "nccl", "auto")
REDOPS: tuple[str, ...] = ("sum", "avg", "max", "min")
#: nccl-tests type names (as printed in its ``type`` column) and their element size in bytes.
DTYPES: dict[str, int] = {
    "float": 4,
    "double": 8,
    "half": 2,
    "bfloat16": 2,
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "int64": 8,
}
#: Ops that take a reduction operator (the others print ``none`` in the redop column).
REDUCING_OPS: frozenset[str] = frozenset({"all_reduce", "reduce_scatter"})


@dataclass(frozen=True)
class BenchConfig:
    """One `tierwise bench` run; every rank must hold the same config (checked at start).

    Sizes are in bytes as nccl-tests' ``-b/-e``: per rank for all_reduce, broadcast and
    sendrecv, the whole (all-ranks) buffer for all_gather, reduce_scatter and alltoall.
    ``size_list`` replaces the ``min_bytes * factor**k`` sweep with explicit sizes.
    """

    op: str = "all_reduce"
    min_bytes: int = 8
    max_bytes: int = 64 << 20
    factor: int = 2
    warmup: int = 5
    iters: int = 20
    algo: str = "flat"
    backend: str = "auto"
    dtype: str = "float"
    redop: str = "sum"
    root: int = 0
    check: bool = True
    duration_s: float | None = None
    window_s: float | None = None
    timeout_s: float = 120.0
    ranks_per_node: int | None = None
    size_list: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.size_list is not None:
            sizes = tuple(sorted({int(s) for s in self.size_list}))
            if not sizes or sizes[0] < 1:
                raise TierwiseError(f"size_list must hold sizes >= 1 B, got {self.size_list}")
            object.__setattr__(self, "size_list", sizes)
            object.__setattr__(self, "min_bytes", sizes[0])
            object.__setattr__(self, "max_bytes", sizes[-1])
        _choice("op", self.op, OPS)
        _choice("algo", self.algo, ALGOS)
        _choice("backend", self.backend, BACKENDS)
        _choice("dtype", self.dtype, tuple(DTYPES))
        _choice("redop", self.redop, REDOPS)
        if self.min_bytes < 1 or self.max_bytes < self.min_bytes:
            raise TierwiseError(
                f"sizes: need 1 <= min-bytes <= max-bytes, got {self.min_bytes} and "
                f"{self.max_bytes}"
            )
        if self.factor < 2 and self.max_bytes > self.min_bytes and self.size_list is None:
            raise TierwiseError(f"factor must be an integer >= 2, got {self.factor}")
        if self.warmup < 0 or self.iters < 1:
            raise TierwiseError(
                f"need warmup >= 0 and iters >= 1, got warmup {self.warmup}, iters {self.iters}"
            )
        if self.timeout_s <= 0:
            raise TierwiseError(f"timeout must be > 0 s, got {self.timeout_s}")
        if self.algo == "hierarchical" and self.op == "sendrecv":
            raise TierwiseError("algo: sendrecv is point-to-point and has no hierarchical form")
        if self.redop == "avg" and self.dtype.startswith(("int", "uint")):
            raise TierwiseError(f"redop 'avg' needs a floating dtype, got {self.dtype!r}")
        if self.ranks_per_node is not None and self.ranks_per_node < 1:
            raise TierwiseError(f"ranks-per-node must be >= 1, got {self.ranks_per_node}")
        if self.window_s is not None and self.window_s <= 0:
            raise TierwiseError(f"window must be > 0 s, got {self.window_s}")

    def check_world(self, world_size: int) -> None:
        """Raise `TierwiseError` when the config cannot run on ``world_size`` ranks."""
        if self.op == "broadcast" and not 0 <= self.root < world_size:
            raise TierwiseError(f"root {self.root} must be in [0, {world_size}) for broadcast")
        if self.ranks_per_node is not None and world_size % self.ranks_per_node:
            raise TierwiseError(
                f"ranks-per-node {self.ranks_per_node} must divide world size {world_size}"
            )

    @property
    def elem_bytes(self) -> int:
        """Bytes per element of ``dtype``."""
        return DTYPES[self.dtype]

    def sizes(self) -> Iterator[int]:
        """Requested sizes in bytes: ``min, min*factor, ...`` up to ``max`` (``--duration``
        adds the sustained series at the largest after them)."""
        if self.size_list is not None:
            yield from self.size_list
            return
        size = self.min_bytes
        while size <= self.max_bytes:
            yield size
            if self.factor < 2:
                return
            size *= self.factor

    def counts(self, nranks: int) -> list[tuple[int, int]]:
        """``(size_bytes, elements per rank chunk)`` actually run for ``nranks`` ranks
        (`whole_element_sizes`: whole elements, empty and repeated sizes left out)."""
        return whole_element_sizes(self.op, self.sizes(), nranks, self.elem_bytes)

    def to_json(self) -> str:
        """The config as a JSON string (passed to launched ranks)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> BenchConfig:
        """Inverse of `to_json`."""
        return cls(**json.loads(text))


def _choice(field: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise TierwiseError(f"{field}: {value!r} is not one of {', '.join(allowed)}")
