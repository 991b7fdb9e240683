"""What the collective model predicts for flat and hierarchical runs in the lab (pure Python).

Flat: gloo's ring (pairwise for alltoall) over the world in rank order, on the physical
placement. Hierarchical: the runtime's two-level algorithm stage by stage (every stage a flat
collective on the groups it forms, all groups of a stage at once sharing the NICs), added up.
The runtime groups ranks ``k*K..k*K+K-1`` as "node" k; with ``aware`` placement that is the
namespace, and on one leaf the sum equals the model's own ``hierarchical`` algorithm. With
two leaves the runtime's rail stage is one flat ring over all nodes (not NCCL's per-leaf
tree the model's algorithm assumes), and with ``naive`` placement the "node" groups are
scattered over namespaces, so their stages cross the shaped links.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tierwise.collectives.predict import Prediction, group_shape, predict
from tierwise.collectives.shape import Shape
from tierwise.errors import TierwiseError
from tierwise.formats.ops import BUSBW_FACTORS
from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.placement import Placement, nic_sharing

PLACEMENTS = ("aware", "naive")
LAB_OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")


def flat_algo(op: str) -> str:
    """The model algorithm matching gloo's flat collective."""
    return "pairwise" if op == "alltoall" else "ring"


def rank_nodes(nodes: int, ranks_per_node: int, placement: str) -> list[int]:
    """Namespace of every rank: blocks of K (``aware``) or round-robin (``naive``)."""
    if placement not in PLACEMENTS:
        raise TierwiseError(f"--placement: {placement!r} is not one of {', '.join(PLACEMENTS)}")
    world = nodes * ranks_per_node
    if placement == "aware":
        return [r // ranks_per_node for r in range(world)]
    return [r % nodes for r in range(world)]


def physical_placement(cluster: ClusterSpec, node_of: Sequence[int]) -> Placement:
    """The model's placement of ranks on namespaces (local slot in order of arrival)."""
    nodes = np.asarray(node_of, dtype=np.int64)
    local = np.zeros_like(nodes)
    for n in np.unique(nodes):
        local[nodes == n] = np.arange(int((nodes == n).sum()))
    return Placement(cluster, nodes, local)


def _stage(
    cluster: ClusterSpec, place: Placement, op: str, groups: list[list[int]], sizes: np.ndarray
) -> np.ndarray:
    """Time (us) of ``op`` on all ``groups`` at once: the slowest group."""
    share = nic_sharing(place, groups)
    times = [_flat_us(op, group_shape(cluster, g, place, nic_share=share), sizes) for g in groups]
    return np.max(times, axis=0)


def _flat_us(op: str, shape: Shape, sizes: np.ndarray) -> np.ndarray:
    """The model's flat-algorithm time (us) of one group."""
    return predict(op, shape, sizes, flat_algo(op)).time_us


def staged_hierarchical_us(
    cluster: ClusterSpec, place: Placement, op: str, k: int, sizes: Sequence[int]
) -> np.ndarray:
    """Per-size time (us) of the runtime's two-level ``op`` on its logical groups."""
    n = np.asarray(sizes, dtype=np.int64)
    world = place.world
    local = [list(range(j, j + k)) for j in range(0, world, k)]
    rails = [list(range(i, world, k)) for i in range(k)]
    if op == "all_reduce":
        return (
            _stage(cluster, place, "reduce_scatter", local, n)
            + _stage(cluster, place, "all_reduce", rails, n // k)
            + _stage(cluster, place, "all_gather", local, n)
        )
    if op == "reduce_scatter":
        return _stage(cluster, place, "reduce_scatter", local, n) + _stage(
            cluster, place, "reduce_scatter", rails, n // k
        )
    if op == "all_gather":
        return _stage(cluster, place, "all_gather", rails, n // k) + _stage(
            cluster, place, "all_gather", local, n
        )
    if op == "alltoall":
        return _stage(cluster, place, "alltoall", local, n) + _stage(
            cluster, place, "alltoall", rails, n
        )
    raise TierwiseError(f"--op: {op!r} is not one of {', '.join(LAB_OPS)}")


def _rows(op: str, p: int, sizes: np.ndarray, time_us: np.ndarray) -> list[dict[str, float]]:
    algbw = sizes / (time_us * 1e3)
    return [
        {
            "size_bytes": int(n),
            "time_us": float(t),
            "algbw_GBps": float(a),
            "busbw_GBps": float(a * BUSBW_FACTORS[op](p)),
        }
        for n, t, a in zip(sizes, time_us, algbw, strict=True)
    ]


def predict_lab(
    cluster: ClusterSpec, op: str, node_of: Sequence[int], sizes: Sequence[int]
) -> dict[str, list[dict[str, float]]]:
    """Predicted rows ``{"flat": [...], "hierarchical": [...]}`` (time_us, busbw_GBps)."""
    place = physical_placement(cluster, node_of)
    n = np.asarray(sizes, dtype=np.int64)
    flat: Prediction = predict(op, group_shape(cluster, placement=place), n, flat_algo(op))
    hier = staged_hierarchical_us(cluster, place, op, cluster.gpus_per_node, n)
    return {
        "flat": _rows(op, place.world, n, flat.time_us),
        "hierarchical": _rows(op, place.world, n, hier),
    }
