"""What one node's topology dump says: GPUs, NICs, NVLink, GPU<->NIC affinity -> cluster fields.

`nvidia_smi` and `nccl_xml` both build a `NodeTopology`; `NodeTopology.cluster_fields()` turns it
into the partial cluster spec (`gpus_per_node`, `intra`, `inter`, `gpu` when named) that
`tierwise.hardware.ingest.spec.complete_cluster` fills up into a loadable cluster YAML.
Bandwidths are GB/s per GPU per direction, NIC rates Gb/s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, cast

from tierwise.hardware import catalog
from tierwise.hardware.catalog import NIC, Link
from tierwise.hardware.ingest.common import (
    DEFAULT_GPU_PCIE,
    DEFAULT_NVLINK_GEN,
    NVLINK_GBPS_PER_LINK,
    NVLINK_GEN_BY_COUNT,
    distance_rank,
)

PCIE_LANES = 16


@dataclass(frozen=True)
class GpuInfo:
    """One GPU: NUMA/CPU affinity, NVLink links leaving it, its nearest NIC and how near."""

    index: int
    name: str | None = None
    numa_node: int | None = None
    cpu_affinity: str | None = None  # Linux cpulist, e.g. "0-55,112-167"
    nvlinks: int = 0  # NVLink links of this GPU (to NVSwitches or to peers)
    nearest_nic: str | None = None
    nic_distance: str | None = None  # PIX | PXB | PHB | NODE | SYS


@dataclass(frozen=True)
class NicInfo:
    """One NIC port; `gpus` are the GPUs that use it as their nearest NIC (its rail)."""

    name: str
    numa_node: int | None = None
    rate_Gbps: float | None = None
    kind: str | None = None  # ib | roce | eth | efa
    gpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class NodeTopology:
    """A node as a topology tool printed it.

    nvlink_switched: all GPUs reach each other through NVSwitch with the same link count;
    nvlink_connected: NVLink alone joins every GPU (switched, or a connected peer mesh);
    nvlink_gen / pcie_gen: known from the input (NCCL's sm and link_speed), else None.
    """

    tool: str
    source: str
    gpus: tuple[GpuInfo, ...]
    nics: tuple[NicInfo, ...]
    nvlink_switched: bool = False
    nvlink_connected: bool = False
    nvlink_gen: int | None = None
    gpu_key: str | None = None
    pcie_gen: int | None = None
    pcie_lanes: int | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def gpus_per_node(self) -> int:
        """GPUs found on the node."""
        return len(self.gpus)

    @property
    def rails(self) -> tuple[NicInfo, ...]:
        """NICs that are the nearest NIC of at least one GPU (the compute NICs)."""
        return tuple(n for n in self.nics if n.gpus)

    @property
    def nvlinks_per_gpu(self) -> int:
        """NVLink links of the least-connected GPU (0 without NVLink)."""
        return min((g.nvlinks for g in self.gpus), default=0)

    def intra(self, gpu_key: str | None = None) -> tuple[str | dict[str, Any], list[str]]:
        """The intra-node link (catalog key or inline link fields) and what was assumed.

        gpu_key (a catalog key) overrides the GPU the input names; it decides the NVLink and PCIe
        generation when the input does not show them.
        """
        gpu_key = gpu_key or self.gpu_key
        if self.nvlinks_per_gpu and self.nvlink_connected:
            return self._nvlink(gpu_key)
        return self._pcie(gpu_key)

    def _nvlink(self, gpu_key: str | None) -> tuple[str | dict[str, Any], list[str]]:
        links, notes = self.nvlinks_per_gpu, []
        gen = self.nvlink_gen or _gen_of_gpu(gpu_key)
        if gen is None:
            gen = NVLINK_GEN_BY_COUNT.get(links, DEFAULT_NVLINK_GEN)
            notes.append(f"intra: NVLink {gen} assumed from NV{links} (no GPU named; use --gpu)")
        bw = links * NVLINK_GBPS_PER_LINK[gen]
        key = f"nvlink{gen}"
        known = _links()
        if (
            key in known
            and known[key].bw_GBps == bw
            and known[key].switched == self.nvlink_switched
        ):
            return key, notes
        template = known.get(key, known["nvlink3"])
        shape = "NVSwitch" if self.nvlink_switched else "peer mesh"
        notes.append(
            f"intra: {links} NVLink {gen} links x {NVLINK_GBPS_PER_LINK[gen]:g} GB/s = {bw:g} GB/s "
            f"per GPU ({shape}) matches no catalog link; written inline"
        )
        inline = _inline(template, f"NVLink {gen} x{links} ({shape}, ingested)", bw)
        inline["switched"] = self.nvlink_switched
        inline["nvls"] = template.nvls and self.nvlink_switched
        return inline, notes

    def _pcie(self, gpu_key: str | None) -> tuple[str | dict[str, Any], list[str]]:
        notes = []
        gen = self.pcie_gen or _pcie_gen_of_gpu(gpu_key)
        if gen is None:
            gen = _pcie_gen_of_gpu(DEFAULT_GPU_PCIE)
            notes.append(
                f"intra: no NVLink and no PCIe generation found; PCIe {gen} of "
                f"{DEFAULT_GPU_PCIE} assumed"
            )
        if self.nvlinks_per_gpu and not self.nvlink_connected:
            notes.append("intra: NVLink joins only some GPU pairs; the node-wide tier is PCIe")
        lanes = self.pcie_lanes or PCIE_LANES
        key = f"pcie{gen}"
        known = _links()
        if key in known and lanes == PCIE_LANES:
            return key, notes
        bw = known["pcie4"].bw_GBps * 2 ** (gen - 4) * lanes / PCIE_LANES  # x2 per generation
        notes.append(f"intra: PCIe {gen} x{lanes} = {bw:g} GB/s matches no catalog link; inline")
        return _inline(known["pcie4"], f"PCIe Gen{gen} x{lanes} (ingested)", bw), notes

    def nic(self) -> tuple[str | dict[str, Any] | None, list[str]]:
        """The compute NIC model (catalog key or inline), None when the input gives no speed."""
        found = Counter((n.kind, n.rate_Gbps) for n in self.rails if n.rate_Gbps and n.kind)
        if not found:
            return None, []
        (kind, rate), _ = found.most_common(1)[0]
        notes = (
            [f"inter.nic: rails differ {dict(found)}; the most common is used"]
            if len(found) > 1
            else []
        )
        return nic_for(kind, rate, notes), notes

    def cluster_fields(self, gpu: str | None = None) -> dict[str, Any]:
        """Partial cluster spec: what this node says (gpu only when named or passed)."""
        gpu_key = gpu or self.gpu_key
        intra, _ = self.intra(gpu)
        nic, _ = self.nic()
        inter: dict[str, Any] = {"nics_per_node": len(self.rails)} if self.nics else {}
        if nic is not None:
            inter["nic"] = nic
        out: dict[str, Any] = {"gpus_per_node": self.gpus_per_node, "intra": intra}
        if gpu_key:
            out = {"gpu": gpu_key, **out}
        if inter:
            out["inter"] = inter
        return out

    def assumptions(self, gpu: str | None = None) -> list[str]:
        """Everything the parser and the link/NIC resolution had to assume, one line each."""
        return [*self.notes, *self.intra(gpu)[1], *self.nic()[1]]

    def as_dict(self, gpu: str | None = None) -> dict[str, Any]:
        """JSON-ready view of what was found (per-GPU affinity, NICs, NVLink)."""
        intra, _ = self.intra(gpu)
        bw = catalog.link(intra).bw_GBps if isinstance(intra, str) else intra["bw_GBps"]
        return {
            "tool": self.tool,
            "source": self.source,
            "gpu": self.gpu_key,
            "gpus_per_node": self.gpus_per_node,
            "nvlinks_per_gpu": self.nvlinks_per_gpu,
            "nvlink_switched": self.nvlink_switched,
            "intra": intra,
            "intra_GBps_per_gpu": bw,
            "nics": len(self.nics),
            "nics_per_node": len(self.rails),
            "gpu_list": [asdict(g) for g in self.gpus],
            "nic_list": [asdict(n) for n in self.nics],
        }


def _links() -> dict[str, Link]:
    return cast(dict[str, Link], catalog.entries("links"))


def _inline(template: Link, name: str, bw: float) -> dict[str, Any]:
    return {
        "name": name,
        "kind": template.kind,
        "bw_GBps": bw,
        "efficiency": template.efficiency,
        "latency_us": template.latency_us,
        "switched": template.switched,
        "nvls": False,
    }


def _gen_of_gpu(gpu_key: str | None) -> int | None:
    if gpu_key is None:
        return None
    intra = catalog.gpu(gpu_key, field="--gpu").intra
    return int(intra.removeprefix("nvlink")) if intra.startswith("nvlink") else None


def _pcie_gen_of_gpu(gpu_key: str | None) -> int | None:
    if gpu_key is None:
        return None
    return int(catalog.gpu(gpu_key, field="--gpu").pcie.removeprefix("pcie"))


def nic_for(kind: str, rate_Gbps: float, notes: list[str]) -> str | dict[str, Any]:
    """Catalog NIC key of this kind and rate, else inline fields taken from the nearest rate."""
    nics = cast(dict[str, NIC], catalog.entries("nics")).values()
    same = [n for n in nics if n.kind == kind]
    exact = [n for n in same if n.rate_Gbps == rate_Gbps]
    if exact:
        return exact[0].key
    template = min(same or nics, key=lambda n: abs(n.rate_Gbps - rate_Gbps))
    notes.append(
        f"inter.nic: no catalog {kind} NIC at {rate_Gbps:g} Gb/s; inline, like {template.key}"
    )
    return {
        "name": f"{kind} {rate_Gbps:g} Gb/s (ingested)",
        "kind": kind,
        "rate_Gbps": rate_Gbps,
        "efficiency": template.efficiency,
        "latency_us": template.latency_us,
    }


def assign_rails(distances: Mapping[int, Mapping[str, str]]) -> dict[int, tuple[str, str]]:
    """Nearest NIC per GPU: the closest distance class, ties to the NIC with fewest GPUs so far.

    `distances[gpu][nic]` is a PCIe distance class; returns gpu -> (nic, distance). Balancing the
    ties gives two GPUs behind one switch with two NICs (DGX A100) one NIC each, as NCCL does.
    """
    load: Counter[str] = Counter()
    out: dict[int, tuple[str, str]] = {}
    for gpu in sorted(distances):
        row = distances[gpu]
        if not row:
            continue
        order = list(row)
        best = min(distance_rank(d) for d in row.values())
        near = [n for n in order if distance_rank(row[n]) == best]
        pick = min(near, key=lambda n: (load[n], order.index(n)))
        load[pick] += 1
        out[gpu] = (pick, row[pick])
    return out


def with_rails(
    gpus: list[GpuInfo], nics: list[NicInfo], distances: Mapping[int, Mapping[str, str]]
) -> tuple[tuple[GpuInfo, ...], tuple[NicInfo, ...]]:
    """GPUs with their nearest NIC filled in and NICs with the GPUs of their rail."""
    rails = assign_rails(distances)
    gpus_out = tuple(
        replace(g, nearest_nic=rails[g.index][0], nic_distance=rails[g.index][1])
        if g.index in rails
        else g
        for g in gpus
    )
    nics_out = tuple(
        replace(n, gpus=tuple(i for i, (nic, _) in rails.items() if nic == n.name)) for n in nics
    )
    return gpus_out, nics_out
