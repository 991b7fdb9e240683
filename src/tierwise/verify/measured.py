"""Measured points of an nccl-tests table, and the group it ran on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierwise.collectives.predict import group_shape
from tierwise.collectives.shape import Shape
from tierwise.errors import SpecError
from tierwise.formats.infer import infer_op
from tierwise.formats.nccl_tests import NcclTest
from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.placement import Placement


@dataclass(frozen=True)
class Measured:
    """Sizes (bytes) and best time (us) of each row: the faster of out-of-place and in-place,
    so a one-off jitter in one half does not count as the fabric's latency."""

    op: str
    nranks: int
    nodes: int
    size_bytes: np.ndarray
    time_us: np.ndarray
    busbw_GBps: np.ndarray


def measured(test: NcclTest, cluster: ClusterSpec, source: str) -> Measured:
    """Points of `test`; rank count from the log, else the cluster's nodes x GPUs per node."""
    if test.op is None:
        infer_op(test, source)  # raises the ParseError saying what the table fits
        raise SpecError(f"{source}: the log does not say which collective it ran; pass --op")
    gpn = test.gpus_per_node or cluster.gpus_per_node
    nranks = test.nranks or cluster.nodes * gpn
    nodes = test.nodes or -(-nranks // gpn)
    sizes, times, busbw = [], [], []
    for row in test.rows:
        halves = [h for h in (row.out_of_place, row.in_place) if h and h.time_us]
        if not halves:
            continue
        best = min(halves, key=lambda h: h.time_us or np.inf)
        sizes.append(row.size_bytes)
        times.append(best.time_us)
        busbw.append(best.busbw_GBps or 0.0)
    if not sizes:
        raise SpecError(f"{source}: no timed rows to compare")
    return Measured(test.op, nranks, nodes, np.array(sizes), np.array(times), np.array(busbw))


def measured_shape(m: Measured, cluster: ClusterSpec) -> Shape:
    """The group the log ran on: `nodes` nodes with nranks/nodes ranks each, contiguous."""
    per_node = -(-m.nranks // m.nodes)
    if m.nodes > cluster.nodes:
        cluster = cluster.model_copy(update={"nodes": m.nodes})
    placement = Placement.contiguous(cluster, m.nranks, ranks_per_node=per_node)
    return group_shape(cluster, placement=placement)
