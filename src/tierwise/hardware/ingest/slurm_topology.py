"""Slurm `topology.conf` (topology/tree plugin): parse it into a switch tree, and emit it.

Each line is `SwitchName=NAME Nodes=HOSTLIST` (a leaf) or `SwitchName=NAME Switches=HOSTLIST`
(an upper switch), optionally `LinkSpeed=N` (a relative number Slurm does not interpret).
Parameter names are case insensitive, `#` starts a comment and a trailing backslash continues a
line (topology.conf(5)). Host lists use Slurm's syntax (`gpu[001-004,007]`), expanded and
collected with python-hostlist.

`SwitchTree` is the parsed tree (leaves, their nodes, levels, the common switch level of two
nodes); `emit_topology_conf` and `emit_slurm_nodes` write topology.conf and the slurm.conf node
section for a `ClusterSpec` (`tree_for` names the switches). This is tierwise's one
topology.conf parser and emitter; `tierwise ingest` and `tierwise schedule` both use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate, pairwise
from typing import Any

import hostlist
import networkx as nx

from tierwise.errors import ParseError, SpecError
from tierwise.hardware.cluster import ClusterSpec, uniform_size

PARAMETERS = {
    "switchname": "SwitchName",
    "switches": "Switches",
    "nodes": "Nodes",
    "linkspeed": "LinkSpeed",
}
#: Most names one Nodes=/Switches= list may expand to (the largest clusters have ~10^4 nodes).
MAX_HOSTS = 100_000
MAX_NAME = 253  # longest switch or node name (a DNS host name)
MAX_MODELLED_LEVELS = 3  # ClusterSpec models leaf, pod (spine) and core switch levels


@dataclass(frozen=True)
class Switch:
    """One `SwitchName=` line: its child nodes (a leaf) and/or child switches."""

    name: str
    line: int
    nodes: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()
    link_speed: str | None = None

    @property
    def is_leaf(self) -> bool:
        """A leaf switch connects nodes directly."""
        return bool(self.nodes)


@dataclass(frozen=True)
class SwitchTree:
    """A validated switch tree (no unknown switches, no loops, each node under one leaf).

    Levels count switch layers: 1 = one switch, 2 = leaves + spine, 3 = leaves + pods + core.
    """

    switches: Mapping[str, Switch]
    source: str = "<topology.conf>"

    @cached_property
    def _graph(self) -> nx.DiGraph:
        g = nx.DiGraph()
        g.add_nodes_from(self.switches)
        g.add_edges_from((s.name, c) for s in self.switches.values() for c in s.switches)
        return g

    @cached_property
    def _levels(self) -> dict[str, int]:
        level: dict[str, int] = {}
        for name in reversed(list(nx.topological_sort(self._graph))):
            children = self.switches[name].switches
            level[name] = 1 + max((level[c] for c in children), default=0)
        return level

    def level(self, switch: str) -> int:
        """Switch level: 1 without child switches, else 1 + the highest child's level."""
        return self._levels[switch]

    @property
    def levels(self) -> int:
        """Switch layers of the tallest part of the tree."""
        return max(self._levels.values())

    @property
    def leaves(self) -> tuple[Switch, ...]:
        """Switches that connect nodes, in file order."""
        return tuple(s for s in self.switches.values() if s.is_leaf)

    @property
    def roots(self) -> tuple[str, ...]:
        """Switches no other switch lists (one for a connected fabric)."""
        return tuple(n for n in self.switches if self._graph.in_degree(n) == 0)

    @cached_property
    def leaf_of(self) -> dict[str, str]:
        """Node hostname -> its leaf switch."""
        return {node: leaf.name for leaf in self.leaves for node in leaf.nodes}

    @property
    def nodes(self) -> tuple[str, ...]:
        """All nodes, leaf by leaf."""
        return tuple(self.leaf_of)

    @property
    def leaf_sizes(self) -> tuple[int, ...]:
        """Nodes under each leaf."""
        return tuple(len(leaf.nodes) for leaf in self.leaves)

    @property
    def pods(self) -> tuple[Switch, ...]:
        """Level-2 switches (the spines of a 2-level tree, the pods of a 3-level one)."""
        return tuple(s for s in self.switches.values() if self._levels[s.name] == 2)

    def common_level(self, a: str, b: str) -> int | None:
        """Lowest switch level joining nodes a and b: 0 same node, 1 same leaf; None if apart."""
        if a == b:
            return 0
        up_a = {self.leaf_of[a], *nx.ancestors(self._graph, self.leaf_of[a])}
        up_b = {self.leaf_of[b], *nx.ancestors(self._graph, self.leaf_of[b])}
        return min((self._levels[s] for s in up_a & up_b), default=None)

    def cluster_fields(self) -> tuple[dict[str, Any], list[str]]:
        """Partial cluster spec (`nodes`, `topology`) and what had to be assumed to get it."""
        notes: list[str] = []
        pods = self._pods_of_leaves()
        sizes = [len(leaf.nodes) for pod in pods for leaf in pod]
        if len(self.roots) > 1:
            notes.append(
                f"topology: {len(self.roots)} separate trees {list(self.roots)}; "
                "Slurm never places a job across them"
            )
        topo: dict[str, Any] = {
            "kind": "single-switch" if len(sizes) == 1 else "fat-tree",
            "nodes_per_leaf": max(sizes),
        }
        if not uniform_size(sizes):
            topo["leaf_sizes"] = list(sizes)
        if len(pods) > 1:
            per_pod = [len(pod) for pod in pods]
            topo["leaves_per_pod"] = max(per_pod)
            if not uniform_size(per_pod):
                topo["pod_sizes"] = per_pod
        if self.levels > MAX_MODELLED_LEVELS:
            notes.append(f"topology: {self.levels} switch levels; those above 3 count as core")
        if len(sizes) > 1:
            notes.append(
                "topology: kind fat-tree and oversubscription 1.0 assumed "
                "(topology.conf gives neither); use --oversubscription"
            )
        return {"nodes": len(self.nodes), "topology": topo}, notes

    def _pods_of_leaves(self) -> list[list[Switch]]:
        """Leaves grouped by pod, in file order (one group on a 1- or 2-level tree); a leaf two
        pods list counts in the first, a leaf no pod lists is a pod of its own."""
        if self.levels < MAX_MODELLED_LEVELS:
            return [list(self.leaves)]
        placed: set[str] = set()
        pods = []
        for p in self.pods:
            pod = [c for c in p.switches if self.switches[c].is_leaf and c not in placed]
            placed |= set(pod)
            pods.append([self.switches[c] for c in pod])
        return [pod for pod in pods if pod] + [[s] for s in self.leaves if s.name not in placed]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready view of the tree."""
        return {
            "source": self.source,
            "levels": self.levels,
            "nodes": len(self.nodes),
            "leaves": len(self.leaves),
            "nodes_per_leaf": max(self.leaf_sizes),
            "roots": list(self.roots),
            "switches": [
                {
                    "name": s.name,
                    "level": self.level(s.name),
                    "nodes": list(s.nodes),
                    "switches": list(s.switches),
                    "link_speed": s.link_speed,
                }
                for s in self.switches.values()
            ],
        }

    def to_conf(self, header: Sequence[str] = ()) -> str:
        """The tree as topology.conf text (host lists collected), leaves first."""
        lines = [f"# {h}" for h in header]
        order = sorted(self.switches.values(), key=lambda s: self.level(s.name))
        for s in order:
            parts = [f"SwitchName={s.name}"]
            if s.nodes:
                parts.append(f"Nodes={hostlist.collect_hostlist(list(s.nodes))}")
            if s.switches:
                parts.append(f"Switches={hostlist.collect_hostlist(list(s.switches))}")
            if s.link_speed is not None:
                parts.append(f"LinkSpeed={s.link_speed}")
            lines.append(" ".join(parts))
        return "\n".join(lines) + "\n"


def parse_topology_conf(text: str, source: str = "<topology.conf>") -> SwitchTree:
    """A validated SwitchTree from topology.conf text; any mistake is a ParseError with its line."""
    switches: dict[str, Switch] = {}
    names = 0
    for lineno, line in _logical_lines(text):
        sw = _switch(line, lineno, source)
        names += len(sw.nodes) + len(sw.switches)
        if names > MAX_HOSTS:
            raise ParseError(
                f"more than {MAX_HOSTS} nodes and switches listed", line=lineno, source=source
            )
        if sw.name in switches:
            raise ParseError(
                f"switch {sw.name!r} is defined twice (first on line {switches[sw.name].line})",
                line=lineno,
                source=source,
            )
        switches[sw.name] = sw
    if not switches:
        raise ParseError("no SwitchName= line: not a topology.conf", source=source)
    _check(switches, source)
    return SwitchTree(switches=switches, source=source)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for i, raw in enumerate(text.splitlines(), 1):
        body = raw.split("#", 1)[0].rstrip()
        if not pending:
            start = i
        if body.endswith("\\"):
            pending += body[:-1] + " "
            continue
        line, pending = (pending + body).strip(), ""
        if line:
            out.append((start, line))
    if pending.strip():
        out.append((start, pending.strip()))
    return out


def _switch(line: str, lineno: int, source: str) -> Switch:
    fields: dict[str, str] = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        canon = PARAMETERS.get(key.lower())
        if not sep or not value:
            raise ParseError(f"{token!r} is not Parameter=value", line=lineno, source=source)
        if canon is None:
            hint = " (topology/block is not supported)" if key.lower().startswith("block") else ""
            raise ParseError(
                f"unknown parameter {key!r}{hint}; allowed: {', '.join(PARAMETERS.values())}",
                line=lineno,
                source=source,
            )
        if canon in fields:
            raise ParseError(f"{canon}= is given twice", line=lineno, source=source)
        fields[canon] = value
    if "SwitchName" not in fields:
        raise ParseError("line has no SwitchName=", line=lineno, source=source)
    name = fields["SwitchName"]
    if re.search(r"[\[\],]", name):
        raise ParseError(
            f"SwitchName={name!r} must be one name, not a list", line=lineno, source=source
        )
    _check_name(name, "SwitchName", lineno, source)
    nodes = _hosts(fields.get("Nodes"), "Nodes", lineno, source)
    children = _hosts(fields.get("Switches"), "Switches", lineno, source)
    if not nodes and not children:
        raise ParseError(
            f"switch {name!r} has neither Nodes= nor Switches=", line=lineno, source=source
        )
    return Switch(name, lineno, nodes, children, fields.get("LinkSpeed"))


def hostlist_size(value: str) -> int:
    """How many names a Slurm host list (``gpu[001-004,007],login1``) expands to, counted
    without expanding it; malformed ranges count 1 (expanding them reports the error)."""
    total, depth, start = 0, 0, 0
    for i, ch in enumerate(value + ","):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            names = 1
            for body in re.findall(r"\[([^\]]*)\]", value[start:i]):
                names *= sum(_range_size(r) for r in body.split(","))
            total, start = total + names, i + 1
    return total


def _range_size(text: str) -> int:
    low, _, high = text.partition("-")
    if low.isascii() and high.isascii() and low.isdigit() and high.isdigit():
        return max(1, int(high[:12]) - int(low[:12]) + 1)
    return 1


def _hosts(value: str | None, key: str, lineno: int, source: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if (size := hostlist_size(value)) > MAX_HOSTS:
        raise ParseError(
            f"{key}= lists {size} names; allowed: at most {MAX_HOSTS}", line=lineno, source=source
        )
    try:
        names = tuple(hostlist.expand_hostlist(value))
    except (hostlist.BadHostlist, ValueError) as exc:  # ValueError: numbers over 4300 digits
        raise ParseError(
            f"{key}={value[:80]!r}: bad host list ({str(exc)[:60]})", line=lineno, source=source
        ) from None
    for name in names:
        _check_name(name, key, lineno, source)
    return names


def _check_name(name: str, key: str, lineno: int, source: str) -> None:
    if len(name) > MAX_NAME:
        raise ParseError(
            f"{key}: name {name[:40]!r}... has {len(name)} characters; allowed: at most "
            f"{MAX_NAME} (a DNS host name)",
            line=lineno,
            source=source,
        )


def _check(switches: dict[str, Switch], source: str) -> None:
    seen: dict[str, Switch] = {}
    for sw in switches.values():
        for child in sw.switches:
            if child not in switches:
                raise ParseError(
                    f"switch {sw.name!r} lists unknown switch {child!r} in Switches=; "
                    f"defined: {hostlist.collect_hostlist(list(switches))}",
                    line=sw.line,
                    source=source,
                )
        for node in sw.nodes:
            if node in seen:
                raise ParseError(
                    f"node {node!r} is under switch {seen[node].name!r} (line {seen[node].line}) "
                    f"and {sw.name!r}",
                    line=sw.line,
                    source=source,
                )
            seen[node] = sw
    graph = nx.DiGraph((s.name, c) for s in switches.values() for c in s.switches)
    if graph.number_of_edges() and not nx.is_directed_acyclic_graph(graph):
        loop = [a for a, _ in nx.find_cycle(graph)]
        raise ParseError(
            f"switch loop {' -> '.join([*loop, loop[0]])}",
            line=switches[loop[0]].line,
            source=source,
        )


def _numbered(prefix: str, count: int) -> list[str]:
    """`count` switch names numbered from 1, zero-padded to one width (leaf01..leaf12)."""
    width = len(str(count))
    return [f"{prefix}{i:0{width}d}" for i in range(1, count + 1)]


def tree_for(cluster: ClusterSpec, hostnames: Sequence[str]) -> SwitchTree:
    """The switch tree of a cluster spec, hostnames in rank order.

    Leaves of the cluster's leaf sizes (`leaf1`...), and above them one root `spine`; with
    more than one pod, pods (`pod1`...) of its pod sizes under a root `core`.
    """
    if len(hostnames) != cluster.nodes:
        raise SpecError(
            f"hostnames: {len(hostnames)} names for nodes={cluster.nodes}; give one per node"
        )
    if len(set(hostnames)) != len(hostnames):
        raise SpecError("hostnames: a hostname is listed twice")
    blocks = [
        tuple(hostnames[j : j + n])
        for j, n in zip(cluster.leaf_starts, cluster.leaf_sizes, strict=True)
    ]
    leaves = [Switch(n, 0, b) for n, b in zip(_numbered("leaf", len(blocks)), blocks, strict=True)]
    switches = {s.name: s for s in leaves}
    if cluster.pods > 1:
        bounds = accumulate(cluster.pod_sizes, initial=0)
        groups = [leaves[a:b] for a, b in pairwise(bounds)]
        pods = [
            Switch(n, 0, switches=tuple(s.name for s in g))
            for n, g in zip(_numbered("pod", len(groups)), groups, strict=True)
        ]
        switches |= {p.name: p for p in pods}
        switches["core"] = Switch("core", 0, switches=tuple(p.name for p in pods))
    elif len(leaves) > 1:
        switches["spine"] = Switch("spine", 0, switches=tuple(s.name for s in leaves))
    return SwitchTree(switches=switches, source=f"cluster {cluster.name}")


TOPOLOGY_CONF_READS = (
    "nodes",
    "gpus_per_node",
    "nodes_per_leaf",
    "leaves_per_pod",
    "oversubscription",
)
"""The cluster overrides topology.conf and the slurm.conf node section depend on (the leaves,
pods and nodes; the oversubscription in a comment)."""


def emit_topology_conf(cluster: ClusterSpec, hostnames: Sequence[str]) -> str:
    """topology.conf text for a cluster spec (`tree_for`); hostnames are the nodes in rank
    order."""
    tree = tree_for(cluster, hostnames)
    header = (
        f"topology.conf for {cluster.name}: {cluster.nodes} nodes, "
        f"up to {cluster.nodes_per_leaf} per leaf, {tree.levels} switch level(s), "
        f"oversubscription {cluster.topology.oversubscription:g}:1 (tierwise)",
        "slurm.conf needs TopologyPlugin=topology/tree",
    )
    return tree.to_conf(header)


def emit_slurm_nodes(
    cluster: ClusterSpec,
    hostnames: Sequence[str],
    *,
    cpus: int | None = None,
    real_memory_mb: int | None = None,
    gres: bool = True,
    gres_type: str | None = None,
    node_addr_base: str | None = None,
    port_base: int | None = None,
    partition: str | None = None,
) -> str:
    """The slurm.conf node section for the hosts of `emit_topology_conf`.

    One `NodeName=HOSTLIST` line for all nodes, with their GPUs as GRES when `gres`. With
    `node_addr_base` ("127.0.1.") one line per node, node i (0-based) at NodeAddr=base(i+1)
    and, with `port_base`, Port=port_base+i+1: several slurmd on one host (emulation).
    `partition` adds a partition of all nodes, node-exclusive.
    """
    tree_for(cluster, hostnames)  # same checks on the host names
    attrs = []
    if gres:
        gtype = re.sub(r"[^A-Za-z0-9_]", "_", gres_type or cluster.gpu.key)
        attrs.append(f"Gres=gpu:{gtype}:{cluster.gpus_per_node}")
    if cpus is not None:
        attrs.append(f"CPUs={cpus}")
    if real_memory_mb is not None:
        attrs.append(f"RealMemory={real_memory_mb}")
    attrs.append("State=UNKNOWN")
    if node_addr_base is None:
        heads = [f"NodeName={hostlist.collect_hostlist(list(hostnames))}"]
    else:
        heads = [
            f"NodeName={h} NodeAddr={node_addr_base}{i}"
            + (f" Port={port_base + i}" if port_base is not None else "")
            for i, h in enumerate(hostnames, 1)
        ]
    lines = [
        f"# {cluster.nodes} x {cluster.gpus_per_node} {cluster.gpu.name} ({cluster.name}, tierwise)"
    ]
    if gres:
        lines.append(
            "# slurm.conf needs GresTypes=gpu; each node's gres.conf lists its GPU devices"
        )
    lines += [f"{head} {' '.join(attrs)}" for head in heads]
    if partition is not None:
        lines.append(
            f"PartitionName={partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP "
            "OverSubscribe=EXCLUSIVE"
        )
    return "\n".join(lines) + "\n"
