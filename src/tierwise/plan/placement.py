"""What a topology-unaware placement costs for the same layout, as step-time ratios."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tierwise.hardware.cluster import ClusterSpec
from tierwise.perf.estimate import estimate
from tierwise.perf.groups import ORDERS
from tierwise.perf.step import Flags
from tierwise.workload.layout import Layout
from tierwise.workload.spec import ModelSpec

NAIVE_ORDER = ORDERS["dp-cp-pp-tp"]


def placement_ratios(
    model: ModelSpec, cluster: ClusterSpec, layout: Layout, flags: Flags = Flags()
) -> dict[str, Any]:
    """Step time of the aware placement and of naive ones (ratio > 1: naive is slower).

    naive_dp_innermost: data parallel fastest-varying, so TP groups straddle nodes.
    scattered_nodes: the aware rank order, but nodes handed out round-robin across leaves.
    Every rank order Megatron-core accepts is scored too (`orders`)."""
    aware = estimate(model, cluster, layout, flags)["step_time_s"]
    dp_inner = estimate(model, cluster, layout, replace(flags, order=NAIVE_ORDER))["step_time_s"]
    scattered = estimate(model, cluster, layout, replace(flags, scatter_nodes=True))["step_time_s"]
    orders = {
        name: estimate(model, cluster, layout, replace(flags, order=o))["step_time_s"]
        for name, o in ORDERS.items()
    }
    return {
        "aware_step_time_s": aware,
        "naive_dp_innermost_step_time_s": dp_inner,
        "scattered_nodes_step_time_s": scattered,
        "naive_dp_innermost_ratio": dp_inner / aware,
        "scattered_nodes_ratio": scattered / aware,
        "orders_step_time_s": orders,
    }
