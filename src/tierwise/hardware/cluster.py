"""Cluster spec: what users write in YAML (or pick as a preset), validated and resolved.

Catalog keys (`gpu: h100-sxm`, `intra: nvlink4`, `inter.nic: ndr400`) are resolved into catalog
objects at validation time, so a loaded spec is self-contained and dumps reproducibly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cache, lru_cache
from itertools import accumulate
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tierwise.bounds import MAX_DOMAIN_GPUS, MAX_GPUS, MAX_GPUS_PER_NODE, MAX_NICS_PER_NODE
from tierwise.errors import SpecError
from tierwise.hardware import catalog
from tierwise.hardware.catalog import GPU, NIC, Link
from tierwise.hardware.fleet import FleetSpec, fleet_fields
from tierwise.hardware.reliability import PowerSpec, ReliabilitySpec
from tierwise.specio import build, data_yaml, read_yaml
from tierwise.textio import is_file

TopologyKind = Literal["rail-optimized", "rail-only", "fat-tree", "spine-leaf", "single-switch"]
InNetworkReduction = Literal["none", "sharp", "nvls", "nvls+sharp"]
RoutingKind = Literal["ecmp", "adaptive", "static"]
# How each NIC kind's fabric routes a flow when the spec leaves `routing` out. InfiniBand:
# adaptive (NCCL_IB_ADAPTIVE_ROUTING defaults to 1 on IB, 0 on RoCE: NCCL env docs; Quantum
# switches spread packets of one QP over the uplinks); AWS EFA: adaptive (SRD sprays each
# flow's packets over many paths, Shalev et al., IEEE Micro 2020); RoCE and Ethernet: ECMP
# (5-tuple hash per flow, one uplink per flow); the lab's veth fabric: the kernel's ECMP.
DEFAULT_ROUTING: dict[str, RoutingKind] = {
    "ib": "adaptive",
    "efa": "adaptive",
    "roce": "ecmp",
    "eth": "ecmp",
    "veth": "ecmp",
}
TIER_NAMES = ("intra", "leaf", "spine", "core")
# Largest cluster tierwise models, in nodes: the placement and group models hold a few arrays
# per rank, so 10^5 nodes (800k GPUs) stay within seconds and a few GB (benchmarks/scale.py).
MAX_NODES = 100_000


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InterSpec(_Spec):
    """Inter-node network: one NIC model, how many ports per node."""

    nic: NIC
    nics_per_node: int = Field(ge=0, le=MAX_NICS_PER_NODE)

    @field_validator("nic", mode="before")
    @classmethod
    def _resolve_nic(cls, value: Any) -> Any:
        return catalog.nic(value) if isinstance(value, str) else value


class TopologySpec(_Spec):
    """The switch tree: leaves of nodes, optional pods of leaves above them.

    Leaves hold `nodes_per_leaf` nodes each (the last one may be partly filled), or the sizes
    listed in `leaf_sizes` in node order (a Slurm topology.conf's leaves); pods likewise hold
    `leaves_per_pod` leaves or the counts in `pod_sizes`. oversubscription is the leaf
    downlink:uplink ratio (2.0 = 2:1); pod_oversubscription the same one level up.
    rail-optimized: each rail (NIC index) has its own leaf per group of nodes, joined by a
    spine; rail-only: the same rail switches (a rail's own spine above them when a job outgrows
    one) with nothing between rails, so traffic between different rails of two nodes must hop
    to the GPU on the destination's rail first (NCCL's PXN; `collectives.shape.relay_of`).
    planes: each NIC port split into that many planes, each its own fabric; a plane's port
    runs at the NIC rate / planes, so a leaf switch reaches planes x nodes_per_leaf nodes
    (gpus_per_leaf likewise; listed leaf_sizes are one plane's leaves as built).
    """

    kind: TopologyKind = "fat-tree"
    nodes_per_leaf: int | None = Field(default=None, gt=0)
    gpus_per_leaf: int | None = Field(default=None, gt=0)
    leaf_sizes: tuple[Annotated[int, Field(gt=0)], ...] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NODES,
        description="Nodes under each leaf in node order (instead of nodes_per_leaf).",
    )
    oversubscription: float = Field(default=1.0, ge=1.0)
    planes: int = Field(
        default=1,
        ge=1,
        le=8,
        description=(
            "Planes each NIC port is split into (multi-plane fabrics, e.g. ConnectX-8 2x400G "
            "on two planes): each plane is its own fabric at the NIC rate / planes per port, so "
            "one leaf reaches planes x nodes_per_leaf nodes. The NIC rate stays the sum."
        ),
    )
    leaves_per_pod: int | None = Field(default=None, gt=0)
    pod_sizes: tuple[Annotated[int, Field(gt=0)], ...] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NODES,
        description="Leaves under each pod in leaf order (instead of leaves_per_pod).",
    )
    pod_oversubscription: float = Field(default=1.0, ge=1.0)
    routing: RoutingKind | None = Field(
        default=None,
        description=(
            "How switches spread flows over their uplinks: ecmp (one uplink per flow, by "
            "hash), adaptive (packets of a flow over every uplink), static (flows dealt out "
            "evenly by destination). Default by NIC kind: InfiniBand and EFA adaptive, RoCE "
            "and Ethernet ecmp."
        ),
    )
    qps_per_connection: int = Field(
        default=1,
        ge=1,
        le=128,
        description=(
            "Queue pairs (flows) per NCCL connection, each carrying an equal share of its "
            "bytes (NCCL_IB_QPS_PER_CONNECTION, default 1; NCCL_IB_SPLIT_DATA_ON_QPS splits "
            "each message or deals messages out, the same share either way)."
        ),
    )

    @model_validator(mode="after")
    def _one_way_to_say_each_level(self) -> TopologySpec:
        """Refuse fields that would be silently ignored: two ways to size the leaves or the
        pods, or leaves, pods and uplink routing under a single switch."""
        for listed, scalar in (("pod_sizes", "leaves_per_pod"), ("leaf_sizes", "nodes_per_leaf")):
            sizes, size = getattr(self, listed), getattr(self, scalar)
            if sizes and size is not None and size != max(sizes):
                raise ValueError(
                    f"{scalar}={size} disagrees with {listed} (largest {max(sizes)}); the "
                    f"listed sizes are used: give {scalar}={max(sizes)} or leave it out"
                )
        if self.gpus_per_leaf is not None and (self.nodes_per_leaf or self.leaf_sizes):
            raise ValueError("give gpus_per_leaf or nodes_per_leaf/leaf_sizes, not both")
        if self.kind == "single-switch":
            above = [
                name
                for name, value in (
                    ("leaves_per_pod", self.leaves_per_pod),
                    ("pod_sizes", self.pod_sizes),
                    ("oversubscription", self.oversubscription > 1),
                    ("pod_oversubscription", self.pod_oversubscription > 1),
                    ("routing", self.routing),  # (flows spread over uplinks)
                    ("qps_per_connection", self.qps_per_connection > 1),
                )
                if value
            ]
            if above:
                raise ValueError(
                    f"kind single-switch has no uplinks; {above[0]} is "
                    "allowed only with a switch tree (fat-tree, spine-leaf, rail-optimized, "
                    "rail-only)"
                )
        return self


class TierCalibration(_Spec):
    """Fitted per-tier constants (`tierwise calibrate`).

    alpha_us: latency of one LL-protocol ring step on this tier (NCCL's software + wire), us;
    beta_GBps: effective bandwidth per GPU per direction, GB/s; overhead_us: fixed extra time of
    one bandwidth-protocol (LL128/Simple/NVLS) collective on this tier, us.
    """

    alpha_us: float = Field(ge=0)
    beta_GBps: float = Field(gt=0)
    overhead_us: float = Field(default=0.0, ge=0)


class StepCalibration(_Spec):
    """Step-time constants of this cluster fitted on its training runs (`tierwise calibrate`
    on training logs; `tierwise.verify.runcheck.fit`).

    compute_scale: the achieved compute rate over the model's efficiency law (0.9 = compute
    takes 1/0.9 of the modelled time: clocks, power caps, kernels); overlap_interference: the
    share of overlapped (hidden) communication time that still lands on the step (None: the
    model's `tierwise.perf.step.OVERLAP_INTERFERENCE`).
    """

    compute_scale: float = Field(default=1.0, gt=0, le=10)
    overlap_interference: float | None = Field(default=None, ge=0, le=1)


UNCALIBRATED_STEP = StepCalibration()
"""The model's own step-time constants (a cluster without a fitted ``step`` entry)."""

CalibrationKey = Literal["intra", "leaf", "spine", "core", "step"]


class ClusterSpec(_Spec):
    """A cluster: GPUs per node, NVLink domain, NICs, switch tree, in-network reduction."""

    name: str = "custom"
    gpu: GPU
    gpus_per_node: int = Field(gt=0, le=MAX_GPUS_PER_NODE)
    nodes: int = Field(gt=0, le=MAX_NODES)
    nvlink_domain_gpus: int | None = Field(default=None, gt=0, le=MAX_DOMAIN_GPUS)
    intra: Link
    inter: InterSpec
    topology: TopologySpec = TopologySpec()
    in_network_reduction: InNetworkReduction = "none"
    calibration: dict[CalibrationKey, TierCalibration | StepCalibration] = {}
    price_per_gpu_hour: float = Field(default=2.5, gt=0)
    fleet: FleetSpec = FleetSpec(name="well-run")
    reliability: ReliabilitySpec = ReliabilitySpec()
    power: PowerSpec = PowerSpec()

    @field_validator("gpu", mode="before")
    @classmethod
    def _resolve_gpu(cls, value: Any) -> Any:
        return catalog.gpu(value) if isinstance(value, str) else value

    @field_validator("calibration", mode="before")
    @classmethod
    def _calibration_kinds(cls, value: Any) -> Any:
        """`step` holds StepCalibration fields, each tier TierCalibration fields."""
        if not isinstance(value, dict):
            return value
        out = {}
        for key, cal in value.items():
            kind = StepCalibration if key == "step" else TierCalibration
            out[key] = kind.model_validate(cal) if isinstance(cal, dict) else cal
            if not isinstance(out[key], kind):
                raise ValueError(f"calibration.{key}: expected {kind.__name__} fields")
        return out

    @field_validator("intra", mode="before")
    @classmethod
    def _resolve_intra(cls, value: Any) -> Any:
        return catalog.link(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check_shape(self) -> ClusterSpec:
        domain, npd = self.domain_gpus, self.nodes_per_domain
        if self.world > MAX_GPUS:
            raise ValueError(
                f"nodes*gpus_per_node = {self.nodes}*{self.gpus_per_node} = {self.world} GPUs; "
                f"allowed: at most {MAX_GPUS} (--nodes, --gpus-per-node)"
            )
        if domain % self.gpus_per_node:
            raise ValueError(
                f"nvlink_domain_gpus={domain} must be a multiple of "
                f"gpus_per_node={self.gpus_per_node}"
            )
        per_leaf, planes = self.topology.gpus_per_leaf, self.topology.planes
        if per_leaf is not None and (per_leaf * planes) % self.gpus_per_node:
            raise ValueError(
                f"topology.gpus_per_leaf={per_leaf} is not a whole number of "
                f"{self.gpus_per_node}-GPU nodes per leaf (x {planes} plane(s)); allowed: "
                f"multiples of {self.gpus_per_node // math.gcd(self.gpus_per_node, planes)}, "
                "or give nodes_per_leaf"
            )
        listed = self.topology.leaf_sizes
        if listed and self.topology.kind != "single-switch" and self.nodes > sum(listed):
            raise ValueError(
                f"nodes={self.nodes} exceed the {sum(listed)} nodes under topology.leaf_sizes; "
                "list every leaf or lower nodes"
            )
        pods = self.topology.pod_sizes
        if pods and self.leaves > sum(pods):
            raise ValueError(
                f"{self.leaves} leaves exceed the {sum(pods)} leaves under topology.pod_sizes; "
                "list every pod or lower nodes"
            )
        if self.inter.nics_per_node == 0 and self.nodes > npd:
            raise ValueError(
                f"nics_per_node=0 leaves nodes={self.nodes} without a network between their "
                f"{-(-self.nodes // npd)} NVLink domains; allowed: nics_per_node >= 1, or "
                f"nodes <= {npd}"
            )
        for start in self.leaf_starts[1:]:
            if start % npd:
                raise ValueError(
                    f"a leaf starts at node {start}, inside a {npd}-node NVLink domain; "
                    f"leaf sizes must be multiples of {npd} (nvlink_domain_gpus / gpus_per_node)"
                )
        return self

    @property
    def step_calibration(self) -> StepCalibration:
        """The step-time constants fitted on this cluster's runs (defaults: the model's)."""
        cal = self.calibration.get("step")
        return cal if isinstance(cal, StepCalibration) else UNCALIBRATED_STEP

    @property
    def domain_gpus(self) -> int:
        """GPUs in one NVLink (scale-up) domain."""
        return self.nvlink_domain_gpus or self.gpus_per_node

    @property
    def nodes_per_domain(self) -> int:
        """Nodes that share one NVLink domain (1 except rack-scale systems like NVL72)."""
        return self.domain_gpus // self.gpus_per_node

    @property
    def nics_per_domain(self) -> int:
        """NICs of one full NVLink domain: what traffic leaving the domain spreads over."""
        return self.inter.nics_per_node * self.nodes_per_domain

    @property
    def domains(self) -> int:
        """NVLink domains (the last one may be partly filled)."""
        return -(-self.nodes // self.nodes_per_domain)

    @property
    def leaf_sizes(self) -> tuple[int, ...]:
        """Nodes under each leaf, in node order, covering exactly `nodes` (single-switch: one
        leaf; listed sizes cut at `nodes`; else leaves of nodes_per_leaf, the last partly
        filled)."""
        return _leaf_sizes(self.nodes, self.gpus_per_node, self.topology)

    @property
    def leaf_starts(self) -> tuple[int, ...]:
        """Index of the first node of each leaf."""
        return _leaf_starts(self.leaf_sizes)

    @property
    def leaves(self) -> int:
        """Leaf switch groups holding at least one node."""
        return len(self.leaf_sizes)

    @property
    def nodes_per_leaf(self) -> int:
        """Nodes under the largest leaf (a preset's scalable unit, at most all nodes)."""
        return max(self.leaf_sizes)

    @property
    def pod_sizes(self) -> tuple[int, ...]:
        """Leaves under each pod, in leaf order, covering every leaf (one pod when the tree has
        two levels; else as `leaf_sizes`, from pod_sizes or leaves_per_pod)."""
        topo = self.topology
        return _blocks(self.leaves, topo.pod_sizes, topo.leaves_per_pod or self.leaves)

    @property
    def leaves_per_pod(self) -> int:
        """Leaves under the largest pod (all leaves when the tree has two levels)."""
        return max(self.pod_sizes)

    @property
    def pods(self) -> int:
        """Pods holding at least one leaf."""
        return len(self.pod_sizes)

    @property
    def world(self) -> int:
        """Total GPUs."""
        return self.nodes * self.gpus_per_node

    @property
    def nvls(self) -> bool:
        """NVLink SHARP reduction inside the NVSwitch domain is enabled and supported."""
        return "nvls" in self.in_network_reduction and self.intra.nvls

    @property
    def routing(self) -> RoutingKind:
        """How the fabric spreads flows over uplinks: the spec's, else its NIC kind's default."""
        return self.topology.routing or DEFAULT_ROUTING[self.inter.nic.kind]

    @property
    def rails_meet_above_leaf(self) -> bool:
        """Traffic between different rails climbs above the leaf switches even under one leaf:
        a rail-optimized fabric without NVLink to relay it (PXN) joins its rail switches
        only at the spine (`collectives.shape.relay_of`)."""
        return (
            self.topology.kind == "rail-optimized"
            and self.intra.kind != "nvlink"
            and self.inter.nics_per_node > 1
            and self.world > self.domain_gpus
        )

    @property
    def sharp(self) -> bool:
        """SHARP reduction in the IB switches is enabled and supported by the NIC/switch."""
        return "sharp" in self.in_network_reduction and self.inter.nic.sharp


def uniform_size(counts: Sequence[int]) -> int:
    """The common count when every count but a smaller last one (a partly built leaf or pod)
    equals the first, else 0."""
    if all(n == counts[0] for n in counts[:-1]) and counts[-1] <= counts[0]:
        return counts[0]
    return 0


@lru_cache(maxsize=256)
def _leaf_sizes(nodes: int, gpus_per_node: int, topo: TopologySpec) -> tuple[int, ...]:
    if topo.kind == "single-switch":
        return (nodes,)
    if topo.nodes_per_leaf:
        npl = topo.nodes_per_leaf * topo.planes
    elif topo.gpus_per_leaf:
        npl = topo.gpus_per_leaf * topo.planes // gpus_per_node  # whole nodes (_check_shape)
    else:
        npl = nodes
    return _blocks(nodes, topo.leaf_sizes, npl)


@lru_cache(maxsize=256)
def _blocks(items: int, listed: tuple[int, ...] | None, size: int) -> tuple[int, ...]:
    """Sizes of consecutive blocks holding `items`: the `listed` sizes cut at `items`, else
    blocks of `size` with a partly filled last one."""
    if not listed:
        full, rest = divmod(items, size)
        return (size,) * full + ((rest,) if rest else ())
    out, left = [], items
    for n in listed:
        if left <= 0:
            break
        out.append(min(n, left))
        left -= n
    return tuple(out)


@lru_cache(maxsize=256)
def _leaf_starts(sizes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(accumulate(sizes[:-1], initial=0))


@cache
def presets() -> dict[str, dict[str, Any]]:
    """Preset cluster fields by name."""
    return data_yaml("tierwise.hardware", "data/clusters.yaml")


def load_cluster(
    arg: str | Path, flags: Mapping[str, str] | None = None, **overrides: Any
) -> ClusterSpec:
    """A cluster from a preset name or a YAML file, with shape overrides applied.

    Overrides (None means keep): nodes, gpus_per_node, nics_per_node, nic, intra, oversubscription,
    nodes_per_leaf (replaces leaf_sizes, gpus_per_leaf and pod_sizes), nvlink_domain_gpus,
    topology (the topology kind), planes, the topology's routing, qps_per_connection,
    pod_oversubscription and leaves_per_pod, and the fleet's slow_node_share,
    slow_node_slowdown and gpu_speed_spread. `flags` (override -> the option that set it)
    names a bad override by the flag typed.
    """
    data, source = _raw_cluster(str(arg))
    data = apply_overrides(data, **overrides)
    given = {k for k, v in overrides.items() if v is not None}
    for key, lookup in (("nic", catalog.nic), ("intra", catalog.link)):
        if key in given and key in (flags or {}) and isinstance(overrides[key], str):
            lookup(overrides[key], (flags or {})[key])  # an unknown key, named by its flag
    named = {override_path(k): flag for k, flag in (flags or {}).items() if k in given}
    return build(ClusterSpec, data, source, named)


def override_path(key: str) -> str:
    """The dotted cluster field an override sets (`nics_per_node` -> `inter.nics_per_node`)."""
    if key in FLEET_OVERRIDES:
        return f"fleet.{key}"
    if key in ("nics_per_node", "nic"):
        return f"inter.{key}"
    if key in (*TOPOLOGY_OVERRIDES, "oversubscription", "planes", "nodes_per_leaf"):
        return f"topology.{key}"
    return "topology.kind" if key == "topology" else key


def _raw_cluster(arg: str) -> tuple[dict[str, Any], str]:
    if arg in presets():
        return {"name": arg, **presets()[arg]}, f"cluster {arg}"
    path = Path(arg)
    if path.suffix in {".yaml", ".yml", ".json"} or is_file(path):
        if not is_file(path):
            raise SpecError(f"--cluster: file {arg!r} does not exist")
        data = read_yaml(path)
        if isinstance(data, dict) and isinstance(data.get("spec"), dict) and "tiers" in data:
            data = data["spec"]  # what `tierwise show cluster --json` prints: load its spec
        if not isinstance(data, dict):
            raise SpecError(f"{arg}: expected a mapping of cluster fields")
        return _spec_fields(data, arg), arg
    raise SpecError(
        f"--cluster: unknown preset {arg!r}; allowed: {', '.join(presets())} or a YAML file"
    )


def _spec_fields(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Cluster fields of a file: `topology: KIND` is short for `topology: {kind: KIND}` (as
    `show cluster` prints it); `inter` and `topology` must be mappings."""
    out = {**data}
    if isinstance(out.get("topology"), str):
        out["topology"] = {"kind": out["topology"]}
    for section, shape in (("inter", "{nic: KEY, nics_per_node: N}"), ("topology", "{kind: KIND}")):
        value = out.get(section)
        if value is not None and not isinstance(value, dict):
            raise SpecError(
                f"{source}: field {section}: expected a mapping {shape}, got {value!r:.60}"
            )
    return out


# Overrides that set a field of the topology or of the fleet as named.
TOPOLOGY_OVERRIDES = ("routing", "qps_per_connection", "pod_oversubscription", "leaves_per_pod")
FLEET_OVERRIDES = ("slow_node_share", "slow_node_slowdown", "gpu_speed_spread")


def apply_overrides(data: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """Copy of raw cluster fields with the CLI shape overrides applied (None = unchanged)."""
    out = {**data}
    inter = dict(out.get("inter") or {})
    topo = dict(out.get("topology") or {})
    fleet = out.get("fleet")
    for key, value in overrides.items():
        if value is None:
            continue
        if key in {"nodes", "gpus_per_node", "intra", "nvlink_domain_gpus"}:
            out[key] = value
        elif key in FLEET_OVERRIDES:
            # unvalidated: `build` names an override out of bounds by its flag, and an
            # unknown fleet name as the spec's
            base = fleet_fields(fleet or "well-run")
            if isinstance(base, dict):
                out["fleet"] = fleet = {**base, key: value, "name": "custom"}
        elif key in TOPOLOGY_OVERRIDES:
            if key == "leaves_per_pod":  # replaces the listed pods
                topo.pop("pod_sizes", None)
            topo[key] = value
        elif key == "nics_per_node":
            inter["nics_per_node"] = value
        elif key == "nic":
            inter["nic"] = value
        elif key == "oversubscription":
            topo["oversubscription"] = value
        elif key == "topology":
            topo["kind"] = value
        elif key == "planes":
            topo["planes"] = value
        elif key == "nodes_per_leaf":
            listed = {"leaf_sizes", "gpus_per_leaf", "pod_sizes"}  # they count the old leaves
            topo = {k: v for k, v in topo.items() if k not in listed}
            topo["nodes_per_leaf"] = value
        else:
            raise SpecError(f"unknown cluster override {key!r}")
    out["inter"], out["topology"] = inter, topo
    return out


def dump_cluster(spec: ClusterSpec) -> dict[str, Any]:
    """The spec as plain data (catalog objects expanded), for YAML/JSON output."""
    return spec.model_dump(mode="json")


def idle_overrides(cluster: ClusterSpec, overrides: dict[str, Any]) -> list[str]:
    """The shape overrides given (not None) that change nothing on `cluster`, each as a
    sentence saying why (a user is told rather than left to think it mattered)."""
    reasons = idle_override_reasons(cluster, overrides)
    return [override_note(name, overrides[name], why) for name, why in reasons.items()]


def unread_overrides(
    cluster: ClusterSpec, overrides: dict[str, Any], read: Sequence[str], what: str
) -> list[str]:
    """The overrides given (not None) that `what` does not read (it reads only the cluster
    fields named in `read`), each as a note; those idle on the whole cluster are
    `idle_overrides`' to say."""
    said = idle_override_reasons(cluster, overrides)
    why = f"{what} reads only {', '.join('--' + r.replace('_', '-') for r in read)}"
    return [
        override_note(name, value, why)
        for name, value in overrides.items()
        if value is not None and name not in read and name not in said
    ]


def override_note(name: str, value: Any, why: str, where: str = "") -> str:
    """``--name VALUE changes nothing{where}: {why}``: an override that changes nothing."""
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return f"--{name.replace('_', '-')} {shown} changes nothing{where}: {why}"


def idle_override_reasons(cluster: ClusterSpec, overrides: dict[str, Any]) -> dict[str, str]:
    """Each shape override given (not None) that changes nothing on `cluster`, with why."""
    given = {k for k, v in overrides.items() if v is not None}
    reasons = {}
    above_leaf = cluster.leaves > 1 or cluster.rails_meet_above_leaf
    if "oversubscription" in given and not above_leaf:
        reasons["oversubscription"] = (
            f"all {cluster.nodes} node(s) of {cluster.name} sit under one leaf switch, so no "
            "traffic crosses a leaf uplink"
        )
    for name in ("nic", "nics_per_node", "nodes_per_leaf"):
        if name in given and cluster.world <= cluster.domain_gpus:
            reasons[name] = (
                f"all {cluster.world} GPUs share one NVLink domain, so no traffic uses a NIC"
            )
    uplinks = above_leaf and cluster.world > cluster.domain_gpus
    for name in ("routing", "qps_per_connection"):
        if name in given and not uplinks:
            reasons[name] = (
                f"no traffic of {cluster.name} crosses a switch uplink, where routing spreads flows"
            )
    if "qps_per_connection" in given and uplinks and cluster.routing == "adaptive":
        reasons["qps_per_connection"] = (
            f"{cluster.name} routes adaptively, spreading every flow's packets over the "
            "uplinks, so the number of flows does not matter"
        )
    if "leaves_per_pod" in given and cluster.pods == 1:
        reasons["leaves_per_pod"] = (
            f"{cluster.name} has {cluster.leaves} leaf switch(es), all under one pod"
        )
    if "pod_oversubscription" in given and cluster.pods == 1:
        reasons["pod_oversubscription"] = f"{cluster.name} has one pod"
    return reasons
