"""Which GPUs form each process group of a layout, and what each group kind crosses."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.placement import hierarchy
from tierwise.perf.groups import (
    DEFAULT_ORDER,
    Degrees,
    group_ids,
    group_shape_of,
    placement_for,
    worst_group,
)
from tierwise.workload.layout import Layout, hsdp_fields

MAPPED_KINDS = {"tp": "tp", "cp": "cp", "ep": "ep", "dp": "dp", "pp": "pp"}
HSDP_KINDS = {"dp_shard": "dpshard", "dp_replicate": "dprep"}
"""An HSDP layout's groups too, by torchtitan's mesh names: the cp x dp_shard ranks that
shard one replica (its weight gathers and gradient reduce-scatters), and one rank of each
replica (its gradient all-reduce)."""


def _degrees(layout: Layout) -> Degrees:
    return Degrees(layout.tp, layout.cp, layout.ep, layout.dp, layout.pp, **hsdp_fields(layout))


def _kinds(d: Degrees) -> dict[str, str]:
    """The mapped group names and their kinds (HSDP's where the layout has it)."""
    return MAPPED_KINDS | HSDP_KINDS if d.dp_shard else MAPPED_KINDS


def process_groups(
    layout: Layout, order: tuple[str, ...] = DEFAULT_ORDER
) -> dict[str, list[list[int]]]:
    """Every group of each kind as lists of global ranks (groups of size 1 are omitted)."""
    d = _degrees(layout)
    out: dict[str, list[list[int]]] = {}
    for name, kind in _kinds(d).items():
        if d.group_size(kind) < 2:
            continue
        _, first, inverse = np.unique(
            group_ids(d, order, kind), return_index=True, return_inverse=True
        )
        # groups of one kind are equal in size: one row of ranks per group, ascending
        members = np.argsort(inverse, kind="stable").reshape(len(first), -1)
        out[name] = members[np.argsort(first)].tolist()
    return out


def gpu_names(cluster: ClusterSpec, ranks: list[int], scatter: bool = False) -> list[str]:
    """`nodeN:gpuM` of each global rank under the cluster's placement."""
    placement = placement_for(cluster, scatter)
    node, local = (
        [column[r] for r in ranks] if isinstance(column, tuple) else column[ranks].tolist()
        for column in (placement.node_of, placement.local_of)
    )
    return [f"node{n}:gpu{g}" for n, g in zip(node, local, strict=True)]


def group_members(
    cluster: ClusterSpec, layout: Layout, order: tuple[str, ...] = DEFAULT_ORDER
) -> dict[str, list[list[str]]]:
    """Every process group of each kind as the GPUs (`nodeN:gpuM`) that form it."""
    names = gpu_names(cluster, list(range(layout.world)))
    return {
        name: [[names[r] for r in g] for g in groups]
        for name, groups in process_groups(layout, order).items()
    }


def group_summary(
    cluster: ClusterSpec,
    layout: Layout,
    order: tuple[str, ...] = DEFAULT_ORDER,
    scatter: bool = False,
    examples: int = 2,
) -> list[dict[str, Any]]:
    """Per group kind: size, count, tier (core: it crosses pods), NIC sharing, example GPUs,
    and the group the step waits for (`perf.groups.worst_group`; pp: the pipeline holding
    its slowest stage boundary; dp: the dp x cp gradient group): its GPUs, the nodes, leaves
    and pods it spans, and how many of those groups (`priced_groups`) span more than one
    pod (> 0 exactly where the tier is core)."""
    d = _degrees(layout)
    placement = placement_for(cluster, scatter)
    rows = []
    for name, groups in process_groups(layout, order).items():
        kind = "dpcp" if name == "dp" and layout.cp > 1 else _kinds(d)[name]
        shape = group_shape_of(cluster, d, kind, order, scatter)
        worst = worst_group(cluster, d, kind, order, scatter)
        if kind == "pp":  # the pipeline holding the slowest pair, and the pipelines crossing
            members = np.asarray(groups)
            pipeline = members[np.any(members == worst.ranks[0], axis=1)][0].tolist()
            span = placement.span(pipeline)
            node = np.asarray(placement.node_of)[members]
            pods = np.sort(hierarchy(cluster, node)[2], axis=1)
            crossing = int(np.count_nonzero(pods[:, 0] != pods[:, -1]))
            priced, of = pipeline, len(groups)
        else:
            span, crossing = worst.span, worst.crossing_pods
            priced = np.asarray(worst.ranks).tolist()
            of = worst.instances
        rows.append(
            {
                "kind": name,
                "size": len(groups[0]),
                "groups": len(groups),
                "tier": shape.top_tier,
                "nodes_per_group": span.nodes,
                "leaves_per_group": span.leaves,
                "pods_per_group": span.pods,
                "groups_crossing_pods": crossing,
                "priced_groups": of,
                "groups_sharing_a_nic": shape.nic_share,
                "slowest_group": gpu_names(cluster, priced, scatter),
                "examples": [gpu_names(cluster, g, scatter) for g in groups[:examples]],
            }
        )
    return rows


def mapping_json(members: dict[str, list[list[str]]]) -> str:
    """mapping.json: each kind's groups (`group_members`), one group per line (json's indent
    would put each of a 100,000-node cluster's ~10^6 GPU names on its own line, slowly).
    GPU names (`nodeN:gpuM`) hold no character JSON escapes."""
    kinds = [
        f" {json.dumps(kind)}: [\n"
        + ",\n".join('  ["' + '", "'.join(g) + '"]' for g in groups)
        + "\n ]"
        for kind, groups in members.items()
    ]
    return "{\n" + ",\n".join(kinds) + "\n}\n" if kinds else "{}\n"
