"""Plain-data summary of a cluster's tiers (what `tierwise show cluster` prints)."""

from __future__ import annotations

from typing import Any

from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.tiers import tiers


def cluster_summary(cluster: ClusterSpec) -> dict[str, Any]:
    """Tiers with per-GPU bandwidth (per direction), latency and ratio to the fastest tier.

    Two conventions for the headline ratio are given: per GPU per direction (NVLink 450 vs the
    GPU's NIC share 50 on DGX H100 = 9) and NVLink bidirectional vs one NIC (900 vs 50 = 18).
    """
    ts = tiers(cluster)
    fastest = ts[0].line_GBps
    nic = cluster.inter.nic
    out: dict[str, Any] = {
        "cluster": cluster.name,
        "gpu": cluster.gpu.label,
        "nodes": cluster.nodes,
        "gpus_per_node": cluster.gpus_per_node,
        "gpus": cluster.world,
        "gpus_per_nvlink_domain": cluster.domain_gpus,
        "nvlink_domains": cluster.domains,
        "nics_per_node": cluster.inter.nics_per_node,
        "nics_per_nvlink_domain": cluster.nics_per_domain,
        "nic": nic.label,
        "nic_kind": nic.kind,
        "intra_link_kind": cluster.intra.kind,
        "nic_Gbps": nic.rate_Gbps,
        "nic_GBps": nic.line_GBps,
        "topology": cluster.topology.kind,
        "nodes_per_leaf": cluster.nodes_per_leaf,
        "leaves": cluster.leaves,
        "smallest_leaf_nodes": min(cluster.leaf_sizes),
        "leaves_per_pod": cluster.leaves_per_pod,
        "smallest_pod_leaves": min(cluster.pod_sizes),
        "pods": cluster.pods,
        "oversubscription": cluster.topology.oversubscription,
        "pod_oversubscription": cluster.topology.pod_oversubscription,
        "routing": cluster.routing,
        "routing_is_default": cluster.topology.routing is None,
        "qps_per_connection": cluster.topology.qps_per_connection,
        "in_network_reduction": cluster.in_network_reduction,
        "fleet": cluster.fleet.name,
        "slow_node_share": cluster.fleet.slow_node_share,
        "slow_node_slowdown": cluster.fleet.slow_node_slowdown,
        "gpu_speed_spread": cluster.fleet.gpu_speed_spread,
        "notes": [note for note in (cluster.fleet.idle_note(),) if note],
        "tiers": [
            {
                "name": t.name,
                "medium": t.medium,
                "bw_GBps_per_gpu": t.line_GBps,
                "eff_GBps_per_gpu": t.eff_GBps,
                "latency_us": t.latency_us,
                "ratio_to_fastest": fastest / t.line_GBps,
                "gpus_in_scope": t.gpus_in_scope,
                "calibrated": t.calibrated,
            }
            for t in ts
        ],
    }
    if len(ts) > 1:
        out["intra_inter_ratio_per_direction"] = fastest / ts[1].line_GBps
        out["intra_bidirectional_vs_one_nic_ratio"] = 2 * fastest / nic.line_GBps
    return out
