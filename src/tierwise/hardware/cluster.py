"""Cluster spec: what users write in YAML (or pick as a preset), validated and resolved.

Catalog keys (`gpu: h100-sxm`, `intra: nvlink4`, `inter.nic: ndr400`) are resolved into catalog
objects at validation time, so a loaded spec is self-contained and dumps reproducibly.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tierwise.errors import SpecError
from tierwise.hardware import catalog
from tierwise.hardware.catalog import GPU, NIC, Link
from tierwise.specio import build, read_yaml
from tierwise.textio import is_file

TopologyKind = Literal["rail-optimized", "fat-tree", "spine-leaf", "single-switch"]
InNetworkReduction = Literal["none", "sharp", "nvls", "nvls+sharp"]
TIER_NAMES = ("intra", "leaf", "spine", "core")


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InterSpec(_Spec):
    """Inter-node network: one NIC model, how many ports per node."""

    nic: NIC
    nics_per_node: int = Field(ge=0)

    @field_validator("nic", mode="before")
    @classmethod
    def _resolve_nic(cls, value: Any) -> Any:
        return catalog.nic(value) if isinstance(value, str) else value


class TopologySpec(_Spec):
    """The switch tree: leaves of `nodes_per_leaf` nodes, optional pods of leaves above them.

    oversubscription is the leaf downlink:uplink ratio (2.0 = 2:1); pod_oversubscription the
    same one level up. Rail-optimized means each rail (NIC index) has its own leaf per group of
    nodes, so same-rail traffic inside a leaf group takes one switch hop.
    """

    kind: TopologyKind = "fat-tree"
    nodes_per_leaf: int | None = Field(default=None, gt=0)
    gpus_per_leaf: int | None = Field(default=None, gt=0)
    oversubscription: float = Field(default=1.0, ge=1.0)
    leaves_per_pod: int | None = Field(default=None, gt=0)
    pod_oversubscription: float = Field(default=1.0, ge=1.0)


class TierCalibration(_Spec):
    """Fitted per-tier constants (`tierwise calibrate`).

    alpha_us: latency of one LL-protocol ring step on this tier (NCCL's software + wire), us;
    beta_GBps: effective bandwidth per GPU per direction, GB/s; overhead_us: fixed extra time of
    one bandwidth-protocol (Simple/NVLS) collective on this tier, us.
    """

    alpha_us: float = Field(ge=0)
    beta_GBps: float = Field(gt=0)
    overhead_us: float = Field(default=0.0, ge=0)


class ClusterSpec(_Spec):
    """A cluster: GPUs per node, NVLink domain, NICs, switch tree, in-network reduction."""

    name: str = "custom"
    gpu: GPU
    gpus_per_node: int = Field(gt=0)
    nodes: int = Field(gt=0)
    nvlink_domain_gpus: int | None = Field(default=None, gt=0)
    intra: Link
    inter: InterSpec
    topology: TopologySpec = TopologySpec()
    in_network_reduction: InNetworkReduction = "none"
    calibration: dict[Literal["intra", "leaf", "spine", "core"], TierCalibration] = {}
    price_per_gpu_hour: float = Field(default=2.5, gt=0)

    @field_validator("gpu", mode="before")
    @classmethod
    def _resolve_gpu(cls, value: Any) -> Any:
        return catalog.gpu(value) if isinstance(value, str) else value

    @field_validator("intra", mode="before")
    @classmethod
    def _resolve_intra(cls, value: Any) -> Any:
        return catalog.link(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check_shape(self) -> ClusterSpec:
        domain = self.domain_gpus
        if domain % self.gpus_per_node:
            raise ValueError(
                f"nvlink_domain_gpus={domain} must be a multiple of "
                f"gpus_per_node={self.gpus_per_node}"
            )
        npl = self.nodes_per_leaf
        if self.nodes > npl and self.nodes % npl:
            raise ValueError(
                f"nodes={self.nodes} are not divisible into leaves of nodes_per_leaf={npl}; "
                f"use a multiple of {npl} or change topology.nodes_per_leaf"
            )
        return self

    @property
    def domain_gpus(self) -> int:
        """GPUs in one NVLink (scale-up) domain."""
        return self.nvlink_domain_gpus or self.gpus_per_node

    @property
    def nodes_per_domain(self) -> int:
        """Nodes that share one NVLink domain (1 except rack-scale systems like NVL72)."""
        return self.domain_gpus // self.gpus_per_node

    @property
    def nodes_per_leaf(self) -> int:
        """Nodes under one leaf switch group (a preset's scalable unit, at most all nodes);
        single-switch puts all nodes under one."""
        topo = self.topology
        if topo.kind == "single-switch":
            return self.nodes
        if topo.nodes_per_leaf:
            return min(topo.nodes_per_leaf, self.nodes)
        if topo.gpus_per_leaf:
            return min(max(1, topo.gpus_per_leaf // self.gpus_per_node), self.nodes)
        return self.nodes

    @property
    def world(self) -> int:
        """Total GPUs."""
        return self.nodes * self.gpus_per_node

    @property
    def nvls(self) -> bool:
        """NVLink SHARP reduction inside the NVSwitch domain is enabled and supported."""
        return "nvls" in self.in_network_reduction and self.intra.nvls

    @property
    def sharp(self) -> bool:
        """SHARP reduction in the IB switches is enabled and supported by the NIC/switch."""
        return "sharp" in self.in_network_reduction and self.inter.nic.sharp


@cache
def presets() -> dict[str, dict[str, Any]]:
    """Preset cluster fields by name."""
    text = resources.files("tierwise.hardware").joinpath("data/clusters.yaml").read_text()
    return yaml.safe_load(text)


def load_cluster(arg: str | Path, **overrides: Any) -> ClusterSpec:
    """A cluster from a preset name or a YAML file, with shape overrides applied.

    Overrides (None means keep): nodes, gpus_per_node, nics_per_node, nic, intra, oversubscription.
    """
    data, source = _raw_cluster(str(arg))
    data = apply_overrides(data, **overrides)
    return build(ClusterSpec, data, source)


def _raw_cluster(arg: str) -> tuple[dict[str, Any], str]:
    if arg in presets():
        return {"name": arg, **presets()[arg]}, f"cluster {arg}"
    path = Path(arg)
    if path.suffix in {".yaml", ".yml", ".json"} or is_file(path):
        if not is_file(path):
            raise SpecError(f"--cluster: file {arg!r} does not exist")
        data = read_yaml(path)
        if not isinstance(data, dict):
            raise SpecError(f"{arg}: expected a mapping of cluster fields")
        return _spec_fields(data, arg), arg
    raise SpecError(
        f"--cluster: unknown preset {arg!r}; allowed: {', '.join(presets())} or a YAML file"
    )


#: Keys of `tierwise show cluster --json` derived from the spec (dropped when it is loaded back).
_SUMMARY_DERIVED = (
    "gpus",
    "nic_Gbps",
    "nic_GBps",
    "tiers",
    "intra_inter_ratio_per_direction",
    "intra_bidirectional_vs_one_nic_ratio",
)
#: Summary key -> (spec section or None for top level, spec field).
_SUMMARY_FIELDS = {
    "cluster": (None, "name"),
    "gpus_per_nvlink_domain": (None, "nvlink_domain_gpus"),
    "nic": ("inter", "nic"),
    "nics_per_node": ("inter", "nics_per_node"),
    "nodes_per_leaf": ("topology", "nodes_per_leaf"),
    "oversubscription": ("topology", "oversubscription"),
}


def _spec_fields(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Cluster fields of a file: the spec form, or `show cluster --json`'s flat summary
    (`cluster:`, `topology: rail-optimized`, `nic:`, `tiers:`); `topology: KIND` is short for
    `topology: {kind: KIND}`. `inter` and `topology` must be mappings."""
    out = {**data}
    if "cluster" in out and "name" not in out:
        tiers = out.get("tiers")
        first = tiers[0] if isinstance(tiers, list) and tiers else None
        if "intra" not in out and isinstance(first, dict) and isinstance(first.get("medium"), str):
            out["intra"] = first["medium"]
        for key in _SUMMARY_DERIVED:
            out.pop(key, None)
        if isinstance(out.get("topology"), str):
            out["topology"] = {"kind": out["topology"]}
        for key, (section, field) in _SUMMARY_FIELDS.items():
            if key in out and (section is None or isinstance(out.get(section, {}), dict)):
                value = out.pop(key)
                (out if section is None else out.setdefault(section, {}))[field] = value
    if isinstance(out.get("topology"), str):
        out["topology"] = {"kind": out["topology"]}
    for section, shape in (("inter", "{nic: KEY, nics_per_node: N}"), ("topology", "{kind: KIND}")):
        value = out.get(section)
        if value is not None and not isinstance(value, dict):
            raise SpecError(
                f"{source}: field {section}: expected a mapping {shape}, got {value!r:.60}"
            )
    return out


def apply_overrides(data: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """Copy of raw cluster fields with the CLI shape overrides applied (None = unchanged)."""
    out = {**data}
    inter = dict(out.get("inter") or {})
    topo = dict(out.get("topology") or {})
    for key, value in overrides.items():
        if value is None:
            continue
        if key in {"nodes", "gpus_per_node", "intra", "nvlink_domain_gpus"}:
            out[key] = value
        elif key == "nics_per_node":
            inter["nics_per_node"] = value
        elif key == "nic":
            inter["nic"] = value
        elif key == "oversubscription":
            topo["oversubscription"] = value
        else:
            raise SpecError(f"unknown cluster override {key!r}")
    out["inter"], out["topology"] = inter, topo
    return out


def dump_cluster(spec: ClusterSpec) -> dict[str, Any]:
    """The spec as plain data (catalog objects expanded), for YAML/JSON output."""
    return spec.model_dump(mode="json")
