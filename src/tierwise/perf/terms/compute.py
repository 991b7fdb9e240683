"""Compute of one micro-batch on the busiest stage: weight GEMMs, attention core, elementwise.

Forward + backward (+ recompute): each weight GEMM at the efficiency of its per-GPU shape and
format (`tierwise.perf.efficiency.gemm_seconds`), the casts of its low-precision operands
(`tierwise.perf.precision`), the attention core at the fused-attention rate (a causal flash
kernel skips the masked half), HBM-bound elementwise work; unfused attention (no flash
kernel) computes every score and moves the score matrix through HBM.
"""

from __future__ import annotations

from typing import NamedTuple

from tierwise.perf.efficiency import (
    CAUSAL_WORK_FRACTION,
    Gemm,
    attention_tflops,
    elementwise_seconds,
    gemm_seconds,
    hbm_bytes_per_s,
)
from tierwise.perf.precision import quantize_seconds
from tierwise.perf.terms.stage import Stage
from tierwise.workload.flops import RECOMPUTE_FULL, Array, LayerFlops, logits_flops
from tierwise.workload.precision import LOW_PRECISION_SHARE
from tierwise.workload.spec import ModelSpec

# Unfused attention (no flash kernel): HBM bytes per attention score element. Forward: fused
# scale-mask-softmax reads and writes 16-bit scores (4), dropout reads them, writes the
# dropped scores and a 1-byte mask (5). Backward: dropout grad (2 + 1 + 2), softmax grad
# reads the output and its grad and writes one (6). The batched GEMMs compute every score.
UNFUSED_SCORE_BYTES_FORWARD = 9
UNFUSED_SCORE_BYTES_BACKWARD = 11


class Compute(NamedTuple):
    """Seconds of one micro-batch's compute on the busiest stage, by kind."""

    gemm_s: Array
    attention_s: Array
    elementwise_s: Array
    quantize_s: Array

    @property
    def total_s(self) -> Array:
        """All compute of the micro-batch."""
        return self.gemm_s + self.attention_s + self.elementwise_s + self.quantize_s


def stage_gemms(
    m: ModelSpec,
    layer: LayerFlops,
    logits: Array,
    tokens: Array,
    tp: Array,
    ep: Array,
    precision: Array,
) -> list[Gemm]:
    """One layer's weight GEMMs (forward FLOPs, per-GPU M, N, K): QKV, output, MLP/expert
    (`layer`: the MoE layer of a MoE model) in the layout's format, the router and the layer's
    share `logits` of the logits GEMM in BF16. M = `tokens` of one micro-batch on one GPU (an
    expert's: the tokens its EP group routes to it, a grouped GEMM)."""
    h, moe = m.hidden, m.moe
    routed_share = moe.top_k * (moe.capacity_factor or 1.0) * ep / moe.experts if moe else 1.0
    expert_tokens = tokens * routed_share
    low = LOW_PRECISION_SHARE[precision]
    ffn = moe.expert_ffn_hidden if moe else m.ffn
    return [
        Gemm(layer.qkv, tokens, (m.q_dim + 2 * m.kv_dim) / tp, h, low),
        Gemm(layer.out, tokens, h, m.q_dim / tp, low),
        Gemm(layer.mlp, tokens, (moe.shared_ffn if moe else m.ffn) / tp, h, low),
        Gemm(layer.experts, expert_tokens, ffn / tp, h, low, expert_tokens if moe else None),
        Gemm(layer.router, tokens, moe.experts if moe else 1, h),
        Gemm(logits, tokens, m.vocab / tp, h),
    ]


def compute(s: Stage, flash_attention: bool = True) -> Compute:
    """GEMM, attention and elementwise seconds of one micro-batch on the stage `s`."""
    m, gpu, f, sf, n = s.model, s.gpu, s.f, s.flops, s.layers
    tp, cp, mbs, seq = f["tp"], f["cp"], f["mbs"], f["seq"]
    precision = f["precision"]
    gemms = stage_gemms(
        m,
        sf.moe_layer,
        logits_flops(m, seq, mbs, tp=tp, cp=cp) / n,
        s.tokens,
        tp,
        f["ep"],
        precision,
    )
    # One layer's GEMMs scaled to the stage's FLOPs; the casts of every layer's operands.
    per_layer = sum([g.flops for g in gemms])
    gemm = (sf.hardware - sf.attention) * gemm_seconds(gpu, gemms, precision) / per_layer
    forwards = 1 + (f["recompute"] == RECOMPUTE_FULL)
    quantize = n * quantize_seconds(gpu, gemms, precision, forwards)
    work = CAUSAL_WORK_FRACTION if flash_attention else 1.0
    attention = sf.attention * work / (attention_tflops(gpu) * 1e12)
    elementwise = elementwise_seconds(gpu, sf.elementwise_bytes, fused=flash_attention)
    if not flash_attention:
        scores = n * mbs * m.heads / tp * seq / cp * seq
        forwards = 1 + (f["recompute"] > 0)
        score_bytes = UNFUSED_SCORE_BYTES_FORWARD * forwards + UNFUSED_SCORE_BYTES_BACKWARD
        elementwise = elementwise + scores * score_bytes / hbm_bytes_per_s(gpu)
    return Compute(gemm, attention, elementwise, quantize)
