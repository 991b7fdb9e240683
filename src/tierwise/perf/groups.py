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
from operator import ne
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from tierwise.collectives.model import ScalarCandidates, auto_candidates, times_us
from tierwise.collectives.shape import Shape, shape_of
from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.placement import (
    SMALL_WORLD,
    GroupSpan,
    Ints,
    Placement,
    hierarchy,
    nic_sharing,
)
from tierwise.memo import Filled, by_identity

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
        self._labels: dict[tuple[bool, bool], tuple[Ints, Ints, Ints]] = {}
        self._min_blocks: dict[bool, tuple[int, ...]] = {}
        self.shapes: dict[tuple[tuple[object, ...], bool], Shape] = {}
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

    def slot_labels(self, scatter: bool) -> tuple[list[int], list[int], list[int]]:
        """Each node slot's (NVLink domain, leaf, pod) as python lists: slot i holds ranks
        i * gpus_per_node onwards."""
        if (scatter, False) not in self._labels:
            node = self.placement(scatter).node_of
            slots = [int(node[i]) for i in range(0, len(node), self.cluster.gpus_per_node)]
            self._labels[scatter, False] = hierarchy(self.cluster, slots)
        return self._labels[scatter, False]

    def min_blocks(self, scatter: bool) -> tuple[int, ...]:
        """Ranks in the smallest pod, leaf and NVLink domain of the placement, the last of
        each left out (the world where there is one)."""
        if scatter not in self._min_blocks:
            import numpy as np

            sizes = [np.bincount(label) for label in reversed(self.label_arrays(scatter))]
            world = len(self.label_arrays(scatter)[0])
            self._min_blocks[scatter] = tuple(
                int(n[:-1].min()) if len(n) > 1 else world for n in sizes
            )
        return self._min_blocks[scatter]

    def label_arrays(self, scatter: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each rank's (NVLink domain, leaf, pod) as numpy arrays."""
        if (scatter, True) not in self._labels:
            import numpy as np

            gpn = self.cluster.gpus_per_node
            node = np.asarray(self.placement(scatter).node_of[::gpn], dtype=np.int64)
            self._labels[scatter, True] = tuple(  # per node slot, then per rank (int32)
                np.repeat(label.astype(np.int32), gpn) for label in hierarchy(self.cluster, node)
            )
        return self._labels[scatter, True]


_cache_for = by_identity(64)(_ClusterCache)  # clusters whose group shapes stay cached at once
_SPANS: dict[tuple[object, ...], Worst] = {}
"""(geometry, shape key, scatter) -> the worst instance of a group kind (`Worst`): clusters
that differ only in their links (a sweep over NICs or oversubscription) share them."""
_SPANS_KEPT = 100_000
_PLACED: dict[tuple[object, ...], tuple[GroupSpan, int, int]] = {}
"""(geometry, scatter, a progression's stride, ranks and pairs, the worst row's set, first
rank and the end of its node slot's ranks) -> (span, NIC sharing, concurrent instances) of
that row: the same row found worst at another world size is placed once."""


def _progression(d: Degrees, order: tuple[str, ...], kind: str) -> tuple[int, int] | None:
    """(stride, ranks) when every group of `kind` is ranks b, b + stride, ... (pp: the whole
    pipeline, whose instances are its stage boundaries); None when it is not such a
    progression."""
    strides, stride = {}, 1
    for dim in order:
        strides[dim] = stride
        stride *= d.group_size(dim)
    if kind in strides:
        return strides[kind], d.group_size(kind)
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


class _Pattern(NamedTuple):
    """The instances of a kind whose groups are progressions (`_progression`): rows b,
    b + stride, ..., (n ranks) for every base b (ranks whose coordinate along the group is 0),
    or, for pp (`pairs`), the pairs b + t*stride, b + (t+1)*stride across each stage boundary
    t < n - 1, one set of rows per boundary (the pair from the last stage back to the first,
    in interleaved schedules, crosses a pod or leaf only if some boundary does: ranks fill
    the cluster in order)."""

    stride: int
    n: int
    world: int
    pairs: bool

    @property
    def sets(self) -> int:
        """Sets of rows that run at once (pp: one per stage boundary)."""
        return self.n - 1 if self.pairs else 1

    def bases(self) -> list[int]:
        """First rank of each group, ascending."""
        block = self.stride * self.n
        return [q + j for q in range(0, self.world, block) for j in range(self.stride)]

    @property
    def width(self) -> int:
        """Ranks in a row."""
        return 2 if self.pairs else self.n

    def row(self, t: int, b: int) -> list[int]:
        """Row of base `b` in set `t`, ranks in ring order."""
        s = self.stride
        if self.pairs:
            return [b + t * s, b + (t + 1) * s]
        return list(range(b, b + self.n * s, s))

    def firsts(self, step: int = 1) -> np.ndarray:
        """First rank of each row of `rows(step)`, in its order, without building the rows."""
        import numpy as np

        s = self.stride
        bases = (
            np.arange(0, self.world, s * self.n, dtype=np.int64)[:, None]
            + np.arange(0, s, step, dtype=np.int64)[None, :]
        ).ravel()
        if not self.pairs:
            return bases
        return (np.arange(self.n - 1, dtype=np.int64)[:, None] * s + bases[None, :]).ravel()

    def slot_step(self, gpn: int) -> int:
        """Bases apart whose rows sit on the same node slots (ranks i * gpn onwards): gpn with
        a stride of whole nodes (the gpn bases of one node's slot), the stride when it divides
        gpn (a row's ranks (q n + k) stride + j, j < stride, lie in slot floor((q n + k) /
        (gpn / stride)) whatever j), else 1."""
        if self.stride % gpn == 0:
            return gpn
        return self.stride if gpn % self.stride == 0 else 1

    def in_one_slot(self, gpn: int) -> bool:
        """Every row lies inside one node slot (its block of stride x n ranks divides gpn)."""
        return gpn % (self.stride * self.n) == 0

    def rows(self, step: int = 1) -> np.ndarray:
        """Every row, set by set and by base within a set (a 2-D array); with `step`, only
        the rows of every step-th base within each block (`slot_step`)."""
        import numpy as np

        s, n = self.stride, self.n
        grid = np.arange(self.world, dtype=np.int64).reshape(-1, n, s).transpose(0, 2, 1)
        grid = grid[:, ::step]
        if not self.pairs:
            return grid.reshape(-1, n)
        pairs = np.stack((grid[..., :-1], grid[..., 1:]), axis=-1)  # (.., .., boundary, 2)
        return pairs.transpose(2, 0, 1, 3).reshape(-1, 2)

    def siblings(self, t: int, lo: int, hi: int) -> list[Any]:
        """The rows of set `t` with a rank in lo..hi - 1 (lists; numpy arrays when they hold
        more than SMALL_WORLD ranks in all)."""
        s, n = self.stride, self.n
        block = s * n
        bases: dict[int, None] = {}
        for r in range(lo, min(hi, self.world)):
            if not self.pairs:
                bases[(r // block) * block + r % s] = None
            elif (r // s) % n in (t, t + 1):
                bases[r - (r // s) % n * s] = None
        width = 2 if self.pairs else n
        if width * len(bases) <= SMALL_WORLD:
            return [self.row(t, b) for b in bases]
        import numpy as np

        steps = np.arange(n, dtype=np.int64) * s
        return [steps + b for b in bases]


def _pattern(d: Degrees, order: tuple[str, ...], kind: str) -> _Pattern | None:
    """The kind's instances as a `_Pattern`, or None where its groups are no progression."""
    progression = _progression(d, order, kind)
    block = progression[0] * progression[1] if progression else 0
    if not block or d.world % block:
        return None
    return _Pattern(*progression, d.world, kind == "pp")


def _fallback_rows(d: Degrees, order: tuple[str, ...], kind: str) -> tuple[np.ndarray, int]:
    """Every instance of `kind` from its group ids, ordered as `_Pattern.rows` orders them
    (groups by first rank; pp: the pairs of each stage boundary in turn), and the rows in
    each set."""
    import numpy as np

    gid = group_ids(d, order, kind)
    rows = np.argsort(gid, kind="stable").reshape(-1, d.group_size(kind))  # ranks ascending
    rows = rows[np.argsort(rows[:, 0], kind="stable")]
    if kind != "pp":
        return rows, len(rows)
    pairs = np.stack((rows[:, :-1], rows[:, 1:]), axis=-1)  # (groups, boundary, 2)
    return pairs.transpose(1, 0, 2).reshape(-1, 2), len(rows)


class Worst(NamedTuple):
    """The instance of a group kind a synchronous step waits for, on a placement: the one
    spanning the most pods, then crossing between them most often, then the same for leaves
    and NVLink domains (the first in rank order among equals); what it spans, and how the
    instances that run with it load the NICs."""

    ranks: Sequence[int]
    """Its ranks in ring order: a tuple, or a numpy array above SMALL_WORLD ranks."""
    span: GroupSpan
    nic_share: int
    siblings: int
    """Instances that run at once with it: its set's rows with a rank on its first node."""
    instances: int
    """Instances of the kind (pp: stage-boundary pairs)."""
    crossing_pods: int
    """Instances that span more than one pod."""


def _level_key(slots: tuple[int, ...], labels: tuple[list[int], ...]) -> tuple[int, ...]:
    """(pods, pod crossings, leaves, leaf crossings, domains, domain crossings) of a row whose
    ranks sit on node `slots` in ring order (`labels`: each node slot's domain, leaf, pod)."""
    domain, leaf, pod = labels
    key: list[int] = []
    for label in (pod, leaf, domain):
        v = [label[x] for x in slots]
        distinct = len(set(v))
        key += (distinct, sum(map(ne, v, v[1:] + v[:1])) if distinct > 1 else 0)
    return tuple(key)


def _worst_small(
    pattern: _Pattern, gpn: int, labels: tuple[list[int], ...]
) -> tuple[int, int, int]:
    """(set, base of the worst row, rows spanning more than one pod) of a pattern, in plain
    Python: rows on the same node slots are priced once (with a stride of whole nodes, the
    gpn bases of one node's slot share them)."""
    count: dict[tuple[int, ...], list[int]] = {}  # node slots -> [rows, set, base] of the first
    step = pattern.slot_step(gpn)
    bases = pattern.bases()[::step]
    s = pattern.stride
    for t in range(pattern.sets):
        offsets = [t * s, (t + 1) * s] if pattern.pairs else range(0, pattern.n * s, s)
        for b in bases:
            slots = tuple([(b + o) // gpn for o in offsets])
            seen = count.get(slots)
            if seen is None:
                count[slots] = [step, t, b]
            else:
                seen[0] += step
    best, best_key, crossing = (0, 0), None, 0
    for slots, (rows, t, b) in count.items():  # in row order: the first of equals stays
        key = _level_key(slots, labels)
        crossing += rows if key[0] > 1 else 0
        if best_key is None or key > best_key:
            best, best_key = (t, b), key
    return (*best, crossing)


class _Jumps(NamedTuple):
    """Rows of evenly spaced ascending ranks on a placement whose labels never fall with the
    rank: each row's first rank, the gap between its consecutive ranks, and its last rank's
    offset from its first."""

    first: np.ndarray
    gap: int
    last: int


def _worst_row_large(
    rows: Callable[[], np.ndarray],
    labels: tuple[np.ndarray, ...],
    ascending: bool,
    jumps: _Jumps | None = None,
    min_blocks: tuple[int, ...] = (),
) -> tuple[int, int]:
    """(index of the worst row by `_level_key`'s key, first among equals; rows spanning more
    than one pod), vectorised over the rows of ranks `rows()` returns (`labels`: each rank's
    domain, leaf, pod). `ascending`: the labels never fall with the rank and every row's ranks
    ascend, so a row spans one block more than it has steps between blocks, and crosses once
    more on the way back (no sort). With `jumps` too, a level whose every block but the last
    (`min_blocks`: the smallest, in ranks, per pod, leaf, domain) is at least the gap between
    a row's ranks has no block between two of them: a row steps its last rank's block minus
    its first's times, and its middle ranks are never gathered."""
    import numpy as np

    domain, leaf, pod = labels
    grid: np.ndarray | None = None
    mask: np.ndarray | None = None
    crossing_pods = 0
    for level, label in enumerate((pod, leaf, domain)):
        if ascending and jumps is not None and jumps.last == jumps.gap:  # two ranks a row
            steps = (label[jumps.first + jumps.gap] != label[jumps.first]).astype(np.int64)
        elif ascending and jumps is not None and jumps.gap <= min_blocks[level]:
            steps = label[jumps.first + jumps.last] - label[jumps.first]
        else:
            grid = rows() if grid is None else grid
            v = label[grid]
            if ascending:
                steps = np.count_nonzero(v[:, 1:] != v[:, :-1], axis=1)
            else:
                crossings = np.count_nonzero(v != np.roll(v, -1, axis=1), axis=1)
                ordered = np.sort(v, axis=1)
                distinct = 1 + np.count_nonzero(ordered[:, 1:] != ordered[:, :-1], axis=1)
        if ascending:
            distinct, crossings = steps + 1, steps + (steps > 0)
        if not crossings.any():
            continue  # every row inside one block
        if label is pod:
            crossing_pods = int(np.count_nonzero(distinct > 1))
        mask = np.ones(len(distinct), dtype=bool) if mask is None else mask
        for key in (distinct, crossings):
            mask &= key == key[mask].max()
    return (0 if mask is None else int(np.argmax(mask))), crossing_pods


def _worst(
    cache: _ClusterCache, d: Degrees, order: tuple[str, ...], kind: str, scatter: bool
) -> Worst:
    """The worst instance of `kind` (`Worst`) and the instances that run with it: the rows
    of its set (pp: its stage boundary) with a rank on the node (slot) of its first rank."""
    placement = cache.placement(scatter)
    gpn = cache.cluster.gpus_per_node
    pattern = _pattern(d, order, kind)
    rows: Any = None
    if pattern is not None and pattern.in_one_slot(gpn):  # one node each: all alike
        t, b, crossing = 0, 0, 0
        worst: Any = pattern.row(t, b)
        instances = d.world // pattern.n * pattern.sets
    elif pattern is not None and d.world <= SMALL_WORLD:
        t, b, crossing = _worst_small(pattern, gpn, cache.slot_labels(scatter))
        worst = pattern.row(t, b)
        instances = len(pattern.bases()) * pattern.sets
    elif pattern is not None:  # one row per node slot's bases: step x fewer
        import numpy as np

        step = pattern.slot_step(gpn)
        firsts = pattern.firsts(step)
        per_set = len(firsts) // pattern.sets
        jumps = _Jumps(firsts, pattern.stride, pattern.stride * (pattern.width - 1))
        best, crossing = _worst_row_large(
            lambda: pattern.rows(step),
            cache.label_arrays(scatter),
            not scatter,
            jumps,
            cache.min_blocks(scatter),
        )
        t, first = best // per_set, int(firsts[best])
        if pattern.width <= SMALL_WORLD:
            worst = pattern.row(t, first - (t * pattern.stride if pattern.pairs else 0))
        else:  # a long row as an array (a list of python ints is ~4x larger)
            worst = first + np.arange(pattern.width, dtype=np.int64) * pattern.stride
        instances, crossing = len(firsts) * step, crossing * step
    else:
        rows, per_set = _fallback_rows(d, order, kind)
        best, crossing = _worst_row_large(lambda: rows, cache.label_arrays(scatter), not scatter)
        worst, t, instances = rows[best], best // per_set, len(rows)
    first = int(worst[0])
    lo = first // gpn * gpn
    hi = min(lo + gpn, d.world)
    # a pattern's row and its siblings follow from these, whatever the world size
    where = (
        (cache.geometry, scatter, *pattern[:2], pattern.pairs, t, first, hi) if pattern else None
    )
    placed = _PLACED.get(where) if where else None
    if placed is None:
        if pattern is not None:
            siblings = pattern.siblings(t, lo, hi)
        else:
            same = rows[t * per_set : (t + 1) * per_set]
            siblings = list(same[((same >= lo) & (same < hi)).any(axis=1)])
            if sum(map(len, siblings)) <= SMALL_WORLD:
                siblings = [row.tolist() for row in siblings]
        if len(worst) <= SMALL_WORLD and not isinstance(worst, list):
            worst = worst.tolist()
        placed = (placement.span(worst), nic_sharing(placement, siblings), len(siblings))
        if where:
            if len(_PLACED) >= _SPANS_KEPT:
                _PLACED.clear()
            _PLACED[where] = placed
    span, nic_share, siblings_n = placed
    return Worst(
        ranks=tuple(worst) if len(worst) <= SMALL_WORLD else _frozen(worst),
        span=span,
        nic_share=nic_share,
        siblings=siblings_n,
        instances=instances,
        crossing_pods=crossing,
    )


def _frozen(ranks: Sequence[int]) -> np.ndarray:
    """`ranks` as a read-only int64 array."""
    import numpy as np

    out = np.array(ranks, dtype=np.int64)
    out.flags.writeable = False
    return out


def _shape_key(d: Degrees, order: tuple[str, ...], kind: str) -> tuple[object, ...]:
    """What a kind's instances depend on: the `_Pattern` of a progression, so layouts share
    them, else the degrees and order."""
    return _pattern(d, order, kind) or _fallback_key(d, order, kind)


def worst_group(
    cluster: ClusterSpec,
    d: Degrees,
    kind: str,
    order: tuple[str, ...] = DEFAULT_ORDER,
    scatter: bool = False,
) -> Worst:
    """The instance of `kind` that a step waits for (`Worst`), cached like its shape: by
    the cluster's geometry (not its links' speeds) and `_shape_key`."""
    if d.world > cluster.world:
        raise SpecError(f"layout needs {d.world} GPUs; the cluster has {cluster.world}")
    cache = _cache_for(cluster)
    where = (cache.geometry, _shape_key(d, order, kind), scatter)
    found = _SPANS.get(where)
    if found is None:
        if len(_SPANS) >= _SPANS_KEPT:
            _SPANS.clear()
        found = _SPANS[where] = _worst(cache, d, order, kind, scatter)
    return found


def group_shape_of(
    cluster: ClusterSpec,
    d: Degrees,
    kind: str,
    order: tuple[str, ...] = DEFAULT_ORDER,
    scatter: bool = False,
) -> Shape:
    """Shape of the slowest instance of `kind` (`worst_group`: a synchronous step waits for
    it), with NIC sharing by its concurrent siblings; cached per cluster by `_shape_key`,
    so layouts share shapes."""
    if d.world > cluster.world:
        raise SpecError(f"layout needs {d.world} GPUs; the cluster has {cluster.world}")
    cache = _cache_for(cluster)
    key = _shape_key(d, order, kind)
    shape = cache.shapes.get((key, scatter))
    if shape is None:
        worst = worst_group(cluster, d, kind, order, scatter)
        shape = cache.shapes[key, scatter] = shape_of(
            cluster, worst.span.on(cluster), worst.nic_share, siblings=worst.siblings
        )
    return shape


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
        # (kind, op, size) -> `time_s` of one python-float size
        self._scalar_s: Filled[tuple[str, str, float], float] = Filled(self._price_scalar, kept=256)

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
        where the layout has no such group); python scalars skip numpy, memoised by size (the
        layouts sharing these groups share their sizes: one model's DP buffers, one
        micro-batch shape's activations)."""
        if size_bytes.__class__ is not float and isinstance(size_bytes, (float, int)):
            size_bytes = float(size_bytes)  # any other python or numpy scalar
        if size_bytes.__class__ is float:
            return self._scalar_s[kind, op, size_bytes]
        shape = self.shapes.get(kind)
        if shape is None:
            return 0.0 * size_bytes
        return comm_time_s(op, shape, size_bytes)

    def _price_scalar(self, key: tuple[str, str, float]) -> float:
        """`time_s` of one (kind, op, size in bytes), priced: the memo's fill."""
        kind, op, size_bytes = key
        fastest_us = self._fastest_us.get((kind, op))
        if fastest_us is None:
            shape = self.shapes.get(kind)
            if shape is None:
                return 0.0 * size_bytes
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
