"""Compute of one micro-batch on the busiest stage: weight GEMMs, attention core, elementwise.

Forward + backward (+ recompute): each weight GEMM at the efficiency of its per-GPU shape
(`tierwise.perf.efficiency.gemm_seconds`), the attention core at the fused-attention rate
(a causal flash kernel skips the masked half), HBM-bound elementwise work; unfused attention
(no flash kernel) computes every score and moves the score matrix through HBM.
"""

from __future__ import annotations

from typing import NamedTuple

from tierwise.hardware.catalog import GPU
from tierwise.perf.efficiency import (
    CAUSAL_WORK_FRACTION,
    attention_tflops,
    elementwise_seconds,
    gemm_seconds,
    hbm_bytes_per_s,
)
from tierwise.perf.terms.stage import Stage
from tierwise.workload.flops import Array, LayerFlops, logits_flops
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

    @property
    def total_s(self) -> Array:
        """All compute of the micro-batch."""
        return self.gemm_s + self.attention_s + self.elementwise_s


def stage_gemm_seconds(
    m: ModelSpec,
    gpu: GPU,
    layer: LayerFlops,
    logits: Array,
    tokens: Array,
    tp: Array,
    ep: Array,
    fp8: Array,
    total_flops: Array,
) -> Array:
    """Seconds of the stage's weight GEMMs: `total_flops` split as one layer's QKV, output,
    MLP/expert GEMMs (`layer`: the MoE layer of a MoE model) and its share `logits` of the
    logits GEMM are, each at the `gemm_seconds` rate of its per-GPU (M, N, K); M = `tokens`
    of one micro-batch on one GPU (an expert's: the tokens its EP group routes to it)."""
    h, moe = m.hidden, m.moe
    routed_share = moe.top_k * (moe.capacity_factor or 1.0) * ep / moe.experts if moe else 1.0
    expert_tokens = tokens * routed_share
    parts = [
        (layer.qkv, tokens, (m.q_dim + 2 * m.kv_dim) / tp, h),
        (layer.out, tokens, h, m.q_dim / tp),
        (layer.mlp, tokens, (moe.shared_ffn if moe else m.ffn) / tp, h),
        (layer.experts, expert_tokens, (moe.expert_ffn_hidden if moe else m.ffn) / tp, h),
        (layer.router, tokens, moe.experts if moe else 1, h),
        (logits, tokens, m.vocab / tp, h),
    ]
    per_layer = sum([flops for flops, *_ in parts])
    return total_flops * gemm_seconds(gpu, parts, fp8) / per_layer


def compute(s: Stage, flash_attention: bool = True) -> Compute:
    """GEMM, attention and elementwise seconds of one micro-batch on the stage `s`."""
    m, gpu, f, sf, n = s.model, s.gpu, s.f, s.flops, s.layers
    tp, cp, mbs, seq = f["tp"], f["cp"], f["mbs"], f["seq"]
    gemm = stage_gemm_seconds(
        m,
        gpu,
        sf.moe_layer,
        logits_flops(m, seq, mbs, tp=tp, cp=cp) / n,
        s.tokens,
        tp,
        f["ep"],
        f["fp8"],
        sf.hardware - sf.attention,
    )
    work = CAUSAL_WORK_FRACTION if flash_attention else 1.0
    attention = sf.attention * work / (attention_tflops(gpu) * 1e12)
    elementwise = elementwise_seconds(gpu, sf.elementwise_bytes)
    if not flash_attention:
        scores = n * mbs * m.heads / tp * seq / cp * seq
        forwards = 1 + (f["recompute"] > 0)
        score_bytes = UNFUSED_SCORE_BYTES_FORWARD * forwards + UNFUSED_SCORE_BYTES_BACKWARD
        elementwise = elementwise + scores * score_bytes / hbm_bytes_per_s(gpu)
    return Compute(gemm, attention, elementwise)
