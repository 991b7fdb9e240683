"""Memory per GPU (bytes) of a training layout, per term, scalar or vectorised over layouts.

Model states (per parameter a rank holds; Rajbhandari et al. 2020, Megatron's
``docs/source/api-guide/dist_optimizer.md``):

- weights 2 B (bf16; a low-precision format adds its row- and column-wise quantized copies,
  ``workload/precision.py``), optimizer 12 B (fp32 master, Adam m, v);
- grads 2 B (bf16, DeepSpeed/FSDP mixed precision) — or 4 B (fp32 main grads) with Megatron's
  distributed optimizer, which keeps the full grad buffer and shards only the 12 B: 6 + 12/d
  (2 B again with ``--grad-reduce-in-bf16``, as NeMo's performance recipes set it);
- ZeRO-1 shards the optimizer, ZeRO-2 also the grads, ZeRO-3 (FSDP) also the weights, over
  dp*cp for non-expert parameters and over the expert-data-parallel group for routed experts,
  which ep (and etp) already split.

Activations per layer and micro-batch follow Korthikanti et al. 2022 (``sbh(34 + 5as/h)``,
with TP+SP ``/t``; see README.md for the GQA/SwiGLU/MoE/flash-attention generalisation).
Selective recompute drops what its modules hold (``recompute.py``); CPU offloading keeps
some layers' activations in host memory. A pipeline rank holds the chunks its schedule runs
forward before its first backward, plus one (`inflight_microbatches`: the first stage
``min(pp, m)`` micro-batches, ``pp + (pp-1)/vpp`` interleaved, never more than all ``m``;
the last one, which also holds one micro-batch's fp32 logits, one, ``pp - (pp-1)/vpp``
interleaved). The reported breakdown is that of the busiest stage.

All formulas are branchless arithmetic, so python scalars (fast) and numpy arrays both work.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from tierwise.frameworks import DUAL_SCHEDULES, PAIRED_SCHEDULE, V_SCHEDULES
from tierwise.memo import Filled, by_identity
from tierwise.records import record
from tierwise.workload.flops import (
    ACT_BYTES,
    RECOMPUTE_FULL,
    RECOMPUTE_NONE,
    RECOMPUTE_SELECTIVE,
    Array,
    kv_heads_per_rank,
    maximum,
    minimum,
)
from tierwise.workload.layout import Layout, layout_fields, middle_stage_layers
from tierwise.workload.params import (
    attention_params,
    embedding_params,
    expert_params,
    mla_latent_params,
    mlp_params,
    mtp_proj_params,
    norm_params,
    norms_per_layer,
    output_params,
    router_params,
    shared_expert_params,
)
from tierwise.workload.precision import ELEMENT_BYTES, IS_LOW, PRIMARY_LOW
from tierwise.workload.recompute import DEFAULT_MASK, framework_mask, recomputes
from tierwise.workload.spec import Dims, ModelSpec, model_dims

GiB = 2**30

WEIGHT_BYTES = 2
"""bf16 weights."""
LOW_PRECISION_WEIGHT_COPIES = 2
"""Quantized copies of each weight Transformer Engine caches under a low-precision format: the
row-wise one for fprop and the column-wise (transposed) one for dgrad."""
GRAD_BYTES_BF16 = 2
GRAD_BYTES_FP32 = 4
"""fp32 main grads: Megatron's for bf16 training (with or without its distributed optimizer),
torchtitan's FSDP2 float32 reduce."""
OPTIMIZER_BYTES = 12
"""Adam in mixed precision: fp32 master weight, first and second moment (ZeRO's K = 12)."""

DROPOUT_MASK_BYTES = 1
SOFTMAX_STORE_BYTES = 2
"""Unfused attention: 16-bit softmax output (Korthikanti's 2as^2b)."""
SOFTMAX_DROPOUT_BYTES = 3
"""Unfused attention with dropout: mask (1) + dropped output (2) per score."""
FLASH_LSE_BYTES = 4
"""Flash attention stores one fp32 log-sum-exp per query and head instead of the scores."""
ROUTER_BYTES_PER_EXPERT = 8
"""fp32 router logits and probabilities per token and expert."""
MLP_ACT_STORE = {"swiglu": 6, "geglu": 6, "gelu": 4, "squared-relu": 4}
"""Bytes kept per token per ffn column: GELU in + fc2 in (2+2); SwiGLU gate, up, fc2 in."""
REPLICATED_INPUTS_PER_LAYER = 4
"""16-bit tensors of width hidden kept whole without SP: norm1, qkv, norm2 and fc1 inputs."""
LINEAR_INPUTS_REPLICATED = 2
"""Of those, the inputs of a linear layer (QKV, fc1), which Transformer Engine may quantize."""
RECOMPUTE_INPUT_BYTES = 2
"""Full recompute keeps only each layer's 16-bit input."""
LOGITS_BYTES = 4
"""fp32 logits for the loss (s*b*V/t)."""

FSDP_PREFETCH_LAYERS = 2
"""ZeRO-3/FSDP: the layer being computed and the one being gathered ahead, in bf16."""
FSDP_REDUCE_BYTES = 4
"""ZeRO-3/FSDP: one layer's unsharded grads before the fp32 reduce-scatter."""
NCCL_BYTES_PER_GROUP = 128 * 2**20
"""NCCL buffers of one communicator: 16 channels x (send + recv) x 4 MiB NCCL_BUFFSIZE."""
CUDA_CONTEXT_BYTES = 0.5 * GiB
"""CUDA context, kernels and library handles."""
WORKSPACE_BYTES = 0.5 * GiB
"""cuBLAS / Transformer Engine / flash-attention workspaces."""
FRAGMENTATION = 0.05
"""Caching-allocator fragmentation, as a fraction of everything else."""


class MemoryBreakdown(NamedTuple):
    """Bytes per GPU by term, for the pipeline stage that needs most (``stage``: 0 or pp-1)."""

    weights: Array
    grads: Array
    optimizer: Array
    fsdp_buffers: Array
    activations: Array
    logits: Array
    comm_buffers: Array
    overhead: Array
    stage: Array
    host_offload: Array = 0.0
    """Bytes of one micro-batch's activations CPU offloading keeps in host memory (not on the
    GPU, not in the total)."""

    @property
    def model_states(self) -> Array:
        """Weights + grads + optimizer states."""
        return self.weights + self.grads + self.optimizer

    @property
    def total_bytes(self) -> Array:
        """Everything on the GPU."""
        return sum(self[:_GPU_TERMS])

    @property
    def total_gib(self) -> Array:
        """Total in GiB (2^30 bytes)."""
        return self.total_bytes / GiB

    def take(self, index: Any) -> MemoryBreakdown:
        """The breakdown of the layouts at `index` (a mask or indices) of a batch."""
        import numpy as np

        return MemoryBreakdown(*(v[index] if np.ndim(v) else v for v in self))

    def to_gib_dict(self) -> dict[str, float]:
        """Scalar breakdown for JSON: ``<term>_gib`` keys plus ``total_gib``, ``stage`` and
        ``host_offload_gib`` (one micro-batch's activations in host memory)."""
        out = {key: float(self[i]) / GiB for i, key in enumerate(GIB_KEYS)}
        out["total_gib"] = sum(out.values())  # in the terms' order
        out["stage"] = int(self.stage)
        out["host_offload_gib"] = float(self.host_offload) / GiB
        return out


_GPU_TERMS = MemoryBreakdown._fields.index("stage")
MEMORY_TERMS = MemoryBreakdown._fields[:_GPU_TERMS]
"""The byte terms of :class:`MemoryBreakdown` on the GPU, in order (its first fields)."""
GIB_KEYS = tuple(f"{name}_gib" for name in MEMORY_TERMS)


def main_grad_bytes(grad_reduce_bf16: Array) -> Array:
    """Bytes per gradient element held and reduced: 4 for fp32 main grads (Megatron's default
    for bf16 training, torchtitan's FSDP2 float32 reduce), 2 where they stay 16-bit
    (``--grad-reduce-in-bf16``, fp16 training, DeepSpeed's default)."""
    return GRAD_BYTES_BF16 + (1 - grad_reduce_bf16) * (GRAD_BYTES_FP32 - GRAD_BYTES_BF16)


def model_state_bytes(
    params: Array,
    *,
    zero: Array,
    shard: Array,
    distributed_optimizer: Array = False,
    grad_reduce_bf16: Array = False,
    precision: Array = 0,
    low_precision_params: Array = False,
) -> tuple[Array, Array, Array]:
    """(weights, grads, optimizer) bytes on one rank for ``params`` it holds before ZeRO.

    ``shard`` is the number of ranks that share this copy (dp*cp, or expert-dp for experts).
    ``low_precision_params``: Megatron's ``--fp8-param-gather`` (Megatron-Bridge's FP8 and
    MXFP8 recipes set it): with a sharded optimizer, whose fp32 master is the only
    high-precision copy, the model's weights are held in the format alone, no BF16 copy.
    """
    opt_sharded = (zero >= 1) | distributed_optimizer
    grad_bytes = main_grad_bytes(grad_reduce_bf16)
    if isinstance(precision, int) and precision == 0:  # one BF16 layout: BF16 weights only
        weight_bytes = WEIGHT_BYTES
    else:
        copies = IS_LOW[precision] * LOW_PRECISION_WEIGHT_COPIES * ELEMENT_BYTES[precision]
        bf16_copy = 1 - low_precision_params * PRIMARY_LOW[precision] * opt_sharded
        weight_bytes = bf16_copy * WEIGHT_BYTES + copies
    weights = params * weight_bytes / (1 + (zero >= 3) * (shard - 1))
    grads = params * grad_bytes / (1 + (zero >= 2) * (shard - 1))
    optimizer = params * OPTIMIZER_BYTES / (1 + opt_sharded * (shard - 1))
    return weights, grads, optimizer


@dataclass(frozen=True)
class _Shape:
    """Model-only quantities the memory model needs, computed once per spec (elements/bytes)."""

    attn_split: float
    """Attention params split by TP: everything but the K and V weights (MLA: but the
    latent down-projections and their norms)."""
    kv_weights_per_head: float
    """K and V weights of one KV head (MLA: 0, its KV heads are never replicated)."""
    dense_layer_split: float
    """Dense-MLP params (split by TP)."""
    moe_layer_split: float
    """Shared-expert params (split by TP)."""
    layer_whole: float
    """Norms and MLA's latent down-projections (not split by TP)."""
    act_attention_whole: float
    """Activation bytes per token of MLA's Q and KV latents (kept whole on every TP rank)."""
    mtp_extra: float
    """Params of the MTP modules' own parts (norms, projection) on the last stage."""
    router: float
    expert: float
    """One routed expert."""
    embedding: float
    output: float
    tied: float
    """Embedding rows Megatron copies to the last stage when tied (vocab*hidden or 0)."""
    final_norm: float
    act_mlp_dense: float
    """Activation bytes per token of a dense MLP before the TP split."""
    act_mlp_routed: float
    """Activation bytes per token of the routed experts (top_k x capacity factor) before the
    expert-TP split."""
    act_mlp_shared: float
    """Activation bytes per token of the shared experts before the TP split."""
    act_dispatch: float
    """Bytes per token of MoE token permutation: the top_k dispatched copies of the input and
    their expert outputs before the combine (h wide, 16-bit)."""
    act_router: float
    """fp32 router logits and probabilities per token."""
    dims: Dims
    """The spec's derived sizes."""
    store: int
    """`MLP_ACT_STORE` of the model's activation."""
    layer_kinds: tuple[tuple[bool, float], ...]
    """(MoE layer, share of the layers) of each layer kind the model has."""
    mixed: bool
    """Stages may differ in kind: leading dense layers of a MoE model, or MTP modules."""
    mtp_dense: bool
    """The MTP modules repeat a dense layer (the last layer is dense)."""


@by_identity()
def _shape(m: ModelSpec) -> _Shape:
    h, moe, mla, dims = m.hidden, m.moe, m.mla, model_dims(m)
    store = MLP_ACT_STORE[m.activation]
    routed = shared = dispatch = router = 0.0
    if moe is not None:
        copies = moe.top_k * (moe.capacity_factor or 1.0)
        routed = store * copies * moe.expert_ffn_hidden
        shared = store * moe.shared_experts * moe.shared_ffn
        dispatch = 2 * copies * ACT_BYTES * h
        router = ROUTER_BYTES_PER_EXPERT * moe.experts
    if mla is None:
        latents = latent_acts = 0.0
        attn_split, kv_per_head = attention_params(m) - 2 * h * m.kv_dim, 2 * h * m.hd
    else:  # Megatron keeps the down-projections (and their outputs) whole on each TP rank
        latents = mla_latent_params(m)
        latent_acts = ACT_BYTES * ((mla.q_lora_rank or 0) + mla.kv_lora_rank + mla.qk_rope_head_dim)
        attn_split, kv_per_head = attention_params(m) - latents, 0.0
    return _Shape(
        attn_split=attn_split,
        kv_weights_per_head=kv_per_head,
        dense_layer_split=mlp_params(m, m.ffn),
        moe_layer_split=shared_expert_params(m),
        layer_whole=norms_per_layer(m) * norm_params(m) + latents,
        act_attention_whole=latent_acts,
        mtp_extra=mtp_proj_params(m),
        router=router_params(m),
        expert=expert_params(m),
        embedding=embedding_params(m),
        output=output_params(m),
        tied=m.tied_embeddings * m.vocab * h,
        final_norm=norm_params(m),
        act_mlp_dense=store * m.ffn,
        act_mlp_routed=routed,
        act_mlp_shared=shared,
        act_dispatch=dispatch,
        act_router=router,
        dims=dims,
        store=store,
        layer_kinds=((False, dims.dense_layers / m.layers),)
        + (((True, dims.moe_layers / m.layers),) if moe else ()),
        mixed=0 < dims.dense_layers < m.layers or m.mtp_layers > 0,
        mtp_dense=not dims.mtp_is_moe,
    )


def expert_token_share(tp: Array, sp: Array, etp: Array) -> Array:
    """Tokens a rank routes to experts, per token of its micro-batch shard (``seq/cp``): its
    sequence-parallel share (``1/tp`` with SP) gathered over its expert-TP group (``etp``),
    at most all of them. Each is dispatched ``top_k`` times."""
    rep = 1 / (1 + sp * (tp - 1))
    return minimum(rep * etp, 1.0)


def activation_bytes_per_token(
    m: ModelSpec,
    seq: Array,
    *,
    tp: Array = 1,
    sp: Array = False,
    etp: Array | None = None,
    moe_layer: bool = False,
    flash_attention: bool = True,
    dropout: bool = False,
    linear_bytes: Array = ACT_BYTES,
    discard: Array = 0,
    cache_expert_inputs: bool = False,
    shape: _Shape | None = None,
) -> tuple[Array, Array, Array]:
    """Bytes per local token of one layer: (kept without recompute, s^2 part, layer input).

    Local tokens are ``seq/cp``; the s^2 part's keys span the whole ``seq`` (ring attention).
    The first term excludes the s^2 part; full recompute keeps only the layer input. Attention
    keeps Q, K, V and the output projection's input, split by TP (MLA: plus its Q and KV
    latents, whole on every rank). A MoE layer keeps the router's fp32 scores, the ``top_k``
    permuted copies of each token and their expert outputs, and the experts' intermediates: a
    rank holds the tokens of its sequence shard (``1/tp`` with SP) gathered over its expert-TP
    group (``etp``, default tp), and the routed experts' columns split by etp; the shared
    experts run as a TP-split dense MLP. Balanced routing: ep does not change the per-rank
    count (each rank's local experts get top_k x its tokens).
    ``linear_bytes``: bytes per element of the inputs the linear layers keep for wgrad (QKV,
    fc1 and expert fc1 inputs, the out-projection and fc2 inputs), less than 16 bits where
    Transformer Engine keeps them quantized. ``discard``: the mask of the selective-recompute
    modules (``tierwise.workload.recompute``) whose tensors are not kept; the s^2 part is
    dropped by ``core_attn``, which the caller applies. ``cache_expert_inputs``: DeepSeek-V3's
    low-precision activation caching of the routed experts (technical report, section 3.3.3):
    each expert keeps only its dispatched input and its SwiGLU input, both in the linear
    inputs' format, and recomputes the SwiGLU output in backward; the routing weight's
    gradient is then taken at the down-projection's input, so the expert outputs before the
    combine are not kept. ``shape``: the model's `_shape`, where the caller has it.
    """
    shape, h = _shape(m) if shape is None else shape, m.hidden
    etp = tp if etp is None else etp
    rep = 1 / (1 + sp * (tp - 1))  # share of "replicated" tensors a TP rank holds
    low = ACT_BYTES - linear_bytes  # bytes a quantized linear input saves per element
    store, dims = shape.store, shape.dims
    q_dim, v_dim = dims.q_dim, dims.v_dim
    kv_rank = dims.hd * kv_heads_per_rank(dims.kv, tp) if m.mla is None else dims.kv_dim / tp
    replicated = (REPLICATED_INPUTS_PER_LAYER * ACT_BYTES + 2 * dropout * DROPOUT_MASK_BYTES) * h
    # Q, K, V and the output projection's input (context, v_dim wide)
    qkv = ACT_BYTES * (q_dim / tp + kv_rank + kv_rank * v_dim / q_dim)
    attention = qkv + ACT_BYTES * v_dim / tp + shape.act_attention_whole * rep
    if flash_attention:
        scores = FLASH_LSE_BYTES * m.heads / tp
    else:
        scores = (SOFTMAX_STORE_BYTES + dropout * SOFTMAX_DROPOUT_BYTES) * m.heads / tp * seq

    # An MLP keeps `store` bytes per column, its fc2 input (one of them) quantized.
    fc2_kept = 1 - low / store
    if moe_layer and m.moe is not None:
        gathered = expert_token_share(tp, sp, etp)
        shared = fc2_kept * shape.act_mlp_shared / tp
        if cache_expert_inputs:  # the dispatched inputs and the SwiGLU inputs, quantized
            act_inputs = store / ACT_BYTES - 1  # columns of the activation's input: SwiGLU 2
            routed = gathered * shape.act_mlp_routed / etp / store * act_inputs * linear_bytes
            routed = routed + gathered * shape.act_dispatch / (2 * ACT_BYTES) * linear_bytes
            expert_act = 0.0  # nothing left for moe_act to free
        else:
            routed_body = gathered * shape.act_mlp_routed / etp
            dispatch = gathered * shape.act_dispatch  # expert fc1 inputs (half) and outputs
            routed = fc2_kept * routed_body + dispatch * (1 - low / (2 * ACT_BYTES))
            expert_act = linear_bytes * routed_body / store  # the expert fc2 inputs
        mlp = shared + routed + shape.act_router * rep
        dense_mlp, fc2_inputs = 0.0, shape.act_mlp_shared / tp  # (shared experts')
    else:
        mlp = dense_mlp = fc2_kept * shape.act_mlp_dense / tp
        shared = expert_act = 0.0
        fc2_inputs = shape.act_mlp_dense / tp
    # Quantized linear inputs besides the MLPs': QKV and fc1 (whole width), out-projection.
    kept = (
        replicated * rep + attention + mlp - low * (LINEAR_INPUTS_REPLICATED * h * rep + v_dim / tp)
    )
    norms = LINEAR_INPUTS_REPLICATED * linear_bytes * h * rep
    if isinstance(discard, int) and discard == 0:  # one layout, nothing recomputed
        return kept, scores, RECOMPUTE_INPUT_BYTES * h * rep
    up_proj = qkv if m.mla is not None else 0.0
    moe_whole = recomputes(discard, "moe") * (mlp - dense_mlp)
    # Transformer Engine fuses a norm into the linear layer after it (QKV, fc1), leaving no
    # norm module to recompute, except MLA's input norm and a MoE layer's pre-MLP norm
    # (megatron/core/models/gpt/gpt_layer_specs.py, get_gpt_layer_with_transformer_engine_spec).
    norm_modules = (m.mla is not None) + (moe_layer and m.moe is not None)
    freed = (
        recomputes(discard, "layernorm") * norms * norm_modules / LINEAR_INPUTS_REPLICATED
        + recomputes(discard, "mlp") * dense_mlp
        + moe_whole
        + (1 - recomputes(discard, "moe"))
        * (
            recomputes(discard, "moe_act") * expert_act
            + recomputes(discard, "shared_experts") * shared
        )
        + recomputes(discard, "mla_up_proj") * up_proj
        + recomputes(discard, "op_sac") * (norms + expert_act + linear_bytes * fc2_inputs / store)
    )
    return kept - freed, scores, RECOMPUTE_INPUT_BYTES * h * rep


def _layer_activation(
    m: ModelSpec, key: tuple, cache_expert_inputs: bool
) -> tuple[Array, Array, Array]:
    """`activation_bytes_per_token` of `key`: (seq, tp, sp, etp, moe_layer, flash_attention,
    dropout, precision, discard); one layout's (python ints) memoised per spec by the key."""
    seq, tp, sp, etp, _, _, _, precision, discard = key
    if not (  # arrays (or numpy scalars): no memo (a generator costs more than these tests)
        type(sp) is bool
        and type(seq) is int
        and type(tp) is int
        and type(etp) is int
        and type(precision) is int
        and type(discard) is int
    ):
        return _activation(m, key, cache_expert_inputs)
    return _activations_by_key(m)[cache_expert_inputs][key]


def _activation(m: ModelSpec, key: tuple, cache: bool) -> tuple[Array, Array, Array]:
    """`activation_bytes_per_token` of `_layer_activation`'s key, computed."""
    seq, tp, sp, etp, moe_layer, flash, dropout, precision, discard = key
    return activation_bytes_per_token(
        m,
        seq,
        tp=tp,
        sp=sp,
        etp=etp,
        moe_layer=moe_layer,
        flash_attention=flash,
        dropout=dropout,
        linear_bytes=ELEMENT_BYTES[precision],
        discard=discard,
        cache_expert_inputs=cache,
        shape=_shape(m),
    )


@by_identity()
def _activations_by_key(m: ModelSpec) -> tuple[Filled[tuple, Any], Filled[tuple, Any]]:
    """`_layer_activation`'s memo of one spec, without and with `cache_expert_inputs`."""
    return Filled(partial(_activation, m, cache=False)), Filled(partial(_activation, m, cache=True))


def inflight_microbatches(
    pp: Array, vpp: Array, micro: Array, group: Array, rank: Array, ahead: int = 0
) -> Array:
    """Micro-batches' worth of its stage's activations pipeline rank `rank` holds at its peak:
    the chunks (micro-batch x virtual stage) its schedule runs forward before the first
    backward, plus the one the steady state adds, never more than all ``micro * vpp`` of them,
    over `vpp` chunks a micro-batch. Megatron's get_pp_rank_microbatches
    (megatron/core/pipeline_parallel/schedules.py): ``pp - rank - 1`` warmup forwards, or
    interleaved ``2 (pp - rank - 1) + (vpp - 1) group`` (`group`: micro-batches per group,
    --microbatch-group-size-per-virtual-pipeline-stage), all of them when that reaches the
    total; `ahead` more interleaved (1 with --overlap-moe-expert-parallel-comm, which runs one
    more forward before the steady state). Rank 0 with group = pp: ``pp + (pp - 1)/vpp``
    (Narayanan et al. 2021), ``min(pp, micro)`` without interleaving."""
    warmup = (pp - rank - 1) * (1 + (vpp > 1)) + (vpp - 1) * group + ahead * (vpp > 1)
    return minimum(micro * vpp, warmup + 1) / vpp


def memory_batch(
    m: ModelSpec,
    *,
    tp: Array = 1,
    cp: Array = 1,
    ep: Array = 1,
    etp: Array | None = None,
    pp: Array = 1,
    vpp: Array = 1,
    dp: Array = 1,
    mbs: Array = 1,
    gbs: Array | None = None,
    seq: Array,
    sp: Array = True,
    recompute: Array = RECOMPUTE_NONE,
    recompute_modules: Array = DEFAULT_MASK,
    activation_offload_layers: Array = 0,
    zero: Array = 0,
    distributed_optimizer: Array = False,
    grad_reduce_bf16: Array = False,
    precision: Array = 0,
    low_precision_params: bool = False,
    first_stage_layers: Array | None = None,
    last_stage_layers: Array | None = None,
    flash_attention: bool = True,
    dropout: bool = False,
    schedule: str = "1F1B",
    mtp_rank: int | None = None,
    mtp_rank_layers: int = 0,
    zero3_buffer_bytes: Array | None = None,
    cache_expert_inputs: bool = False,
    microbatch_group: Array | None = None,
    warmup_ahead: int = 0,
    recompute_share: Array | None = None,
    recompute_group: Array = 1,
) -> MemoryBreakdown:
    """Memory per GPU; layout fields are scalars or numpy arrays (see ``layouts_to_arrays``).

    ``sp`` should already be False where tp == 1 (it has no effect then anyway). Stage layer
    counts default to ``layers / pp``. ``flash_attention=False, dropout=True`` reproduces
    Korthikanti et al.'s unfused-attention accounting. ``schedule``: the pipeline schedule
    (`tierwise.frameworks.SCHEDULES`): DualPipe and DualPipeV hold their stages as
    `_dual_ranks` says, a V schedule the head on rank 0. ``mtp_rank``: the pipeline rank a
    layout string places the MTP layers on, with ``mtp_rank_layers`` decoder layers (one
    layout; None: with the head). ``zero3_buffer_bytes``: a
    framework's own ZeRO-3 working buffers (DeepSpeed's live-parameter and bucket limits),
    instead of two gathered layers and one layer's gradients. ``cache_expert_inputs``:
    DeepSeek-V3's expert activation caching (``activation_bytes_per_token``).
    ``microbatch_group``: Megatron's --microbatch-group-size-per-virtual-pipeline-stage (None:
    pp), which sets how far the interleaved warmup runs ahead (`inflight_microbatches`), and
    ``warmup_ahead`` chunks more (its `ahead`).
    ``recompute_share`` / ``recompute_group``: full recompute other than layer by layer
    (`layout.partial_recompute_fields`): the share of layers that keep only their input, one
    input kept per group of `recompute_group` layers, a group rematerialised at a time.
    """
    shape, moe_cfg, h = _shape(m), m.moe, m.hidden
    etp = tp if etp is None else etp
    gbs = mbs * dp if gbs is None else gbs
    n_first = m.layers / pp if first_stage_layers is None else first_stage_layers
    n_last = m.layers / pp if last_stage_layers is None else last_stage_layers
    single = pp == 1

    # Parameters one rank holds per layer kind: non-expert part, and routed experts.
    attn = shape.attn_split / tp + shape.kv_weights_per_head * kv_heads_per_rank(shape.dims.kv, tp)
    dense_layer = attn + shape.layer_whole + shape.dense_layer_split / tp
    moe_layer = attn + shape.layer_whole + shape.router + shape.moe_layer_split / tp
    experts_rank = (moe_cfg.experts / ep if moe_cfg else 0) * shape.expert / etp
    biggest_layer = maximum(dense_layer, moe_layer + experts_rank) if moe_cfg else dense_layer

    # Activations per local token of an average layer (dense/MoE in the model's proportion).
    tokens = mbs * seq / cp
    full = recompute == RECOMPUTE_FULL if recompute_share is None else recompute_share
    offloading = not (isinstance(activation_offload_layers, int) and activation_offload_layers == 0)
    discard = (recompute == RECOMPUTE_SELECTIVE) * recompute_modules
    keep_scores = (1 - full) * (1 - recomputes(discard, "core_attn"))
    working = kept = 0.0
    for is_moe, share in shape.layer_kinds:
        act, scores, inp = _layer_activation(
            m,
            (seq, tp, sp, etp, is_moe, flash_attention, dropout, precision, discard),
            cache_expert_inputs,
        )
        working = working + share * (act + scores)
        kept = kept + share * (
            full * inp / recompute_group + (1 - full) * act + keep_scores * scores
        )

    rep = 1 / (1 + sp * (tp - 1))
    groups = 1 * (tp > 1) + 1 * (cp > 1) + 1 * (ep > 1) + 1 * (pp > 1) + 1 * (dp > 1)
    routed = expert_token_share(tp, sp, etp) if moe_cfg else 0.0
    moe_a2a = (2 * 2 * moe_cfg.top_k * ACT_BYTES * h * routed) if moe_cfg else 0.0
    comm = NCCL_BYTES_PER_GROUP * groups + tokens * (
        (tp > 1) * sp * ACT_BYTES * h  # the all-gathered SP input of one layer
        + (ep > 1) * moe_a2a  # all-to-all send + recv buffers
        + (pp > 1) * 2 * ACT_BYTES * h * rep  # p2p send + recv of a stage boundary
    )
    if zero3_buffer_bytes is None:
        zero3_buffer_bytes = (
            FSDP_PREFETCH_LAYERS * WEIGHT_BYTES + FSDP_REDUCE_BYTES
        ) * biggest_layer
    fsdp = (zero >= 3) * zero3_buffer_bytes
    edp = tp * cp * dp / (ep * etp)

    def states_of(params: Array, shard: Array) -> tuple[Array, Array, Array]:
        """`model_state_bytes` of `params` shared by `shard` ranks, under the layout's flags."""
        return model_state_bytes(
            params,
            zero=zero,
            shard=shard,
            distributed_optimizer=distributed_optimizer,
            grad_reduce_bf16=grad_reduce_bf16,
            precision=precision,
            low_precision_params=low_precision_params,
        )

    mtp_layers, vocab = m.mtp_layers, m.vocab

    def terms(
        stages: list[tuple[Array, Array, Array, Array, Array]],
        embedding: Array,
        head: Array,
        copies: int = 1,
    ) -> list[Array]:
        """Bytes by term of a rank holding `stages`, each (layers, index of its first layer,
        micro-batches of its activations held, MTP layers, micro-batches of theirs held), and
        the `embedding` and the output `head` (0/1); `copies`: ranks holding each of its
        stages per replica (DualPipe: 2, the optimizer states sharded over both)."""
        non_expert = expert = held = mtp = 0.0
        for n, start, count, mtp_n, mtp_count in stages:
            dense_n = (n if moe_cfg is None else m.dense_layers_in(start, n)) + mtp_n * mtp_dense
            moe_n = n + mtp_n - dense_n
            non_expert = non_expert + dense_n * dense_layer + moe_n * moe_layer
            expert = expert + moe_n * experts_rank
            # CPU offloading: `offload` of the stage's layers keep their activations in host
            # memory between forward and backward (Transformer Engine holds at most the others).
            resident = n - minimum(activation_offload_layers, n) if offloading else n
            held = held + resident * count + mtp_n * mtp_count
            mtp = mtp + mtp_n
        # The MTP modules (norms, projection) embed the shifted tokens: a rank without the
        # embedding keeps a copy (Megatron-core's GPTModel builds LanguageModelEmbedding where
        # pre_process or mtp_process), the output head's when tied.
        edge = embedding * shape.embedding + head * (shape.output + (1 - embedding) * shape.tied)
        edge = edge + (mtp > 0) * (1 - embedding) * (shape.embedding - head * shape.tied)
        non_expert = non_expert + edge / tp + head * shape.final_norm + mtp * shape.mtp_extra / tp
        states = states_of(non_expert, dp * cp * copies)
        if moe_cfg:  # routed experts: sharded over their own expert-data-parallel ranks
            expert_states = states_of(expert, edp * copies)
            states = [a + b for a, b in zip(states, expert_states, strict=True)]
        acts = tokens * (held * kept + (full > 0) * recompute_group * working)
        logits = head * (1 + mtp_layers) * LOGITS_BYTES * tokens * vocab / tp
        body = [*states, fsdp, acts, logits, comm]
        overhead = CUDA_CONTEXT_BYTES + WORKSPACE_BYTES + FRAGMENTATION * sum(body)
        return [*body, overhead]

    mtp_dense = shape.mtp_dense
    micro = gbs / (mbs * dp)
    group = pp if microbatch_group is None else microbatch_group

    def inflight(rank: Array) -> Array:  # micro-batches' worth held (Megatron's schedules)
        return inflight_microbatches(pp, vpp, micro, group, rank, warmup_ahead)

    n_mid = None if single is True else middle_stage_layers(m.layers, pp, n_first, n_last)
    start_last = m.layers - n_last
    if schedule in DUAL_SCHEDULES:
        candidates = _dual_ranks(schedule, pp, n_first, n_mid, n_last, mtp_layers, m.layers)
        chosen, stage = terms(*candidates[0][0]), 0 * pp
        others = [(terms(*c), index, exists) for c, index, exists in candidates[1:]]
        return _busiest(chosen, stage, others, host=0.0)
    # The MTP layers: with the loss, or on `mtp_rank` (a layout string's ``m``).
    v = schedule in V_SCHEDULES  # rank 0 holds the first and the last stage
    head_first = True if v else single
    if mtp_rank is None:  # with the head, one micro-batch's worth (the loss runs at once)
        mtp_first, mtp_first_held = mtp_layers * head_first, 1
    else:
        mtp_first, mtp_first_held = mtp_layers * (mtp_rank == 0), inflight(0)
    first = terms([(n_first, 0, inflight(0), mtp_first, mtp_first_held)], 1, head_first)
    # CPU offloading runs with one pipeline stage only (Layout checks it).
    host = tokens * minimum(activation_offload_layers, n_first) * kept if offloading else 0.0
    # A python-scalar single-stage layout has one stage: skip the other evaluations.
    if single is True:
        return record(MemoryBreakdown, (*first, 0, host))
    # The last stage; and the second, the busiest of the middle ones: one micro-batch fewer in
    # flight than the first, but more layers when the end stages are short, or heavier ones
    # when the first stage holds a MoE model's leading dense layers. (A python-scalar layout
    # skips it where neither can make it the busiest.)
    mtp_last = mtp_layers * (1 - head_first) * (mtp_rank is None)
    # interleaved, the last rank's warmup runs (vpp-1) x group chunks ahead too (schedules.py)
    last = terms([(n_last, start_last, inflight(pp - 1), mtp_last, 1)], single, 1 - head_first)
    others = [(last, pp - 1, pp > 1)]
    if not isinstance(pp, int) or (pp > 2 and (n_mid > n_first or shape.mixed)):
        mid = terms([(n_mid, n_first, inflight(1), 0, 0)], 0, 0)
        others.append((mid, 1, pp > 2))
    if mtp_rank is not None and mtp_rank > 0:  # one layout: the rank holding them alone
        count = inflight(mtp_rank)
        start = min(n_first + (mtp_rank - 1) * n_mid, start_last)
        held = terms([(mtp_rank_layers, start, count, mtp_layers, count)], 0, 0)
        others.append((held, mtp_rank, True))
    return _busiest(first, 0 * pp, others, host)


def _busiest(
    chosen: list[Array], stage: Array, others: list[tuple[list[Array], int, Array]], host: Array
) -> MemoryBreakdown:
    """The `MemoryBreakdown` of the rank whose terms sum highest: `chosen` (rank `stage`) or
    one of `others` (terms, rank, whether the layout has it), blended per layout for arrays."""
    for other, index, exists in others:
        take = exists & (sum(other) > sum(chosen))
        if isinstance(take, bool):  # python scalars: no blend
            chosen, stage = (other, index) if take else (chosen, stage)
        else:
            chosen = [take * b + (1 - take) * a for a, b in zip(chosen, other, strict=True)]
            stage = take * index + (1 - take) * stage
    return record(MemoryBreakdown, (*chosen, stage, host))


def _dual_ranks(
    schedule: str, pp: Array, n_first: Array, n_mid: Array, n_last: Array, mtp: int, layers: int
) -> list[tuple[tuple[Any, ...], int, Array]]:
    """`memory_batch`'s `terms` arguments of the ranks of a two-direction schedule that may
    hold most, with their rank and whether the layout has them. Activations: the chunks each
    rank holds at its peak, pp + 1 stages' worth on every rank (DeepSeek-V3 report, Table 2;
    DualPipe README: "PP+1", PP its stages). DualPipe (dualpipe.py DualPipe.step): a rank of
    half-rank h = min(r, pp-1-r) runs 2(pp/2-h-1) + (h+1) forwards of stage h and h+1 of
    stage pp-1-h before its first backward, and one more forward in the overlapped steady
    state: pp - h of stage h, h + 1 of stage pp-1-h; both stages' weights, gradients and
    (sharded over both copies) optimizer states. DualPipeV (dualpipev.py): rank r holds
    2pp - r of its first chunk and r + 1 of its second, half its layers each: pp + 1/2 of
    the rank's layers; rank 0 the embedding and the head."""
    start_last = layers - n_last
    if schedule == PAIRED_SCHEDULE:
        ends = ([(n_first, 0, pp, 0, 0), (n_last, start_last, 1, mtp, 1)], 1, 1, 2)
        # half-rank 1: stage 1 (pp-1 held) and stage pp-2 (2 held), the middle stages' size
        middle = ([(n_mid, n_first, pp - 1, 0, 0), (n_mid, start_last - n_mid, 2, 0, 0)], 0, 0, 2)
        return [(ends, 0, True), (middle, 1, pp > 2)]
    held = pp + 0.5
    first = ([(n_first, 0, held, mtp, 1)], 1, 1)
    last = ([(n_last, start_last, held, 0, 0)], 0, 0)
    middle = ([(n_mid, n_first, held, 0, 0)], 0, 0)
    return [(first, 0, True), (last, pp - 1, True), (middle, 1, pp > 2)]


def replica_fields(f: dict[str, Any]) -> dict[str, Any]:
    """The layout fields `memory_batch` takes: an HSDP layout (``dp_shard`` in the fields)
    holds what FSDP over its dp_shard ranks holds (same micro-batches in flight)."""
    if "dp_shard" not in f:
        return f
    shard = f["dp_shard"]
    fields = {k: v for k, v in f.items() if k != "dp_shard"}
    return fields | {"dp": shard, "gbs": f["gbs"] * shard // f["dp"]}


def memory(
    m: ModelSpec,
    layout: Layout,
    *,
    flash_attention: bool = True,
    dropout: bool = False,
    low_precision_params: bool = False,
    framework: str | None = None,
) -> MemoryBreakdown:
    """Memory per GPU of one layout (python scalars: a few microseconds); `framework`: whose
    selective recompute runs (``recompute.framework_mask``)."""
    fields = replica_fields(layout_fields(layout, m))
    fields["recompute_modules"] = framework_mask(framework, fields["recompute_modules"])
    return memory_batch(
        m,
        **fields,
        flash_attention=flash_attention,
        dropout=dropout,
        low_precision_params=low_precision_params,
    )
