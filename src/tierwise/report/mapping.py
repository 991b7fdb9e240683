"""The parallelism-mapping figure: TP/CP/EP/PP/DP groups coloured on the node x GPU grid.

`mapping_data` computes, for each parallel dimension of degree > 1, the group id of every
rank (ranks ordered by `order`, innermost first, filled into GPUs node by node — the rule of
`tierwise.perf.groups`) and the tier its slowest group's traffic tops out on.
`mapping_figure` draws one panel per dimension: columns are nodes, rows are GPU slots, one
colour per group, leaf boundaries as vertical lines.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.placement import Placement
from tierwise.perf.groups import Degrees, group_ids, group_shape_of
from tierwise.report.render import new_figure, style

KINDS = ("tp", "cp", "ep", "pp", "dp")
"""Dimensions drawn, in this order. `ep` is carved out of cp*dp (it does not grow the world)."""
PALETTE = ListedColormap(
    [
        "#4c6ef5",
        "#f76707",
        "#37b24d",
        "#e64980",
        "#15aabf",
        "#fab005",
        "#7950f2",
        "#82c91e",
        "#fa5252",
        "#1098ad",
        "#be4bdb",
        "#f59f00",
        "#228be6",
        "#40c057",
        "#fd7e14",
        "#ae3ec9",
    ]
)
"""Qualitative colours cycled over group ordinals (neighbouring groups differ)."""
ANNOTATE_MAX_CELLS = 256
"""Grids up to this many GPUs get the group number written in each cell."""


@dataclass(frozen=True)
class GroupMap:
    """One dimension: `ids[r]` is the ordinal (0..groups-1, by first rank) of rank r's group."""

    kind: str
    degree: int
    ids: np.ndarray
    tier: str

    @property
    def groups(self) -> list[list[int]]:
        """The process groups as rank lists (ascending), ordered by their first rank."""
        return [np.nonzero(self.ids == g)[0].tolist() for g in range(int(self.ids.max()) + 1)]


@dataclass(frozen=True)
class MappingData:
    """Rank -> (node, GPU slot) and the group maps of one layout on one cluster."""

    cluster: str
    gpus_per_node: int
    leaf_starts: tuple[int, ...]
    node_of: np.ndarray
    local_of: np.ndarray
    order: tuple[str, ...]
    maps: tuple[GroupMap, ...]

    def grid(self, m: GroupMap) -> np.ndarray:
        """(gpus_per_node, nodes used) array of group ordinals; -1 where no rank sits."""
        nodes = int(self.node_of.max()) + 1
        out = np.full((self.gpus_per_node, nodes), -1, dtype=np.int64)
        out[self.local_of, self.node_of] = m.ids
        return out


def _ordinals(gid: np.ndarray) -> np.ndarray:
    """Renumber group ids 0.. in order of each group's first rank."""
    _, first, inverse = np.unique(gid, return_index=True, return_inverse=True)
    rank_of_group = np.argsort(np.argsort(first))
    return rank_of_group[inverse.ravel()]


def mapping_data(cluster: ClusterSpec, d: Degrees, order: tuple[str, ...]) -> MappingData:
    """Groups of each dimension with degree > 1 for degrees `d` and rank `order`.

    The dp map is the pure data-parallel group (ranks equal in tp, cp, pp); its tier is
    where the gradient reduce over dp*cp tops out. Each tier is that of the kind's slowest
    group (pp: stage-boundary pair), as `tierwise.perf.estimate` reports it.
    """
    placement = Placement.contiguous(cluster, d.world)
    maps = []
    for kind in KINDS:
        degree = getattr(d, kind)
        if degree < 2:
            continue
        ids = _ordinals(group_ids(d, order, kind))
        reduce_kind = "dpcp" if kind == "dp" else kind
        tier = group_shape_of(cluster, d, reduce_kind, order).top_tier  # its slowest group's
        maps.append(GroupMap(kind, degree, ids, tier))
    return MappingData(
        cluster.name,
        cluster.gpus_per_node,
        cluster.leaf_starts,
        np.asarray(placement.node_of),
        np.asarray(placement.local_of),
        order,
        tuple(maps),
    )


def mapping_figure(data: MappingData, tier_labels: dict[str, str]) -> Figure:
    """One panel per dimension: node x GPU grid coloured by group, titled with its tier.

    `tier_labels` maps a tier name to its caption (e.g. "NVLink 450 GB/s, 0.7 us")."""
    maps = data.maps
    nodes = int(data.node_of.max()) + 1
    with style():
        fig = new_figure(1.0 + 1.55 * max(1, len(maps)))
        if not maps:
            ax = fig.add_subplot()
            ax.axis("off")
            ax.text(0.5, 0.5, "one GPU: no process groups", ha="center", va="center")
            return fig
        axes = fig.subplots(len(maps), 1, squeeze=False)[:, 0]
        annotate = nodes * data.gpus_per_node <= ANNOTATE_MAX_CELLS
        for ax, m in zip(axes, maps, strict=True):
            grid = data.grid(m)
            shown = np.ma.masked_where(grid < 0, grid % len(PALETTE.colors))
            ax.imshow(
                shown,
                cmap=PALETTE,
                vmin=0,
                vmax=len(PALETTE.colors) - 1,
                aspect="auto",
                interpolation="nearest",
            )
            for b in data.leaf_starts[1:]:
                if b < nodes:
                    ax.axvline(b - 0.5, color="black", lw=2.5)
            if annotate:
                for (gpu, node), g in np.ndenumerate(grid):
                    if g >= 0:
                        ax.text(
                            node, gpu, str(g), ha="center", va="center", fontsize=8, color="white"
                        )
            n_groups = int(m.ids.max()) + 1
            ax.set_title(
                f"{m.kind.upper()} = {m.degree}: {n_groups} groups, "
                f"tier {m.tier} ({tier_labels.get(m.tier, m.tier)})",
                loc="left",
            )
            ax.set_ylabel("GPU")
            ax.set_yticks(range(data.gpus_per_node))
            step = max(1, nodes // 16)
            ax.set_xticks(range(0, nodes, step))
        axes[-1].set_xlabel("node (thick lines: leaf boundaries)")
        fig.suptitle(
            f"Rank order {'-'.join(data.order)} (innermost first) on {data.cluster}", fontsize=15
        )
    return fig
