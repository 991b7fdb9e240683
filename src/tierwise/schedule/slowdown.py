"""Placement -> slowdown: a job's step time on the nodes it got over its step time at ideal
placement, from an injected step-time function.

The seam is `StepTimeFn(job_class, placement, uplink_share) -> step seconds`. The default,
`collective_step_time`, is compute + the exposed DP gradient all-reduce
(`tierwise.collectives`); `tierwise.perf` can replace it without touching the simulator.

Ideal placement: the job's nodes packed into the fewest leaves (node 0 up) with full-rate
uplinks (share = oversubscription: the job alone on a tree that does not block it), so a
slowdown is never below 1.

Uplink share: a leaf of `s` nodes with oversubscription `r` carries s/r nodes' worth of line
rate up to the spine; when `d` of its nodes belong to running jobs that cross the spine, each
gets min(r, s/d) times the per-node oversubscribed rate (`group_shape`'s
`uplink_share`), and a job gets the smallest share over its leaves. Shares are bucketed
(rounded down to a quarter-octave) so slowdowns can be cached per
(job class, placement signature, share bucket).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tierwise.collectives.predict import group_shape, time_us
from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.placement import Placement, nic_sharing
from tierwise.schedule.jobs import JobClass
from tierwise.workload.flops import TRAINING_PASSES

GRAD_BYTES_PER_PARAM = 2
"""bf16 gradients all-reduced over the DP group."""
BACKWARD_SHARE = (TRAINING_PASSES - 1) / TRAINING_PASSES
"""Share of a step's compute in the backward pass, behind which the DP all-reduce overlaps."""
SHARE_BUCKETS_PER_OCTAVE = 4
"""Uplink shares are rounded down to 2**(-k/4): at most 19% pessimistic, cached per bucket."""

StepTimeFn = Callable[[JobClass, Placement, float], float]
"""(job class, placement of its ranks, uplink share) -> step time in seconds."""

Signature = tuple[tuple[int, ...], ...]
"""Per pod used, the job's node count in each leaf it uses (both sorted): what the
placement's cost depends on."""


def job_placement(cluster: ClusterSpec, cls: JobClass, nodes: np.ndarray) -> Placement:
    """Ranks of `cls` on `nodes` in block order (the hostfile order): rank r on node r // gpn."""
    return Placement.contiguous(cluster, cls.gpus, nodes=np.sort(nodes).tolist())


def dp_groups(cls: JobClass) -> list[list[int]]:
    """DP groups with ranks ordered tp -> dp -> pp (Megatron-core): one per (tp rank, stage)."""
    tp, dp = cls.tp, cls.dp
    return [[t + tp * (d + dp * s) for d in range(dp)] for s in range(cls.pp) for t in range(tp)]


def collective_step_time(cls: JobClass, placement: Placement, uplink_share: float) -> float:
    """compute_s + the part of the DP gradient all-reduce that backward does not hide, s."""
    if cls.dp < 2:
        return cls.compute_s
    groups = dp_groups(cls)
    shape = group_shape(
        placement.cluster,
        groups[0],
        placement,
        nic_share=_nic_share(placement.cluster, cls),
        uplink_share=uplink_share,
    )
    grad_bytes = cls.params / (cls.tp * cls.pp) * GRAD_BYTES_PER_PARAM
    allreduce_s = time_us("all_reduce", shape, grad_bytes) * 1e-6
    return cls.compute_s + max(0.0, allreduce_s - BACKWARD_SHARE * cls.compute_s)


_NIC_SHARE: dict[tuple[JobClass, int, int], int] = {}


def _nic_share(cluster: ClusterSpec, cls: JobClass) -> int:
    """DP groups of the job that share one NIC (`nic_sharing`); with whole nodes in block
    order it depends on the layout and node shape only, so it is computed once per
    (class, GPUs per node, NICs per node) on the first nodes."""
    key = (cls, cluster.gpus_per_node, cluster.inter.nics_per_node)
    if key not in _NIC_SHARE:
        nodes = np.arange(cls.nodes(cluster.gpus_per_node))
        _NIC_SHARE[key] = nic_sharing(job_placement(cluster, cls, nodes), dp_groups(cls))
    return _NIC_SHARE[key]


def leaf_share(leaf_nodes: int, oversubscription: float, crossing_nodes: int) -> float:
    """Uplink share of each spine-crossing node of a leaf (see module docstring)."""
    return min(oversubscription, leaf_nodes / max(crossing_nodes, 1))


def share_bucket(share: float) -> float:
    """`share` rounded down to the cache grid."""
    k = math.floor(math.log2(share) * SHARE_BUCKETS_PER_OCTAVE + 1e-9)
    return 2.0 ** (k / SHARE_BUCKETS_PER_OCTAVE)


class SlowdownModel:
    """Cached slowdown of a job class on a placement under an uplink share."""

    def __init__(self, cluster: ClusterSpec, step_time: StepTimeFn = collective_step_time):
        self.cluster = cluster
        self.step_time = step_time
        self.npl = min(cluster.nodes_per_leaf, cluster.nodes)
        self.leaves_per_pod = cluster.topology.leaves_per_pod or cluster.nodes
        self._ideal: dict[JobClass, float] = {}
        self._cache: dict[tuple[JobClass, Signature, float | None], float] = {}

    @property
    def cache_size(self) -> int:
        """Distinct (class, signature, share bucket) slowdowns computed so far."""
        return len(self._cache)

    def signature(self, nodes: np.ndarray) -> Signature:
        """Placement signature of `nodes` (see `Signature`)."""
        leaves, counts = np.unique(nodes // self.npl, return_counts=True)
        pods: dict[int, list[int]] = {}
        for leaf, n in zip(leaves.tolist(), counts.tolist(), strict=True):
            pods.setdefault(leaf // self.leaves_per_pod, []).append(n)
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
        if key not in self._cache:
            placement = job_placement(self.cluster, cls, nodes)
            step = self.step_time(cls, placement, bucket or self.full_share)
            self._cache[key] = step / self.ideal_step_s(cls)
        return self._cache[key]
