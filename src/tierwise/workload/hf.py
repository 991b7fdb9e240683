"""Import a Hugging Face ``config.json`` into a :class:`ModelSpec`.

Supported ``model_type`` values and the field names each uses (as in ``transformers``);
fields not listed are ignored, a listed field that is required and missing is named:

- llama, mistral, phi3, qwen2 (+ q/k/v bias), qwen3 (+ QK-norm): hidden_size,
  num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, intermediate_size,
  vocab_size, tie_word_embeddings, max_position_embeddings, rope_theta, attention_bias,
  mlp_bias; SwiGLU, RMSNorm. mistral/phi3: ``sliding_window`` applies to every layer.
- mixtral: + num_local_experts, num_experts_per_tok (intermediate_size is the expert size).
- qwen2_moe, qwen3_moe: + num_experts, num_experts_per_tok, moe_intermediate_size,
  shared_expert_intermediate_size (one shared expert), mlp_only_layers (leading),
  decoder_sparse_step.
- deepseek (DeepSeekMoE, MHA): + n_routed_experts, n_shared_experts, moe_intermediate_size,
  first_k_dense_replace, moe_layer_freq, scoring_func.
- deepseek_v2, deepseek_v3, kimi_k2 (Kimi-K2 ships as deepseek_v3): + q_lora_rank,
  kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim (MLA),
  num_nextn_predict_layers (MTP).
- gpt_oss: + num_local_experts, num_experts_per_tok (or experts_per_token), layer_types,
  sliding_window; biases on every linear layer and the router, attention sinks.
- llama4 (``text_config`` nested or flat), llama4_text: + intermediate_size (experts),
  intermediate_size_mlp (dense layers), num_local_experts, interleave_moe_layer_step,
  attention_chunk_size, no_rope_layer_interval, use_qk_norm; one shared expert, sigmoid router.
- gemma2, gemma3 (``text_config``), gemma3_text: GeGLU, tied embeddings, layer_types or
  sliding_window_pattern (Gemma 2: odd layers global), gemma3 QK-norm;
  both with post-attention and post-feed-forward norms (``post_norms``).
- gpt2: n_embd, n_layer, n_head, n_inner (None = 4 n_embd), n_positions; GELU,
  LayerNorm, biases everywhere, learned positions, tied embeddings.
- gpt_neox: hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
  max_position_embeddings; GELU, LayerNorm, biases, rotary, untied by default.

Defaults follow each ``transformers`` config class (e.g. ``tie_word_embeddings`` is False
for Llama but True for GPT-2 and Gemma). Not modelled (O(hidden) parameters per layer or no
effect on cost): Qwen2-MoE's shared-expert gate, Gemma's logit soft-capping, attention
temperature tuning, rope scaling.
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


def _layer_pattern(cfg: Mapping[str, Any], source: str) -> dict[str, Any] | None:
    """Local attention from ``layer_types`` / ``sliding_window_pattern`` / ``sliding_window``."""
    window = cfg.get("sliding_window")
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        local = [t != "full_attention" for t in types]
        if not any(local) or window is None:
            return None
        every = local.index(False) + 1 if not all(local) else None
        expected = [every is None or (i + 1) % every != 0 for i in range(len(local))]
        if local != expected:
            raise SpecError(
                f"{source}: layer_types must repeat (local x N-1, full) blocks; got {types[:8]}..."
            )
        return {"window": window, "global_every": every}
    pattern = cfg.get("sliding_window_pattern")
    if window is not None and pattern:
        return {"window": window, "global_every": pattern}
    return None


_SLIDING_ALL = {"mistral", "mixtral", "phi3"}
"""model_types whose ``sliding_window`` applies to every layer."""


def _rope_theta(cfg: Mapping[str, Any]) -> Any:
    """``rope_theta``, or inside ``rope_parameters`` (transformers 5 configs)."""
    nested = cfg.get("rope_parameters")
    return cfg.get("rope_theta") or (
        nested.get("rope_theta") if isinstance(nested, Mapping) else None
    )


def _llama_like(cfg: Mapping[str, Any], source: str) -> Fields:
    attn_bias, mlp_bias = bool(cfg.get("attention_bias")), bool(cfg.get("mlp_bias"))
    bias = "all" if attn_bias and mlp_bias else "qkv" if attn_bias else "none"
    fields: Fields = {
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
        "rope_theta": _rope_theta(cfg),
    }
    # Mistral v0.1, Mixtral, Phi-3-mini: every layer slides (use_sliding_window False turns it off).
    window, kind = cfg.get("sliding_window"), cfg.get("model_type")
    if window and cfg.get("use_sliding_window", True) and str(kind) in _SLIDING_ALL:
        fields["local_attention"] = {"window": window}
    return fields


def _qwen2(cfg: Mapping[str, Any], source: str) -> Fields:
    return {**_llama_like(cfg, source), "bias": "qkv"}


def _qwen3(cfg: Mapping[str, Any], source: str) -> Fields:
    return {**_llama_like(cfg, source), "qk_norm": True}


def _mixtral(cfg: Mapping[str, Any], source: str) -> Fields:
    fields = _llama_like(cfg, source)
    fields["moe"] = {
        "experts": _need(cfg, "num_local_experts", source),
        "top_k": _need(cfg, "num_experts_per_tok", source),
        "expert_ffn_hidden": fields["ffn_hidden"],
    }
    return fields


def _leading_dense(only: Any, source: str) -> int:
    if not isinstance(only, list) or not all(type(i) is int for i in only):
        raise SpecError(f"{source}: mlp_only_layers must be a list of layer indices, got {only!r}")
    if sorted(only) != list(range(len(only))):
        raise SpecError(
            f"{source}: mlp_only_layers {only} must be leading layers 0..k-1 (others unsupported)"
        )
    return len(only)


def _qwen_moe(cfg: Mapping[str, Any], source: str, base: Fields) -> Fields:
    shared = cfg.get("shared_expert_intermediate_size") or 0
    base["moe"] = {
        "experts": _need(cfg, "num_experts", source),
        "top_k": _need(cfg, "num_experts_per_tok", source),
        "expert_ffn_hidden": _need(cfg, "moe_intermediate_size", source),
        "shared_experts": 1 if shared else 0,
        "shared_expert_ffn_hidden": shared or None,
        "dense_layers": _leading_dense(cfg.get("mlp_only_layers") or [], source),
        "every": cfg.get("decoder_sparse_step") or 1,
    }
    return base


def _qwen2_moe(cfg: Mapping[str, Any], source: str) -> Fields:
    return _qwen_moe(cfg, source, _qwen2(cfg, source))


def _qwen3_moe(cfg: Mapping[str, Any], source: str) -> Fields:
    return _qwen_moe(cfg, source, _qwen3(cfg, source))


def _deepseek(cfg: Mapping[str, Any], source: str) -> Fields:
    fields = _llama_like(cfg, source)
    fields["moe"] = {
        "experts": _need(cfg, "n_routed_experts", source),
        "top_k": _need(cfg, "num_experts_per_tok", source),
        "expert_ffn_hidden": _need(cfg, "moe_intermediate_size", source),
        "shared_experts": cfg.get("n_shared_experts") or 0,
        "dense_layers": cfg.get("first_k_dense_replace") or 0,
        "every": cfg.get("moe_layer_freq") or 1,
        "router": "sigmoid" if cfg.get("scoring_func") == "sigmoid" else "softmax",
        "expert_bias": cfg.get("topk_method") == "noaux_tc",
    }
    return fields


def _deepseek_mla(cfg: Mapping[str, Any], source: str) -> Fields:
    """DeepSeek-V2/V3 and Kimi-K2: DeepSeekMoE + multi-head latent attention (+ MTP)."""
    fields = _deepseek(cfg, source)
    fields["mla"] = {
        "q_lora_rank": cfg.get("q_lora_rank"),
        "kv_lora_rank": _need(cfg, "kv_lora_rank", source),
        "qk_nope_head_dim": _need(cfg, "qk_nope_head_dim", source),
        "qk_rope_head_dim": _need(cfg, "qk_rope_head_dim", source),
        "v_head_dim": _need(cfg, "v_head_dim", source),
    }
    fields["head_dim"] = None
    fields["mtp_layers"] = cfg.get("num_nextn_predict_layers") or 0
    return fields


def _gpt_oss(cfg: Mapping[str, Any], source: str) -> Fields:
    """GPT-OSS: MoE in every layer, biases everywhere, attention sinks, 128-token windows."""
    fields = _llama_like(cfg, source)
    fields |= {
        "bias": "all" if cfg.get("attention_bias", True) else "none",
        "attention_sinks": True,
        "local_attention": _layer_pattern(cfg, source),
        "moe": {
            "experts": _need(cfg, "num_local_experts", source),
            "top_k": cfg.get("num_experts_per_tok") or _need(cfg, "experts_per_token", source),
            "expert_ffn_hidden": fields["ffn_hidden"],
        },
    }
    return fields


def _llama4(cfg: Mapping[str, Any], source: str) -> Fields:
    """Llama 4 text model (``text_config`` nested or flat): chunked attention with NoPE global
    layers, one shared + top-k routed experts, MoE every ``interleave_moe_layer_step`` layers."""
    text = cfg.get("text_config")
    text = text if isinstance(text, Mapping) else cfg
    fields = _llama_like(text, source)
    fields["ffn_hidden"] = text.get("intermediate_size_mlp") or fields["ffn_hidden"]
    expert = _need(text, "intermediate_size", source)
    chunk, nope = text.get("attention_chunk_size"), text.get("no_rope_layer_interval")
    rope_flags = text.get("no_rope_layers")  # 1 = RoPE (chunked), 0 = NoPE (global)
    if nope is None and isinstance(rope_flags, list) and 0 in rope_flags:
        nope = rope_flags.index(0) + 1
        if rope_flags != [int((i + 1) % nope != 0) for i in range(len(rope_flags))]:
            raise SpecError(f"{source}: no_rope_layers must repeat every {nope} layers")
    if chunk:
        fields["local_attention"] = {
            "window": chunk,
            "kind": "chunked",
            "global_every": nope,
            "global_nope": bool(nope),
        }
    fields["qk_norm"] = bool(text.get("use_qk_norm", False))
    fields["tied_embeddings"] = bool(cfg.get("tie_word_embeddings", False))
    step = text.get("interleave_moe_layer_step") or 1
    fields["moe"] = {
        "experts": _need(text, "num_local_experts", source),
        "top_k": _need(text, "num_experts_per_tok", source),
        "expert_ffn_hidden": expert,
        "shared_experts": 1,
        "every": step,
        "router": "sigmoid",
    }
    return fields


GEMMA3_TEXT_DEFAULTS = {
    "vocab_size": 262_208,
    "sliding_window_pattern": 6,
    "max_position_embeddings": 131_072,
    "rope_theta": 1_000_000.0,
}
"""``transformers`` Gemma3TextConfig defaults that published Gemma 3 configs leave out."""


def _gemma(cfg: Mapping[str, Any], source: str) -> Fields:
    """Gemma 2 / Gemma 3 (text): GeGLU, tied embeddings, local/global layer pattern."""
    text = cfg.get("text_config")
    text = text if isinstance(text, Mapping) else cfg
    if cfg.get("model_type") != "gemma2":
        text = {**GEMMA3_TEXT_DEFAULTS, "model_type": "gemma3_text", **text}
    fields = _llama_like(text, source)
    gemma2 = cfg.get("model_type") == "gemma2"
    local = _layer_pattern(text, source)
    if local is None and gemma2 and text.get("sliding_window"):
        local = {"window": text["sliding_window"], "global_every": 2}  # odd layers global
    tied = cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", True))
    fields |= {
        "activation": "geglu",
        "tied_embeddings": bool(tied),
        "local_attention": local,
        "qk_norm": not gemma2,
        "post_norms": True,
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
    "mixtral": _mixtral,
    "qwen2": _qwen2,
    "qwen2_moe": _qwen2_moe,
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "deepseek": _deepseek,
    "deepseek_v2": _deepseek_mla,
    "deepseek_v3": _deepseek_mla,
    "kimi_k2": _deepseek_mla,
    "gpt_oss": _gpt_oss,
    "llama4": _llama4,
    "llama4_text": _llama4,
    "gemma2": _gemma,
    "gemma3": _gemma,
    "gemma3_text": _gemma,
    "phi3": _llama_like,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
}


def supported_model_types() -> tuple[str, ...]:
    """The ``model_type`` values :func:`from_hf_config` reads."""
    return tuple(_MAPPERS)


NORM_EPS_KEYS = ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon")
ROPE_KINDS = {"llama3": "llama3", "yarn": "yarn", "linear": "linear"}
"""config.json ``rope_scaling`` types tierwise reads (others, e.g. default, mean none)."""
ROPE_KEYS = {
    "factor": "factor",
    "original_max_position_embeddings": "original_max_seq",
    "low_freq_factor": "low_freq_factor",
    "high_freq_factor": "high_freq_factor",
    "beta_fast": "beta_fast",
    "beta_slow": "beta_slow",
    "mscale": "mscale",
    "mscale_all_dim": "mscale_all_dim",
}
ROUTER_KEYS = {
    "norm_topk_prob": "renormalize",
    "routed_scaling_factor": "score_scale",
    "n_group": "groups",
    "topk_group": "group_top_k",
}


def _numerics(cfg: Mapping[str, Any], fields: Fields) -> Fields:
    """The norms' epsilon, the rope scaling and the router's settings (what a launch must
    state as the config.json does), added to the architecture's `fields`."""
    eps = next((cfg[k] for k in NORM_EPS_KEYS if isinstance(cfg.get(k), int | float)), None)
    out = {**fields, "norm_eps": eps}
    scaling = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if isinstance(scaling, Mapping):
        kind = ROPE_KINDS.get(str(scaling.get("rope_type") or scaling.get("type")))
        if kind is not None and scaling.get("factor"):
            values = {
                ours: scaling[theirs] for theirs, ours in ROPE_KEYS.items() if theirs in scaling
            }
            out["rope_scaling"] = {"kind": kind, **values}
    moe = out.get("moe")
    if isinstance(moe, Mapping):
        router = {
            ours: cfg[theirs] for theirs, ours in ROUTER_KEYS.items() if cfg.get(theirs) is not None
        }
        if router.get("groups") == 1:  # one group: plain top-k
            router.pop("groups"), router.pop("group_top_k", None)
        if router.get("score_scale") == 1:
            router.pop("score_scale")
        out["moe"] = {**moe, **router}
    return out


def from_hf_config(
    cfg: Mapping[str, Any],
    default_name: str,
    source: str = "config.json",
    hf_path: str | None = None,
) -> ModelSpec:
    """Map a ``transformers`` config mapping onto a :class:`ModelSpec`; `hf_path`: the
    directory the config.json was read from (where its tokenizer is)."""
    kind = cfg.get("model_type")
    if not isinstance(kind, str) or kind not in _MAPPERS:
        raise SpecError(
            f"{source}: model_type {kind!r:.60} is not supported; allowed: {', '.join(_MAPPERS)}"
        )
    try:
        mapped = _MAPPERS[kind](cfg, source)
    except (TypeError, ValueError) as exc:  # e.g. n_embd: {} reaching 4 * n_embd
        raise SpecError(
            f"{source}: a {kind} field has the wrong type ({str(exc)[:80]}); sizes and counts "
            "are numbers, layer lists are lists of integers"
        ) from None
    fields = {k: v for k, v in _numerics(cfg, mapped).items() if v is not None}
    name = str(cfg.get("_name_or_path") or default_name).rstrip("/").split("/")[-1]
    return ModelSpec.parse({"name": name, **fields, "hf_path": hf_path}, source=source)
