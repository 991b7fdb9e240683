"""Megatron-LM's selective-recompute modules (``--recompute-modules``) as a bit mask.

With ``--recompute-granularity selective`` Megatron-core re-runs in the backward pass only
the modules named in ``--recompute-modules`` (default ``core_attn``), each of which then keeps
less for backward (``megatron/core/transformer/transformer_config.py``,
``recompute_modules``; Megatron-LM ``megatron/training/arguments.py``):

- ``core_attn``: the attention core; frees the ``s^2`` scores of unfused attention (a flash
  kernel keeps none, so it frees nothing there and only costs the re-run);
- ``layernorm``: the two pre-norms (output-discarding checkpoint): frees their 16-bit outputs,
  the inputs of QKV and of the MLP / router;
- ``moe_act``: the routed experts' activation function: frees its output (the expert fc2
  input);
- ``mlp``: the dense MLP: frees everything inside it, keeping its input;
- ``moe``: the whole MoE layer, token dispatch and combine included;
- ``shared_experts``: the shared experts of a MoE layer;
- ``mla_up_proj``: MLA's up-projections and RoPE: frees the per-head Q, K and V (the
  re-run is priced as the up-projection GEMMs; RoPE's elementwise work is left out).

In low precision Megatron has the next GEMM save the original input instead of a quantized
copy (``set_save_original_input``), so ``layernorm`` and ``moe_act`` free what that GEMM would
have kept; they need an FP8 recipe other than delayed scaling. ``moe_act`` needs grouped
GEMMs, ``mla_up_proj`` MLA. Megatron-LM at d98e8a64 also lists modules of models tierwise does
not describe (gdn_norm_out, gdp_in_proj, gdp_qkv, mhc).
The mask is an integer so the vectorised memory and FLOP functions take it per layout.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal, get_args

from tierwise import frameworks

if TYPE_CHECKING:
    from tierwise.workload.flops import Array
    from tierwise.workload.spec import ModelSpec

RecomputeModule = Literal[
    "core_attn", "layernorm", "moe_act", "mlp", "moe", "shared_experts", "mla_up_proj"
]
MODULES: tuple[str, ...] = get_args(RecomputeModule)
BITS = {name: 1 << i for i, name in enumerate(MODULES)}
"""Each module's bit; ``op_sac`` (:data:`OP_SAC_MASK`) follows Megatron's."""
DEFAULT_MODULES: tuple[str, ...] = ("core_attn",)
"""Megatron-core's default ``recompute_modules``."""
MOE_MODULES = ("moe_act", "moe", "shared_experts")


DEFAULT_MASK = BITS["core_attn"]
"""The mask of :data:`DEFAULT_MODULES`."""
OP_SAC_MASK = BITS["op_sac"] = 1 << len(MODULES)
"""torchtitan's op-level selective activation checkpointing (``selective_ac_option = "op"``,
``torchtitan/distributed/activation_checkpoint.py``): it saves the outputs of matmuls and of
the attention kernel but recomputes every second matmul (by count) and every other op. Per
layer that re-runs half of the weight-GEMM forward FLOPs and all the elementwise forward
work, not the attention core, and drops the norm and activation-function outputs."""


def modules_mask(modules: Iterable[str] | None) -> int:
    """The bit mask of `modules` (None: Megatron's default, ``core_attn``)."""
    return DEFAULT_MASK if modules is None else sum(BITS[name] for name in set(modules))


def framework_mask(framework: str | None, mask: Array) -> Array:
    """The module mask selective recompute runs under `framework` (None: the generic model):
    op-level SAC where its row says so (torchtitan's), Megatron's modules otherwise."""
    op_sac = frameworks.row(framework).selective_recompute == frameworks.RECOMPUTE_OP_SAC
    return OP_SAC_MASK if op_sac else mask


def mask_modules(mask: int) -> tuple[str, ...] | None:
    """The Megatron module names of `mask` (None for Megatron's default)."""
    if mask == DEFAULT_MASK:
        return None
    return tuple(name for name in MODULES if mask & BITS[name])


def light_modules(has_moe: bool, has_mla: bool) -> tuple[str, ...]:
    """The modules Megatron-Bridge's MoE recipes recompute to save memory at little cost
    (output-discarding checkpoints of elementwise work): the norms Transformer Engine keeps
    as modules (MLA's input norm, a MoE layer's pre-MLP norm; it fuses the others into the
    next linear layer), the experts' activation and MLA's up-projections where the model
    has them."""
    norms = ("layernorm",) * (has_moe or has_mla)
    return norms + ("moe_act",) * has_moe + ("mla_up_proj",) * has_mla


def spec_modules(model: ModelSpec) -> tuple[str, ...]:
    """The ``--recompute-modules`` that exist in Megatron-core's Transformer Engine layer
    spec for `model` (megatron/core/models/gpt/gpt_layer_specs.py): the attention core and
    the dense MLP always, the norms only where they are modules (MLA, MoE), the expert
    modules in MoE models, the up-projections with MLA."""
    moe, mla = model.moe is not None, model.mla is not None
    shared = moe and bool(model.moe and model.moe.shared_experts)
    names = {
        "core_attn": True,
        "layernorm": moe or mla,
        "mlp": True,
        "moe_act": moe,
        "moe": moe,
        "shared_experts": shared,
        "mla_up_proj": mla,
    }
    return tuple(name for name in MODULES if names[name])


def recomputes(mask: Array, module: str) -> Array:
    """1 where the layouts' `mask` holds `module` (a Megatron name, or ``op_sac`` for
    torchtitan's policy), else 0 (python ints and numpy arrays)."""
    return (mask // BITS[module]) % 2
