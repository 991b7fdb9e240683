"""Which cluster the doctor compares a run with when `--cluster` is not given.

The logs say what ran: the GPU (nccl-tests' rank lines, nvidia-smi), the node count (NCCL's
nNodes, hosts, ranks) and the NIC rate (NCCL's NET/IB speed lines, ibstat, the topology
dump). The expected bandwidth comes from the catalog preset with that GPU, at the log's node
count and, when the log's NIC rate differs from the preset's, with the catalog NIC of that
rate and kind. A run whose GPU no preset has (or that names none) keeps the default preset
and says so.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from tierwise.hardware import catalog
from tierwise.hardware.catalog import NIC
from tierwise.hardware.cluster import ClusterSpec, load_cluster, presets
from tierwise.verify.doctor.facts import Facts

DEFAULT_PRESET = "dgx-h100"
"""What the doctor compares with when the logs name no GPU a preset has."""

# GPU names as nvidia-smi and nccl-tests print them -> catalog key; first match wins, so the
# more specific patterns come first (GB200 before B200, H100 PCIe before H100). A100 PCIe has
# no catalog entry (no NVSwitch): its key matches no preset, so the default is used and said.
_GPU_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), key)
    for pattern, key in (
        (r"\bGB300\b", "gb300"),
        (r"\bGB200\b", "gb200"),
        (r"\bB300\b", "b300"),
        (r"\bB200\b", "b200"),
        (r"\bH200\b", "h200"),
        (r"\bH100\b.*\b(PCIe|NVL)\b", "h100-pcie"),
        (r"\bH100\b", "h100-sxm"),
        (r"\bA100\b.*PCI", "a100-pcie"),
        (r"\bA100\b.*\b40\s?GB\b", "a100-sxm-40gb"),
        (r"\bA100\b", "a100-sxm-80gb"),
        (r"\bL40S\b", "l40s"),
        (r"\bMI300X\b", "mi300x"),
    )
)
_NIC_KIND = {"IB": "ib", "RoCE": "roce"}


@dataclass(frozen=True)
class ClusterChoice:
    """The cluster to compare with and why: ``by`` is ``--cluster``, ``logs`` or ``default``."""

    cluster: ClusterSpec
    by: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """JSON form (``cluster_source``)."""
        c = self.cluster
        return {
            "cluster": c.name,
            "chosen_by": self.by,
            "reason": self.reason,
            "gpu": c.gpu.key,
            "nodes": c.nodes,
            "nic": c.inter.nic.key,
            "nics_per_node": c.inter.nics_per_node,
        }


def gpu_key(names: set[str]) -> str | None:
    """The catalog GPU the names (all GPUs of the run) are, when they agree on one."""
    keys = {_match(n) for n in names} - {None}
    return keys.pop() if len(keys) == 1 else None


def _match(name: str) -> str | None:
    return next((key for pattern, key in _GPU_PATTERNS if pattern.search(name)), None)


def nic_rate(facts: Facts) -> tuple[float, str] | None:
    """(Gb/s, IB or RoCE) of most of the NICs NCCL uses: NCCL's NET/IB speed lines, else the
    ibstat/ibv_devinfo/topology-dump ports of those NICs; None when nothing says."""
    rates = [rate_kind for rate_kind in facts.nic_speeds.values()]
    if not rates:
        used = set(facts.ib_nics)
        kind = Counter(facts.ib_nics.values()).most_common(1)
        rates = [
            (p.rate_Gbps, kind[0][0] if kind else "IB")
            for p in facts.ports
            if p.rate_Gbps
            and p.kind in {"rdma", "xml"}
            and p.state in (None, "active")
            and (not used or p.device in used)
        ]
    if not rates:
        return None
    return Counter(rates).most_common(1)[0][0]


def _catalog_nic(rate_Gbps: float, kind: str) -> NIC | None:
    want = _NIC_KIND.get(kind, "ib")
    nics = catalog.entries("nics").values()
    return next(
        (n for n in nics if isinstance(n, NIC) and n.kind == want and n.rate_Gbps == rate_Gbps),
        None,
    )


def choose_cluster(
    facts: Facts, cluster: str | None = None, overrides: dict[str, Any] | None = None
) -> ClusterChoice:
    """The cluster to compare the run with: `cluster` (a preset or YAML) when given, else the
    preset for the logs' GPU at their node count and NIC rate; `overrides` (the CLI's shape
    options) apply last either way."""
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    if cluster is not None:
        return ClusterChoice(load_cluster(cluster, **overrides), "--cluster", "given")
    key = gpu_key(facts.gpu_names)
    preset = _preset_for(key)
    said: list[str] = []
    if preset is None:
        named = ", ".join(sorted(facts.gpu_names)) or "no GPU"
        reason = (
            f"the logs name {named}; no preset has it"
            if facts.gpu_names
            else "the logs name no GPU"
        )
        preset, by = DEFAULT_PRESET, "default"
    else:
        by = "logs"
        said.append(f"GPU {sorted(facts.gpu_names)[0]} -> {key}")
        reason = ""
    found = dict(overrides)
    nodes = facts.node_count
    if nodes and "nodes" not in found:
        found["nodes"] = nodes
        said.append(f"{nodes} node(s)")
    rate = nic_rate(facts)
    base = load_cluster(preset)
    same = rate is not None and (rate[0], _NIC_KIND.get(rate[1], "ib")) == (
        base.inter.nic.rate_Gbps,
        base.inter.nic.kind,
    )
    if rate and "nic" not in found and not same:
        nic = _catalog_nic(*rate)
        if nic is not None:
            found["nic"] = nic.key
            said.append(f"NIC {rate[0]:g} Gb/s {rate[1]} -> {nic.key}")
    elif rate:
        said.append(f"NIC {rate[0]:g} Gb/s {rate[1]}")
    reason = "; ".join(filter(None, [reason, *said])) or "the logs say nothing more"
    chosen = load_cluster(preset, **found)
    if by == "logs" and key != chosen.gpu.key:  # a sibling's preset: the run's own GPU in it
        chosen = chosen.model_copy(update={"gpu": catalog.gpu(key)})  # type: ignore[arg-type]
    return ClusterChoice(chosen, by, reason)


def _preset_for(key: str | None) -> str | None:
    """The first preset with GPU `key`, else with a sibling of it (A100 40GB: the A100 80GB
    preset, same NVLink and SMs); None when no preset has either."""
    if key is None:
        return None
    gpus = {name: str(p.get("gpu")) for name, p in presets().items()}
    exact = [name for name, g in gpus.items() if g == key]
    family = key.rsplit("-", 1)[0] if key.count("-") >= 2 else None
    siblings = [name for name, g in gpus.items() if family and g.startswith(family + "-")]
    return next(iter(exact + siblings), None)
