"""Cluster state on the switch tree: which nodes are free, down or drained, per leaf and pod.

Leaves hold consecutive nodes (`ClusterSpec.leaf_sizes`: equal leaves, the last one perhaps
partly filled, or the sizes a topology.conf lists), and pods hold consecutive leaves the same
way (a 2-level tree has one pod). Allocation is node-exclusive. Counts per leaf are kept
incrementally so policies read them in O(leaves).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np

from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.placement import block_of, hierarchy

FREE = -1
"""`owner` value of an idle, schedulable node."""
UNAVAILABLE = -2
"""`owner` value of a down or drained node."""


def node_name_width(nodes: int) -> int:
    """Digits in node names (`gpu001`): at least 3, more for clusters of 1000+ nodes."""
    return max(3, len(str(nodes)))


def node_name(index: int, nodes: int, prefix: str = "gpu") -> str:
    """Slurm-style name of node `index` (0-based), numbered from 1: gpu001, gpu002..."""
    return f"{prefix}{index + 1:0{node_name_width(nodes)}d}"


class ClusterState:
    """Free/allocated/unavailable nodes of `cluster`, with per-leaf free counts.

    `down` nodes are broken; `drained` ones take no new jobs (in a simulation both are simply
    unavailable; the distinction is kept for reporting and Slurm output).
    """

    def __init__(self, cluster: ClusterSpec, down: Iterable[int] = (), drained: Iterable[int] = ()):
        self.cluster = cluster
        self.nodes = cluster.nodes
        self.nodes_per_leaf = cluster.nodes_per_leaf
        self.leaves = cluster.leaves
        self.leaves_per_pod = cluster.leaves_per_pod
        self.pods = cluster.pods
        self.leaf_of = hierarchy(cluster, np.arange(self.nodes))[1]
        self.leaf_start = np.asarray(cluster.leaf_starts, dtype=np.int64)
        self.pod_of_leaf = block_of(cluster.pod_sizes, np.arange(self.leaves))
        self.leaf_size = np.bincount(self.leaf_of, minlength=self.leaves)
        self.down = frozenset(_checked(down, self.nodes, "down"))
        self.drained = frozenset(_checked(drained, self.nodes, "drained"))
        self.owner = np.full(self.nodes, FREE, dtype=np.int64)
        self.owner[list(self.down | self.drained)] = UNAVAILABLE
        self.free_per_leaf = np.bincount(self.leaf_of[self.owner == FREE], minlength=self.leaves)
        self.usable_per_leaf = self.free_per_leaf.copy()
        self.free_total = int(self.free_per_leaf.sum())
        self.usable = self.free_total
        self._usable = self.usable_per_leaf.tolist()
        self._ids = np.arange(self.nodes)
        starts = cluster.leaf_starts
        self._bounds = [(lo, lo + n) for lo, n in zip(starts, cluster.leaf_sizes, strict=True)]
        self._whole_free = self.free_total  # free nodes in whole free leaves

    def free_nodes(self, leaf: int | None = None) -> np.ndarray:
        """Free node indices (of one leaf, or all), ascending."""
        if leaf is None:
            return np.flatnonzero(self.owner == FREE)
        lo, hi = self._bounds[leaf]
        return self._ids[lo:hi][self.owner[lo:hi] == FREE]

    def whole_free_leaves(self) -> np.ndarray:
        """Leaves whose every usable node is free (and that have one)."""
        free = self.free_per_leaf
        return np.flatnonzero((free == self.usable_per_leaf) & (free > 0))

    def allocate(self, job: int, nodes: np.ndarray) -> dict[int, int]:
        """Give `nodes` to `job`; each must be free (a double allocation is a bug, not input).
        Returns the job's node count per leaf, by ascending leaf."""
        listed = nodes.tolist()  # a job holds few nodes: Python beats numpy's per-call cost
        if self._foreign(nodes, FREE) or len(set(listed)) != len(listed):
            raise RuntimeError(f"job {job}: nodes {listed} are not all free")
        self.owner[nodes] = job
        per_leaf = self.per_leaf(nodes)
        for leaf, count in per_leaf.items():
            self._add_free(leaf, -count)
        self.free_total -= len(listed)
        return per_leaf

    def release(self, job: int, nodes: np.ndarray, per_leaf: dict[int, int] | None = None) -> None:
        """Return `job`'s nodes to the free pool (`per_leaf`: what `allocate` returned)."""
        if self._foreign(nodes, job):
            raise RuntimeError(f"job {job}: does not hold nodes {nodes.tolist()}")
        self.owner[nodes] = FREE
        for leaf, count in (per_leaf or self.per_leaf(nodes)).items():
            self._add_free(leaf, count)
        self.free_total += len(nodes)

    def per_leaf(self, nodes: np.ndarray) -> dict[int, int]:
        """Node count of `nodes` in each leaf they use, by ascending leaf."""
        leaves = self.leaf_of[nodes].tolist()
        if leaves and leaves.count(leaves[0]) == len(leaves):  # most jobs sit in one leaf
            return {leaves[0]: len(leaves)}
        return dict(sorted(Counter(leaves).items()))

    def _foreign(self, nodes: np.ndarray, owner: int) -> bool:
        """Whether some node of `nodes` is not `owner`'s."""
        held = self.owner[nodes].tolist()
        return held.count(owner) != len(held)

    def _add_free(self, leaf: int, delta: int) -> None:
        """Change a leaf's free count, keeping the count of nodes in whole free leaves."""
        free, usable = int(self.free_per_leaf[leaf]), self._usable[leaf]
        if free == usable:
            self._whole_free -= free
        free += delta
        self.free_per_leaf[leaf] = free
        if free == usable:
            self._whole_free += free

    def fragmentation(self) -> float:
        """Share of free nodes that sit in partly used leaves (0 = every free node in a whole
        free leaf, 1 = no whole leaf free)."""
        if self.free_total == 0:
            return 0.0
        return 1.0 - self._whole_free / self.free_total


def _checked(indices: Iterable[int], nodes: int, what: str) -> list[int]:
    out = [int(i) for i in indices]
    for i in out:
        if not 0 <= i < nodes:
            raise SpecError(f"--{what}: node index {i} is outside the cluster's 0..{nodes - 1}")
    return out
