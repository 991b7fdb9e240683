"""Process groups of a layout placed on the cluster, and the collective cost tables they get.

Ranks are ordered by `order` (innermost first; Megatron-core's default tp-cp-ep-dp-pp, where
ep is carved out of cp*dp and so is not a separate dimension of the world) and filled into
GPUs node by node. Each group kind's shape is built once per (cluster, degrees, order) and
its collectives' candidate tables are cached by the collective model. A layout's groups
(`LayoutGroups`) are cached per cluster too, so one estimate looks its degrees up once and
prices each collective from a memoised (latency, rate) list without touching numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

from tierwise.collectives.model import ScalarCandidates, auto_candidates, times_us
from tierwise.collectives.shape import Shape, shape_of
from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.placement import (
    SMALL_WORLD,
    GroupSpan,
    Placement,
    hierarchy,
    nic_sharing,
)
from tierwise.memo import by_identity

if TYPE_CHECKING:
    import numpy as np

DEFAULT_ORDER = ("tp", "cp", "dp", "pp")
ORDERS = {
    "tp-cp-ep-dp-pp": ("tp", "cp", "dp", "pp"),
    "tp-cp-ep-pp-dp": ("tp", "cp", "pp", "dp"),
    "tp-pp-cp-ep-dp": ("tp", "pp", "cp", "dp"),
    "dp-cp-pp-tp": ("dp", "cp", "pp", "tp"),  # naive: data parallel innermost
}
# dpshard / dprep: torchtitan's HSDP, sharding over cp x dp_shard ranks and replicating
# over dp / dp_shard (only when Degrees.dp_shard is set). edp: the expert-data-parallel group
# that reduces the expert weights' gradients (one rank of each ep group: Megatron's
# expert_data_parallel group), which spans nodes when the ep group fills them.
GROUP_KINDS = ("tp", "cp", "ep", "dpcp", "pp", "dpshard", "dprep", "edp")


class Degrees(NamedTuple):
    """The parallel degrees that decide where groups land (hashable cache key)."""

    tp: int
    cp: int
    ep: int
    dp: int
    pp: int
    dp_shard: int = 0
    """HSDP: dp ranks sharding one replica (0: all dp, plain FSDP)."""
    etp: int = 0
    """Expert tensor parallel size when it differs from tp (0: tp)."""

    @property
    def world(self) -> int:
        """GPUs in the job."""
        return self.tp * self.cp * self.dp * self.pp

    def group_size(self, kind: str) -> int:
        """Ranks in a group of `kind` (dpcp: dp*cp; edp: the expert ranks' tp*cp*dp over
        etp*ep, tp taken as etp when etp is 0; pp counts the stage boundary; dpshard, dprep: 1
        without HSDP)."""
        if kind == "dpcp":
            return self.dp * self.cp
        if kind == "edp":
            return self.dp * self.cp * (self.tp // self.etp if self.etp else 1) // self.ep
        if kind in ("dpshard", "dprep"):
            if not self.dp_shard:
                return 1
            return self.cp * self.dp_shard if kind == "dpshard" else self.dp // self.dp_shard
        return getattr(self, kind)


def _coords(d: Degrees, order: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Each rank's coordinate along tp, cp, dp, pp for the given order (innermost first)."""
    import numpy as np

    sizes = {"tp": d.tp, "cp": d.cp, "dp": d.dp, "pp": d.pp}
    ranks = np.arange(d.world)
    coords, stride = {}, 1
    for dim in order:
        coords[dim] = (ranks // stride) % sizes[dim]
        stride *= sizes[dim]
    return coords


def group_ids(d: Degrees, order: tuple[str, ...], kind: str) -> np.ndarray:
    """For every rank, an id shared by exactly the ranks of its `kind` group.

    tp/cp/dp/pp: ranks equal in every other coordinate. dpcp: the gradient-reduce group over
    dp*cp. ep: the experts' group, `ep` consecutive ranks of the cp*dp index (cp fastest);
    edp: the ranks of that index equal modulo ep (with etp: of the tp*cp*dp index, etp*ep).
    dpshard: cp x the dp_shard ranks of one HSDP replica; dprep: one rank of each replica."""
    c = _coords(d, order)
    if kind in {"tp", "cp", "dp", "pp"}:
        others = [dim for dim in ("tp", "cp", "dp", "pp") if dim != kind]
    elif kind in {"dpcp", "ep", "dpshard", "edp"}:
        others = ["tp", "pp"]
    elif kind == "dprep":
        others = ["tp", "cp", "pp"]
    else:
        raise SpecError(f"unknown group kind {kind!r}")
    import numpy as np

    gid = np.zeros(d.world, dtype=np.int64)
    for dim in others:
        gid = gid * getattr(d, dim) + c[dim]
    if kind == "ep" and d.etp:
        # Megatron's expert ranks: etp innermost, then ep, over the tp*cp*dp ranks of a stage.
        r = c["tp"] + d.tp * (c["cp"] + d.cp * c["dp"])
        gid = (c["pp"] * d.world + r % d.etp) * d.world + r // (d.etp * d.ep)
    elif kind == "ep":
        gid = gid * d.world + (c["cp"] + d.cp * c["dp"]) // d.ep
    elif kind == "edp" and d.etp:
        r = c["tp"] + d.tp * (c["cp"] + d.cp * c["dp"])
        gid = c["pp"] * d.world + r % (d.etp * d.ep)
    elif kind == "edp":
        gid = gid * d.world + (c["cp"] + d.cp * c["dp"]) % d.ep
    elif kind == "dpshard":
        gid = gid * d.dp + c["dp"] // d.dp_shard
    elif kind == "dprep":
        gid = gid * d.dp + c["dp"] % d.dp_shard
    return gid


def group_ranks(d: Degrees, order: tuple[str, ...], kind: str) -> np.ndarray:
    """Ranks of the group of `kind` that holds rank 0, in ring (coordinate) order."""
    import numpy as np

    gid = group_ids(d, order, kind)
    return np.nonzero(gid == gid[0])[0]


def _siblings(d: Degrees, order: tuple[str, ...], kind: str, gpn: int) -> list[list[int]]:
    """The groups of `kind` with a rank on the first node: they run at the same time."""
    import numpy as np

    gid = group_ids(d, order, kind)
    return [np.nonzero(gid == g)[0].tolist() for g in dict.fromkeys(gid[:gpn].tolist())]


def scattered_nodes(cluster: ClusterSpec) -> list[int]:
    """Node order of a topology-unaware scheduler: consecutive ranks' nodes on different
    leaves (round-robin over leaves)."""
    import numpy as np

    node = np.arange(cluster.nodes)
    leaf = hierarchy(cluster, node)[1]
    slot = node - np.asarray(cluster.leaf_starts)[leaf]
    return np.lexsort((leaf, slot)).tolist()


def placement_for(cluster: ClusterSpec, scatter: bool = False) -> Placement:
    """Ranks filled node by node over the cluster's nodes in order, or scattered over leaves."""
    return _cache_for(cluster).placement(scatter)


class _ClusterCache:
    """Per-cluster placements and group shapes, keyed by identity (specs are frozen)."""

    def __init__(self, cluster: ClusterSpec) -> None:
        self.cluster = cluster
        self.placements: dict[bool, Placement] = {}
        self.shapes: dict[tuple[tuple[int, ...], bool], Shape] = {}
        self.layouts: dict[tuple[Degrees, tuple[str, ...], bool], LayoutGroups] = {}
        # what a group's span and NIC sharing depend on (not the links' speeds)
        self.geometry = (
            cluster.nodes,
            cluster.gpus_per_node,
            cluster.nodes_per_domain,
            cluster.inter.nics_per_node,
            cluster.leaf_sizes,
            cluster.pod_sizes,
        )

    def placement(self, scatter: bool) -> Placement:
        """The contiguous or the scattered placement, built on first use."""
        if scatter not in self.placements:
            nodes = scattered_nodes(self.cluster) if scatter else None
            self.placements[scatter] = Placement.contiguous(self.cluster, nodes=nodes)
        return self.placements[scatter]


_cache_for = by_identity(64)(_ClusterCache)  # clusters whose group shapes stay cached at once
_SPANS: dict[tuple[object, ...], tuple[GroupSpan, int, int]] = {}
"""(geometry, shape key, scatter) -> (span, NIC sharing, siblings) of a group: clusters that
differ only in their links (a sweep over NICs or oversubscription) share them."""
_SPANS_KEPT = 100_000


def _progression(d: Degrees, order: tuple[str, ...], kind: str) -> tuple[int, int] | None:
    """(stride, ranks) when every group of `kind` is ranks b, b + stride, ... (pp: the two
    ranks across one stage boundary); None when the group is not such a progression."""
    strides, stride = {}, 1
    for dim in order:
        strides[dim] = stride
        stride *= d.group_size(dim)
    if kind in strides:
        return strides[kind], 2 if kind == "pp" else d.group_size(kind)
    if kind == "ep" and d.etp:  # expert ranks etp apart when tp, cp, dp are innermost
        return (d.etp, d.ep) if order[:3] == ("tp", "cp", "dp") else None
    if kind == "edp" and d.etp:  # etp*ep apart when tp, cp, dp are innermost
        fits = order[:3] == ("tp", "cp", "dp")
        return (d.etp * d.ep, d.group_size(kind)) if fits else None
    if kind == "dprep":  # one dp coordinate of each replica: dp_shard apart
        return strides["dp"] * d.dp_shard, d.group_size(kind)
    inner, outer = sorted(("cp", "dp"), key=order.index)
    if d.cp == 1 or d.dp == 1:
        start = strides["dp" if d.cp == 1 else "cp"]
    elif strides[outer] == strides[inner] * d.group_size(inner) and inner == "cp":
        start = strides["cp"]  # cp*dp ranks consecutive, cp fastest: the ep index's order
    else:
        return None
    if kind == "edp":  # every ep-th rank of that index
        start = start * d.ep
    return start, d.group_size(kind)


def _fallback_key(d: Degrees, order: tuple[str, ...], kind: str) -> tuple[int, ...]:
    return (*d, *map(order.index, ("tp", "cp", "dp", "pp")), GROUP_KINDS.index(kind))


def _concurrent_groups(
    d: Degrees, order: tuple[str, ...], kind: str, gpn: int
) -> list[Sequence[int]]:
    """The groups of `kind` with a rank on the first node (`gpn` GPUs): they run at the same
    time and share its NICs (pp: the two ranks across one stage boundary)."""
    progression = _progression(d, order, kind)
    if progression is None:
        siblings = _siblings(d, order, kind, gpn)
        return [g[:2] for g in siblings] if kind == "pp" else siblings
    stride, n = progression
    block = stride * n
    bases = dict.fromkeys((r // block) * block + r % stride for r in range(min(gpn, d.world)))
    if n * len(bases) <= SMALL_WORLD:
        return [[b + k * stride for k in range(n)] for b in bases]
    import numpy as np

    steps = np.arange(n, dtype=np.int64) * stride
    return [steps + b for b in bases]


def group_shape_of(
    cluster: ClusterSpec,
    d: Degrees,
    kind: str,
    order: tuple[str, ...] = DEFAULT_ORDER,
    scatter: bool = False,
) -> Shape:
    """Shape of the first group of `kind`, with NIC sharing by its concurrent siblings; cached
    by (stride, ranks, ranks on the first node) where the groups are progressions, so layouts
    share shapes."""
    if d.world > cluster.world:
        raise SpecError(f"layout needs {d.world} GPUs; the cluster has {cluster.world}")
    cache = _cache_for(cluster)
    progression = _progression(d, order, kind)
    # a progression's concurrent groups depend on how many ranks the first node holds too
    key = (*progression, min(cluster.gpus_per_node, d.world)) if progression else None
    key = key or _fallback_key(d, order, kind)
    if (key, scatter) not in cache.shapes:
        found = _SPANS.get((cache.geometry, key, scatter))
        if found is None:
            p = cache.placement(scatter)
            siblings = _concurrent_groups(d, order, kind, cluster.gpus_per_node)
            if len(_SPANS) >= _SPANS_KEPT:
                _SPANS.clear()
            found = _SPANS[cache.geometry, key, scatter] = (
                p.span(siblings[0]),
                nic_sharing(p, siblings),
                len(siblings),
            )
        span, nic_share, siblings_n = found
        cache.shapes[key, scatter] = shape_of(
            cluster, span.on(cluster), nic_share, siblings=siblings_n
        )
    return cache.shapes[key, scatter]


KindTiers: TypeAlias = "tuple[dict[str, str], tuple[tuple[str, str], ...]]"
"""`LayoutGroups.tiers_of`: the tier of each name, and the (name, tier) pairs that cross one."""


class LayoutGroups:
    """One layout's groups on a cluster: the shape of each kind with >= 2 ranks, and the
    candidate costs of the collectives run on them (memoised per (kind, op))."""

    def __init__(self, shapes: dict[str, Shape]) -> None:
        self.shapes = shapes
        # (kind, op) -> the fastest-candidate time of one size, us (`ScalarCandidates`)
        self._fastest_us: dict[tuple[str, str], Callable[[float], float]] = {}
        # The slowest tier each group kind crosses: intra, leaf or spine ("none": no group).
        self.top_tiers = {
            kind: shapes[kind].top_tier if kind in shapes else "none" for kind in GROUP_KINDS
        }
        self._tiers: dict[tuple[tuple[str, str], ...], KindTiers] = {}

    def tiers_of(self, kinds: dict[str, str]) -> KindTiers:
        """The top tier of each of `kinds` (name -> group kind) and, in order, the (name,
        tier) of those whose group crosses one (not "none"); memoised by `kinds`."""
        key = tuple(kinds.items())
        found = self._tiers.get(key)
        if found is None:
            tiers = {name: self.top_tiers[group] for name, group in kinds.items()}
            crossing = tuple((name, tier) for name, tier in tiers.items() if tier != "none")
            found = self._tiers[key] = (tiers, crossing)
        return found

    def time_s(self, kind: str, op: str, size_bytes: float | np.ndarray) -> float | np.ndarray:
        """Seconds of the fastest candidate of `op` for `size_bytes` on the `kind` group (0
        where the layout has no such group); python scalars skip numpy."""
        if size_bytes.__class__ is not float and isinstance(size_bytes, (float, int)):
            size_bytes = float(size_bytes)  # any other python or numpy scalar
        scalar = size_bytes.__class__ is float
        if scalar:
            fastest_us = self._fastest_us.get((kind, op))
            if fastest_us is not None:  # priced before: the hot path
                return fastest_us(size_bytes) * 1e-6
        shape = self.shapes.get(kind)
        if shape is None:
            return 0.0 * size_bytes
        if not scalar:
            return comm_time_s(op, shape, size_bytes)
        fastest_us = ScalarCandidates.of(auto_candidates(op, shape)).fastest_us
        self._fastest_us[kind, op] = fastest_us
        return fastest_us(size_bytes) * 1e-6


def layout_groups(
    cluster: ClusterSpec,
    d: Degrees,
    order: tuple[str, ...] = DEFAULT_ORDER,
    scatter: bool = False,
) -> LayoutGroups:
    """The groups of a layout with degrees `d` (cached per cluster, like the shapes)."""
    cache = _cache_for(cluster)
    key = (d, order, scatter)
    groups = cache.layouts.get(key)
    if groups is None:
        shapes = {
            kind: group_shape_of(cluster, d, kind, order, scatter)
            for kind in GROUP_KINDS
            if d.group_size(kind) >= 2
        }
        groups = cache.layouts[key] = LayoutGroups(shapes)
    return groups


def comm_time_s(op: str, shape: Shape, size_bytes: float | np.ndarray) -> float | np.ndarray:
    """Fastest candidate's time for `size_bytes` (scalar or array), seconds."""
    import numpy as np

    cands = auto_candidates(op, shape)
    if np.ndim(size_bytes) == 0:
        return ScalarCandidates.of(cands).fastest_us(float(size_bytes)) * 1e-6
    if not cands:
        return 0.0 * size_bytes
    n = np.asarray(size_bytes, dtype=float)
    return times_us(cands, n.ravel()).min(axis=0).reshape(n.shape) * 1e-6
