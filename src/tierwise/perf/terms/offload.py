"""CPU activation offloading (Megatron's ``--cpu-offloading-num-layers``, Transformer Engine's
CPU-offload context): the offloaded layers' activations are copied to host memory during the
forward pass and back during the backward pass, on copy engines, overlapping the compute of
the other layers (TransformerEngine docs/features/other_optimizations/cpu_offloading).

Each direction moves one micro-batch's offloaded activations over the GPU's host link (PCIe
on x86 hosts, NVLink-C2C on Grace) and hides behind that pass's compute; what does not fit
in it stalls the GPU. The copies' HBM traffic is not charged to the compute.
"""

from __future__ import annotations

from typing import NamedTuple

from tierwise.hardware import catalog
from tierwise.hardware.catalog import GPU
from tierwise.perf.terms.dp import FORWARD_SHARE
from tierwise.records import record
from tierwise.workload.flops import Array, pos


class Offload(NamedTuple):
    """One micro-batch's offload copies: seconds they stall the GPU (`exposed_s`), take in
    all (`total_s`, both directions) and bytes over the host link (`bytes`)."""

    exposed_s: Array
    total_s: Array
    bytes: Array


HOST_COPY_EFFICIENCY = 0.8
"""Share of a host link's line rate (``GPU.host_GBps``) the offload copies reach: assumed, no
published measurement found (PCIe links use their catalog efficiency)."""


def host_GBps(gpu: GPU) -> float:
    """GB/s one GPU copies to or from host memory (one direction)."""
    if gpu.host_GBps is not None:
        return gpu.host_GBps * HOST_COPY_EFFICIENCY
    return catalog.link(gpu.pcie, field="gpu.pcie").effective_GBps


NO_OFFLOAD = Offload(0.0, 0.0, 0.0)  # nothing offloaded (one shared, immutable tuple)


def offload(gpu: GPU, host_bytes: Array, compute_s: Array) -> Offload:
    """One micro-batch's offload copies; `host_bytes`: the activations it keeps in host
    memory; `compute_s`: its compute, forward and backward."""
    if isinstance(host_bytes, float) and host_bytes == 0.0:  # one layout, nothing offloaded
        return NO_OFFLOAD
    one_way = host_bytes / (host_GBps(gpu) * 1e9)
    forward, backward = compute_s * FORWARD_SHARE, compute_s * (1 - FORWARD_SHARE)
    exposed = pos(one_way - forward) + pos(one_way - backward)
    return record(Offload, (exposed, 2 * one_way, 2 * host_bytes))
