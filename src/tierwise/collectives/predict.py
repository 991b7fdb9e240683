"""Predict a collective over message sizes: time, algbw, busbw and the algorithm chosen."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tierwise.collectives.model import (
    ALGO_ALIASES,
    ALGOS,
    Candidate,
    auto_candidates,
    bus_factor,
    candidates,
    times_us,
)
from tierwise.collectives.shape import Shape, shape_of
from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec, idle_override_reasons, override_note
from tierwise.hardware.placement import Placement


@dataclass(frozen=True)
class Prediction:
    """Per-size prediction; times in us, bandwidths in GB/s (1e9 B/s) as nccl-tests prints."""

    op: str
    nranks: int
    size_bytes: np.ndarray
    time_us: np.ndarray
    algbw_GBps: np.ndarray
    busbw_GBps: np.ndarray
    algo: list[str]
    proto: list[str]
    runner_up: list[str] | None = None
    """Per size, the next fastest candidate as ``algo/proto`` ("-" when there is none)."""
    margin: np.ndarray | None = None
    """Per size, the runner-up's time over the chosen one's - 1: how close the choice was (a
    choice that flips between neighbouring sizes has a small margin)."""

    def rows(self) -> list[dict[str, object]]:
        """JSON rows with unit-suffixed keys."""
        return [
            {
                "size_bytes": int(n),
                "time_us": float(t),
                "algbw_GBps": float(a),
                "busbw_GBps": float(b),
                "algo": al,
                "proto": pr,
                "runner_up": up,
                "margin_pct": None if margin is None else round(float(margin) * 100, 2),
            }
            for n, t, a, b, al, pr, up, margin in zip(
                self.size_bytes,
                self.time_us,
                self.algbw_GBps,
                self.busbw_GBps,
                self.algo,
                self.proto,
                self.runner_up or ["-"] * len(self.algo),
                [None] * len(self.algo) if self.margin is None else self.margin,
                strict=True,
            )
        ]


def group_shape(
    cluster: ClusterSpec,
    ranks: Sequence[int] | None = None,
    placement: Placement | None = None,
    nic_share: int = 1,
    uplink_share: float = 1.0,
) -> Shape:
    """Shape of `ranks` (default: every GPU) under `placement` (default: contiguous)."""
    placement = placement or Placement.contiguous(cluster)
    ranks = list(range(placement.world)) if ranks is None else ranks
    return shape_of(cluster, placement.span(ranks), nic_share, uplink_share)


_BEYOND_DOMAIN = ("nic", "nics_per_node", "nodes_per_leaf")
"""Overrides of the NICs and the leaf switches behind them: nothing of a group inside one
NVLink domain uses them."""
_ABOVE_LEAF = ("oversubscription", "routing", "qps_per_connection")
"""Overrides of the switch uplinks above a leaf, where routing spreads flows."""
_ABOVE_POD = ("leaves_per_pod", "pod_oversubscription")
"""Overrides of the pods: nothing of a group inside one pod crosses between pods."""


def idle_for_group(cluster: ClusterSpec, shape: Shape, overrides: dict[str, Any]) -> list[str]:
    """The fabric overrides given (not None) that change nothing for the group `shape` although
    they matter on `cluster` (those idle on the whole cluster are `idle_overrides`'), each as a
    sentence saying why: a group inside one NVLink domain uses no NIC, one under a single
    leaf switch (whose rails change without the spine) crosses no uplink, one inside a pod
    crosses no pod's uplinks."""
    said = idle_override_reasons(cluster, overrides)
    one = shape.p == 1
    ranks = "its 1 rank sits" if one else f"its {shape.p} ranks sit"
    if not shape.crosses_domains:
        names, why = (
            (*_BEYOND_DOMAIN, *_ABOVE_LEAF, *_ABOVE_POD),
            f"{ranks} in one NVLink domain, so no traffic uses a NIC",
        )
    elif shape.n_leaf == 1 and shape.relay != "spine":
        names, why = (
            (*_ABOVE_LEAF, *_ABOVE_POD),
            f"{ranks} under one leaf switch, so no traffic crosses a switch uplink",
        )
    elif shape.n_pod == 1:
        names, why = _ABOVE_POD, f"{ranks} in one pod, so no traffic crosses between pods"
    else:
        return []
    return [
        override_note(name, overrides[name], why, " for this group")
        for name in names
        if overrides.get(name) is not None and name not in said
    ]


def pick(op: str, shape: Shape, algo: str = "auto") -> tuple[Candidate, ...]:
    """Candidates for `op`, all (auto) or those of one algorithm; an impossible one is an error."""
    if algo != "auto" and algo not in ALGOS and algo not in ALGO_ALIASES:
        allowed = ", ".join(["auto", *ALGOS, *ALGO_ALIASES])
        raise SpecError(f"--algo: unknown algorithm {algo!r}; allowed: {allowed}")
    if algo == "auto":
        return auto_candidates(op, shape)
    cands = candidates(op, shape)
    names = ALGO_ALIASES.get(algo, (algo,))
    chosen = tuple(c for c in cands if c.algo in names)
    if not chosen and shape.p > 1:
        offered = sorted({c.algo for c in cands})
        raise SpecError(
            f"--algo: {algo!r} does not apply to {op} on this group "
            f"({shape.p} ranks, {shape.n_dom} NVLink domains); available: {', '.join(offered)}"
        )
    return chosen


def predict(
    op: str, shape: Shape, sizes: Sequence[int] | np.ndarray, algo: str = "auto"
) -> Prediction:
    """Fastest candidate per size (as NCCL's tuner picks), or the fastest of one algorithm."""
    n = np.asarray(sizes, dtype=np.int64)
    cands = pick(op, shape, algo)
    if not cands:  # one rank: nothing moves
        zeros = np.zeros(len(n))
        return Prediction(op, shape.p, n, zeros, zeros, zeros, ["none"] * len(n), ["-"] * len(n))
    times = times_us(cands, n)
    order = np.argsort(times, axis=0, kind="stable")
    best = order[0]
    columns = np.arange(len(n))
    t = times[best, columns]
    second = order[1] if len(cands) > 1 else best
    second_t = times[second, columns]
    margin = np.where((t > 0) & (second != best), second_t / np.where(t > 0, t, 1.0) - 1, 0.0)
    algbw = np.where(t > 0, n / (t * 1e3), 0.0)
    return Prediction(
        op=op,
        nranks=shape.p,
        size_bytes=n,
        time_us=t,
        algbw_GBps=algbw,
        busbw_GBps=algbw * bus_factor(op, shape.p),
        algo=[cands[i].algo for i in best],
        proto=[cands[i].proto for i in best],
        runner_up=[
            f"{cands[j].algo}/{cands[j].proto}" if j != i else "-"
            for i, j in zip(best, second, strict=True)
        ],
        margin=margin,
    )


def time_us(op: str, shape: Shape, size_bytes: float, algo: str = "auto") -> float:
    """One size, fastest candidate: the planner's and step-time model's hot path."""
    cands = pick(op, shape, algo)
    return min((c.time_scalar_us(size_bytes) for c in cands), default=0.0)


def expected(
    cluster: ClusterSpec,
    op: str,
    sizes: Sequence[int] | np.ndarray,
    nodes: int | None = None,
    ranks_per_node: int | None = None,
    algo: str = "auto",
) -> Prediction:
    """What nccl-tests should show for `op` on `nodes` nodes (default all) of `cluster` with
    `ranks_per_node` ranks each (default every GPU), placed in block order: the model's
    prediction per size (time us, algbw and busbw GB/s, the algorithm NCCL would pick)."""
    nodes = nodes or cluster.nodes
    if nodes > cluster.nodes:
        cluster = cluster.model_copy(update={"nodes": nodes})
    k = ranks_per_node or cluster.gpus_per_node
    placement = Placement.contiguous(cluster, nodes * k, ranks_per_node=k)
    return predict(op, group_shape(cluster, placement=placement), sizes, algo)


def predicted_busbw(
    cluster: ClusterSpec,
    op: str,
    size_bytes: int,
    nodes: int | None = None,
    ranks_per_node: int | None = None,
    algo: str = "auto",
) -> float:
    """Expected nccl-tests busbw (GB/s) of one size; see `expected`."""
    return float(expected(cluster, op, [size_bytes], nodes, ranks_per_node, algo).busbw_GBps[0])
