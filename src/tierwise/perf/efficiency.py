"""Achieved compute and memory throughput as fractions of a GPU's peak.

One law for every weight GEMM, on every GPU generation and in every precision. A GEMM of
per-GPU shape (M, N, K) does 2MNK FLOPs on e(MK + KN + MN) bytes of e-byte operands; with
I = MNK / (MK + KN + MN) its arithmetic intensity is 2I/e FLOP/byte (the same for its fprop,
dgrad and wgrad, which permute the three dims). It runs at

    rate = peak[format] * ARCH_PEAK_FRACTION[arch] * FORMAT_EFFICIENCY[format]
           * I / (I + GEMM_RIDGE_MULTIPLE * ridge * e / 2),   ridge = peak[format] / HBM B/s,

so a skinny GEMM (one small dim: the columns a TP rank holds, the tokens an expert gets) loses
more on a GPU whose compute outruns its memory, and more in a faster format. Expert GEMMs run
grouped (one kernel over a rank's experts); at few tokens per expert the tiles are part empty
and the launch is amortised over little work, which the factor t / (t + GROUPED_GEMM_TOKENS)
of t tokens per expert adds. ARCH_PEAK_FRACTION for Ampere and Hopper is the calibration file's
cuBLAS figure for large square BF16 GEMMs (../shared/calibration/training_runs.yaml,
gemm_and_hardware); the other constants are fitted on all calibration runs (training_runs.yaml
and training_runs_modern.yaml) by ``benchmarks/validate_estimate.py --fit``; docs/validation.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from tierwise.hardware.catalog import GPU
from tierwise.memo import by_identity
from tierwise.workload.flops import Array
from tierwise.workload.precision import FORMATS, ByCode

# Share of the dense BF16 peak large square GEMMs reach, per tensor-core generation. Ampere and
# Hopper: the calibration file ("roughly 70-80% on H100 and about 80-90% on A100 in cuBLAS"),
# the middle of each range. Blackwell: fitted (no GEMM figure in the calibration folder).
ARCH_PEAK_FRACTION = {
    "ampere": 0.85,
    "hopper": 0.75,
    "blackwell": 0.6402,
    "blackwell-ultra": 0.872,
}
DEFAULT_PEAK_FRACTION = 0.75
# A low-precision format's GEMMs relative to a BF16 GEMM at the same share of its own peak:
# scaled GEMMs on the tensor-cores' FP8/FP4 paths reach less of their (2x, 4x) peak than BF16
# does (scale handling in the epilogue/main loop, power and clock limits at the higher rate).
# FP8 (one value for every recipe: no calibration run uses delayed or blockwise scaling, whose
# differences the model prices as cast traffic in perf/precision.py) and MXFP8 are fitted;
# NVFP4 (no calibration run) is assumed.
FORMAT_EFFICIENCY = {
    "bf16": 1.0,
    "fp8-delayed": 0.8823,
    "fp8-tensorwise": 0.8823,
    "fp8-blockwise": 0.8823,
    "mxfp8": 0.826,
    "nvfp4": 0.5,
}
# Arithmetic intensity, in multiples of the format's ridge point, at which a GEMM reaches half
# its peak fraction. Fitted (benchmarks/validate_estimate.py --fit).
GEMM_RIDGE_MULTIPLE = 0.9109
# Tokens per expert at which a grouped expert GEMM loses half its rate to tile padding and
# per-expert overhead. Fitted.
GROUPED_GEMM_TOKENS = 0.8383
# Flash attention (fused, causal, BF16) relative to the GEMM peak fraction on Hopper and
# Blackwell (FlashAttention-3 / cuDNN kernels). Fitted with GEMM_RIDGE_MULTIPLE on their runs.
ATTENTION_RELATIVE_EFFICIENCY = 0.943
# Share of the dense BF16 peak flash attention reaches where no calibration run measures it
# and a kernel benchmark does. Ampere runs FlashAttention-2, which reaches 50-73% of A100's
# peak (Dao 2023, "FlashAttention-2", arXiv 2307.08691, abstract), its backward pass at the
# lower end: 0.6. Every A100 calibration run used unfused attention (Megatron-LM of 2021), so
# the value fitted on Hopper and Blackwell kernels is not applied to Ampere.
ATTENTION_PEAK_FRACTION = {"ampere": 0.6}
# A quoted share counts the work as flash-attention's benchmarks do: the backward at 2.5x the
# forward, because the kernel recomputes the scores (Dao-AILab/flash-attention,
# benchmarks/benchmark_flash_attention.py, flops(): fwd_bwd = 3.5 x fwd). The model counts the
# backward at 2x (model FLOPs), so a quoted share keeps 3 / 3.5 of its rate in the model's count.
# Unfused attention's batched GEMMs recompute nothing; the fitted ATTENTION_RELATIVE_EFFICIENCY
# is already in the model's count.
FLASH_BENCHMARK_WORK = 3.5 / 3.0
# A causal kernel skips the masked half of the s^2 scores (model FLOPs count all of it).
CAUSAL_WORK_FRACTION = 0.5
# Share of HBM bandwidth elementwise/norm kernels and the optimizer reach.
HBM_EFFICIENCY = 0.7
# Elementwise kernels move each tensor this many times more than the fused minimum the
# workload layer counts (casts, bias, dropout masks, copies, launch gaps). Fitted for
# frameworks with fused kernels (Transformer Engine's LayerNorm+cast, SwiGLU, RoPE, flash
# attention); the unfused Megatron-LM of 2021-22 (no flash attention) moves at least as much:
# UNFUSED_ELEMENTWISE_RATIO (>= 1, fitted) times that.
ELEMENTWISE_TRAFFIC_FACTOR = 2.355
UNFUSED_ELEMENTWISE_RATIO = 1


class Gemm(NamedTuple):
    """Weight GEMMs of one kind: FLOPs, per-GPU (m x k) @ (k x n), the share of FLOPs in the
    low-precision format (0..1) and the tokens per expert of a grouped GEMM (None: plain)."""

    flops: Array
    m: Array
    n: Array
    k: Array
    low_share: Array = 0.0
    expert_tokens: Array | None = None


def peak_fraction(gpu: GPU) -> float:
    """Large-GEMM share of the dense BF16 peak for `gpu`'s generation."""
    return ARCH_PEAK_FRACTION.get(gpu.arch, DEFAULT_PEAK_FRACTION)


class FormatRates(NamedTuple):
    """Per format code: achieved large-GEMM TFLOP/s (`rate`) and the half-rate intensity I
    (`half`: FLOP per element triple, as `gemm_intensity`); BF16's two apart (code 0)."""

    rate: ByCode
    half: ByCode
    rate_bf16: float
    half_bf16: float


@by_identity()
def _format_rates(gpu: GPU) -> FormatRates:
    """`gpu`'s `FormatRates`; an unsupported format runs at the BF16 rate."""
    rate, half = [], []
    for f in FORMATS:
        peak = gpu.peak_tflops(f.peak) or gpu.peak_bf16_tflops
        rate.append(peak * peak_fraction(gpu) * FORMAT_EFFICIENCY[f.name])
        half.append(GEMM_RIDGE_MULTIPLE * peak / gpu.hbm_tbps * f.element_bytes / 2)
    return FormatRates(ByCode(rate), ByCode(half), rate[0], half[0])


def gemm_intensity(m: Array, n: Array, k: Array) -> Array:
    """MNK / (MK + KN + MN): FLOPs per byte of a 16-bit (m x k) @ (k x n) GEMM."""
    return m * n * k / (m * k + k * n + m * n)


def gemm_seconds(gpu: GPU, gemms: Sequence[Gemm], precision: Array = 0) -> Array:
    """Seconds of weight GEMMs, each at the rate of its shape, format (`precision`, a
    ``workload.precision`` code, for its `low_share`; BF16 for the rest) and grouping."""
    if gpu.gemm_efficiency is not None:
        return sum([g[0] for g in gemms]) / (gpu.peak_bf16_tflops * gpu.gemm_efficiency * 1e12)
    rates, halves, rate_bf16, half_bf16 = _format_rates(gpu)
    total = 0.0
    for flops, m, n, k, low_share, expert_tokens in gemms:
        if isinstance(flops, float) and flops == 0.0:  # no work: a dense model's experts, router
            continue
        intensity = m * n * k / (m * k + k * n + m * n)  # `gemm_intensity`, inlined (hot loop)
        # flops / (rate * I / (I + half)) = flops * (1 + half / I) / rate
        if isinstance(low_share, float) and low_share == 0.0:  # all 16-bit: the low part is 0
            per_flop = (1 + half_bf16 / intensity) / rate_bf16
        else:
            bf16 = (1 - low_share) * (1 + half_bf16 / intensity) / rate_bf16
            low = low_share * (1 + halves[precision] / intensity) / rates[precision]
            per_flop = bf16 + low
        seconds = flops * per_flop
        if expert_tokens is not None:  # a grouped GEMM
            seconds = seconds * (1 + GROUPED_GEMM_TOKENS / expert_tokens)
        total = total + seconds
    return total / 1e12


def attention_tflops(gpu: GPU, fp8: bool = False, flash: bool = True) -> float:
    """Achieved TFLOP/s of the attention core, counting model FLOPs (forward + 2x for the
    backward; a causal kernel's skipped half is taken off by the caller): BF16, or FP8
    (Megatron's ``--fp8-dot-product-attention``: cuDNN's FP8 attention, at the FP8 GEMMs'
    efficiency) where the GPU has FP8 tensor cores. `flash`: a fused kernel, which recomputes
    the scores in its backward (unfused attention's batched GEMMs do not)."""
    if gpu.gemm_efficiency is not None:
        return gpu.peak_bf16_tflops * gpu.gemm_efficiency
    share = ATTENTION_PEAK_FRACTION.get(gpu.arch)
    if share is None:
        share = peak_fraction(gpu) * ATTENTION_RELATIVE_EFFICIENCY
    elif flash:
        share /= FLASH_BENCHMARK_WORK
    bf16 = gpu.peak_bf16_tflops * share
    if not (fp8 and gpu.peak_fp8_tflops):
        return bf16
    return bf16 * gpu.peak_fp8_tflops / gpu.peak_bf16_tflops * FORMAT_EFFICIENCY["fp8-tensorwise"]


def elementwise_seconds(gpu: GPU, nbytes: Array, fused: bool = True) -> Array:
    """Time of HBM-bound elementwise work counted as `nbytes` fused bytes."""
    factor = ELEMENTWISE_TRAFFIC_FACTOR * (1.0 if fused else UNFUSED_ELEMENTWISE_RATIO)
    return nbytes * factor / hbm_bytes_per_s(gpu)


def hbm_bytes_per_s(gpu: GPU) -> float:
    """Achieved HBM bandwidth, bytes/s."""
    return gpu.hbm_tbps * 1e12 * HBM_EFFICIENCY
