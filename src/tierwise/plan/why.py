"""One line saying what dominates a plan's step time."""

from __future__ import annotations

from typing import Any

LABELS = {
    "tp_comm_s": "TP comm",
    "cp_comm_s": "CP comm",
    "ep_comm_s": "EP all-to-all",
    "offload_s": "CPU offload copies",
    "pp_comm_s": "PP p2p",
    "pipeline_bubble_s": "pipeline bubble",
    "dp_comm_s": "exposed DP comm",
    "optimizer_s": "optimizer",
}


def why(plan: dict[str, Any]) -> str:
    """'compute 81%; largest overhead TP comm on intra 15%' style summary, naming the groups
    that cross a pod boundary (`core`), if any."""
    step = plan["step_time_s"]
    b = plan["breakdown"]
    compute = b["compute_s"] / step
    key, seconds = max(((k, v) for k, v in b.items() if k in LABELS), key=lambda kv: kv[1])
    kind = key.split("_")[0]
    tier = plan["comm_tiers"].get(kind)
    where = f" on {tier}" if tier and tier != "none" else ""
    crossing = sorted(k for k, t in plan["comm_tiers"].items() if t == "core")
    pods = f"; crosses pods: {', '.join(crossing)}" if crossing else ""
    if seconds / step < 0.01:
        return f"compute-bound ({compute:.0%}); overheads under 1%{pods}"
    line = f"compute {compute:.0%}; largest overhead {LABELS[key]}{where} {seconds / step:.0%}"
    return line + pods
