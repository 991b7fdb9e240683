"""Which node each rank sits on: the two levels ("node", "local") of a hierarchical collective.

Pure Python (no torch), so launchers and tests can reason about placements cheaply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from tierwise.errors import TierwiseError


@dataclass(frozen=True)
class Placement:
    """Node id of every rank (index = global rank); every node holds the same number of ranks.

    Nodes are ordered by their lowest rank and ranks inside a node ascend, so ``mesh[j][l]`` is
    the global rank with local index ``l`` on node ``j``.
    """

    node_of: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.node_of:
            raise TierwiseError("placement: world size must be >= 1, got 0 ranks")
        counts = {n: self.node_of.count(n) for n in set(self.node_of)}
        if len(set(counts.values())) != 1:
            detail = ", ".join(f"node {n}: {c}" for n, c in sorted(counts.items()))
            raise TierwiseError(
                f"placement: every node must hold the same number of ranks, got {detail}"
            )

    @classmethod
    def contiguous(cls, world_size: int, ranks_per_node: int) -> Placement:
        """Ranks ``k*ranks_per_node .. (k+1)*ranks_per_node-1`` on node ``k`` (torchrun, srun)."""
        if world_size < 1:
            raise TierwiseError(f"world size must be >= 1, got {world_size}")
        if ranks_per_node < 1 or world_size % ranks_per_node:
            raise TierwiseError(
                f"ranks per node {ranks_per_node} must be >= 1 and divide world size {world_size}"
            )
        return cls(tuple(r // ranks_per_node for r in range(world_size)))

    @classmethod
    def from_node_ids(cls, node_ids: Sequence[int]) -> Placement:
        """An explicit node id per rank, e.g. ``[0, 1, 0, 1]`` for round-robin placement."""
        return cls(tuple(int(n) for n in node_ids))

    @classmethod
    def from_env(cls, world_size: int, environ: Mapping[str, str]) -> Placement:
        """Contiguous placement with ``LOCAL_WORLD_SIZE`` ranks per node (all ranks on one node
        when it is unset)."""
        raw = environ.get("LOCAL_WORLD_SIZE", str(world_size))
        try:
            per_node = int(raw)
        except ValueError:
            raise TierwiseError(f"LOCAL_WORLD_SIZE must be an integer, got {raw!r}") from None
        return cls.contiguous(world_size, per_node)

    @property
    def world_size(self) -> int:
        """Number of ranks."""
        return len(self.node_of)

    @cached_property
    def mesh(self) -> tuple[tuple[int, ...], ...]:
        """Global ranks as ``[node][local]``: nodes ordered by lowest rank, ranks ascending."""
        order: dict[int, list[int]] = {}
        for rank, node in enumerate(self.node_of):
            order.setdefault(node, []).append(rank)
        return tuple(tuple(ranks) for ranks in order.values())

    @property
    def nodes(self) -> int:
        """Number of nodes."""
        return len(self.mesh)

    @property
    def ranks_per_node(self) -> int:
        """Ranks on each node (the local world size)."""
        return len(self.mesh[0])

    @cached_property
    def _coords(self) -> dict[int, tuple[int, int]]:
        return {r: (j, i) for j, row in enumerate(self.mesh) for i, r in enumerate(row)}

    def coords(self, rank: int) -> tuple[int, int]:
        """``(node index, local index)`` of a global rank."""
        return self._coords[rank]
