"""Bytes each parallelism moves and the time its collectives take on the tier its ranks sit on.

Per micro-batch and GPU (bytes are nccl-tests sizes: the full tensor for all_reduce, the
gathered output for all_gather, the input for reduce_scatter, the per-rank buffer for
alltoall, the message for sendrecv):

- TP: per layer 2 all-reduces forward and 2 backward of the activation (s/cp x b x h, 16-bit);
  with sequence parallelism each becomes an all-gather plus a reduce-scatter of the same size.
- CP (ring attention): per layer cp-1 exchanges of the K and V blocks forward, twice that
  backward (K, V and their gradients), overlapped with the attention core.
- EP: per MoE layer a dispatch and a combine all-to-all forward and backward of the routed
  tokens (top_k copies of each local token).
- PP: per micro-batch one activation send forward and one gradient send backward per stage
  boundary (per virtual stage with interleaving), scattered over TP with SP.
- DP: once per step the gradients (reduce-scatter with a sharded optimizer, else all-reduce)
  and, with a sharded optimizer, the all-gather of updated 16-bit weights; ZeRO-3/FSDP gathers
  weights forward and backward and reduce-scatters gradients every micro-batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tierwise.collectives.shape import Shape
from tierwise.hardware.cluster import ClusterSpec
from tierwise.perf.groups import (
    DEFAULT_ORDER,
    Degrees,
    comm_time_s,
    layout_groups,
)
from tierwise.workload.flops import ACT_BYTES, Array

if TYPE_CHECKING:
    import numpy as np

TP_COLLECTIVES_PER_PASS = 2
KV_TENSORS = 2
A2A_PER_MOE_PASS = 2  # dispatch + combine

CommFn = Callable[[str, str, Array], Array]


def scalar_comm(
    cluster: ClusterSpec, d: Degrees, order: tuple[str, ...] = DEFAULT_ORDER, scatter: bool = False
) -> CommFn:
    """Comm-time function for one layout: (group kind, op, bytes) -> seconds."""
    return layout_groups(cluster, d, order, scatter).time_s


def batch_comm(
    cluster: ClusterSpec,
    arrays: dict[str, np.ndarray],
    order: tuple[str, ...] = DEFAULT_ORDER,
    scatter: bool = False,
) -> CommFn:
    """Comm-time function over many layouts: one shape lookup per distinct degree tuple, one
    collective pricing per distinct group shape of each kind (many tuples share a shape)."""
    import numpy as np

    # One integer per degree tuple (mixed radix): a 1-D unique is far cheaper than a row one.
    # (HSDP's dp_shard where the layouts carry it: Degrees' next field)
    keys = ("tp", "cp", "ep", "dp", "pp", "dp_shard")[: 5 + ("dp_shard" in arrays)]
    columns = [np.asarray(arrays[k], dtype=np.int64) for k in keys]
    dims = tuple(int(c.max()) + 1 for c in columns)
    uniq, inverse = np.unique(np.ravel_multi_index(columns, dims), return_inverse=True)
    rows = np.stack(np.unravel_index(uniq, dims), axis=1)
    groups = [layout_groups(cluster, Degrees(*map(int, row)), order, scatter) for row in rows]
    by_kind: dict[str, tuple[list[Shape], list[np.ndarray]]] = {}

    def members_of(kind: str) -> tuple[list[Shape], list[np.ndarray]]:
        """The distinct shapes of `kind` groups and the layouts on each."""
        if kind not in by_kind:
            ids: dict[Shape, int] = {}
            of_tuple = np.array(
                [-1 if (sh := g.shapes.get(kind)) is None else ids.setdefault(sh, len(ids))
                 for g in groups],
                dtype=np.int64,
            )  # fmt: skip
            shape_of = of_tuple[inverse]
            order_ = np.argsort(shape_of, kind="stable")
            counts = np.bincount(shape_of + 1, minlength=len(ids) + 1)
            split = np.split(order_, np.cumsum(counts)[:-1])[1:]  # drop the no-group layouts
            by_kind[kind] = (list(ids), split)
        return by_kind[kind]

    def time(kind: str, op: str, size: Array) -> Array:
        size = np.broadcast_to(np.asarray(size, dtype=float), inverse.shape)
        out = np.zeros(inverse.shape)
        for shape, idx in zip(*members_of(kind), strict=True):
            out[idx] = comm_time_s(op, shape, size[idx])
        return out

    return time


def activation_bytes(tokens: Array, hidden: int) -> Array:
    """One 16-bit activation tensor of `tokens` x hidden."""
    return tokens * hidden * ACT_BYTES
