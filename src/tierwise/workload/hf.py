"""Import a Hugging Face ``config.json`` into a :class:`ModelSpec`.

Supported ``model_type`` values and the field names each uses (as in ``transformers``):

- llama, mistral, qwen2 (+ qwen2 q/k/v bias): hidden_size, num_hidden_layers,
  num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size,
  tie_word_embeddings, max_position_embeddings; gated SiLU MLP (SwiGLU), RMSNorm.
- mixtral: the above + num_local_experts, num_experts_per_tok (every layer is MoE;
  intermediate_size is the expert size).
- qwen2_moe: + num_experts, num_experts_per_tok, moe_intermediate_size,
  shared_expert_intermediate_size (one shared expert of that size), mlp_only_layers.
- deepseek (DeepSeekMoE, no MLA): + n_routed_experts, n_shared_experts,
  moe_intermediate_size, first_k_dense_replace.
- gpt2: n_embd, n_layer, n_head, n_inner (None = 4 n_embd), n_positions; GELU,
  LayerNorm, biases everywhere, learned positions, tied embeddings.
- gpt_neox: hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
  max_position_embeddings; GELU, LayerNorm, biases, rotary, untied by default.

Defaults follow each ``transformers`` config class (e.g. ``tie_word_embeddings`` is False
for Llama but True for GPT-2). Gates that add O(hidden) parameters per layer (Qwen2-MoE's
shared-expert gate) are not modelled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tierwise.errors import SpecError
from tierwise.workload.spec import ModelSpec

Fields = dict[str, Any]


def is_hf_config(data: Mapping[str, Any]) -> bool:
    """True for a mapping that looks like a ``transformers`` config rather than a tierwise spec."""
    return "model_type" in data or "architectures" in data


def _need(cfg: Mapping[str, Any], key: str, source: str) -> Any:
    if cfg.get(key) is None:
        raise SpecError(f"{source}: Hugging Face field {key!r} is required")
    return cfg[key]


def _llama_like(cfg: Mapping[str, Any], source: str) -> Fields:
    attn_bias, mlp_bias = bool(cfg.get("attention_bias")), bool(cfg.get("mlp_bias"))
    bias = "all" if attn_bias and mlp_bias else "qkv" if attn_bias else "none"
    return {
        "layers": _need(cfg, "num_hidden_layers", source),
        "hidden": _need(cfg, "hidden_size", source),
        "heads": _need(cfg, "num_attention_heads", source),
        "kv_heads": cfg.get("num_key_value_heads"),
        "head_dim": cfg.get("head_dim"),
        "ffn_hidden": _need(cfg, "intermediate_size", source),
        "vocab": _need(cfg, "vocab_size", source),
        "activation": "swiglu",
        "tied_embeddings": bool(cfg.get("tie_word_embeddings", False)),
        "max_seq": cfg.get("max_position_embeddings"),
        "norm": "rmsnorm",
        "bias": bias,
    }


def _qwen2(cfg: Mapping[str, Any], source: str) -> Fields:
    return {**_llama_like(cfg, source), "bias": "qkv"}


def _mixtral(cfg: Mapping[str, Any], source: str) -> Fields:
    fields = _llama_like(cfg, source)
    fields["moe"] = {
        "experts": _need(cfg, "num_local_experts", source),
        "top_k": _need(cfg, "num_experts_per_tok", source),
        "expert_ffn_hidden": fields["ffn_hidden"],
    }
    return fields


def _leading_dense(only: list[int], source: str) -> int:
    if sorted(only) != list(range(len(only))):
        raise SpecError(
            f"{source}: mlp_only_layers {only} must be leading layers 0..k-1 (others unsupported)"
        )
    return len(only)


def _qwen2_moe(cfg: Mapping[str, Any], source: str) -> Fields:
    fields = _qwen2(cfg, source)
    if cfg.get("decoder_sparse_step", 1) != 1:
        raise SpecError(f"{source}: decoder_sparse_step must be 1 (interleaved dense unsupported)")
    shared = cfg.get("shared_expert_intermediate_size") or 0
    fields["moe"] = {
        "experts": _need(cfg, "num_experts", source),
        "top_k": _need(cfg, "num_experts_per_tok", source),
        "expert_ffn_hidden": _need(cfg, "moe_intermediate_size", source),
        "shared_experts": 1 if shared else 0,
        "shared_expert_ffn_hidden": shared or None,
        "dense_layers": _leading_dense(list(cfg.get("mlp_only_layers") or []), source),
    }
    return fields


def _deepseek(cfg: Mapping[str, Any], source: str) -> Fields:
    fields = _llama_like(cfg, source)
    if cfg.get("moe_layer_freq", 1) != 1:
        raise SpecError(f"{source}: moe_layer_freq must be 1 (interleaved dense unsupported)")
    fields["moe"] = {
        "experts": _need(cfg, "n_routed_experts", source),
        "top_k": _need(cfg, "num_experts_per_tok", source),
        "expert_ffn_hidden": _need(cfg, "moe_intermediate_size", source),
        "shared_experts": cfg.get("n_shared_experts") or 0,
        "dense_layers": cfg.get("first_k_dense_replace") or 0,
    }
    return fields


def _gpt2(cfg: Mapping[str, Any], source: str) -> Fields:
    hidden = _need(cfg, "n_embd", source)
    return {
        "layers": _need(cfg, "n_layer", source),
        "hidden": hidden,
        "heads": _need(cfg, "n_head", source),
        "ffn_hidden": cfg.get("n_inner") or 4 * hidden,
        "vocab": _need(cfg, "vocab_size", source),
        "activation": "gelu",
        "tied_embeddings": bool(cfg.get("tie_word_embeddings", True)),
        "max_seq": _need(cfg, "n_positions", source),
        "norm": "layernorm",
        "bias": "all",
        "position": "learned",
    }


def _gpt_neox(cfg: Mapping[str, Any], source: str) -> Fields:
    return {
        "layers": _need(cfg, "num_hidden_layers", source),
        "hidden": _need(cfg, "hidden_size", source),
        "heads": _need(cfg, "num_attention_heads", source),
        "ffn_hidden": _need(cfg, "intermediate_size", source),
        "vocab": _need(cfg, "vocab_size", source),
        "activation": "gelu",
        "tied_embeddings": bool(cfg.get("tie_word_embeddings", False)),
        "max_seq": cfg.get("max_position_embeddings"),
        "norm": "layernorm",
        "bias": "all" if cfg.get("attention_bias", True) else "none",
    }


_MAPPERS: dict[str, Callable[[Mapping[str, Any], str], Fields]] = {
    "llama": _llama_like,
    "mistral": _llama_like,
    "qwen2": _qwen2,
    "mixtral": _mixtral,
    "qwen2_moe": _qwen2_moe,
    "deepseek": _deepseek,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
}


def from_hf_config(
    cfg: Mapping[str, Any], default_name: str, source: str = "config.json"
) -> ModelSpec:
    """Map a ``transformers`` config mapping onto a :class:`ModelSpec`."""
    kind = cfg.get("model_type")
    if not isinstance(kind, str) or kind not in _MAPPERS:
        raise SpecError(
            f"{source}: model_type {kind!r:.60} is not supported; allowed: {', '.join(_MAPPERS)}"
        )
    try:
        fields = _MAPPERS[kind](cfg, source)
    except (TypeError, ValueError) as exc:  # e.g. n_embd: {} reaching 4 * n_embd
        raise SpecError(
            f"{source}: a {kind} field has the wrong type ({str(exc)[:80]}); sizes and counts "
            "are numbers, layer lists are lists of integers"
        ) from None
    name = str(cfg.get("_name_or_path") or default_name).rstrip("/").split("/")[-1]
    return ModelSpec.parse({"name": name, **fields}, source=source)
