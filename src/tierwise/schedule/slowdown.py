"""Placement -> slowdown: a job's step time on the nodes it got over its step time at ideal
placement, from an injected step-time function (`tierwise.schedule.step_time`: `perf`, the
default, or `dp-allreduce`).

Ideal placement: the job's nodes packed into the fewest leaves (node 0 up) with full-rate
uplinks (share = oversubscription: the job alone on a tree that does not block it). A
placement that beats it (a pipeline whose stages each fill a leaf, say) is its own ideal: a
slowdown is never below 1.

Uplink share: a leaf of `s` nodes with oversubscription `r` carries s/r nodes' worth of line
rate up to the spine; when `d` of its nodes belong to running jobs that cross the spine, each
gets min(r, s/d) times the per-node oversubscribed rate (`shape_of`'s `uplink_share`), and a
job gets the smallest share over its leaves. Shares are bucketed (rounded down to a
quarter-octave) so slowdowns can be cached per (job class, placement signature, share bucket).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping

import numpy as np

from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.placement import block_of, hierarchy
from tierwise.schedule.jobs import JobClass
from tierwise.schedule.step_time import STEP_TIMES, StepTimeFn, job_placement, step_time_fn

SHARE_BUCKETS_PER_OCTAVE = 4
"""Uplink shares are rounded down to 2**(-k/4): at most 19% pessimistic, cached per bucket."""

Signature = tuple[tuple[int, ...], ...]
"""Per pod used, the job's node count in each leaf it uses (both sorted): what the
placement's cost depends on."""


def leaf_share(leaf_nodes: int, oversubscription: float, crossing_nodes: int) -> float:
    """Uplink share of each spine-crossing node of a leaf (see module docstring)."""
    return min(oversubscription, leaf_nodes / max(crossing_nodes, 1))


def share_bucket(share: float) -> float:
    """`share` rounded down to the cache grid."""
    k = math.floor(math.log2(share) * SHARE_BUCKETS_PER_OCTAVE + 1e-9)
    return 2.0 ** (k / SHARE_BUCKETS_PER_OCTAVE)


DEFAULT_STEP_TIME = next(iter(STEP_TIMES))
"""The step-time model a `SlowdownModel` uses unless given one."""


class SlowdownModel:
    """Cached slowdown of a job class on a placement under an uplink share."""

    def __init__(self, cluster: ClusterSpec, step_time: StepTimeFn | None = None):
        self.cluster = cluster
        self.step_time = step_time or step_time_fn(DEFAULT_STEP_TIME)
        self._ideal: dict[JobClass, float] = {}
        self._cache: dict[tuple[JobClass, Signature, float | None], float] = {}
        self._pod_sizes = cluster.pod_sizes

    @property
    def cache_size(self) -> int:
        """Distinct (class, signature, share bucket) slowdowns computed so far."""
        return len(self._cache)

    def signature(self, nodes: np.ndarray) -> Signature:
        """Placement signature of `nodes` (see `Signature`)."""
        _, leaf, _ = hierarchy(self.cluster, nodes.tolist())  # lists: a job holds few nodes
        return self.signature_of(Counter(leaf))

    def signature_of(self, per_leaf: Mapping[int, int]) -> Signature:
        """Placement signature of a job with `per_leaf[leaf]` nodes in each leaf it uses."""
        if len(self._pod_sizes) == 1:
            return (tuple(sorted(per_leaf.values(), reverse=True)),)
        leaves = sorted(per_leaf)
        pods: dict[int, list[int]] = {}
        for p, lf in zip(block_of(self._pod_sizes, leaves), leaves, strict=True):
            pods.setdefault(p, []).append(per_leaf[lf])
        return tuple(sorted(tuple(sorted(c, reverse=True)) for c in pods.values()))

    def ideal_step_s(self, cls: JobClass) -> float:
        """Step time on the first nodes of the cluster (fewest leaves), full-rate uplinks, s."""
        if cls not in self._ideal:
            nodes = np.arange(cls.nodes(self.cluster.gpus_per_node))
            placement = job_placement(self.cluster, cls, nodes)
            self._ideal[cls] = self.step_time(cls, placement, self.full_share)
        return self._ideal[cls]

    @property
    def full_share(self) -> float:
        """The uplink share that gives a node its full line rate (bucketed oversubscription)."""
        return share_bucket(self.cluster.topology.oversubscription)

    def slowdown(
        self, cls: JobClass, nodes: np.ndarray, uplink_share: float, sig: Signature | None = None
    ) -> float:
        """Step time on `nodes` at `uplink_share` (bucketed) over the ideal step time; `sig`
        is `signature(nodes)` when the caller keeps it."""
        sig = sig or self.signature(nodes)
        single_leaf = len(sig) == 1 and len(sig[0]) == 1
        bucket = None if single_leaf else share_bucket(uplink_share)
        key = (cls, sig, bucket)
        cached = self._cache.get(key)
        if cached is None:
            placement = job_placement(self.cluster, cls, nodes)
            step = self.step_time(cls, placement, bucket or self.full_share)
            cached = self._cache[key] = max(1.0, step / self.ideal_step_s(cls))
        return cached
