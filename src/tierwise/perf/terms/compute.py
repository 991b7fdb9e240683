"""Compute of one micro-batch: the decoder layers' weight GEMMs, attention core and
elementwise work, and apart from them the logits GEMM and the cross-entropy loss (last
pipeline rank) and the input embedding (first rank).

Forward + backward (+ recompute): each weight GEMM at the efficiency of its per-GPU shape and
format (`tierwise.perf.efficiency.gemm_seconds`), the casts of its low-precision operands
(`tierwise.perf.precision`), the attention core at the fused-attention rate (a causal flash
kernel skips the masked half), HBM-bound elementwise work; unfused attention (no flash
kernel) computes every score and moves the score matrix through HBM. The
embedding is a row gather forward and a scatter-add into its fp32 gradient backward; under
TP each rank of the vocab-parallel table writes every token's row (masked).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple, TypeAlias

from tierwise.hardware.catalog import GPU
from tierwise.memo import Filled, by_identity
from tierwise.perf.efficiency import (
    CAUSAL_WORK_FRACTION,
    Gemm,
    attention_tflops,
    elementwise_seconds,
    gemm_seconds,
    hbm_bytes_per_s,
)
from tierwise.perf.precision import quantize_seconds
from tierwise.perf.terms.host import host_seconds
from tierwise.perf.terms.stage import Stage, modules_of
from tierwise.records import record
from tierwise.workload.flops import (
    ACT_BYTES,
    ELEMENTWISE_BACKWARD_FACTOR,
    PERMUTES_PER_MOE_LAYER,
    RECOMPUTE_SELECTIVE,
    Array,
    LayerFlops,
    padded_vocab,
)
from tierwise.workload.precision import LOW_PRECISION_SHARE
from tierwise.workload.recompute import recomputes
from tierwise.workload.spec import ModelSpec, model_dims

# Unfused attention (no flash kernel): HBM bytes per attention score element. Forward: fused
# scale-mask-softmax reads and writes 16-bit scores (4), dropout reads them, writes the
# dropped scores and a 1-byte mask (5). Backward: dropout grad (2 + 1 + 2), softmax grad
# reads the output and its grad and writes one (6). The batched GEMMs compute every score.
UNFUSED_SCORE_BYTES_FORWARD = 9
UNFUSED_SCORE_BYTES_BACKWARD = 11
# Cross-entropy loss, HBM bytes per logit (token x vocabulary entry on the rank): even fused
# (Megatron's --cross-entropy-loss-fusion) it reads the 16-bit logits forward, and reads them
# again and writes their gradient backward (2 + 2 + 2).
LOSS_BYTES_PER_LOGIT = 6
# Input embedding, HBM bytes per token and hidden element: forward reads the 16-bit row and
# writes the output (2 + 2); backward reads the output gradient (2) and reads and writes the
# fp32 gradient row (4 + 4).
EMBEDDING_BYTES_PER_ELEMENT = 14


class Compute(NamedTuple):
    """Seconds of one micro-batch's compute: the decoder layers of the stage (`gemm_s`,
    `attention_s`, `elementwise_s`), the logits GEMM (`logits_s`) and the loss over them
    (`loss_s`, HBM-bound) on the last rank, and the embedding on the first."""

    gemm_s: Array
    attention_s: Array
    elementwise_s: Array
    quantize_s: Array
    host_s: Array
    logits_s: Array
    loss_s: Array
    embedding_s: Array

    def scaled(self, factor: float) -> Compute:
        """Every GPU term times ``factor`` (a cluster's fitted compute rate: 1 / compute_scale);
        the host time MoE layers leave exposed is the CPU's and stays."""
        if factor == 1.0:
            return self
        return Compute(
            *(
                v if name == "host_s" else v * factor
                for name, v in zip(self._fields, self, strict=True)
            )
        )

    @property
    def layers_s(self) -> Array:
        """The stage's decoder layers."""
        return self.gemm_s + self.attention_s + self.elementwise_s + self.quantize_s + self.host_s


def layer_gemms(
    m: ModelSpec,
    layer: LayerFlops,
    tokens: Array,
    tp: Array,
    ep: Array,
    etp: Array,
    precision: Array,
    expert_load: Array = 1.0,
) -> list[Gemm]:
    """One layer's weight GEMMs (forward FLOPs, per-GPU M, N, K): QKV, output and MLP/expert
    (`layer`: the MoE layer of a MoE model) in the layout's format, the router in BF16. M =
    `tokens` of one micro-batch on one GPU; an expert's M: the tokens its EP group routes to
    it, `expert_load` times the mean on the busiest rank, which the others wait for (time,
    not FLOPs: the FLOPs are scaled by it too), run as a grouped GEMM; experts split their
    columns over etp."""
    h, moe, d = m.hidden, m.moe, model_dims(m)
    routed_share = moe.top_k * (moe.capacity_factor or 1.0) * ep / moe.experts if moe else 1.0
    expert_tokens = tokens * routed_share * etp / tp * expert_load
    low = LOW_PRECISION_SHARE[precision]
    ffn, q_dim = (moe.expert_ffn_hidden if moe else d.ffn), d.q_dim
    expert_gemm = (layer.experts * expert_load, expert_tokens, ffn / etp, h, low)
    return [
        record(Gemm, (layer.qkv, tokens, (q_dim + 2 * d.kv_dim) / tp, h, low, None)),
        record(Gemm, (layer.out, tokens, h, q_dim / tp, low, None)),
        record(Gemm, (layer.mlp, tokens, (moe.shared_ffn if moe else d.ffn) / tp, h, low, None)),
        record(Gemm, (*expert_gemm, expert_tokens if moe else None)),
        record(Gemm, (layer.router, tokens, moe.experts if moe else 1, h, 0.0, None)),
    ]


PricedGemms: TypeAlias = "tuple[tuple[Gemm, ...], Array, Array]"
"""One layer's weight GEMMs (`layer_gemms`), their seconds per FLOP, the logits GEMM's
seconds."""


def priced_gemms(m: ModelSpec, gpu: GPU, args: tuple) -> PricedGemms:
    """`layer_gemms(m, *args[:7])` and their seconds per FLOP on `gpu`, and the seconds of
    `args[7]` logits FLOPs; one layout's (python numbers) memoised per spec by the GPU's
    identity and `args`: (layer, tokens, tp, ep, etp, precision, expert_load, logits_flops)."""
    _, tokens, tp, ep, etp, precision, expert_load, logits_flops = args
    if not (  # arrays (or numpy scalars): no memo (a generator costs more than these tests)
        type(tokens) is float
        and type(expert_load) is float
        and type(logits_flops) is float
        and type(tp) is int
        and type(ep) is int
        and type(etp) is int
        and type(precision) is int
    ):
        return _priced(m, gpu, args)
    by_gpu = _priced_by_gpu(m)
    known = by_gpu.get(id(gpu))
    if known is None:  # (its fill holds the GPU: no other object can have its id)
        if len(by_gpu) >= _GPUS_KEPT:
            by_gpu.clear()
        known = by_gpu[id(gpu)] = Filled(partial(_priced, m, gpu))
    return known[args]


_GPUS_KEPT = 16


@by_identity()
def _priced_by_gpu(m: ModelSpec) -> dict[int, Filled[tuple, PricedGemms]]:
    """`priced_gemms`' memo of one spec, by the GPU's identity."""
    return {}


def _priced(m: ModelSpec, gpu: GPU, args: tuple) -> PricedGemms:
    """`priced_gemms`, computed (the GEMMs a tuple: a memoised value is shared)."""
    layer, tokens, tp, _, _, precision, _, logits_flops = args
    gemms = tuple(layer_gemms(m, *args[:7]))
    flops = layer.qkv + layer.out + layer.mlp + layer.experts + layer.router
    # The output layer is a plain (BF16) linear in Megatron.
    logits = record(Gemm, (logits_flops, tokens, m.vocab / tp, m.hidden, 0.0, None))
    return gemms, gemm_seconds(gpu, gemms, precision) / flops, gemm_seconds(gpu, [logits])


def permute_bytes(s: Stage) -> Array:
    """HBM bytes the workload counts for copying routed tokens into expert order and back
    (Megatron's permute / unpermute) on the stage, all passes: what a dispatcher changes."""
    m, f = s.model, s.f
    if m.moe is None:
        return 0.0
    routed = s.tokens / (1 + f["sp"] * (f["tp"] - 1)) * m.moe.top_k
    per_layer = ACT_BYTES * routed * PERMUTES_PER_MOE_LAYER * 2 * m.hidden
    passes = 1 + ELEMENTWISE_BACKWARD_FACTOR + (s.moe_passes - 2)
    return s.layers * (m.moe_layers / m.layers) * per_layer * passes


def recomputes_core_attention(f: dict[str, Any]) -> Array:
    """1 where selective recompute re-runs the attention core (Megatron's ``core_attn``)."""
    return (f["recompute"] == RECOMPUTE_SELECTIVE) * recomputes(modules_of(f), "core_attn")


def compute(
    s: Stage,
    flash_attention: bool = True,
    expert_load: Array = 1.0,
    permute_scale: Array = 1.0,
    cuda_graphs: bool = False,
    fp8_attention: bool = False,
) -> Compute:
    """Compute seconds of one micro-batch: the stage's layers (with the host time MoE layers
    leave exposed without CUDA graphs), the logits, the embedding; `expert_load`: the busiest
    expert rank's routed tokens over the mean; `permute_scale`: the dispatcher's permute
    traffic over the workload's (`permute_bytes`); `fp8_attention`: the attention core in
    FP8."""
    m, gpu, f, n, tokens, passes = s.model, s.gpu, s.f, s.layers, s.tokens, s.passes
    tp, cp, mbs, seq = f["tp"], f["cp"], f["mbs"], f["seq"]
    h, vocab, precision = m.hidden, m.vocab, f["precision"]
    # (locals: a named tuple's attribute is a slow lookup)
    _, hardware, attention_flops, logits_flops, elementwise_bytes, _, _, layer = s.flops
    # One layer's GEMMs scaled to the stage's FLOPs (the busiest expert rank's time); the
    # casts of every layer's operands.
    args = (layer, tokens, tp, f["ep"], f["etp"], precision, expert_load, logits_flops)
    gemms, per_flop, logits = priced_gemms(m, gpu, args)
    gemm = (hardware - attention_flops - logits_flops) * per_flop
    casts = passes - 1  # forward passes
    quantize = n * quantize_seconds(gpu, gemms, precision, casts)
    work = CAUSAL_WORK_FRACTION if flash_attention else 1.0
    attention = (
        attention_flops * work / (attention_tflops(gpu, fp8_attention, flash_attention) * 1e12)
    )
    elementwise = elementwise_seconds(
        gpu, elementwise_bytes + (permute_scale - 1) * permute_bytes(s), fused=flash_attention
    )
    if not flash_attention:
        scores = n * mbs * m.heads / tp * seq / cp * seq
        forwards = passes - 1 + recomputes_core_attention(f)
        score_bytes = UNFUSED_SCORE_BYTES_FORWARD * forwards + UNFUSED_SCORE_BYTES_BACKWARD
        elementwise = elementwise + scores * score_bytes / hbm_bytes_per_s(gpu)
    embedding = tokens * h * EMBEDDING_BYTES_PER_ELEMENT / hbm_bytes_per_s(gpu)
    loss = elementwise_seconds(gpu, tokens * padded_vocab(vocab) / tp * LOSS_BYTES_PER_LOGIT)
    host = host_seconds(s, cuda_graphs)
    return record(Compute, (gemm, attention, elementwise, quantize, host, logits, loss, embedding))
