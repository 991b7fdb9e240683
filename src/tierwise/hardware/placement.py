"""Where ranks sit: rank -> (node, local GPU), and what a group of ranks spans.

A `Placement` maps global ranks to nodes (indices into the cluster) and local GPU slots.
`span()` answers, for one group of ranks, which tiers it crosses, how many ranks share an
NVLink domain, how many NICs its traffic leaves a domain through, and how often its ring order
crosses each boundary. `hierarchy()` maps nodes to their domain, leaf and pod (leaves may differ
in size; the last leaf, domain and pod may be partly filled).

Placements of up to `SMALL_WORLD` ranks hold python ints and their groups are spanned with
python lists, so one small estimate never imports numpy (about 8x a bare interpreter's start);
larger ones hold numpy arrays. The few per-element steps below take either (`_take`, `_div`,
`_counts`, `_crossings`, `_concat`, `block_of`); a property test checks both give the same spans.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec, uniform_size
from tierwise.hardware.tiers import Tier, tier

if TYPE_CHECKING:
    import numpy as np

SMALL_WORLD = 4096
"""Most ranks a placement holds as python ints (larger: numpy arrays)."""
Ints = Any
"""Integers per rank or node: a python list (small placements) or a numpy int64 array."""


@dataclass(frozen=True)
class Placement:
    """Global rank r runs on node `node_of[r]`, GPU slot `local_of[r]` of `cluster`."""

    cluster: ClusterSpec
    node_of: Sequence[int]
    """Node of each rank: a tuple of python ints up to SMALL_WORLD ranks, else a numpy array."""
    local_of: Sequence[int]

    @classmethod
    def contiguous(
        cls,
        cluster: ClusterSpec,
        world: int | None = None,
        nodes: Sequence[int] | None = None,
        ranks_per_node: int | None = None,
        world_name: str = "world size",
    ) -> Placement:
        """Ranks fill GPUs node by node (torchrun/Slurm block order) over `nodes` (default 0..);
        a `world` that does not fit is an error naming it as `world_name` (a flag, say)."""
        k = ranks_per_node or cluster.gpus_per_node
        if k > cluster.gpus_per_node:
            raise SpecError(
                f"--ranks-per-node: {k}; allowed: 1 to {cluster.gpus_per_node} (the GPUs of a node)"
            )
        world = (
            world if world is not None else (len(nodes) if nodes is not None else cluster.nodes) * k
        )
        node_list = tuple(nodes) if nodes is not None else range(cluster.nodes)
        if world > len(node_list) * k:
            raise SpecError(
                f"{world_name}: {world}; allowed: at most {len(node_list) * k} ranks "
                f"({len(node_list)} nodes of {k} ranks)"
            )
        if world <= SMALL_WORLD:
            ranks = range(world)
            return cls(
                cluster, tuple(node_list[r // k] for r in ranks), tuple(r % k for r in ranks)
            )
        import numpy as np

        all_ranks = np.arange(world)
        return cls(cluster, np.asarray(node_list, dtype=np.int64)[all_ranks // k], all_ranks % k)

    @property
    def world(self) -> int:
        """Number of ranks placed."""
        return len(self.node_of)

    def nodes_used(self) -> list[int]:
        """The distinct nodes the ranks run on, ascending."""
        return sorted({int(n) for n in self.node_of})

    def nic_of(self, ranks: Sequence[int] | np.ndarray) -> Ints:
        """Rail (NIC index in its node) of each rank's GPU: GPUs split evenly over NICs."""
        c = self.cluster
        nics = max(c.inter.nics_per_node, 1)
        return _div(_take(self.local_of, ranks, nics), c.gpus_per_node)

    def span(self, ranks: Sequence[int] | np.ndarray) -> GroupSpan:
        """What the group `ranks` (in ring order) spans on the cluster."""
        return GroupSpan.of(self, ranks)


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
    # Rails (NIC index in a node) the group's traffic changes between domains:
    rail_changes: float = 0.0  # ring steps that must change rail (NCCL picks each ring's ends)
    pair_rail_changes: int = 0  # steps r -> r+1 in rank order between different rails
    cross_rail_share: float = 0.0  # share of all-to-all bytes between domains changing rail

    @classmethod
    def of(cls, placement: Placement, ranks: Sequence[int] | np.ndarray) -> GroupSpan:
        c = placement.cluster
        node = _take(placement.node_of, ranks)
        domain, leaf, pod = hierarchy(c, node)
        n_domains, ranks_per_domain, _ = _counts(domain)
        n_leaves = _counts(leaf)[0]
        n_pods = _counts(pod)[0]
        top_name = _top_name(n_domains, n_leaves, n_pods)
        return cls(
            size=len(ranks),
            nodes=_counts(node)[0],
            domains=n_domains,
            leaves=n_leaves,
            pods=n_pods,
            ranks_per_domain=ranks_per_domain,
            rails=_rails(placement, ranks, node),
            domain_crossings=_crossings(domain),
            leaf_crossings=_crossings(leaf),
            pod_crossings=_crossings(pod),
            top=tier(c, top_name),
            intra=tier(c, "intra"),
            **(_rail_fields(placement, ranks, domain) if n_domains > 1 else {}),
        )

    def on(self, cluster: ClusterSpec) -> GroupSpan:
        """This span with `cluster`'s tiers: the same group on a cluster of the same geometry
        (nodes, domains, leaves, pods, NICs per node) whose links differ."""
        top = tier(cluster, _top_name(self.domains, self.leaves, self.pods))
        return replace(self, top=top, intra=tier(cluster, "intra"))

    @property
    def tiers_spanned(self) -> list[str]:
        """Names of the tiers the group's traffic uses, fastest first."""
        if self.domains == 1:
            return ["intra"]
        order = ["intra", "leaf", "spine", "core"]
        used = order[1 : order.index(self.top.name) + 1]
        return (["intra"] if self.ranks_per_domain > 1 else []) + used


def _top_name(domains: int, leaves: int, pods: int) -> str:
    """The slowest tier a group spanning these crosses."""
    if domains == 1:
        return "intra"
    return "leaf" if leaves == 1 else "spine" if pods == 1 else "core"


def _steps(label: np.ndarray) -> np.ndarray:
    """Whether each step r -> r+1 of a cyclic ring over the ranks changes label."""
    import numpy as np

    if len(label) < 2:
        return np.zeros(len(label), dtype=bool)
    return label != np.roll(label, -1)


def _rail_fields(
    placement: Placement, ranks: Sequence[int] | np.ndarray, domain: Ints
) -> dict[str, Any]:
    """GroupSpan's rail fields of a group that spans several domains (lists for small
    placements, numpy arrays for large ones; a property test keeps the two equal)."""
    rail = placement.nic_of(ranks)
    nics = placement.cluster.inter.nics_per_node
    if isinstance(domain, list):
        return _rail_fields_small(domain, list(rail), nics)
    import numpy as np

    domain = np.asarray(domain, dtype=np.int64)
    rail = np.asarray(rail, dtype=np.int64)
    return {
        "rail_changes": _ring_rail_changes(domain, rail, nics),
        "pair_rail_changes": int(np.count_nonzero(_steps(domain) & _steps(rail))),
        "cross_rail_share": _cross_rail_share(domain, rail),
    }


def _rail_fields_small(domain: list[int], rail: list[int], nics: int) -> dict[str, Any]:
    """`_rail_fields` in plain Python: see `_ring_rail_changes` and `_cross_rail_share`."""
    p = len(domain)
    nxt = [(i + 1) % p for i in range(p)]
    rails_of: dict[int, set[int]] = {}
    for d, r in zip(domain, rail, strict=True):
        rails_of.setdefault(d, set()).add(r)
    changes: list[float] = []
    pair_changes = 0
    for i, j in enumerate(nxt):
        if p < 2 or domain[i] == domain[j]:
            continue
        src, dst = rails_of[domain[i]], rails_of[domain[j]]
        changes.append(1.0 - len(src & dst) / len(src))
        pair_changes += rail[i] != rail[j]
    remote = p * p - sum(n * n for n in Counter(domain).values())
    same_rail_remote = sum(n * n for n in Counter(rail).values()) - sum(
        n * n for n in Counter(zip(domain, rail, strict=True)).values()
    )
    return {
        "rail_changes": math.fsum(changes),
        "pair_rail_changes": pair_changes,
        "cross_rail_share": 1.0 - same_rail_remote / remote if remote else 0.0,
    }


def _ring_rail_changes(domain: np.ndarray, rail: np.ndarray, nics: int) -> float:
    """Ring steps between domains that must change rail, summed over the steps.

    NCCL orders each ring inside a domain as it likes, so a step from domain A to domain B
    stays on one rail per channel while A and B hold the group's GPUs on common rails: the
    share of A's rails missing from B must change rail (1 for one GPU per node on different
    local ranks, 0 for full nodes)."""
    import numpy as np

    steps = np.flatnonzero(_steps(domain))
    if not len(steps):
        return 0.0
    doms, dom_idx = np.unique(domain, return_inverse=True)
    member = np.zeros((len(doms), max(nics, 1)), dtype=bool)
    member[dom_idx, rail] = True
    src, dst = member[dom_idx[steps]], member[dom_idx[(steps + 1) % len(domain)]]
    common = np.count_nonzero(src & dst, axis=1) / np.count_nonzero(src, axis=1)
    return math.fsum((1.0 - common).tolist())  # exactly rounded: same as the list path


def _cross_rail_share(domain: np.ndarray, rail: np.ndarray) -> float:
    """Share of the (sender, receiver) pairs in different domains whose GPUs sit on different
    rails: the bytes of an all-to-all that PXN must hop to another GPU first."""
    import numpy as np

    p = len(domain)
    per_domain = np.unique(domain, return_counts=True)[1]
    remote = p * p - int(np.sum(per_domain.astype(np.int64) ** 2))
    if remote == 0:
        return 0.0
    per_rail = np.unique(rail, return_counts=True)[1].astype(np.int64)
    pair_key = domain.astype(np.int64) * (int(rail.max()) + 1) + rail
    per_domain_rail = np.unique(pair_key, return_counts=True)[1].astype(np.int64)
    same_rail_remote = int(np.sum(per_rail**2) - np.sum(per_domain_rail**2))
    return 1.0 - same_rail_remote / remote


def _take(column: Sequence[int], ranks: Sequence[int] | np.ndarray, scale: int = 1) -> Ints:
    """`column` (times `scale`) at each of `ranks`: a list from a tuple column, else an array."""
    if isinstance(column, tuple):
        return [column[r] * scale for r in ranks]
    import numpy as np

    picked = column[np.asarray(ranks, dtype=np.int64)]
    return picked * scale if scale != 1 else picked


def _div(values: Ints, d: int) -> Ints:
    """Floor division of each value by `d`."""
    return [v // d for v in values] if isinstance(values, list) else values // d


def _counts(values: Ints) -> tuple[int, int, int]:
    """(distinct values, most occurrences of one, fewest occurrences of one)."""
    if isinstance(values, list):
        counts = Counter(values).values()
        return len(counts), max(counts), min(counts)
    import numpy as np

    found = np.unique(values, return_counts=True)[1]
    return len(found), int(found.max()), int(found.min())


def _concat(parts: list[Ints]) -> Ints:
    """The values of all `parts` (lists or arrays) in one list or array."""
    if isinstance(parts[0], list):
        return [v for part in parts for v in part]
    import numpy as np

    return np.concatenate(parts)


def _crossings(label: Ints) -> int:
    """Times a cyclic ring over the ranks steps between different labels (0 inside one)."""
    if isinstance(label, list):
        return sum(a != b for a, b in zip(label, label[1:] + label[:1], strict=True))
    import numpy as np

    if len(label) < 2 or np.all(label == label[0]):
        return 0
    return int(np.count_nonzero(label != np.roll(label, -1)))


def _nic_keys(placement: Placement, ranks: Sequence[int] | np.ndarray, node: Ints) -> Ints:
    """The distinct (node, NIC) pairs the ranks send through, as node * (nics + 1) + NIC."""
    stride = placement.cluster.inter.nics_per_node + 1
    nic = placement.nic_of(ranks)
    if isinstance(node, list):
        return list({n * stride + q for n, q in zip(node, nic, strict=True)})
    import numpy as np

    keys = np.sort(node * stride + nic)  # not np.unique: numpy 2.4 hashes, ~50x slower at 10^6
    return keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if len(keys) else keys


def _rails(placement: Placement, ranks: Sequence[int] | np.ndarray, node: Ints) -> int:
    """Distinct NICs the group's GPUs use in its least-connected NVLink domain: traffic that
    leaves a domain spreads over every NIC of it (one node's NICs, or a whole NVL72 rack's)."""
    c = placement.cluster
    nics = c.inter.nics_per_node + 1
    pairs = _nic_keys(placement, ranks, node)
    return max(1, _counts(_div(_div(pairs, nics), c.nodes_per_domain))[2])


def hierarchy(cluster: ClusterSpec, node: Ints) -> tuple[Ints, Ints, Ints]:
    """(NVLink domain, leaf, pod) index of each node in `node` (a list or a numpy array)."""
    domain = _div(node, cluster.nodes_per_domain)
    leaf = block_of(cluster.leaf_sizes, node)
    return domain, leaf, block_of(cluster.pod_sizes, leaf)


def block_of(sizes: tuple[int, ...], item: Ints) -> Ints:
    """Block of each item for consecutive blocks of `sizes` items (leaves of nodes, pods of
    leaves)."""
    uniform, starts = _block_plan(sizes)
    if uniform:
        return _div(item, uniform)
    if isinstance(item, list):
        return [bisect_right(starts, i) - 1 for i in item]
    import numpy as np

    return np.searchsorted(starts, item, side="right") - 1


@lru_cache(maxsize=256)
def _block_plan(sizes: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """(common block size when all blocks but a partly filled last one share it, else 0;
    first item of each block)."""
    starts = [0]
    for size in sizes[:-1]:
        starts.append(starts[-1] + size)
    return uniform_size(sizes), tuple(starts)


def nic_sharing(placement: Placement, groups: Sequence[Sequence[int]]) -> int:
    """Most groups that leave their NVLink domain through one same NIC when all `groups` run
    at once."""
    per_domain = placement.cluster.nodes_per_domain
    used = []  # per group crossing domains: the distinct (node, NIC) it sends through
    for g in groups:
        node = _take(placement.node_of, g)
        if _crossings(_div(node, per_domain)):
            used.append(_nic_keys(placement, g, node))
    return _counts(_concat(used))[1] if used else 1
