"""The cluster-topology figure: GPUs, NVLink domains, NICs/rails, leaf and spine switches.

A big cluster is drawn as a representative subset (at most 2 leaves x 2 nodes, or 4 nodes
under one leaf; at most 8 GPUs per node) with "x N" captions for what is left out.
`topology_graph` builds that subset as a networkx graph (node attribute `kind`: gpu, nic,
nvswitch, leaf, spine, core; edge attribute `tier`); `topology_figure` lays it out in rows
and labels each tier with its per-GPU bandwidth and latency.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.tiers import Tier, tiers
from tierwise.report.figures import TIER_COLORS
from tierwise.report.render import new_figure, style

MAX_NODES_DRAWN = 4
MAX_GPUS_DRAWN = 8
MAX_SWITCHES_DRAWN = 8
ROW_Y = {"core": 5.6, "spine": 4.6, "leaf": 3.4, "nic": 2.2, "gpu": 1.2, "nvswitch": 0.4}


@dataclass(frozen=True)
class Subset:
    """What is drawn of the cluster: leaves, nodes per leaf, GPUs and NICs per node."""

    leaves: int
    leaves_total: int
    nodes_per_leaf: int
    gpus: int
    nics: int
    rail_switches: int

    @property
    def nodes(self) -> int:
        """Nodes drawn."""
        return self.leaves * self.nodes_per_leaf


def subset(cluster: ClusterSpec) -> Subset:
    """The representative part of `cluster` the figure draws."""
    npl = cluster.nodes_per_leaf
    leaves_total = cluster.leaves
    leaves = min(leaves_total, 2)
    per_leaf = min(npl, MAX_NODES_DRAWN // leaves)
    nics = min(cluster.inter.nics_per_node, MAX_GPUS_DRAWN)
    rails = cluster.topology.kind in {"rail-optimized", "rail-only"} and nics > 1
    return Subset(
        leaves,
        leaves_total,
        per_leaf,
        min(cluster.gpus_per_node, MAX_GPUS_DRAWN),
        nics,
        min(nics, MAX_SWITCHES_DRAWN) if rails else 1,
    )


def topology_graph(cluster: ClusterSpec) -> nx.Graph:
    """The drawn subset as a graph; node ids are tuples, `pos` is (x, y) in figure units."""
    s = subset(cluster)
    tier_by_name = {t.name: t for t in tiers(cluster)}
    g = nx.Graph()
    width = 10.0
    node_w = width / s.nodes
    wired = cluster.inter.nics_per_node > 0 and "leaf" in tier_by_name
    for leaf in range(s.leaves):
        leaf_x0 = leaf * s.nodes_per_leaf * node_w
        leaf_w = s.nodes_per_leaf * node_w
        if wired:
            for r in range(s.rail_switches):
                x = leaf_x0 + leaf_w * (r + 0.5) / s.rail_switches
                g.add_node(("leaf", leaf, r), kind="leaf", pos=(x, ROW_Y["leaf"]), rail=r)
        for i in range(s.nodes_per_leaf):
            _add_node(g, cluster, s, (leaf, i), leaf_x0 + i * node_w, node_w, wired)
    if "spine" in tier_by_name:
        for k in range(2):
            g.add_node(("spine", k), kind="spine", pos=(width * (k + 1) / 3, ROW_Y["spine"]))
            for leaf_id in [n for n, a in g.nodes(data=True) if a["kind"] == "leaf"]:
                g.add_edge(("spine", k), leaf_id, tier="spine")
    if "core" in tier_by_name:
        g.add_node(("core", 0), kind="core", pos=(width / 2, ROW_Y["core"]))
        for k in range(2):
            g.add_edge(("core", 0), ("spine", k), tier="core")
    return g


def _add_node(
    g: nx.Graph,
    cluster: ClusterSpec,
    s: Subset,
    node: tuple[int, int],
    x0: float,
    w: float,
    wired: bool,
) -> None:
    """GPUs and NICs of node `(leaf, i)`, wired to its scale-up switch and (if `wired`) its
    leaf. Nodes of one NVLink domain (drawn under the same leaf) share one scale-up switch."""
    leaf, i = node
    g.graph.setdefault("node_x", []).append(x0 + w / 2)
    domain = (cluster.leaf_starts[leaf] + i) // cluster.nodes_per_domain
    nvs = ("nvswitch", leaf, domain)
    if nvs not in g:
        g.add_node(nvs, kind="nvswitch", x0=x0, x1=x0 + w)
    g.nodes[nvs]["x1"] = x0 + w
    g.nodes[nvs]["pos"] = ((g.nodes[nvs]["x0"] + x0 + w) / 2, ROW_Y["nvswitch"])
    for j in range(s.gpus):
        gpu = ("gpu", *node, j)
        g.add_node(gpu, kind="gpu", pos=(x0 + w * (j + 0.5) / s.gpus, ROW_Y["gpu"]))
        g.add_edge(gpu, nvs, tier="intra")
    for n in range(s.nics):
        nic = ("nic", *node, n)
        g.add_node(nic, kind="nic", pos=(x0 + w * (n + 0.5) / s.nics, ROW_Y["nic"]))
        first_gpu = n * s.gpus // s.nics
        g.add_edge(nic, ("gpu", *node, first_gpu), tier="pcie")
        if wired:
            g.add_edge(nic, ("leaf", leaf, n * s.rail_switches // s.nics), tier="leaf")


def _tier_caption(t: Tier) -> str:
    return (
        f"{t.name}: {t.medium} · {t.line_GBps:g} GB/s per GPU line "
        f"({t.eff_GBps:.3g} eff.) · {t.latency_us:g} µs"
    )


BOX = {
    "gpu": (0.9, 0.32, "#2b8a3e"),
    "nic": (0.8, 0.26, "#1c7ed6"),
    "leaf": (0.8, 0.34, "#1864ab"),
    "spine": (1.6, 0.4, "#e8590c"),
    "core": (2.2, 0.4, "#c2255c"),
}
"""Box (width share of a slot or absolute width, height, colour) per drawn element kind."""


def _box(ax: Axes, x: float, y: float, w: float, h: float, color: str, text: str = "") -> None:
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.02",
            fc=color,
            ec="black",
            lw=0.6,
            zorder=3,
        )
    )
    if text:
        ax.text(x, y, text, ha="center", va="center", color="white", fontsize=9, zorder=4)


def topology_figure(cluster: ClusterSpec) -> Figure:
    """The topology subset with tier captions (bandwidth per GPU and latency) and x N notes."""
    g = topology_graph(cluster)
    s = subset(cluster)
    ts = {t.name: t for t in tiers(cluster)}
    pos = nx.get_node_attributes(g, "pos")
    slot = 10.0 / s.nodes
    with style():
        fig = new_figure(6.8)
        ax = fig.add_subplot()
        ax.set_xlim(-1.5, 15.6)
        for row, text in (
            ("gpu", "GPUs"),
            ("nic", "NICs"),
            ("leaf", "leaf\nswitches"),
            ("spine", "spine"),
            ("core", "core"),
        ):
            if row in {"gpu", "nic"} or any(a["kind"] == row for _, a in g.nodes(data=True)):
                ax.text(-1.4, ROW_Y[row], text, ha="left", va="center", fontsize=11)
        top = max(y for _, y in pos.values())
        ax.set_ylim(-0.5, top + 0.6)
        ax.axis("off")
        for x in g.graph["node_x"]:
            _node_frame(ax, x, slot)
        for a, b, attrs in g.edges(data=True):
            (xa, ya), (xb, yb) = pos[a], pos[b]
            color = TIER_COLORS.get(attrs["tier"], "#868e96")
            ax.plot(
                [xa, xb],
                [ya, yb],
                color=color,
                lw=1.0 if attrs["tier"] == "leaf" else 1.6,
                alpha=0.8,
                zorder=1,
            )
        for n, attrs in g.nodes(data=True):
            x, y = pos[n]
            kind = attrs["kind"]
            if kind == "nvswitch":
                _domain_box(ax, cluster, x, (attrs["x1"] - attrs["x0"]) - 0.1 * slot)
                continue
            w, label = _width_label(kind, attrs, s, slot)
            _box(ax, x, y, w, BOX[kind][1], BOX[kind][2], label)
        _captions(ax, cluster, s, ts, slot)
        ax.set_title(_title(cluster, s), loc="left")
    return fig


def _width_label(kind: str, attrs: dict, s: Subset, slot: float) -> tuple[float, str]:
    """Drawn width (figure units) and text of one element."""
    share = BOX[kind][0]
    if kind == "gpu":
        w = share * slot / s.gpus
        return w, "GPU" if w > 0.45 else ""
    if kind == "nic":
        w = share * slot / s.nics
        return w, "NIC" if w > 0.45 else ""
    if kind == "leaf":
        w = min(share * 10.0 / (s.leaves * s.rail_switches), 1.4)
        return w, f"rail {attrs['rail']}" if s.rail_switches > 1 else "leaf"
    return share, kind


def _node_frame(ax: Axes, x: float, slot: float) -> None:
    """A light frame around one node (its GPUs, NICs and scale-up switch)."""
    ax.add_patch(
        FancyBboxPatch(
            (x - slot * 0.48, 0.1),
            slot * 0.96,
            ROW_Y["nic"] + 0.15,
            boxstyle="round,pad=0.03",
            fc="#f1f3f5",
            ec="#adb5bd",
            lw=1,
            zorder=0,
        )
    )


def _domain_box(ax: Axes, cluster: ClusterSpec, x: float, w: float) -> None:
    """The node's scale-up fabric (NVSwitch / PCIe / xGMI) under its GPUs."""
    kind = cluster.intra.kind
    name = {"nvlink": "NVSwitch", "pcie": "PCIe switch", "xgmi": "xGMI"}.get(kind, kind)
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, ROW_Y["nvswitch"] - 0.17),
            w,
            0.34,
            boxstyle="round,pad=0.02",
            fc=TIER_COLORS["intra"],
            alpha=0.35,
            ec=TIER_COLORS["intra"],
            lw=1.2,
            zorder=2,
        )
    )
    gpus = f", {cluster.domain_gpus}-GPU domain" if cluster.nodes_per_domain > 1 else ""
    ax.text(
        x,
        ROW_Y["nvswitch"],
        f"{name} ({cluster.intra.key}{gpus})",
        ha="center",
        va="center",
        fontsize=10,
        zorder=4,
    )


def _captions(ax: Axes, cluster: ClusterSpec, s: Subset, ts: dict[str, Tier], slot: float) -> None:
    """Tier captions at the right of each row, and the 'x N' notes for what is not drawn."""
    right = 10.4
    rows = {
        "intra": ROW_Y["gpu"] - 0.4,
        "leaf": ROW_Y["leaf"],
        "spine": ROW_Y["spine"],
        "core": ROW_Y["core"],
    }
    for name, t in ts.items():
        ax.text(
            right,
            rows[name],
            _tier_caption(t).replace(" · ", "\n", 1),
            ha="left",
            va="center",
            fontsize=11,
            color=TIER_COLORS[name],
            fontweight="bold",
        )
    nic = cluster.inter.nic
    notes = []
    if cluster.gpus_per_node > s.gpus:
        notes.append(f"{s.gpus} of {cluster.gpus_per_node} GPUs drawn per node")
    if cluster.inter.nics_per_node:
        notes.append(f"{cluster.inter.nics_per_node} x {nic.key} ({nic.rate_Gbps:g} Gb/s) per node")
    if cluster.nodes_per_domain > 1:
        notes.append(
            f"NVLink domain: {cluster.domain_gpus} GPUs = {cluster.nodes_per_domain} nodes"
        )
    sizes = sorted(set(cluster.leaf_sizes))
    per_leaf = f"{sizes[0]}-{sizes[-1]}" if len(sizes) > 1 else f"{sizes[0]}"
    notes.append(f"x {per_leaf} nodes per leaf (drawn {s.nodes_per_leaf})")
    if s.leaves_total > 1:
        notes.append(
            f"x {s.leaves_total} leaves (drawn {s.leaves}), "
            f"oversubscription {cluster.topology.oversubscription:g}:1"
        )
    if cluster.in_network_reduction != "none":
        notes.append(f"in-network reduction: {cluster.in_network_reduction}")
    ax.text(right, ROW_Y["nic"] - 0.1, "\n".join(notes), ha="left", va="center", fontsize=10.5)
    for leaf in range(s.leaves):
        x0 = leaf * s.nodes_per_leaf * slot
        ax.text(
            x0 + s.nodes_per_leaf * slot / 2,
            -0.35,
            f"leaf {leaf}: {s.nodes_per_leaf} of {cluster.leaf_sizes[leaf]} nodes",
            ha="center",
            va="center",
            fontsize=10.5,
            style="italic",
        )


def _title(cluster: ClusterSpec, s: Subset) -> str:
    return (
        f"{cluster.name}: {cluster.nodes} nodes x {cluster.gpus_per_node} "
        f"{cluster.gpu.key} = {cluster.world} GPUs, {cluster.topology.kind}"
    )
