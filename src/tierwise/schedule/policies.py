"""Placement policies: which free nodes a job of `n` nodes gets, or None to wait.

- `naive`: the first `n` free nodes by index (what a scheduler without topology does).
- `topo`: Slurm's topology/tree best fit — the lowest switch level that can hold the job
  (leaf, then pod, then the whole tree), the tightest such switch (fewest free nodes, lowest
  index on ties); below it, leaves are taken greedily: a leaf that holds the rest of the job
  with the fewest free nodes, else the leaf with the most free nodes. This minimises the leaves
  used, then the crossings of the level above. Nodes inside a leaf go in index order.
- `topo-frag`: `topo`, but a job smaller than a leaf never takes a whole free leaf while the
  job at the head of the queue that needs whole leaves is waiting for them (`reserve`); it
  fits into a partly used leaf, else spans partly used leaves, else waits.

Waiting for a better placement versus starting now on a worse one is the simulator's
`max_wait_s` (it applies to every policy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tierwise.errors import SpecError
from tierwise.schedule.state import ClusterState

PlaceFn = Callable[[ClusterState, int, int], np.ndarray | None]
"""(state, nodes wanted, whole leaves reserved) -> nodes, or None to wait."""


def naive(state: ClusterState, n: int, reserve: int = 0) -> np.ndarray | None:
    """First `n` free nodes by index."""
    if n > state.free_total:
        return None
    return state.free_nodes()[:n]


def topo(state: ClusterState, n: int, reserve: int = 0) -> np.ndarray | None:
    """Slurm topology/tree best fit (module docstring)."""
    if n > state.free_total:
        return None
    free = state.free_per_leaf
    fits = (free >= n).nonzero()[0]
    if len(fits):
        return state.free_nodes(int(fits[free[fits].argmin()]))[:n]
    pod_free = np.bincount(state.pod_of_leaf, weights=free, minlength=state.pods)
    pods = np.flatnonzero(pod_free >= n)
    if len(pods) and state.pods > 1:
        pod = int(pods[np.argmin(pod_free[pods])])
        return _greedy(state, np.flatnonzero(state.pod_of_leaf == pod), n)
    return _greedy(state, np.arange(state.leaves), n)


def topo_frag(state: ClusterState, n: int, reserve: int = 0) -> np.ndarray | None:
    """`topo` that keeps `reserve` whole free leaves for a waiting large job (docstring)."""
    if n >= state.nodes_per_leaf or reserve == 0:
        return topo(state, n)
    whole = state.whole_free_leaves()
    partial = np.setdiff1d(np.flatnonzero(state.free_per_leaf > 0), whole, assume_unique=True)
    free = state.free_per_leaf
    fits = partial[free[partial] >= n]
    if len(fits):
        return state.free_nodes(int(fits[np.argmin(free[fits])]))[:n]
    roomy = whole[free[whole] >= n]  # a whole leaf may be small (down nodes, a short last leaf)
    if len(whole) > reserve and len(roomy):
        return state.free_nodes(int(roomy[0]))[:n]
    if free[partial].sum() >= n:
        return _greedy(state, partial, n)
    return None


def _greedy(state: ClusterState, leaves: np.ndarray, n: int) -> np.ndarray:
    """Take nodes from `leaves`: best-fit leaf for the remainder, else the fullest-free one."""
    free = state.free_per_leaf[leaves].copy()
    taken: list[np.ndarray] = []
    rem = n
    while rem > 0:
        fits = np.flatnonzero(free >= rem)
        i = int(fits[np.argmin(free[fits])]) if len(fits) else int(np.argmax(free))
        k = min(rem, int(free[i]))
        taken.append(state.free_nodes(int(leaves[i]))[:k])
        free[i] = 0
        rem -= k
    return np.sort(np.concatenate(taken))


@dataclass(frozen=True)
class Policy:
    """A named placement function; `reserves` says it uses the queue's whole-leaf reservation."""

    name: str
    place: PlaceFn
    reserves: bool = False


POLICIES = {
    "naive": Policy("naive", naive),
    "topo": Policy("topo", topo),
    "topo-frag": Policy("topo-frag", topo_frag, reserves=True),
}


def policy(name: str) -> Policy:
    """A policy by name; unknown names are a user error listing the allowed ones."""
    if name not in POLICIES:
        raise SpecError(f"--policy: unknown policy {name!r}; allowed: {', '.join(POLICIES)}")
    return POLICIES[name]
