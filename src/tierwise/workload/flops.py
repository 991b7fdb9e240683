"""Forward/training FLOPs and elementwise HBM bytes of a model, per GPU, vectorised.

Conventions (see README.md):

- 2 FLOPs per multiply-accumulate; every count is for one micro-batch of ``mbs`` sequences of
  ``seq`` tokens on one GPU of a (tp, cp) group. Arguments may be numpy arrays (broadcast).
- Attention scores and context (``QK^T`` and ``PV``) count the full ``s^2`` by default, as
  Megatron's formula and MFU conventions do; ``causal=True`` counts the half a causal kernel
  really computes. Model FLOPs (MFU) use the full ``s^2``.
- Training = 3 x forward; full recompute adds one forward of the layers (not the logits),
  selective recompute the forward of its modules (``workload/recompute.py``; Megatron's
  default: the attention core).
- Tensor parallelism splits heads and FFN columns; when ``tp > kv_heads`` each rank holds one
  whole KV head (replicated ``tp / kv_heads`` times) and computes its projection.
- Context parallelism: each rank holds ``seq / cp`` tokens; its queries meet all ``seq`` keys.
- MoE: a capacity factor pads every expert to ``cf * tokens * top_k / experts`` slots, so
  expert compute scales by ``cf``; dropless (None) computes exactly top_k per token.
- Elementwise bytes: norms, residual adds, rotary, MLP activation, MoE permute/unpermute in
  16-bit activations (also under fp8, whose GEMM inputs are cast inside the GEMM kernels);
  attention is a fused (flash) kernel, so softmax adds no HBM traffic. Norm/residual work is
  split over TP ranks only with sequence parallelism.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, TypeAlias

from tierwise.memo import Filled, by_identity
from tierwise.records import record
from tierwise.workload.params import (
    MTP_NORMS,
    MTP_PROJ_INPUTS,
    mla_latent_params,
    mla_params,
    norms_per_layer,
)
from tierwise.workload.recompute import DEFAULT_MASK, recomputes
from tierwise.workload.spec import ModelSpec, model_dims

if TYPE_CHECKING:
    import numpy as np

Array: TypeAlias = "float | np.ndarray"
"""A python float (one layout) or a numpy array (many); numpy loads only with the arrays."""


def minimum(a: Array, b: Array) -> Array:
    """Branchless minimum for python floats and numpy arrays alike."""
    return a + (b < a) * (b - a)


def maximum(a: Array, b: Array) -> Array:
    """Branchless maximum for python floats and numpy arrays alike."""
    return a + (b > a) * (b - a)


def pos(x: Array) -> Array:
    """max(x, 0) for scalars and arrays (a float either way)."""
    return x * (x > 0) + 0.0


FLOPS_PER_MAC = 2
TRAINING_PASSES = 3
"""Forward + backward (backward = 2 x forward: input and weight gradients)."""
CAUSAL_FRACTION = 0.5
"""Share of the ``s^2`` score matrix a causal kernel computes."""
ACT_BYTES = 2
"""Bytes per activation element in elementwise kernels (bf16)."""
RESIDUAL_ADDS_PER_LAYER = 2
ELEMENTWISE_BACKWARD_FACTOR = 2.0
"""Backward elementwise traffic / forward: reads saved input and output grad, writes grad."""
ACTIVATION_ELEMENTS = {"swiglu": 3, "geglu": 3, "gelu": 2, "squared-relu": 2}
"""Elements the MLP activation reads + writes per ffn column (SwiGLU: gate, up in; one out)."""
ELEMENTS_PER_NORM = 2
ELEMENTS_PER_RESIDUAL_ADD = 3
PERMUTES_PER_MOE_LAYER = 2
"""Token copies into expert order (dispatch) and back (combine), each a read + write."""
RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL = 0, 1, 2
"""Integer codes of ``Layout.recompute`` used by the vectorised functions."""
VOCAB_MULTIPLE = 128
"""Megatron pads the vocabulary to a multiple of this (``--make-vocab-size-divisible-by``)."""


def padded_vocab(vocab: int, multiple: int = VOCAB_MULTIPLE) -> int:
    """Vocabulary rounded up to ``multiple`` rows, as Megatron allocates the logits GEMM."""
    return -(-vocab // multiple) * multiple


def attention_proj_macs(m: ModelSpec) -> int:
    """Multiply-accumulates per token of one layer's attention projections (Q, K, V, output;
    MLA: its down/up projections and latent norms, as Megatron counts them)."""
    if m.mla is not None:
        return mla_params(m)
    return m.hidden * (m.q_dim + 2 * m.kv_dim + m.v_dim)


def causal_keys(m: ModelSpec, seq: Array) -> Array:
    """Keys a query meets under the causal mask, averaged over queries and over the layers.

    Global layers: ``seq / 2`` (Megatron's causal halving). Sliding window ``w``:
    ``w - w(w-1)/(2 seq)`` (exact mean of ``min(i+1, w)``) when ``w < seq``. Chunked
    attention of chunk ``c``: ``c / 2`` when ``c < seq`` (each chunk is its own causal block).
    """
    full = seq / 2
    local = m.local_attention
    if local is None or m.local_layers == 0:
        return full
    w = local.window
    within = seq > w
    span = w - w * (w - 1) / (2 * seq) if local.kind == "sliding" else w / 2
    local_keys = within * span + (1 - within) * full
    share = m.local_layers / m.layers
    return share * local_keys + (1 - share) * full


def core_attention_macs(m: ModelSpec, seq: Array) -> Array:
    """Multiply-accumulates per token of one (average) layer's causal attention core:
    ``keys x (q_dim + v_dim)`` for the scores and the context."""
    return causal_keys(m, seq) * (m.q_dim + m.v_dim)


def mlp_macs(m: ModelSpec, moe_layer: bool) -> int:
    """Multiply-accumulates per token of a layer's MLP (MoE: top_k routed + shared experts,
    no router)."""
    nmat = m.matmuls_per_mlp
    if not moe_layer or m.moe is None:
        return nmat * m.hidden * m.ffn
    moe = m.moe
    routed = moe.top_k * moe.expert_ffn_hidden
    return nmat * m.hidden * (routed + moe.shared_experts * moe.shared_ffn)


def model_flops_per_token(
    m: ModelSpec, seq: Array, *, vocab_multiple: int = VOCAB_MULTIPLE, causal: bool = True
) -> Array:
    """Training model FLOPs per token, as Megatron-LM / Megatron-Bridge count them.

    ``num_floating_point_operations`` (Megatron-LM ``megatron/training/training.py``;
    Megatron-Bridge ``src/megatron/bridge/training/utils/flop_utils.py``): 3 passes x 2 FLOPs
    per MAC over the attention projections, the causal-halved core (sliding windows exact),
    the dense MLPs or top_k routed + shared experts (no router), each MTP module as one more
    layer of the last layer's kind plus its norms, ``2h x h`` projection and its own logits,
    and the logits over the vocabulary padded to ``vocab_multiple``. No recompute.
    ``causal=False``: the full ``s^2`` core on every layer, as Megatron-LM counted before
    commit 8873b55d6a (2025-03-06), the convention of model TFLOP/s published until then.
    """
    h, mtp = m.hidden, m.mtp_layers
    core = core_attention_macs(m, seq) if causal else seq * (m.q_dim + m.v_dim)
    attention = attention_proj_macs(m) + core
    moe_layers = m.moe_layers + mtp * m.mtp_is_moe
    dense_layers = m.dense_layers + mtp * (not m.mtp_is_moe)
    layers = (m.layers + mtp) * attention + dense_layers * mlp_macs(m, False)
    layers = layers + moe_layers * mlp_macs(m, True)
    mtp_extra = mtp * (MTP_NORMS * h + MTP_PROJ_INPUTS * h * h)
    logits = h * padded_vocab(m.vocab, vocab_multiple) * (1 + mtp)
    return TRAINING_PASSES * FLOPS_PER_MAC * (layers + mtp_extra + logits)


class LayerFlops(NamedTuple):
    """Forward FLOPs and elementwise HBM bytes of one layer, one micro-batch, one GPU."""

    qkv: Array
    attention: Array
    """Scores and context (the ``s^2`` part)."""
    out: Array
    mlp: Array
    """Dense MLP, or the shared experts of a MoE layer."""
    router: Array
    experts: Array
    """Routed experts (top_k per token, times the capacity factor)."""
    elementwise_bytes: Array
    norm_bytes: Array = 0.0
    """Of ``elementwise_bytes``: the two pre-norms."""
    mlp_act_bytes: Array = 0.0
    """Of ``elementwise_bytes``: the activation function of the dense MLP (MoE layer: of the
    shared experts)."""
    expert_act_bytes: Array = 0.0
    """Of ``elementwise_bytes``: the routed experts' activation function."""
    permute_bytes: Array = 0.0
    """Of ``elementwise_bytes``: MoE token permute and unpermute."""
    up_proj: Array = 0.0
    """Of ``qkv``: MLA's up-projections (everything but the latent down-projections)."""

    @property
    def gemm(self) -> Array:
        """Weight-GEMM FLOPs (everything but the attention core)."""
        return self.qkv + self.out + self.mlp + self.router + self.experts

    @property
    def total(self) -> Array:
        """All forward FLOPs of the layer."""
        return self.gemm + self.attention


def kv_heads_per_rank(kv_heads: int, tp: Array) -> Array:
    """KV heads one TP rank holds: ``kv/tp``, or one (replicated) when ``tp > kv``."""
    share = kv_heads / tp
    return share + (share < 1) * (1 - share)


def layer_flops(
    m: ModelSpec,
    seq: Array,
    mbs: Array,
    *,
    tp: Array = 1,
    cp: Array = 1,
    sp: Array = True,
    moe_layer: bool = False,
    causal: bool = False,
) -> LayerFlops:
    """Forward cost of one dense (or, with ``moe_layer``, MoE) layer."""
    d = model_dims(m)
    h, nmat, q_dim, v_dim = m.hidden, d.matmuls_per_mlp, d.q_dim, d.v_dim
    tokens = mbs * seq / cp
    q_rank = q_dim / tp
    kv_rank = d.hd * kv_heads_per_rank(d.kv, tp)
    mac = FLOPS_PER_MAC * tokens
    keys = causal_keys(m, seq) / (CAUSAL_FRACTION if not causal else 1.0)
    attention = mac * keys * (q_dim + v_dim) / tp
    if m.mla is not None:  # latent down-projections whole on each TP rank, the rest split
        latents = mla_latent_params(m)
        up_proj = mac * (mla_params(m) - latents - v_dim * h) / tp
        qkv = mac * latents + up_proj
    else:
        qkv, up_proj = mac * h * (q_rank + 2 * kv_rank), 0.0
    # 16-bit bytes per token of the elementwise kernels: the norms, residual adds and
    # (MoE) permutes over the tokens a rank holds with SP, rotary over its heads.
    per_norm_token = ACT_BYTES * h / (1 + sp * (tp - 1))
    rope = ACT_BYTES * tokens * (q_rank + kv_rank) * 2 * (m.position == "rope")
    act_bytes = ACT_BYTES * tokens / tp * ACTIVATION_ELEMENTS[m.activation]
    norms = tokens * per_norm_token * norms_per_layer(m) * ELEMENTS_PER_NORM
    residual = tokens * per_norm_token * RESIDUAL_ADDS_PER_LAYER * ELEMENTS_PER_RESIDUAL_ADD
    if moe_layer and m.moe is not None:
        moe = m.moe
        routed = moe.top_k * (moe.capacity_factor or 1.0)
        mlp = mac * h * moe.shared_ffn * nmat * moe.shared_experts / tp
        experts = mac * h * moe.expert_ffn_hidden * nmat * routed / tp
        router = mac * h * moe.experts / tp
        mlp_act = act_bytes * moe.shared_experts * moe.shared_ffn
        expert_act = act_bytes * routed * moe.expert_ffn_hidden
        permute = tokens * per_norm_token * PERMUTES_PER_MOE_LAYER * moe.top_k * 2
    else:
        mlp = mac * h * d.ffn * nmat / tp
        experts = router = expert_act = permute = 0.0
        mlp_act = act_bytes * d.ffn
    elementwise = norms + residual + permute + rope + mlp_act + expert_act
    return record(LayerFlops, (
        qkv, attention, mac * v_dim / tp * h, mlp, router, experts,
        elementwise, norms, mlp_act, expert_act, permute, up_proj,
    ))  # fmt: skip


def logits_flops(m: ModelSpec, seq: Array, mbs: Array, *, tp: Array = 1, cp: Array = 1) -> Array:
    """Forward FLOPs of the output projection over the padded vocabulary (split over TP)."""
    return FLOPS_PER_MAC * mbs * seq / cp * m.hidden * padded_vocab(m.vocab) / tp


def head_flops(
    m: ModelSpec, seq: Array, mbs: Array, dense: LayerFlops, moe: LayerFlops, tp: Array, cp: Array
) -> Array:
    """Forward FLOPs after the last layer: the logits, and per MTP module one more layer of
    the last layer's kind, its ``2h x h`` projection and its own logits (on the last stage)."""
    logits = logits_flops(m, seq, mbs, tp=tp, cp=cp)
    if not m.mtp_layers:
        return logits
    return logits * (1 + m.mtp_layers) + mtp_flops(m, seq, mbs, dense, moe, tp, cp)


def mtp_flops(
    m: ModelSpec, seq: Array, mbs: Array, dense: LayerFlops, moe: LayerFlops, tp: Array, cp: Array
) -> Array:
    """Forward FLOPs of the MTP modules without their logits: per module one layer of the
    last layer's kind and its ``2h x h`` projection (where a layout places ``m``; the
    logits stay with the loss, as Megatron-core's GPTModel._postprocess computes them)."""
    layer = moe.total if m.mtp_is_moe else dense.total
    proj = FLOPS_PER_MAC * mbs * seq / cp * MTP_PROJ_INPUTS * m.hidden * m.hidden / tp
    return m.mtp_layers * (layer + proj)


def _layers(
    m: ModelSpec, seq: Array, mbs: Array, tp: Array, cp: Array, sp: Array, causal: bool
) -> tuple[LayerFlops, LayerFlops, Array]:
    """The dense and the MoE layer (the same object for a dense model) and the `head_flops`
    after them; one layout's (python ints) are memoised per spec by these few sizes, which a
    search's layouts share."""
    if (
        type(sp) is bool
        and type(seq) is int
        and type(mbs) is int
        and type(tp) is int
        and type(cp) is int
    ):
        return _layers_by_sizes(m)[seq, mbs, tp, cp, sp, causal]
    return _both_layers(m, seq, mbs, tp, cp, sp, causal)


@by_identity()
def _layers_by_sizes(m: ModelSpec) -> Filled[tuple, tuple[LayerFlops, LayerFlops, Array]]:
    """`_layers` of one layout by (seq, mbs, tp, cp, sp, causal), filled in as asked for."""
    return Filled(lambda key: _both_layers(m, *key))


def _both_layers(
    m: ModelSpec, seq: Array, mbs: Array, tp: Array, cp: Array, sp: Array, causal: bool
) -> tuple[LayerFlops, LayerFlops, Array]:
    """`_layers`, computed."""
    dense = moe = layer_flops(m, seq, mbs, tp=tp, cp=cp, sp=sp, causal=causal)
    if m.moe is not None:
        moe = layer_flops(m, seq, mbs, tp=tp, cp=cp, sp=sp, moe_layer=True, causal=causal)
    return dense, moe, head_flops(m, seq, mbs, dense, moe, tp, cp)


def forward_flops(
    m: ModelSpec,
    seq: Array,
    mbs: Array,
    *,
    tp: Array = 1,
    cp: Array = 1,
    causal: bool = False,
) -> Array:
    """Forward FLOPs of the whole model (all layers + logits) for one micro-batch, per GPU."""
    dense, moe, head = _layers(m, seq, mbs, tp, cp, True, causal)
    return m.dense_layers * dense.total + m.moe_layers * moe.total + head


class Recomputed(NamedTuple):
    """What selective recompute re-runs of one average layer, forward: attention-core FLOPs,
    weight-GEMM FLOPs and elementwise HBM bytes."""

    attention: Array
    gemm: Array
    elementwise_bytes: Array


NOTHING_RECOMPUTED = Recomputed(0.0, 0.0, 0.0)
OP_SAC_MATMUL_SHARE = 0.5
"""torchtitan's op-level SAC re-runs every second matmul of a layer: half of them by count,
taken as half of the weight-GEMM FLOPs (which matmuls alternate from call to call)."""


def selective_recompute(
    dense: LayerFlops, moe: LayerFlops, moe_share: float, modules: Array
) -> Recomputed:
    """The forward work the ``modules`` mask (``tierwise.workload.recompute``) re-runs per
    layer, dense and MoE layers in the model's proportion (``moe_share``). ``moe`` covers
    ``moe_act`` and ``shared_experts``."""
    core, norm = recomputes(modules, "core_attn"), recomputes(modules, "layernorm")
    whole_moe, up = recomputes(modules, "moe"), recomputes(modules, "mla_up_proj")
    act = maximum(whole_moe, recomputes(modules, "moe_act"))
    shared = maximum(whole_moe, recomputes(modules, "shared_experts"))
    dense_mlp, dense_share = recomputes(modules, "mlp"), 1 - moe_share
    op_sac = recomputes(modules, "op_sac")  # torchtitan: every second matmul, every other op
    attention = core * (dense_share * dense.attention + moe_share * moe.attention)
    gemm = dense_share * (dense_mlp * dense.mlp + up * dense.up_proj) + moe_share * (
        shared * moe.mlp + whole_moe * (moe.router + moe.experts) + up * moe.up_proj
    )
    gemm = gemm + op_sac * OP_SAC_MATMUL_SHARE * (dense_share * dense.gemm + moe_share * moe.gemm)
    elementwise = op_sac * (
        dense_share * dense.elementwise_bytes + moe_share * moe.elementwise_bytes
    ) + (1 - op_sac) * (
        norm * (dense_share * dense.norm_bytes + moe_share * moe.norm_bytes)
        + dense_share * dense_mlp * dense.mlp_act_bytes
        + moe_share
        * (shared * moe.mlp_act_bytes + act * moe.expert_act_bytes + whole_moe * moe.permute_bytes)
    )
    return Recomputed(attention, gemm, elementwise)


def training_flops(
    m: ModelSpec,
    seq: Array,
    mbs: Array,
    *,
    tp: Array = 1,
    cp: Array = 1,
    recompute: Array = RECOMPUTE_NONE,
    recompute_modules: Array = DEFAULT_MASK,
    causal: bool = False,
) -> Array:
    """Hardware FLOPs of forward + backward (+ recompute) for one micro-batch, per GPU;
    selective recompute re-runs the ``recompute_modules`` mask."""
    dense, moe, head = _layers(m, seq, mbs, tp, cp, True, causal)
    layers = m.dense_layers * dense.total + m.moe_layers * moe.total
    again = selective_recompute(dense, moe, m.moe_layers / m.layers, recompute_modules)
    selective = m.layers * (again.attention + again.gemm)
    extra = (recompute == RECOMPUTE_FULL) * layers + (recompute == RECOMPUTE_SELECTIVE) * selective
    return TRAINING_PASSES * (layers + head) + extra


def model_flops_per_step(m: ModelSpec, seq: Array, gbs: Array) -> Array:
    """Model FLOPs of one step over all GPUs, ``gbs x seq x model_flops_per_token`` (Megatron's
    counter, no recompute): the numerator of MFU and of model TFLOP/s per GPU."""
    if isinstance(seq, (int, float)):  # one layout: the per-token count is memoised
        per_token = _flops_per_token_by_seq(m)
        if seq not in per_token:
            per_token[seq] = float(model_flops_per_token(m, seq))
        return gbs * seq * per_token[seq]
    return gbs * seq * model_flops_per_token(m, seq)


@by_identity()
def _flops_per_token_by_seq(m: ModelSpec) -> dict[int | float, float]:
    """The model's FLOPs per token by sequence length, filled in as lengths are asked for."""
    return {}


def megatron_eq3_flops(gbs: Array, seq: Array, layers: int, hidden: int, vocab: int) -> Array:
    """Narayanan et al. SC'21 eq. 3: ``96 B s l h^2 (1 + s/6h + V/16lh)``, B = global batch.

    Counts the full-recompute forward (4 passes) of a GELU, ffn = 4h, MHA GPT.
    """
    h = hidden
    return 96 * gbs * seq * layers * h * h * (1 + seq / (6 * h) + vocab / (16 * layers * h))


class StageFlops(NamedTuple):
    """Training work of one micro-batch on one GPU of the busiest pipeline stage.

    The busiest stage is taken to hold ``ceil(layers / pp)`` layers (MoE and dense in the
    model's proportion) plus the logits.
    """

    model: Array
    """FLOPs without recompute."""
    hardware: Array
    """FLOPs with recompute."""
    attention: Array
    """Share of ``hardware`` in the attention core."""
    logits: Array
    """Share of ``hardware`` in the output projection (and the MTP modules, see
    ``head_flops``)."""
    elementwise_bytes: Array
    """HBM bytes of elementwise work (forward, backward, recompute)."""
    layers: Array
    """Layers on the stage."""
    dense_layer: LayerFlops
    """Forward cost of one dense layer."""
    moe_layer: LayerFlops
    """Forward cost of one MoE layer (the dense layer again for a dense model)."""


def flops_batch(
    m: ModelSpec,
    *,
    seq: Array,
    mbs: Array,
    tp: Array = 1,
    cp: Array = 1,
    pp: Array = 1,
    sp: Array = True,
    recompute: Array = RECOMPUTE_NONE,
    recompute_modules: Array = DEFAULT_MASK,
    stage_layers: Array | None = None,
    causal: bool = False,
    recompute_share: Array | None = None,
) -> StageFlops:
    """Per-stage training FLOPs and bytes for arrays of layout fields (one entry per layout);
    selective recompute re-runs the ``recompute_modules`` mask; full recompute the forward of
    `recompute_share` of the layers (None: all; `layout.partial_recompute_fields`)."""
    dense, moe, head = _layers(m, seq, mbs, tp, cp, sp, causal)
    n = stage_layers
    if n is None:
        import numpy as np

        n = np.ceil(m.layers / np.asarray(pp))
    moe_share = model_dims(m).moe_layers / m.layers
    dense_total = dense.total
    moe_total = dense_total if moe is dense else moe.total  # one object for a dense model
    per_layer = (1 - moe_share) * dense_total + moe_share * moe_total
    attn = (1 - moe_share) * dense.attention + moe_share * moe.attention
    ew = (1 - moe_share) * dense.elementwise_bytes + moe_share * moe.elementwise_bytes
    full = recompute == RECOMPUTE_FULL if recompute_share is None else recompute_share
    selective = recompute == RECOMPUTE_SELECTIVE
    logits = TRAINING_PASSES * head
    model = n * TRAINING_PASSES * per_layer + logits
    if selective is False:  # a python scalar without selective recompute: nothing re-runs
        again = NOTHING_RECOMPUTED
    else:
        again = selective_recompute(dense, moe, moe_share, recompute_modules)
    hardware = model + n * (full * per_layer + selective * (again.attention + again.gemm))
    attention = n * (attn * (TRAINING_PASSES + full) + selective * again.attention)
    ew_bytes = n * (
        ew * (1 + ELEMENTWISE_BACKWARD_FACTOR + full) + selective * again.elementwise_bytes
    )
    return record(StageFlops, (model, hardware, attention, logits, ew_bytes, n, dense, moe))
