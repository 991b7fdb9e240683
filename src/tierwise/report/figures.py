"""Data figures: busbw vs message size per tier and algorithm, breakdown bars, what-if sweeps.

Each figure has a `*_data` function returning exactly the plotted numbers (so tests can check
them against the CLI) and a function drawing a `matplotlib.figure.Figure` from that data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator

from tierwise.collectives.model import ALGOS, candidates
from tierwise.collectives.predict import Prediction, group_shape, predict
from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.placement import Placement
from tierwise.hardware.tiers import tiers
from tierwise.report.render import check_path, new_figure, save, style

TIER_COLORS = {"intra": "#2b8a3e", "leaf": "#1c7ed6", "spine": "#e8590c", "core": "#c2255c"}
"""One colour per tier, shared by every figure of the report."""
ALGO_COLORS = {
    "ring": "#7048e8",
    "tree": "#a61e4d",
    "hierarchical": "#0c8599",
    "nvls": "#f59f00",
    "nvls_tree": "#e67700",
    "collnet_direct": "#d6336c",
    "collnet_chain": "#9c36b5",
    "pat": "#5c940d",
    "pairwise": "#868e96",
}
"""One colour per algorithm (the requested group's per-algorithm curves, dashed)."""
ALGO_DASHES = {
    "ring": ":",
    "tree": "-.",
    "hierarchical": "--",
    "nvls": (0, (1, 1)),
    "nvls_tree": (0, (2, 1)),
    "collnet_direct": (0, (3, 1, 1, 1)),
    "collnet_chain": (0, (3, 1, 1, 1, 1, 1)),
    "pat": (0, (4, 2)),
    "pairwise": (0, (6, 2, 1, 2)),
}


@dataclass(frozen=True)
class BusbwCurve:
    """One line of the busbw figure: sizes in bytes, busbw in GB/s as nccl-tests prints.

    role: `auto` (the requested group, fastest algorithm per size, = `tierwise collective`),
    `algo` (the requested group forced to one algorithm), `tier` (auto on a small group whose
    top tier is `tier`) or `measured` (points from an nccl-tests log).
    """

    label: str
    role: str
    algo: str
    tier: str
    nranks: int
    nodes: int
    size_bytes: tuple[int, ...]
    busbw_GBps: tuple[float, ...]
    chosen: tuple[str, ...] = ()


@dataclass(frozen=True)
class BusbwLimit:
    """A contract floor drawn on the figure: busbw (GB/s) the fabric must reach per size."""

    label: str
    size_bytes: tuple[int, ...]
    busbw_GBps: tuple[float, ...]


@dataclass(frozen=True)
class BusbwData:
    """Everything the busbw figure plots."""

    op: str
    cluster: str
    curves: tuple[BusbwCurve, ...]
    limits: tuple[BusbwLimit, ...] = field(default=())

    def curve(self, role: str, tier: str | None = None) -> BusbwCurve:
        """The first curve of `role` (and `tier`), KeyError if absent."""
        for c in self.curves:
            if c.role == role and (tier is None or c.tier == tier):
                return c
        raise KeyError((role, tier))


def _curve(
    pred: Prediction,
    label: str,
    role: str,
    algo: str,
    placement: Placement,
) -> BusbwCurve:
    span = placement.span(range(placement.world))
    return BusbwCurve(
        label=label,
        role=role,
        algo=algo,
        tier=span.top.name,
        nranks=pred.nranks,
        nodes=span.nodes,
        size_bytes=tuple(int(n) for n in pred.size_bytes),
        busbw_GBps=tuple(float(b) for b in pred.busbw_GBps),
        chosen=tuple(pred.algo),
    )


def _tier_nodes(cluster: ClusterSpec) -> dict[str, list[int]]:
    """Small node sets whose top tier is each tier present: one NVLink domain (intra); two
    domains under one leaf (leaf); two domains in each of two leaves (spine); two domains in
    each of two pods (core)."""
    npd, sizes, starts = cluster.nodes_per_domain, cluster.leaf_sizes, cluster.leaf_starts
    pair = list(range(2 * npd))
    sets = {"intra": list(range(npd)), "leaf": pair}
    if len(sizes) > 1 and sizes[1] >= 2 * npd:
        sets["spine"] = pair + [starts[1] + n for n in pair]
    pod = cluster.pod_sizes[0]  # the first leaf of the second pod
    if cluster.pods > 1 and sizes[pod] >= 2 * npd:
        sets["core"] = pair + [starts[pod] + n for n in pair]
    present = {t.name for t in tiers(cluster)}
    return {
        name: nodes
        for name, nodes in sets.items()
        if name in present
        and (name == "intra" or 2 * npd <= sizes[0])
        and max(nodes) < cluster.nodes
    }


def busbw_figure_data(
    cluster: ClusterSpec,
    op: str,
    sizes: Sequence[int] | np.ndarray,
    *,
    ranks_per_node: int,
    world: int,
) -> BusbwData:
    """The points of the busbw figure for `op` over `sizes` (bytes).

    The requested group is `world` ranks, `ranks_per_node` per node, placed contiguously (as
    `tierwise collective` places them): its auto curve and one curve per algorithm that applies.
    Then, per tier of the cluster, the auto curve of the smallest group reaching that tier with
    the same ranks per node (skipped where it is the requested group itself).
    """
    placement = Placement.contiguous(cluster, world, ranks_per_node=ranks_per_node)
    shape = group_shape(cluster, placement=placement)
    nodes = len(placement.nodes_used())
    where = f"{world} ranks on {nodes} node{'s' if nodes > 1 else ''}"
    curves = [_curve(predict(op, shape, sizes), f"auto, {where}", "auto", "auto", placement)]
    offered = {c.algo for c in candidates(op, shape)}
    for algo in (a for a in ALGOS if a in offered):
        curves.append(_curve(predict(op, shape, sizes, algo), algo, "algo", algo, placement))
    group_nodes = placement.nodes_used()
    for name, node_ids in _tier_nodes(cluster).items():
        if node_ids == group_nodes or ranks_per_node * len(node_ids) < 2:
            continue
        tp = Placement.contiguous(
            cluster, ranks_per_node * len(node_ids), nodes=node_ids, ranks_per_node=ranks_per_node
        )
        pred = predict(op, group_shape(cluster, placement=tp), sizes)
        label = f"{name} tier: {tp.world} ranks on {len(node_ids)} node{'s' * (len(node_ids) > 1)}"
        curves.append(_curve(pred, label, "tier", "auto", tp))
    return BusbwData(op=op, cluster=cluster.name, curves=tuple(curves))


def size_label(n: float) -> str:
    """Bytes as nccl-tests-style binary sizes: 8, 1K, 64M, 2G."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g}{unit}"
    return f"{n:g}"


def _size_axis(ax: Axes) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: size_label(v)))
    ax.set_xlabel("message size (bytes)")


def busbw_figure(data: BusbwData) -> Figure:
    """busbw (GB/s) vs message size (log x): tier curves in tier colours, the requested group's
    algorithms dashed, its auto choice bold, measured points as markers, limits as steps."""
    with style():
        fig = new_figure(6.5)
        ax = fig.add_subplot()
        for c in data.curves:
            x, y = np.array(c.size_bytes), np.array(c.busbw_GBps)
            color = TIER_COLORS.get(c.tier, "#495057")
            if c.role == "auto":
                ax.plot(x, y, color="#212529", lw=5, alpha=0.4, label=c.label, zorder=1)
            elif c.role == "algo":
                ax.plot(
                    x,
                    y,
                    color=ALGO_COLORS[c.algo],
                    lw=2,
                    ls=ALGO_DASHES[c.algo],
                    label=f"{c.label} ({c.nranks} ranks)",
                    zorder=3,
                )
            elif c.role == "tier":
                ax.plot(x, y, color=color, lw=2.2, alpha=0.8, label=c.label, zorder=2)
            else:
                ax.plot(x, y, color=color, ls="none", marker="o", ms=6, label=c.label, zorder=5)
        for lim in data.limits:
            ax.step(
                lim.size_bytes,
                lim.busbw_GBps,
                where="mid",
                color="#c92a2a",
                lw=1.6,
                ls="--",
                label=f"contract: {lim.label}",
                zorder=6,
            )
        _size_axis(ax)
        ax.set_ylabel("busbw (GB/s per rank)")
        ax.set_ylim(bottom=0)
        ax.grid(True, which="major", alpha=0.3)
        ax.set_title(f"{data.op} busbw on {data.cluster}: per algorithm and per tier")
        ax.legend(loc="upper left", ncols=2 if len(data.curves) > 6 else 1, framealpha=0.9)
    return fig


def busbw_figure_file(
    cluster: ClusterSpec,
    op: str,
    sizes: Sequence[int] | np.ndarray,
    path: str | Path,
    *,
    ranks_per_node: int,
    world: int,
) -> None:
    """Write the busbw figure of `busbw_figure_data(...)` to `path` (.png or .svg)."""
    check_path(path)
    data = busbw_figure_data(cluster, op, sizes, ranks_per_node=ranks_per_node, world=world)
    save(busbw_figure(data), path, salt="busbw")


@dataclass(frozen=True)
class Breakdown:
    """Named non-negative parts of one total, in `unit` (s, GiB, GB); `limit` is drawn as a
    line (e.g. the GPU's HBM); `colors` maps a part to its bar colour (default grey)."""

    title: str
    unit: str
    parts: Mapping[str, float]
    limit: float | None = None
    limit_label: str = ""
    colors: Mapping[str, str] = field(default_factory=dict)

    @property
    def total(self) -> float:
        """Sum of the parts."""
        return float(sum(self.parts.values()))


def breakdown_figure(panels: Sequence[Breakdown]) -> Figure:
    """One horizontal bar chart per breakdown (parts in the order given, values labelled)."""
    with style():
        fig = new_figure(1.2 + 0.42 * sum(max(len(b.parts), 1) for b in panels) + 0.6 * len(panels))
        axes = fig.subplots(
            len(panels),
            1,
            squeeze=False,
            height_ratios=[max(len(b.parts), 1) + 1.5 for b in panels],
        )[:, 0]
        for ax, b in zip(axes, panels, strict=True):
            names, values = list(b.parts), [float(v) for v in b.parts.values()]
            colors = [b.colors.get(n, "#495057") for n in names]
            ax.barh(names, values, color=colors)
            ax.invert_yaxis()
            for y, v in enumerate(values):
                ax.annotate(
                    f"{v:.3g}",
                    (v, y),
                    xytext=(4, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=11,
                )
            if b.limit is not None:
                ax.axvline(b.limit, color="#c92a2a", ls="--", lw=1.5)
                ax.annotate(
                    b.limit_label,
                    (b.limit, len(names) - 0.5),
                    xytext=(-4, 0),
                    textcoords="offset points",
                    ha="right",
                    color="#c92a2a",
                )
            ax.set_xlim(0, max([*values, b.limit or 0.0, 1e-12]) * 1.15)
            ax.set_title(f"{b.title}: total {b.total:.3g} {b.unit}", loc="left")
            ax.set_xlabel(b.unit)
            ax.grid(True, axis="x", alpha=0.3)
    return fig


@dataclass(frozen=True)
class SweepSeries:
    """One line of a what-if sweep."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]


@dataclass(frozen=True)
class SweepData:
    """A what-if sweep: y (e.g. tokens/s) against one fabric parameter, one line per setting
    of a second parameter."""

    title: str
    x_label: str
    y_label: str
    series: tuple[SweepSeries, ...]
    x_ticks: tuple[str, ...] | None = None
    """Tick labels for categorical x (then x holds 1, 2, 4, ... positions)."""


def sweep_figure(data: SweepData) -> Figure:
    """Lines with markers; x on a log-2 axis (NICs, nodes, ratios are powers of two)."""
    with style():
        fig = new_figure(5.5)
        ax = fig.add_subplot()
        for s in data.series:
            ax.plot(s.x, s.y, marker="o", lw=2, label=s.label)
        xs = sorted({x for s in data.series for x in s.x})
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, list(data.x_ticks) if data.x_ticks else [f"{x:g}" for x in xs])
        ax.set_xlabel(data.x_label)
        ax.set_ylabel(data.y_label)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.set_title(data.title, loc="left")
        ax.legend()
    return fig


def sweep_figure_file(
    rows: Sequence[Mapping[str, object]], keys: Sequence[str], path: str | Path
) -> None:
    """`tierwise sweep --plot`: best tokens/s against the first varied parameter, one line per
    value of the second (categorical values such as NIC names are spaced evenly); rows where
    nothing was planned are left out of the lines."""
    check_path(path)
    first = list(dict.fromkeys(r[keys[0]] for r in rows))
    numeric = all(isinstance(v, int | float) for v in first)
    pos = {v: (float(v) if numeric else float(2**i)) for i, v in enumerate(first)}
    groups: dict[str, list[Mapping[str, object]]] = {}
    for r in rows:
        if r["tokens_per_s"] is None:
            continue
        label = f"{keys[1]}={r[keys[1]]}" if len(keys) > 1 else "best plan"
        groups.setdefault(label, []).append(r)
    series = tuple(
        SweepSeries(
            label, tuple(pos[r[keys[0]]] for r in rs), tuple(float(r["tokens_per_s"]) for r in rs)
        )  # type: ignore[arg-type]
        for label, rs in groups.items()
    )
    data = SweepData(
        title="best layout's throughput per fabric setting",
        x_label=keys[0],
        y_label="tokens/s",
        series=series,
        x_ticks=None if numeric else tuple(str(v) for v in first),
    )
    save(sweep_figure(data), path, salt="sweep")


ETTR_MAX_GPUS = 131_072
"""The ETTR figure reaches at least this many GPUs (the scale the failure papers project to)."""


def ettr_data(cluster: ClusterSpec, gpus: int, bytes_per_gpu: float) -> SweepData:
    """ETTR against job size for the cluster's reliability facts: a job of `gpus` GPUs writes
    `bytes_per_gpu` per checkpoint, a larger or smaller one the same total spread over its GPUs;
    each at its Young-Daly interval. Two lines: the renewal form (`ettr`) and Kokolis et al.'s
    first-order one; whole nodes, powers of two from one node to 8x the cluster or 131,072
    GPUs."""
    from tierwise.perf.train_time import checkpoint_terms, ettr, ettr_first_order

    top = max(8 * cluster.world, ETTR_MAX_GPUS)
    sizes = np.array(
        [cluster.gpus_per_node * 2**i for i in range(64) if cluster.gpus_per_node * 2**i <= top]
    )
    t = checkpoint_terms(cluster, bytes_per_gpu * gpus / sizes, sizes)
    costs = (t["rate"], t["restart_s"], t["interval_s"], t["write_s"], t["lag_s"])
    x = tuple(float(n) for n in sizes)
    rate = cluster.reliability.node_failures_per_1000_node_days
    return SweepData(
        title=f"ETTR vs GPUs at {rate:.2f} node failures per 1,000 node-days",
        x_label="GPUs in the job",
        y_label="effective training time ratio",
        series=(
            SweepSeries("expected (restarts fail too)", x, tuple(map(float, ettr(*costs)))),
            SweepSeries(
                "first order (Kokolis et al.)", x, tuple(map(float, ettr_first_order(*costs)))
            ),
        ),
        x_ticks=tuple(count_label(n) for n in x),
    )


def count_label(n: float) -> str:
    """A GPU count as 8, 512, 4K, 128K (binary thousands, as GPU counts come)."""
    return f"{n / 1024:g}K" if n >= 1024 else f"{n:g}"
