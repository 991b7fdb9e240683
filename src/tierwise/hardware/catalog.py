"""The hardware catalog: GPUs, intra-node links, NICs and switches, loaded from data/*.yaml.

Units: TFLOP/s (dense), GiB, TB/s for HBM, GB/s (1e9 B/s) per GPU per direction for links,
Gb/s for NIC line rates, microseconds for latency.
"""

from __future__ import annotations

from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tierwise.errors import SpecError
from tierwise.specio import data_yaml


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @property
    def label(self) -> str:
        """The catalog key, or for an inline spec (key "inline") its name, as users read it."""
        key, name = getattr(self, "key", ""), getattr(self, "name", "")
        return f"{name} (inline)" if key == "inline" else key


PRECISIONS = ("bf16", "fp8", "mxfp8", "nvfp4")
"""GEMM precisions a GPU may run, each with its own dense peak field ``peak_<name>_tflops``."""


class GPU(_Frozen):
    """One accelerator: dense tensor peaks per precision, memory and its interconnect."""

    key: str = "inline"
    name: str = "custom GPU"
    arch: str = "custom"
    """Tensor-core generation: ampere, hopper, blackwell, blackwell-ultra, cdna3, ada."""
    peak_bf16_tflops: float = Field(gt=0)
    peak_fp8_tflops: float | None = Field(default=None, gt=0)
    peak_mxfp8_tflops: float | None = Field(default=None, gt=0)
    """Block-scaled FP8 (OCP MX, 32-element blocks, E8M0 scales); None: not supported."""
    peak_nvfp4_tflops: float | None = Field(default=None, gt=0)
    """NVFP4 (E2M1, 16-element blocks, E4M3 scales); None: not supported."""
    hbm_gib: float = Field(gt=0)
    hbm_tbps: float = Field(gt=0)
    intra: str = "pcie5"
    pcie: str = "pcie5"
    host_GBps: float | None = Field(default=None, gt=0)
    """GB/s per direction between the GPU and host memory (CPU offloading) where that is not
    its own PCIe link (Grace's NVLink-C2C; a host of an older PCIe generation)."""
    board_power_w: float | None = Field(default=None, gt=0)
    """Maximum board power (TDP), W, from the datasheet; None: not known."""
    gemm_efficiency: float | None = Field(default=None, gt=0, le=1)
    """Fixed achieved share of peak for every GEMM, for a device whose peak was measured (the
    lab's CPU ranks); None: the shape-dependent curve of `tierwise.perf.efficiency`."""

    def peak_tflops(self, precision: str) -> float | None:
        """Dense tensor peak in TFLOP/s for `precision` (one of PRECISIONS); None: unsupported."""
        return getattr(self, f"peak_{precision}_tflops")


class Link(_Frozen):
    """An intra-node link class; bw_GBps is line rate per GPU per direction."""

    key: str = "inline"
    name: str = "custom link"
    kind: Literal["nvlink", "pcie", "xgmi", "loopback"] = "nvlink"
    bw_GBps: float = Field(gt=0)
    efficiency: float = Field(default=0.8, gt=0, le=1)
    latency_us: float = Field(default=1.0, ge=0)
    switched: bool = False
    nvls: bool = False

    @property
    def effective_GBps(self) -> float:
        """Bandwidth a ring reaches per GPU per direction (line rate x protocol efficiency)."""
        return self.bw_GBps * self.efficiency


class NIC(_Frozen):
    """A network adapter port; rate in Gb/s, effective bandwidth in GB/s."""

    key: str = "inline"
    name: str = "custom NIC"
    kind: Literal["ib", "roce", "eth", "efa", "veth"] = "ib"
    rate_Gbps: float = Field(gt=0)
    efficiency: float = Field(default=0.9, gt=0, le=1)
    latency_us: float = Field(default=2.0, ge=0)
    sharp: bool = False

    @property
    def line_GBps(self) -> float:
        """Line rate in GB/s (1e9 B/s)."""
        return self.rate_Gbps / 8

    @property
    def effective_GBps(self) -> float:
        """Bandwidth nccl-tests reaches through this port, GB/s."""
        return self.line_GBps * self.efficiency


class Switch(_Frozen):
    """A switch model: radix (ports), port rate in Gb/s, port-to-port latency."""

    key: str
    name: str
    radix: int = Field(gt=0)
    rate_Gbps: float = Field(gt=0)
    latency_us: float = Field(ge=0)


KINDS: dict[str, type[_Frozen]] = {"gpus": GPU, "links": Link, "nics": NIC, "switches": Switch}


@cache
def _load(kind: str) -> dict[str, _Frozen]:
    model = KINDS[kind]
    raw = data_yaml("tierwise.hardware", f"data/{kind}.yaml")
    return {key: model(key=key, **fields) for key, fields in raw.items()}


def entries(kind: str) -> dict[str, _Frozen]:
    """All catalog entries of one kind (gpus, links, nics, switches) by key."""
    if kind not in KINDS:
        raise SpecError(f"catalog kind {kind!r} is unknown; allowed: {', '.join(KINDS)}")
    return _load(kind)


def lookup(kind: str, key: str, field: str) -> _Frozen:
    """One catalog entry; an unknown key is a SpecError naming the field and the allowed keys."""
    table = entries(kind)
    if key not in table:
        raise SpecError(f"{field}: unknown {kind[:-1]} {key!r}; allowed: {', '.join(table)}")
    return table[key]


def gpu(key: str, field: str = "gpu") -> GPU:
    """A GPU by catalog key."""
    return lookup("gpus", key, field)  # type: ignore[return-value]


def link(key: str, field: str = "intra") -> Link:
    """An intra-node link by catalog key."""
    return lookup("links", key, field)  # type: ignore[return-value]


def nic(key: str, field: str = "inter.nic") -> NIC:
    """A NIC by catalog key."""
    return lookup("nics", key, field)  # type: ignore[return-value]
