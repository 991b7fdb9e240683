"""Step time of a job on the nodes it got: the `StepTimeFn` seam of the slowdown model.

`StepTimeFn(job_class, placement, uplink_share) -> step seconds`; the job's ranks sit in block
order over its nodes (`job_placement`, the hostfile order: tp innermost, then dp, then pp).
Two implementations, chosen by name (`STEP_TIMES`, CLI `--slowdown`):

- `perf` (`PerfStepTime`): the job's layout priced by `tierwise.perf.step.step_terms` —
  compute, TP / PP / DP communication and its overlap, pipeline bubble, optimizer — with a
  comm function whose group shapes come from the actual placement: for each group kind the
  group that spans the most pods, then leaves, then nodes, shaped with the NIC sharing of the
  kind's concurrent groups and the job's uplink share (`collectives.shape.shape_of`). A step
  is `m` micro-batches of one `SEQ_TOKENS` sequence, `m` the integer >= 1 nearest to
  compute_s / perf's compute time of one micro-batch, so the trace's compute_s sets the
  compute : communication ratio. A job whose model is a bare parameter count has no
  architecture to price and falls back to `dp-allreduce`.
- `dp-allreduce` (`collective_step_time`): compute_s + the part of the DP gradient all-reduce
  that backward does not hide.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tierwise.collectives.predict import group_shape, time_us
from tierwise.collectives.shape import Shape, shape_of
from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.placement import Placement, hierarchy, nic_sharing
from tierwise.perf.comm import CommFn
from tierwise.perf.estimate import degrees
from tierwise.perf.groups import DEFAULT_ORDER, comm_time_s, group_ids
from tierwise.perf.step import Flags, step_terms
from tierwise.schedule.jobs import JobClass, model_spec
from tierwise.workload.flops import TRAINING_PASSES, Array
from tierwise.workload.layout import layout_fields
from tierwise.workload.spec import ModelSpec

GRAD_BYTES_PER_PARAM = 2
"""bf16 gradients all-reduced over the DP group (`dp-allreduce`)."""
BACKWARD_SHARE = (TRAINING_PASSES - 1) / TRAINING_PASSES
"""Share of a step's compute in the backward pass, behind which the DP all-reduce overlaps."""
ORDER = DEFAULT_ORDER
"""Rank order tp -> cp -> dp -> pp (cp = 1 here): the block order `job_placement` uses."""

StepTimeFn = Callable[[JobClass, Placement, float], float]
"""(job class, placement of its ranks, uplink share) -> step time in seconds."""


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
        nic_share=nic_sharing(placement, groups),
        uplink_share=uplink_share,
    )
    grad_bytes = cls.params / (cls.tp * cls.pp) * GRAD_BYTES_PER_PARAM
    allreduce_s = time_us("all_reduce", shape, grad_bytes) * 1e-6
    return cls.compute_s + max(0.0, allreduce_s - BACKWARD_SHARE * cls.compute_s)


def concurrent_groups(cls: JobClass) -> dict[str, list[np.ndarray]]:
    """Per group kind of perf's comm function (tp, dpcp, pp) with a degree >= 2, the sets of
    groups that communicate at once, each a (groups, ranks) array: all groups of the kind,
    and for pp one set per stage boundary (the send/recv pairs across it)."""
    d = degrees(cls.layout())
    out: dict[str, list[np.ndarray]] = {}
    for kind, degree in (("tp", cls.tp), ("dpcp", cls.dp), ("pp", cls.pp)):
        if degree < 2:
            continue
        gid = group_ids(d, ORDER, kind)
        groups = np.stack([np.flatnonzero(gid == g) for g in dict.fromkeys(gid.tolist())])
        out[kind] = [groups[:, s : s + 2] for s in range(cls.pp - 1)] if kind == "pp" else [groups]
    return out


def _distinct(values: np.ndarray) -> np.ndarray:
    """Distinct values in each row of a 2-D integer array."""
    v = np.sort(values, axis=1)
    return 1 + (np.diff(v, axis=1) != 0).sum(axis=1)


def widest_group(placement: Placement, groups: np.ndarray) -> int:
    """Row of `groups` that spans the most pods, then leaves, then nodes."""
    c = placement.cluster
    node = np.asarray(placement.node_of)[groups]
    _, leaf, pod = hierarchy(c, node)
    width = groups.shape[1] + 1
    key = (_distinct(pod) * width + _distinct(leaf)) * width + _distinct(node)
    return int(np.argmax(key))


def placed_shapes(
    placement: Placement, sets: dict[str, list[np.ndarray]], uplink_share: float
) -> dict[str, Shape]:
    """Per kind, the shape of its widest group on `placement`, with the NIC sharing of the
    groups that run with it and the job's uplink share."""
    out: dict[str, Shape] = {}
    for kind, group_sets in sets.items():
        best = [(widest_group(placement, g), g) for g in group_sets]
        spans = [(placement.span(g[i]), g) for i, g in best]
        span, siblings = max(spans, key=lambda sg: (sg[0].pods, sg[0].leaves, sg[0].nodes))
        share = nic_sharing(placement, siblings.tolist())
        out[kind] = shape_of(placement.cluster, span, share, uplink_share)
    return out


def placed_comm(shapes: dict[str, Shape]) -> CommFn:
    """perf's comm function, `(kind, op, bytes) -> seconds`, on the given group shapes (a kind
    without a shape, a group of one rank, costs nothing)."""

    def time(kind: str, op: str, size: Array) -> Array:
        shape = shapes.get(kind)
        return 0.0 * size if shape is None else comm_time_s(op, shape, size)

    return time


@dataclass(frozen=True)
class _Priced:
    """What `PerfStepTime` keeps per job class: architecture, layout fields, group sets."""

    model: ModelSpec
    fields: dict[str, Any]
    sets: dict[str, list[np.ndarray]]


class PerfStepTime:
    """`StepTimeFn` from `tierwise.perf` on the actual placement (module docstring)."""

    def __init__(self, flags: Flags = Flags()) -> None:
        self.flags = flags
        self._cluster: ClusterSpec | None = None
        self._priced: dict[JobClass, _Priced | None] = {}

    def __call__(self, cls: JobClass, placement: Placement, uplink_share: float) -> float:
        """Step time of `cls` on `placement` at `uplink_share`, s."""
        cluster = placement.cluster
        if cluster is not self._cluster:  # specs are frozen: a new one starts a new cache
            self._cluster, self._priced = cluster, {}
        if cls not in self._priced:
            self._priced[cls] = self._price(cls, cluster)
        priced = self._priced[cls]
        if priced is None:
            return collective_step_time(cls, placement, uplink_share)
        comm = placed_comm(placed_shapes(placement, priced.sets, uplink_share))
        terms = step_terms(priced.model, cluster, priced.fields, comm, self.flags)
        return float(terms["step_time_s"])

    def _price(self, cls: JobClass, cluster: ClusterSpec) -> _Priced | None:
        model = model_spec(cls.model)
        if model is None:
            return None
        one = cls.layout()
        try:
            one.validate_for(model)
        except SpecError as exc:
            raise SpecError(f"model {cls.model!r}, tp={cls.tp} pp={cls.pp}: {exc}") from None
        free = placed_comm({})
        per_micro = step_terms(model, cluster, layout_fields(one, model), free, self.flags)
        micro = max(1, round(cls.compute_s / float(per_micro["breakdown"]["compute_s"])))
        fields = layout_fields(cls.layout(micro), model)
        return _Priced(model, fields, concurrent_groups(cls))


STEP_TIMES: dict[str, Callable[[], StepTimeFn]] = {
    "perf": PerfStepTime,
    "dp-allreduce": lambda: collective_step_time,
}
"""Step-time models by name (`--slowdown`); the first is the default."""


def step_time_fn(name: str) -> StepTimeFn:
    """A fresh step-time function by name; an unknown name is a one-line user error."""
    if name not in STEP_TIMES:
        raise SpecError(f"--slowdown: {name!r}; allowed: {', '.join(STEP_TIMES)}")
    return STEP_TIMES[name]()
