"""Achieved compute and memory throughput as fractions of a GPU's peak.

GEMM efficiency rises with the narrowest per-GPU GEMM dimension d (hidden, or the head/FFN
columns one TP rank holds): eff = GEMM_PEAK_FRACTION[gpu] * d / (d + GEMM_HALF_DIM). The
peak fractions are the calibration file's cuBLAS figures for large square BF16 GEMMs
(../shared/calibration/training_runs.yaml, gemm_and_hardware); GEMM_HALF_DIM is the one
constant fitted on the training runs there (benchmarks/validate_estimate.py, docs/validation.md).
"""

from __future__ import annotations

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
# Per-GPU GEMM dimension at which efficiency is half its peak fraction (elements). Fitted on
# the training runs of ../shared/calibration/ by benchmarks/validate_estimate.py.
GEMM_HALF_DIM = 768.0
# FP8 GEMMs: Transformer Engine reaches about 1.4x the BF16 GEMM throughput in practice, not
# the 2x of peak (scaling, casts, amax reductions): efficiency relative to the FP8 peak.
FP8_GEMM_RELATIVE_EFFICIENCY = 0.7
# Flash attention (fused, causal) relative to the GEMM peak fraction: FlashAttention-2 reports
# ~70% of A100 peak forward and less backward: 0.75 of the GEMM fraction, which the fit on
# the training runs also picks (benchmarks/validate_estimate.py --fit).
ATTENTION_RELATIVE_EFFICIENCY = 0.75
# A causal kernel skips the masked half of the s^2 scores (model FLOPs count all of it).
CAUSAL_WORK_FRACTION = 0.5
# Share of HBM bandwidth elementwise/norm kernels and the optimizer reach.
HBM_EFFICIENCY = 0.7
# Unfused framework kernels move each elementwise tensor this many times more than the fused
# minimum the workload layer counts (casts, bias, dropout masks, copies). Fitted with
# GEMM_HALF_DIM on the training runs (benchmarks/validate_estimate.py --fit).
ELEMENTWISE_TRAFFIC_FACTOR = 2.0


def gemm_peak_fraction(gpu: GPU) -> float:
    """Large-GEMM share of dense peak for `gpu`."""
    return GEMM_PEAK_FRACTION.get(gpu.key, DEFAULT_GEMM_PEAK_FRACTION)


def gemm_tflops(gpu: GPU, dim: Array, fp8: Array = False) -> Array:
    """Achieved GEMM TFLOP/s for narrowest per-GPU dimension `dim` (elements)."""
    if gpu.gemm_efficiency is not None:
        return gpu.peak_bf16_tflops * gpu.gemm_efficiency
    frac = gemm_peak_fraction(gpu) * dim / (dim + GEMM_HALF_DIM)
    fp8_peak = gpu.peak_fp8_tflops or gpu.peak_bf16_tflops
    peak = gpu.peak_bf16_tflops + fp8 * (
        fp8_peak * FP8_GEMM_RELATIVE_EFFICIENCY - gpu.peak_bf16_tflops
    )
    return peak * frac


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
