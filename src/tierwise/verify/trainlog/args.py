"""Megatron-LM argument names (arguments block, command line, Bridge/NeMo YAML) -> record.

Names follow megatron/training/arguments.py (2020's `model_parallel_size` and `batch_size`,
2021's `checkpoint_activations`, today's `recompute_granularity`); Megatron-Bridge and NeMo
configs use the same TransformerConfig names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tierwise.verify.trainlog.record import Found
from tierwise.verify.trainlog.text import positive_int, truthy

# Megatron argument -> record key, integer degrees and sizes.
INT_FIELDS = {
    "tensor_model_parallel_size": "layout.tp",
    "model_parallel_size": "layout.tp",  # Megatron-LM v1 (2020): model parallel = tensor
    "pipeline_model_parallel_size": "layout.pp",
    "virtual_pipeline_model_parallel_size": "layout.vpp",
    "context_parallel_size": "layout.cp",
    "expert_model_parallel_size": "layout.ep",
    "expert_tensor_parallel_size": "layout.etp",
    "data_parallel_size": "layout.dp",
    "micro_batch_size": "layout.mbs",
    "global_batch_size": "layout.gbs",
    "seq_length": "layout.seq",
    "encoder_seq_length": "layout.seq",
    "world_size": "gpus",
    "num_layers": "model.layers",
    "hidden_size": "model.hidden",
    "num_attention_heads": "model.heads",
    "kv_channels": "model.head_dim",
    "ffn_hidden_size": "model.ffn_hidden",
    "padded_vocab_size": "model.vocab",
    "vocab_size": "model.vocab",
    "num_experts": "model.experts",
    "num_moe_experts": "model.experts",
    "moe_router_topk": "model.top_k",
    "moe_ffn_hidden_size": "model.moe_ffn_hidden",
}
# Settings a cost term of the step-time model reads (Megatron's argument names).
PRICED_SETTINGS = (
    "overlap_grad_reduce",
    "overlap_param_gather",
    "tp_comm_overlap",
    "use_distributed_optimizer",
    "sequence_parallel",
    "moe_token_dispatcher_type",
    "overlap_moe_expert_parallel_comm",
    "moe_router_force_load_balancing",
    "attention_backend",
    "use_flash_attn",
    "enable_cuda_graph",
    "fp8_param_gather",
    "fp8_dot_product_attention",
    "align_param_gather",
    "delay_wgrad_compute",
    "microbatch_group_size_per_vp_stage",
    "scatter_gather_tensors_in_pipeline",
    "async_tensor_model_parallel_allreduce",
    "cp_comm_type",
    "overlap_p2p_comm",
    "recompute_modules",
    "fp8_recipe",
    "moe_expert_capacity_factor",
    "recompute_method",
    "recompute_num_layers",
)
# Settings read and reported that no cost term prices (doctor lists them as not modelled).
UNPRICED_SETTINGS = (
    "moe_grouped_gemm",
    "defer_embedding_wgrad_compute",
    "DDP_impl",
    "gradient_accumulation_fusion",
)
SETTINGS = (*PRICED_SETTINGS, *UNPRICED_SETTINGS, "log_interval")


def dtype_of(args: Mapping[str, Any]) -> str | None:
    """bf16 / fp16 / fp8 from --bf16, --fp16, --fp8-format (or a Bridge mixed_precision)."""
    fp8 = args.get("fp8") or args.get("fp8_format")
    if fp8 not in (None, False, "None"):
        return "fp8"
    if truthy(args.get("bf16")):
        return "bf16"
    if truthy(args.get("fp16")):
        return "fp16"
    params = str(args.get("params_dtype", ""))
    for name in ("bfloat16", "float16"):
        if params.endswith(name):
            return "bf16" if name == "bfloat16" else "fp16"
    return None


def recompute_of(args: Mapping[str, Any]) -> str | None:
    """none / selective / full from recompute_granularity or 2021's checkpoint_activations."""
    if "recompute_granularity" in args:
        g = args["recompute_granularity"]
        return "none" if g in (None, "None", "null") else str(g)
    if "checkpoint_activations" in args:
        return "full" if truthy(args["checkpoint_activations"]) else "none"
    if "activations_checkpoint_granularity" in args:  # NeMo 1.x
        g = args["activations_checkpoint_granularity"]
        return "none" if g in (None, "None", "null") else str(g)
    return None


def apply_args(found: Found, args: Mapping[str, Any], source: str) -> None:
    """Put what a set of Megatron arguments states into ``found``."""
    for name, key in INT_FIELDS.items():
        if name not in args:
            continue
        raw = args[name]
        if name == "virtual_pipeline_model_parallel_size" and raw is None:
            if "num_layers_per_virtual_pipeline_stage" not in args or (
                args["num_layers_per_virtual_pipeline_stage"] is None
            ):
                found.put(key, 1, f"{source} ({name} None: not interleaved)")
            continue
        if name in ("num_experts", "num_moe_experts") and raw is None:
            found.put(key, 0, f"{source} ({name} None: dense)")
            continue
        found.put(key, positive_int(raw), f"{source} ({name})")
    per_stage = positive_int(args.get("num_layers_per_virtual_pipeline_stage"))
    layers, pp = (
        positive_int(args.get("num_layers")),
        positive_int(args.get("pipeline_model_parallel_size")),
    )
    if per_stage and layers and pp and layers % (pp * per_stage) == 0:
        found.put(
            "layout.vpp",
            layers // (pp * per_stage),
            f"{source} (num_layers / pipeline size / num_layers_per_virtual_pipeline_stage)",
        )
    if "batch_size" in args and "micro_batch_size" not in args:  # 2020: per-GPU batch
        found.put("layout.mbs", positive_int(args["batch_size"]), f"{source} (batch_size)")
        found.note("Megatron-LM v1: batch_size is per GPU; the global batch is batch_size x dp")
    if truthy(args.get("group_query_attention")):
        found.put("model.kv_heads", positive_int(args.get("num_query_groups")), source)
    elif "group_query_attention" in args or "num_query_groups" not in args:
        found.put(
            "model.kv_heads", positive_int(args.get("num_attention_heads")), f"{source} (MHA)"
        )
    else:
        found.put("model.kv_heads", positive_int(args.get("num_query_groups")), source)
    found.put("layout.dtype", dtype_of(args), f"{source} (precision flags)")
    found.put("layout.recompute", recompute_of(args), f"{source} (recompute flags)")
    gated = [truthy(args[k]) for k in ("swiglu", "gated_linear_unit") if k in args]
    if gated:
        found.put("model.activation", "swiglu" if any(gated) else "gelu", f"{source} (swiglu)")
    tied = args.get("untie_embeddings_and_output_weights")
    if isinstance(tied, bool):
        found.put("model.tied_embeddings", not tied, source)
    elif isinstance(args.get("share_embeddings_and_output_weights"), bool):
        found.put("model.tied_embeddings", args["share_embeddings_and_output_weights"], source)
    for name in SETTINGS:
        if name in args and args[name] is not None:
            found.setting(name, args[name])
