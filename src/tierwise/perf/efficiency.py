"""Achieved compute and memory throughput as fractions of a GPU's peak.

A weight GEMM of per-GPU shape (M, N, K) does 2MNK FLOPs on 2(MK + KN + MN) bytes of 16-bit
operands: arithmetic intensity I = MNK / (MK + KN + MN) FLOP/byte (the same for its forward,
data-gradient and weight-gradient GEMMs, which permute the three dims). Its efficiency is
eff = GEMM_PEAK_FRACTION[gpu] * I / (I + GEMM_RIDGE_MULTIPLE * ridge), ridge = peak FLOP/s over
HBM bytes/s: a skinny GEMM (one small dim: the head or FFN columns a TP rank holds) loses more
on a GPU whose compute outruns its memory (H100's ridge is ~295 FLOP/byte, A100's ~153).
The peak fractions are the calibration file's cuBLAS figures for large square BF16 GEMMs
(../shared/calibration/training_runs.yaml, gemm_and_hardware); GEMM_RIDGE_MULTIPLE is fitted
on the training runs there (benchmarks/validate_estimate.py, docs/validation.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from tierwise.hardware.catalog import GPU
from tierwise.workload.flops import Array

# Share of dense peak large square BF16 GEMMs reach (calibration file: "roughly 70-80% on H100
# and about 80-90% on A100 in cuBLAS"): the middle of each range. Other GPUs: assumed as H100.
GEMM_PEAK_FRACTION = {
    "a100-sxm-40gb": 0.85,
    "a100-sxm-80gb": 0.85,
    "h100-sxm": 0.75,
    "h100-pcie": 0.75,
    "h200": 0.75,
}
DEFAULT_GEMM_PEAK_FRACTION = 0.75
# Arithmetic intensity, in multiples of the GPU's ridge point, at which a GEMM reaches half its
# peak fraction. Fitted on the training runs of ../shared/calibration/ by
# benchmarks/validate_estimate.py --fit.
GEMM_RIDGE_MULTIPLE = 1.0
# FP8 GEMMs: Transformer Engine reaches about 1.4x the BF16 GEMM throughput in practice, not
# the 2x of peak (scaling, casts, amax reductions): efficiency relative to the FP8 peak.
FP8_GEMM_RELATIVE_EFFICIENCY = 0.7
# Flash attention (fused, causal) relative to the GEMM peak fraction. Fitted with
# GEMM_RIDGE_MULTIPLE (benchmarks/validate_estimate.py --fit; 0.75 costs 0.2 points of MAE):
# FlashAttention-2 reaches ~70% of A100 peak forward but less backward, and less of H100's.
ATTENTION_RELATIVE_EFFICIENCY = 0.6
# A causal kernel skips the masked half of the s^2 scores (model FLOPs count all of it).
CAUSAL_WORK_FRACTION = 0.5
# Share of HBM bandwidth elementwise/norm kernels and the optimizer reach.
HBM_EFFICIENCY = 0.7
# Unfused framework kernels move each elementwise tensor this many times more than the fused
# minimum the workload layer counts (casts, bias, dropout masks, copies). Fitted with
# GEMM_RIDGE_MULTIPLE on the training runs (benchmarks/validate_estimate.py --fit).
ELEMENTWISE_TRAFFIC_FACTOR = 2.5


def gemm_peak_fraction(gpu: GPU) -> float:
    """Large-GEMM share of dense peak for `gpu`."""
    return GEMM_PEAK_FRACTION.get(gpu.key, DEFAULT_GEMM_PEAK_FRACTION)


def gemm_intensity(m: Array, n: Array, k: Array) -> Array:
    """FLOPs per byte of a 16-bit (m x k) @ (k x n) GEMM: mnk / (mk + kn + mn)."""
    return m * n * k / (m * k + k * n + m * n)


def gemm_seconds(
    gpu: GPU, gemms: Sequence[tuple[Array, Array, Array, Array]], fp8: Array = False
) -> Array:
    """Seconds of weight GEMMs given as (FLOPs, m, n, k) of per-GPU (m x k) @ (k x n) shapes:
    each at peak * fraction * I / (I + GEMM_RIDGE_MULTIPLE * ridge) TFLOP/s."""
    if gpu.gemm_efficiency is not None:
        return sum([g[0] for g in gemms]) / (gpu.peak_bf16_tflops * gpu.gemm_efficiency * 1e12)
    fp8_peak = gpu.peak_fp8_tflops or gpu.peak_bf16_tflops
    peak = gpu.peak_bf16_tflops + fp8 * (
        fp8_peak * FP8_GEMM_RELATIVE_EFFICIENCY - gpu.peak_bf16_tflops
    )
    # FP8 operands are 1 byte: twice the intensity, against a ridge as much higher as the peak.
    half = GEMM_RIDGE_MULTIPLE * peak / gpu.hbm_tbps / (1 + fp8)
    # flops / (rate * I / (I + half)) = flops * (1 + half / I) / rate, rate = peak * fraction
    work = sum([flops * (1 + half / gemm_intensity(m, n, k)) for flops, m, n, k in gemms])
    return work / (peak * gemm_peak_fraction(gpu) * 1e12)


def attention_tflops(gpu: GPU) -> float:
    """Achieved TFLOP/s of the fused attention core (BF16), counting the work it does."""
    if gpu.gemm_efficiency is not None:
        return gpu.peak_bf16_tflops * gpu.gemm_efficiency
    return gpu.peak_bf16_tflops * gemm_peak_fraction(gpu) * ATTENTION_RELATIVE_EFFICIENCY


def elementwise_seconds(gpu: GPU, nbytes: Array) -> Array:
    """Time of HBM-bound elementwise work counted as `nbytes` fused bytes."""
    return nbytes * ELEMENTWISE_TRAFFIC_FACTOR / hbm_bytes_per_s(gpu)


def hbm_bytes_per_s(gpu: GPU) -> float:
    """Achieved HBM bandwidth, bytes/s."""
    return gpu.hbm_tbps * 1e12 * HBM_EFFICIENCY
