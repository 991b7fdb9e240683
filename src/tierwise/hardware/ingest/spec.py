"""Fill an ingested partial cluster spec up to one `load_cluster` accepts, saying what was assumed.

Precedence for each field: the user's option, then what the tool output showed, then a default
named in the returned notes (GPU by intra-node link, NIC of the preset with that GPU, one node).
"""

from __future__ import annotations

from typing import Any

import yaml

from tierwise.hardware import catalog
from tierwise.hardware.cluster import ClusterSpec, presets
from tierwise.hardware.ingest.common import DEFAULT_GPU, DEFAULT_GPU_BY_INTRA, DEFAULT_GPU_PCIE
from tierwise.specio import build

DEFAULT_NIC = "ndr400"
DEFAULT_GPUS_PER_NODE = 8


def complete_cluster(
    partial: dict[str, Any],
    *,
    name: str,
    gpu: str | None = None,
    nic: str | None = None,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    nics_per_node: int | None = None,
    oversubscription: float | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Complete cluster fields (plain data, validated) and one note per default taken."""
    notes: list[str] = []

    def pick(field: str, given: Any, found: Any, default: Any, why: str) -> Any:
        if given is not None:
            return given
        if found is not None:
            return found
        notes.append(f"{field}: {default} ({why})")
        return default

    inter = dict(partial.get("inter") or {})
    gpn = pick(
        "gpus_per_node",
        gpus_per_node,
        partial.get("gpus_per_node"),
        DEFAULT_GPUS_PER_NODE,
        "default; use --gpus-per-node",
    )
    intra = partial.get("intra")
    gpu_key = pick("gpu", gpu, partial.get("gpu"), *_default_gpu(intra))
    if intra is None:
        intra = catalog.gpu(gpu_key, field="--gpu").intra
        notes.append(f"intra: {intra} (the catalog link of {gpu_key})")
    nic_default, nic_why = _preset_nic(gpu_key)
    nic_key = pick("inter.nic", nic, inter.get("nic"), nic_default, f"{nic_why}; use --nic")
    npn = pick(
        "inter.nics_per_node",
        nics_per_node,
        inter.get("nics_per_node"),
        gpn,
        "one NIC per GPU assumed; use --nics-per-node",
    )
    data: dict[str, Any] = {
        "name": name,
        "gpu": gpu_key,
        "gpus_per_node": gpn,
        "nodes": pick("nodes", nodes, partial.get("nodes"), 1, "default; use --nodes"),
        "intra": intra,
        "inter": {"nic": nic_key, "nics_per_node": npn},
    }
    topo = dict(partial.get("topology") or {})
    if oversubscription is not None:
        topo["oversubscription"] = oversubscription
    if topo:
        data["topology"] = topo
    build(ClusterSpec, data, f"ingested cluster {name}")
    return data, notes


def _default_gpu(intra: str | dict[str, Any] | None) -> tuple[str, str]:
    """GPU to assume: the one that goes with the ingested link, else the most common one."""
    if intra is None:
        return DEFAULT_GPU, "default; use --gpu"
    kind = catalog.link(intra).kind if isinstance(intra, str) else intra.get("kind")
    key = DEFAULT_GPU_BY_INTRA.get(intra) if isinstance(intra, str) else None
    if key is None:
        key = DEFAULT_GPU_PCIE if kind == "pcie" else DEFAULT_GPU
    return (
        key,
        f"assumed from intra {intra if isinstance(intra, str) else intra['name']}; use --gpu",
    )


def _preset_nic(gpu_key: str) -> tuple[str, str]:
    """The NIC of the first preset built on this GPU (dgx-a100 -> hdr200), else NDR 400."""
    for preset, fields in presets().items():
        if fields.get("gpu") == gpu_key:
            return fields["inter"]["nic"], f"the NIC of preset {preset}"
    return DEFAULT_NIC, "default"


def cluster_yaml(data: dict[str, Any], header: list[str]) -> str:
    """Cluster YAML text with `# ...` header lines (source and the defaults taken)."""
    lines = "".join(f"# {h}\n" for h in header)
    return lines + yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
