"""Slurm names and per-allocation files: node index <-> hostname, and the hostfile / rankfile
of an allocation in the placement's order.

topology.conf and the slurm.conf node section come from the one parser/emitter in
`tierwise.hardware.ingest.slurm_topology` (`emit_topology_conf`, `emit_slurm_nodes`,
`parse_topology_conf`) over the names `node_names` gives; host lists use python-hostlist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import hostlist

from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.ingest.slurm_topology import MAX_HOSTS, hostlist_size
from tierwise.schedule.state import node_name

#: A node name prefix: the start of a host name (RFC 1123 letters, digits, '-'; '_' and '.'
#: as Slurm NodeName allows), so a hostlist of the names can be written and read back.
NODE_PREFIX = re.compile(r"[A-Za-z0-9_.-]{0,63}")


HOSTFILE_READS = ("nodes", "gpus_per_node")
"""The cluster overrides a hostfile or rankfile depends on (`hostfile`, `rankfile`)."""


def node_names(cluster: ClusterSpec, nodes: Iterable[int], prefix: str = "gpu") -> list[str]:
    """Names of node indices; a prefix that is not the start of a host name is a SpecError."""
    if not NODE_PREFIX.fullmatch(prefix):
        raise SpecError(
            f"--prefix {prefix[:40]!r}: allowed: up to 63 letters, digits, '-', '_' or '.'"
        )
    return [node_name(int(i), cluster.nodes, prefix) for i in nodes]


def node_indices(cluster: ClusterSpec, expr: str, prefix: str = "gpu") -> list[int]:
    """Node indices of a Slurm hostlist of names written by `node_names` (gpu[001-002] ->
    [0, 1]), in the list's order."""
    if (size := hostlist_size(expr)) > MAX_HOSTS:
        raise SpecError(f"hostlist {expr[:60]!r}: {size} names; allowed: at most {MAX_HOSTS}")
    try:
        names = hostlist.expand_hostlist(expr.strip())
    except (hostlist.BadHostlist, ValueError) as exc:  # ValueError: numbers of 4300+ digits
        raise SpecError(
            f"hostlist {expr[:60]!r}: {str(exc)[:60]}; use e.g. gpu[001-004,007]"
        ) from None
    known = {n: i for i, n in enumerate(node_names(cluster, range(cluster.nodes), prefix))}
    out = []
    for name in names:
        if name not in known:
            raise SpecError(
                f"node {name[:60]!r} is not a node of cluster {cluster.name!r} "
                f"({hostlist.collect_hostlist(list(known))})"
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
