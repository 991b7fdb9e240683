"""Where ranks sit: rank -> (node, local GPU), and what a group of ranks spans.

A `Placement` maps global ranks to nodes (indices into the cluster) and local GPU slots.
`span()` answers, for one group of ranks, which tiers it crosses, how many ranks share an
NVLink domain, how many NICs its traffic leaves a domain through, and how often its ring order
crosses each boundary. `hierarchy()` maps nodes to their domain, leaf and pod (leaves may differ
in size; the last leaf, domain and pod may be partly filled).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec, uniform_size
from tierwise.hardware.tiers import Tier, tier


@dataclass(frozen=True)
class Placement:
    """Global rank r runs on node `node_of[r]`, GPU slot `local_of[r]` of `cluster`."""

    cluster: ClusterSpec
    node_of: np.ndarray
    local_of: np.ndarray

    @classmethod
    def contiguous(
        cls,
        cluster: ClusterSpec,
        world: int | None = None,
        nodes: Sequence[int] | None = None,
        ranks_per_node: int | None = None,
    ) -> Placement:
        """Ranks fill GPUs node by node (torchrun/Slurm block order) over `nodes` (default 0..)."""
        k = ranks_per_node or cluster.gpus_per_node
        if k > cluster.gpus_per_node:
            raise SpecError(f"--ranks-per-node: {k} exceeds gpus_per_node={cluster.gpus_per_node}")
        world = (
            world if world is not None else (len(nodes) if nodes is not None else cluster.nodes) * k
        )
        node_list = np.asarray(nodes if nodes is not None else range(cluster.nodes), dtype=np.int64)
        needed = -(-world // k)
        if needed > len(node_list):
            raise SpecError(
                f"world size {world} needs {needed} nodes of {k} ranks; "
                f"the cluster has {len(node_list)}"
            )
        ranks = np.arange(world)
        return cls(cluster, node_list[ranks // k], ranks % k)

    @property
    def world(self) -> int:
        """Number of ranks placed."""
        return len(self.node_of)

    def nic_of(self, ranks: np.ndarray) -> np.ndarray:
        """Rail (NIC index in its node) of each rank's GPU: GPUs split evenly over NICs."""
        c = self.cluster
        nics = max(c.inter.nics_per_node, 1)
        return (self.local_of[ranks] * nics) // c.gpus_per_node

    def span(self, ranks: Sequence[int] | np.ndarray) -> GroupSpan:
        """What the group `ranks` (in ring order) spans on the cluster."""
        return GroupSpan.of(self, np.asarray(ranks, dtype=np.int64))


@dataclass(frozen=True)
class GroupSpan:
    """Shape of one process group on the cluster (see module docstring)."""

    size: int
    nodes: int
    domains: int
    leaves: int
    pods: int
    ranks_per_domain: int
    rails: int  # NICs the group's GPUs use in its least-connected NVLink domain
    domain_crossings: int
    leaf_crossings: int
    pod_crossings: int
    top: Tier
    intra: Tier

    @classmethod
    def of(cls, placement: Placement, ranks: np.ndarray) -> GroupSpan:
        c = placement.cluster
        node = placement.node_of[ranks]
        domain, leaf, pod = hierarchy(c, node)
        _, per_domain = np.unique(domain, return_counts=True)
        n_domains = len(per_domain)
        n_leaves = len(np.unique(leaf))
        n_pods = len(np.unique(pod))
        top_name = (
            "intra"
            if n_domains == 1
            else "leaf"
            if n_leaves == 1
            else "spine"
            if n_pods == 1
            else "core"
        )
        return cls(
            size=len(ranks),
            nodes=len(np.unique(node)),
            domains=n_domains,
            leaves=n_leaves,
            pods=n_pods,
            ranks_per_domain=int(per_domain.max()),
            rails=_rails(placement, ranks, node),
            domain_crossings=_crossings(domain),
            leaf_crossings=_crossings(leaf),
            pod_crossings=_crossings(pod),
            top=tier(c, top_name),
            intra=tier(c, "intra"),
        )

    @property
    def tiers_spanned(self) -> list[str]:
        """Names of the tiers the group's traffic uses, fastest first."""
        if self.domains == 1:
            return ["intra"]
        order = ["intra", "leaf", "spine", "core"]
        used = order[1 : order.index(self.top.name) + 1]
        return (["intra"] if self.ranks_per_domain > 1 else []) + used


def _crossings(label: np.ndarray) -> int:
    """Times a cyclic ring over the ranks steps between different labels (0 inside one)."""
    if len(label) < 2 or np.all(label == label[0]):
        return 0
    return int(np.count_nonzero(label != np.roll(label, -1)))


def _rails(placement: Placement, ranks: np.ndarray, node: np.ndarray) -> int:
    """Distinct NICs the group's GPUs use in its least-connected NVLink domain: traffic that
    leaves a domain spreads over every NIC of it (one node's NICs, or a whole NVL72 rack's)."""
    c = placement.cluster
    nics = c.inter.nics_per_node + 1
    pairs = np.unique(node * nics + placement.nic_of(ranks))
    _, per_domain = np.unique(pairs // nics // c.nodes_per_domain, return_counts=True)
    return max(1, int(per_domain.min()))


def hierarchy(cluster: ClusterSpec, node: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(NVLink domain, leaf, pod) index of each node in `node`."""
    domain = node // cluster.nodes_per_domain
    leaf = block_of(cluster.leaf_sizes, node)
    return domain, leaf, block_of(cluster.pod_sizes, leaf)


def block_of(sizes: tuple[int, ...], item: np.ndarray) -> np.ndarray:
    """Block of each item for consecutive blocks of `sizes` items (leaves of nodes, pods of
    leaves)."""
    uniform, starts = _block_plan(sizes)
    if uniform:
        return item // uniform
    return np.searchsorted(starts, item, side="right") - 1


@lru_cache(maxsize=256)
def _block_plan(sizes: tuple[int, ...]) -> tuple[int, np.ndarray]:
    """(common block size when all blocks but a partly filled last one share it, else 0;
    first item of each block)."""
    return uniform_size(sizes), np.cumsum((0, *sizes[:-1]))


def nic_sharing(placement: Placement, groups: Sequence[Sequence[int]]) -> int:
    """Most groups that leave their NVLink domain through one same NIC when all `groups` run
    at once."""
    if not groups:
        return 1
    c = placement.cluster
    nics = c.inter.nics_per_node + 1
    used = []  # per group crossing domains: the distinct (node, NIC) it sends through
    for g in groups:
        ranks = np.asarray(g, dtype=np.int64)
        node = placement.node_of[ranks]
        domain = node // c.nodes_per_domain
        if np.all(domain == domain[0]):
            continue
        used.append(np.unique(node * nics + placement.nic_of(ranks)))
    if not used:
        return 1
    return int(np.unique(np.concatenate(used), return_counts=True)[1].max())
