"""Slurm files from a cluster spec and back: topology.conf (topology/tree), the slurm.conf
node section, hostlists, and per-allocation hostfile / rankfile in the placement's order.

topology.conf written here: one `SwitchName=leafNN Nodes=...` per leaf, `SwitchName=podNN
Switches=...` per pod when the tree has three levels, and one root `SwitchName=spine`.
The parser reads any topology/tree file and reports the line of each mistake. (A second
parser/emitter, `tierwise.hardware.ingest.slurm_topology`, was written at the same time; the
two are to be merged.) Hostlists use python-hostlist.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import hostlist

from tierwise.errors import ParseError, SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.schedule.state import ClusterState, node_name


def expand_hostlist(expr: str) -> list[str]:
    """`gpu[001-003,007],cpu1` -> names, as `scontrol show hostnames` prints them."""
    try:
        return hostlist.expand_hostlist(expr.strip())
    except hostlist.BadHostlist as exc:
        raise SpecError(f"hostlist {expr!r}: {exc}; use e.g. gpu[001-004,007]") from None


def compress_hostlist(names: Iterable[str]) -> str:
    """Names -> Slurm hostlist (`gpu[001-003,007]`)."""
    return hostlist.collect_hostlist(list(names))


def node_names(cluster: ClusterSpec, nodes: Iterable[int], prefix: str = "gpu") -> list[str]:
    """Names of node indices."""
    return [node_name(int(i), cluster.nodes, prefix) for i in nodes]


def topology_conf(cluster: ClusterSpec, prefix: str = "gpu") -> str:
    """topology.conf for the cluster's switch tree (module docstring)."""
    state = ClusterState(cluster)
    width = len(str(state.leaves))
    leaf = [f"leaf{i + 1:0{width}d}" for i in range(state.leaves)]
    lines = [
        f"# tierwise: {cluster.name}, {cluster.nodes} nodes, {state.nodes_per_leaf} per leaf, "
        f"oversubscription {cluster.topology.oversubscription:g}:1"
    ]
    for i, name in enumerate(leaf):
        nodes = range(i * state.nodes_per_leaf, min((i + 1) * state.nodes_per_leaf, cluster.nodes))
        hosts = compress_hostlist(node_names(cluster, nodes, prefix))
        lines.append(f"SwitchName={name} Nodes={hosts}")
    if state.leaves == 1:
        return "\n".join(lines) + "\n"
    tops = leaf
    if state.pods > 1:
        pw = len(str(state.pods))
        tops = []
        for p in range(state.pods):
            members = [leaf[i] for i in range(state.leaves) if state.pod_of_leaf[i] == p]
            tops.append(f"pod{p + 1:0{pw}d}")
            lines.append(f"SwitchName={tops[-1]} Switches={compress_hostlist(members)}")
    lines.append(f"SwitchName=spine Switches={compress_hostlist(tops)}")
    return "\n".join(lines) + "\n"


def slurm_nodes_conf(
    cluster: ClusterSpec,
    prefix: str = "gpu",
    cpus: int | None = None,
    addr_base: str | None = None,
    port_base: int | None = None,
    partition: str = "gpus",
) -> str:
    """slurm.conf node + partition lines matching `topology_conf`.

    With `addr_base` ("127.0.1.") and `port_base` (17000) each node gets its own address
    base+N and port base+N, which lets several slurmd run on one host (emulation).
    """
    names = node_names(cluster, range(cluster.nodes), prefix)
    extra = f" CPUs={cpus}" if cpus else ""
    if addr_base is None:
        lines = [
            f"NodeName={compress_hostlist(names)}{extra} Gres=gpu:{cluster.gpus_per_node} "
            "State=UNKNOWN"
        ]
    else:
        lines = [
            f"NodeName={n} NodeAddr={addr_base}{i + 1} Port={(port_base or 17000) + i + 1}"
            f"{extra} State=UNKNOWN"
            for i, n in enumerate(names)
        ]
    lines.append(
        f"PartitionName={partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP "
        "OverSubscribe=EXCLUSIVE"
    )
    return "\n".join(lines) + "\n"


@dataclass
class Switch:
    """One switch of a topology.conf: nodes below it (leaf) or child switches, and its level
    (0 = leaf, as `scontrol show topology` numbers them)."""

    name: str
    line: int
    nodes: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    level: int = 0


@dataclass
class SlurmTopology:
    """A parsed topology.conf: switches by name, each node's leaf switch."""

    switches: dict[str, Switch]
    leaf_of: dict[str, str]

    @property
    def leaves(self) -> list[Switch]:
        """Switches that hold nodes, in file order."""
        return [s for s in self.switches.values() if s.nodes]

    @property
    def levels(self) -> int:
        """Switch levels (2 = leaf + spine)."""
        return 1 + max((s.level for s in self.switches.values()), default=0)

    def nodes_per_leaf(self) -> list[int]:
        """Node count of each leaf switch."""
        return [len(s.nodes) for s in self.leaves]


def parse_topology(text: str, source: str = "topology.conf") -> SlurmTopology:
    """Read a topology/tree topology.conf; a mistake is a `ParseError` naming its line."""
    switches: dict[str, Switch] = {}
    leaf_of: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields: dict[str, str] = {}
        for token in line.split():
            key, sep, value = token.partition("=")
            if not sep or not value:
                raise ParseError(f"expected Key=Value, got {token!r}", number, source)
            fields[key.lower()] = value
        name = fields.pop("switchname", None)
        if name is None:
            raise ParseError("line does not start a switch (SwitchName=...)", number, source)
        if name in switches:
            raise ParseError(
                f"switch {name!r} defined twice (first on line {switches[name].line})",
                number,
                source,
            )
        unknown = set(fields) - {"switches", "nodes", "linkspeed"}
        if unknown:
            raise ParseError(
                f"unknown key(s) {', '.join(sorted(unknown))}; allowed: SwitchName, "
                "Switches, Nodes, LinkSpeed",
                number,
                source,
            )
        sw = Switch(name, number)
        try:
            sw.nodes = expand_hostlist(fields["nodes"]) if "nodes" in fields else []
            sw.children = expand_hostlist(fields["switches"]) if "switches" in fields else []
        except SpecError as exc:
            raise ParseError(str(exc), number, source) from None
        for node in sw.nodes:
            if node in leaf_of:
                raise ParseError(
                    f"node {node} is already under switch {leaf_of[node]!r}", number, source
                )
            leaf_of[node] = name
        switches[name] = sw
    for sw in switches.values():
        for child in sw.children:
            if child not in switches:
                raise ParseError(
                    f"switch {sw.name!r} lists unknown switch {child!r}; defined: "
                    f"{compress_hostlist(switches)}",
                    sw.line,
                    source,
                )
    for sw in switches.values():
        _level(sw, switches, source, ())
    return SlurmTopology(switches, leaf_of)


def _level(sw: Switch, switches: dict[str, Switch], source: str, path: tuple[str, ...]) -> int:
    if sw.name in path:
        raise ParseError(
            f"switch {sw.name!r} is its own ancestor ({' -> '.join(path)})", sw.line, source
        )
    if sw.children:
        sw.level = 1 + max(
            _level(switches[c], switches, source, (*path, sw.name)) for c in sw.children
        )
    return sw.level


def check_matches(topology: SlurmTopology, cluster: ClusterSpec, prefix: str = "gpu") -> None:
    """The parsed tree has the cluster's leaves: same node names under the same leaves."""
    state = ClusterState(cluster)
    names = node_names(cluster, range(cluster.nodes), prefix)
    missing = [n for n in names if n not in topology.leaf_of]
    if missing:
        raise SpecError(
            f"topology.conf: node(s) {compress_hostlist(missing)} of cluster "
            f"{cluster.name!r} are under no switch"
        )
    members: dict[int, set[str]] = {}
    for i, n in enumerate(names):
        members.setdefault(int(state.leaf_of[i]), set()).add(topology.leaf_of[n])
    for leaf, switches in members.items():
        if len(switches) > 1:
            raise SpecError(
                f"topology.conf: leaf {leaf + 1} of cluster {cluster.name!r} is split "
                f"over switches {', '.join(sorted(switches))}"
            )


def node_indices(cluster: ClusterSpec, names: Iterable[str], prefix: str = "gpu") -> list[int]:
    """Node indices of names written by `node_names` (gpu001 -> 0)."""
    known = {n: i for i, n in enumerate(node_names(cluster, range(cluster.nodes), prefix))}
    out = []
    for name in names:
        if name not in known:
            raise SpecError(
                f"node {name!r} is not a node of cluster {cluster.name!r} "
                f"({compress_hostlist(known)})"
            )
        out.append(known[name])
    return out


def rank_hosts(gpus: int, hosts: Sequence[str], gpus_per_node: int) -> list[str]:
    """Host of each of `gpus` ranks in block order: ranks fill a node's GPUs (tp innermost, so
    a TP group shares a node) and the hosts' order (leaf by leaf) keeps DP neighbours close."""
    need = -(-gpus // gpus_per_node)
    if need > len(hosts):
        raise SpecError(
            f"--nodelist: {len(hosts)} hosts, the job needs {need} nodes of {gpus_per_node} GPUs"
        )
    return [hosts[r // gpus_per_node] for r in range(gpus)]


def hostfile(gpus: int, hosts: Sequence[str], gpus_per_node: int) -> str:
    """SLURM_HOSTFILE contents (one line per task, for `srun --distribution=arbitrary`)."""
    return "".join(f"{h}\n" for h in rank_hosts(gpus, hosts, gpus_per_node))


def rankfile(gpus: int, hosts: Sequence[str], gpus_per_node: int) -> str:
    """Open MPI rankfile: `rank R=host slot=S`, S the local GPU slot."""
    return "".join(
        f"rank {r}={h} slot={r % gpus_per_node}\n"
        for r, h in enumerate(rank_hosts(gpus, hosts, gpus_per_node))
    )
