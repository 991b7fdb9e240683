"""Time a low-precision format adds outside the GEMMs: quantizing their operands in HBM.

Per micro-batch, each low-precision weight GEMM (M x K) @ (K x N) casts its input (M x K) in
every forward pass (twice under full recompute) and its output gradient (M x N) once in the
backward pass; each cast reads the 16-bit tensor (twice with an amax pass: current scaling,
NVFP4's per-tensor scale) and writes its quantized copies (``workload.precision``). Weights
are cast once per step (Transformer Engine caches them over micro-batches): left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from tierwise.hardware.catalog import GPU
from tierwise.perf.efficiency import Gemm, hbm_bytes_per_s
from tierwise.workload.flops import Array
from tierwise.workload.precision import (
    AMAX_PASS,
    BF16_BYTES,
    ELEMENT_BYTES,
    IS_LOW,
    quantized_copies,
)


def quantize_bytes(gpu: GPU, gemms: Sequence[Gemm], precision: Array, forwards: Array) -> Array:
    """HBM bytes of the casts of `gemms` (their low-precision share) on `gpu` for one
    micro-batch of `forwards` forward passes (2 under full recompute) and one backward."""
    copies = quantized_copies(gpu, precision)  # 0 for bf16: nothing is cast
    per_element = IS_LOW[precision] * BF16_BYTES * (1 + AMAX_PASS[precision])
    per_element = per_element + copies * ELEMENT_BYTES[precision]
    total = 0.0
    for g in gemms:
        total = total + g.low_share * (forwards * g.m * g.k + g.m * g.n)
    return total * per_element


def quantize_seconds(gpu: GPU, gemms: Sequence[Gemm], precision: Array, forwards: Array) -> Array:
    """Seconds of those casts at the achieved HBM bandwidth (0 for bf16)."""
    if gpu.gemm_efficiency is not None or (isinstance(precision, int) and not IS_LOW[precision]):
        return 0.0  # a fixed-efficiency GPU, or one 16-bit layout: nothing is cast
    return quantize_bytes(gpu, gemms, precision, forwards) / hbm_bytes_per_s(gpu)
