"""The tiers of a cluster: per-GPU bandwidth and latency of each level of the hierarchy.

Tier names: `intra` (NVLink/PCIe/xGMI inside an NVLink domain), `leaf` (NICs, one switch
hop), `spine` (crosses leaves; divided by oversubscription), `core` (crosses pods).
Bandwidths are GB/s per GPU per direction; `*_eff_GBps` is what a ring reaches
(line rate x protocol efficiency), overridden by a fitted calibration.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import accumulate, pairwise

from tierwise.hardware.cluster import ClusterSpec
from tierwise.memo import by_identity

# Extra one-way latency per additional switch level a message climbs (leaf -> spine -> core),
# in microseconds: two more switch traversals of ~0.13 us (Quantum-2) plus cable time, rounded.
EXTRA_LEVEL_LATENCY_US = 0.5


@dataclass(frozen=True)
class Tier:
    """One tier of the hierarchy, as seen by one GPU."""

    name: str
    level: int
    medium: str
    line_GBps: float
    eff_GBps: float
    latency_us: float
    gpus_in_scope: int
    calibrated: bool
    alpha_us: float | None = None
    overhead_us: float = 0.0


def tiers(cluster: ClusterSpec) -> list[Tier]:
    """The tiers present in `cluster`, fastest first (cached per spec: specs are frozen)."""
    return list(_tiers_of(cluster))


@by_identity(256)  # specs whose tiers stay cached (what-if sweeps make a few hundred)
def _tiers_of(cluster: ClusterSpec) -> list[Tier]:
    link, nic = cluster.intra, cluster.inter.nic
    out = [
        _calibrated(
            cluster,
            Tier(
                name="intra",
                level=0,
                medium=link.label,
                line_GBps=link.bw_GBps,
                eff_GBps=link.effective_GBps,
                latency_us=link.latency_us,
                gpus_in_scope=cluster.domain_gpus,
                calibrated=False,
            ),
        )
    ]
    if cluster.nodes_per_domain >= cluster.nodes or cluster.inter.nics_per_node == 0:
        return out
    share = cluster.inter.nics_per_node / cluster.gpus_per_node
    planes = cluster.topology.planes
    on_planes = f" on {planes} planes of {nic.rate_Gbps / planes:g}G" if planes > 1 else ""
    leaf = Tier(
        name="leaf",
        level=1,
        medium=f"{cluster.inter.nics_per_node}x {nic.label}/node{on_planes}",
        line_GBps=nic.line_GBps * share,
        eff_GBps=nic.effective_GBps * share,
        latency_us=nic.latency_us,
        gpus_in_scope=cluster.nodes_per_leaf * cluster.gpus_per_node,
        calibrated=False,
    )
    out.append(_calibrated(cluster, leaf))
    if cluster.leaves > 1:
        over = cluster.topology.oversubscription
        out.append(_above(cluster, out[-1], "spine", 2, over, _nodes_per_pod(cluster)))
        if cluster.pods > 1:
            pod_over = cluster.topology.pod_oversubscription
            out.append(_above(cluster, out[-1], "core", 3, pod_over, cluster.nodes))
    return out


def _nodes_per_pod(cluster: ClusterSpec) -> int:
    """Nodes under the largest pod (all nodes when the tree has two levels)."""
    bounds = accumulate(cluster.pod_sizes, initial=0)
    return max(sum(cluster.leaf_sizes[a:b]) for a, b in pairwise(bounds))


def _above(
    cluster: ClusterSpec, below: Tier, name: str, level: int, over: float, nodes_in_scope: int
) -> Tier:
    tier = replace(
        below,
        name=name,
        level=level,
        medium=f"{below.medium} {over:g}:1",
        line_GBps=below.line_GBps / over,
        eff_GBps=below.eff_GBps / over,
        latency_us=below.latency_us + EXTRA_LEVEL_LATENCY_US,
        gpus_in_scope=nodes_in_scope * cluster.gpus_per_node,
    )
    return _calibrated(cluster, tier)


def _calibrated(cluster: ClusterSpec, tier: Tier) -> Tier:
    cal = cluster.calibration.get(tier.name)  # type: ignore[call-overload]
    if cal is None:
        return tier
    return replace(
        tier,
        eff_GBps=cal.beta_GBps,
        calibrated=True,
        alpha_us=cal.alpha_us,
        overhead_us=cal.overhead_us,
    )


def tier(cluster: ClusterSpec, name: str) -> Tier:
    """The named tier; a tier the cluster lacks falls back to the next one below it."""
    found = {t.name: t for t in tiers(cluster)}
    for candidate in ("core", "spine", "leaf", "intra")[
        ("core", "spine", "leaf", "intra").index(name) :
    ]:
        if candidate in found:
            return found[candidate]
    raise AssertionError("every cluster has an intra tier")
