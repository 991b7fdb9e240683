"""Megatron-LM ``pretrain_gpt.py`` arguments for a plan, and the environment it requires.

Argument names are Megatron-LM's (``megatron/training/arguments.py``; the transformer ones
generated from megatron-core's ``TransformerConfig``); what ``validate_args`` requires is
written with them: ``--max-position-embeddings`` at least ``--seq-length``, grouped GEMMs
for MoE (what the estimate prices), and ``CUDA_DEVICE_MAX_CONNECTIONS=1`` whenever tp or cp
> 1 (NVIDIA/Megatron-LM@d98e8a64 ``validate_args``: asserted before Blackwell, where the
requirement ends; set everywhere, it is harmless).
"""

from __future__ import annotations

from tierwise import frameworks
from tierwise.perf.flags import Flags
from tierwise.plan.emit.common import Launch, check_runs, hf_path, refuse
from tierwise.workload.layout import Layout
from tierwise.workload.pipeline import layout_string
from tierwise.workload.precision import GATHER_LOW_DTYPES
from tierwise.workload.recompute import spec_modules
from tierwise.workload.spec import ModelSpec

FW = frameworks.MEGATRON
KIND = str(FW.emitter)
FILE = "megatron_args.txt"
ORDER_FLAG = {("tp", "cp", "pp", "dp"): "--use-tp-pp-dp-mapping"}
"""Rank orders other than Megatron-core's default (tp-cp-ep-dp-pp) and the flag that asks
for them (``parallel_state.initialize_model_parallel(order=...)``)."""

LOW_PRECISION_ARGS = {
    "bf16": [],
    "fp8": ["--fp8-format hybrid"],
    "mxfp8": ["--fp8-format e4m3", "--fp8-recipe mxfp8"],
    "nvfp4": ["--fp4-format e2m1", "--fp4-recipe nvfp4"],
}
"""Megatron-LM flags of each dtype (its arguments.py: --fp8-format, --fp8-recipe, --fp4-*)."""
NORMALIZATION = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}
POSITION = {"rope": "rope", "learned": "learned_absolute"}
ACTIVATION_FLAG = {"swiglu": ["--swiglu"], "squared-relu": ["--squared-relu"], "gelu": []}
"""Megatron-LM's MLP flags (no flag: GELU); it has no gated-GELU (GeGLU) flag."""
LLAMA3_ROPE = (1.0, 4.0, 8192)
"""(low_freq_factor, high_freq_factor, original_max_position_embeddings) that Megatron-core's
``RotaryEmbedding._apply_scaling`` fixes for ``--use-rope-scaling`` (Llama 3.1's)."""


def moe_layer_freq(model: ModelSpec) -> str:
    """Megatron's ``--moe-layer-freq`` list pattern (1 = MoE layer) for ``model``: leading
    dense layers, then every ``every``-th layer MoE, e.g. ``([0]*3+[1]*58)`` for
    DeepSeek-V3 and ``([0,1]*24)`` for Llama 4 Maverick."""
    moe = model.moe
    assert moe is not None
    n = model.moe_layers
    unit = ",".join(["0"] * (moe.every - 1) + ["1"])
    tail = model.layers - moe.dense_layers - n * moe.every
    parts = [f"[0]*{moe.dense_layers}"] if moe.dense_layers else []
    parts.append(f"[{unit}]*{n}")
    parts += [f"[0]*{tail}"] if tail else []
    return f"({'+'.join(parts)})"


def _refuse_model(model: ModelSpec) -> None:
    local = model.local_attention
    if model.activation == "geglu":
        raise refuse(
            KIND,
            "activation=geglu: Megatron-LM's arguments have --swiglu, --squared-relu or "
            "plain GELU, no GeGLU",
        )
    if local is not None and local.kind == "chunked":
        raise refuse(
            KIND,
            "local_attention.kind=chunked: Megatron-LM's arguments have sliding windows "
            "(--window-size), no chunked attention (Llama 4)",
        )


def _rope_args(model: ModelSpec) -> list[str]:
    """Rotary base and scaling as the config.json states them."""
    args = []
    if model.position == "rope" and model.rope_theta is not None:
        args.append(f"--rotary-base {round(model.rope_theta)}")
    scaling = model.rope_scaling
    if scaling is None:
        return args
    if scaling.kind == "llama3":
        fixed = (scaling.low_freq_factor, scaling.high_freq_factor, scaling.original_max_seq)
        if fixed != LLAMA3_ROPE:
            raise refuse(
                KIND,
                f"rope_scaling {fixed}: Megatron-LM's --use-rope-scaling fixes low/high "
                f"frequency factors and original context to {LLAMA3_ROPE} (Llama 3.1's)",
            )
        return [*args, "--use-rope-scaling", f"--rope-scaling-factor {scaling.factor:g}"]
    if scaling.kind == "linear":
        return [*args, f"--rotary-seq-len-interpolation-factor {scaling.factor:g}"]
    yarn = [f"--rotary-scaling-factor {scaling.factor:g}"]
    if scaling.original_max_seq:
        yarn.append(f"--yarn-original-max-position-embeddings {scaling.original_max_seq}")
    if scaling.beta_fast is not None:
        yarn.append(f"--yarn-beta-fast {scaling.beta_fast:g}")
    if scaling.beta_slow is not None:
        yarn.append(f"--yarn-beta-slow {scaling.beta_slow:g}")
    if model.mla is not None:  # MLA takes yarn by default; its mscales are MLA's
        return [
            *args,
            "--rope-type yarn",
            *yarn,
            f"--mscale {scaling.mscale or 1.0:g}",
            f"--mscale-all-dim {scaling.mscale_all_dim or 0.0:g}",
        ]
    return [*args, *yarn]  # with --position-embedding-type yarn (`_position`)


def _position(model: ModelSpec) -> str:
    """Megatron's position embedding type: YaRN is its own type, except under MLA (which
    takes ``--rope-type yarn``)."""
    scaling = model.rope_scaling
    if scaling is not None and scaling.kind == "yarn" and model.mla is None:
        return "yarn"
    return POSITION[model.position]


def _moe_args(model: ModelSpec) -> list[str]:
    """Experts, the router as the config.json routes and the grouped GEMMs the estimate
    prices (``--moe-grouped-gemm``)."""
    moe = model.moe
    if moe is None:
        return []
    args = [
        f"--num-experts {moe.experts}",
        f"--moe-router-topk {moe.top_k}",
        f"--moe-ffn-hidden-size {moe.expert_ffn_hidden}",
        "--moe-grouped-gemm",
    ]
    if moe.shared_experts:
        args.append(f"--moe-shared-expert-intermediate-size {moe.shared_experts * moe.shared_ffn}")
    if model.moe_layers != model.layers:
        args.append(f'--moe-layer-freq "{moe_layer_freq(model)}"')
    if moe.router == "sigmoid":  # Megatron renormalises the top-k sigmoid scores
        args.append("--moe-router-score-function sigmoid")
    elif not moe.renormalize:  # softmax over all experts, top-k probabilities kept as they are
        args.append("--moe-router-pre-softmax")
    if moe.expert_bias:
        args.append("--moe-router-enable-expert-bias")
    if moe.score_scale is not None:
        args.append(f"--moe-router-topk-scaling-factor {moe.score_scale:g}")
    if moe.groups is not None and moe.group_top_k is not None:
        args += [
            f"--moe-router-num-groups {moe.groups}",
            f"--moe-router-group-topk {moe.group_top_k}",
        ]
    return args


def model_args(model: ModelSpec, seq: int) -> list[str]:
    """Megatron-LM arguments that build ``model``'s shape (names from its ``arguments.py``):
    tokenizer (the config.json's directory or Hub repository), norm and its epsilon, MLP
    activation, position embedding, rotary base and scaling, biases, untied embeddings, GQA,
    head width, QK-norm, MLA, MoE and its router, MTP, attention sinks and sliding windows.
    ``--max-position-embeddings`` covers ``seq`` (Megatron asserts it)."""
    _refuse_model(model)
    local = model.local_attention
    args = [
        "--tokenizer-type HuggingFaceTokenizer",
        f"--tokenizer-model {hf_path(model, KIND)}",
        f"--max-position-embeddings {max(model.max_seq or seq, seq)}",
        f"--num-layers {model.layers}",
        f"--hidden-size {model.hidden}",
        f"--ffn-hidden-size {model.ffn}",
        f"--num-attention-heads {model.heads}",
        f"--normalization {NORMALIZATION[model.norm]}",
        *([f"--norm-epsilon {model.norm_eps:g}"] if model.norm_eps is not None else []),
        *ACTIVATION_FLAG[model.activation],
        f"--position-embedding-type {_position(model)}",
        *_rope_args(model),
    ]
    if model.bias != "all":
        args.append("--disable-bias-linear")
    if model.bias == "qkv":
        args.append("--add-qkv-bias")
    if not model.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if model.mla is not None:
        mla = model.mla
        q_lora = [] if mla.q_lora_rank is None else [f"--q-lora-rank {mla.q_lora_rank}"]
        args += [
            "--multi-latent-attention",
            *q_lora,
            f"--kv-lora-rank {mla.kv_lora_rank}",
            f"--qk-head-dim {mla.qk_nope_head_dim}",
            f"--qk-pos-emb-head-dim {mla.qk_rope_head_dim}",
            f"--v-head-dim {mla.v_head_dim}",
        ]
    else:
        if model.kv != model.heads:
            args += ["--group-query-attention", f"--num-query-groups {model.kv}"]
        args.append(f"--kv-channels {model.hd}")
    if model.qk_norm:
        args.append("--qk-layernorm")
    if model.attention_sinks:
        args.append("--softmax-type learnable")
    if local is not None:  # HF's window counts the query itself; Megatron's left span does not
        args.append(f"--window-size {local.window - 1},0")
        if local.global_every is not None:
            args.append(f"--window-attn-skip-freq {local.global_every}")
    args += _moe_args(model)
    if model.mtp_layers:
        args.append(f"--mtp-num-layers {model.mtp_layers}")
    return args


def _pipeline_args(model: ModelSpec, layout: Layout) -> list[str]:
    stages = layout.stage_layers(model)
    first, last, middle = stages[0], stages[-1], set(stages[1:-1])
    args = []
    uneven = layout.pp_layers is not None and layout.pp > 1
    if len(middle) > 1 or any(n % layout.vpp for n in stages) or (uneven and layout.vpp > 1):
        # Only a layout string states middle stages that differ, chunks that do, or an
        # uneven split interleaved (it also sets the virtual stages per rank).
        text = layout_string(stages, layout.vpp, model.mtp_layers)
        args.append(f'--pipeline-model-parallel-layout "{text}"')
    else:
        if layout.pp_layers is not None and layout.pp > 1:
            args += [
                f"--decoder-first-pipeline-num-layers {first}",
                f"--decoder-last-pipeline-num-layers {last}",
            ]
        if layout.vpp > 1:  # (interleaving on 2 ranks needs the p2p overlap: on by default)
            args.append(f"--num-layers-per-virtual-pipeline-stage {first // layout.vpp}")
    return args


def _recompute_args(model: ModelSpec, layout: Layout) -> list[str]:
    if layout.recompute == "full":
        return [
            "--recompute-granularity full",
            f"--recompute-method {layout.recompute_method or 'uniform'}",
            f"--recompute-num-layers {layout.recompute_num_layers or 1}",
        ]
    if layout.recompute != "selective":
        return []
    args = ["--recompute-granularity selective"]
    if layout.recompute_modules is not None:
        missing = [m for m in layout.recompute_modules if m not in spec_modules(model)]
        if missing:
            raise refuse(
                KIND,
                f"recompute_modules={','.join(missing)}: {model.name}'s Transformer Engine "
                f"layer spec has no such module (it has {', '.join(spec_modules(model))})",
            )
        args.append(f"--recompute-modules {' '.join(layout.recompute_modules)}")
    return args


def _precision_args(layout: Layout, flags: Flags) -> list[str]:
    # Low precision runs Transformer Engine's GEMMs inside a bf16 model; without --bf16 the
    # rest would run in fp32. FP8: E4M3 forward, E5M2 backward; --fp8-recipe only when not the
    # default (delayed). MXFP8 is E4M3 throughout; NVFP4 is --fp4-format e2m1.
    args = ["--bf16", *LOW_PRECISION_ARGS[layout.dtype]]
    if layout.fp8_recipe is not None:
        args.append(f"--fp8-recipe {layout.fp8_recipe}")
    sharded = layout.distributed_optimizer or layout.zero >= 1
    if flags.fp8_param_gather and layout.dtype in GATHER_LOW_DTYPES and sharded:
        args.append("--fp8-param-gather")  # the gathers the plan priced in FP8
    return args


def _behaviour_args(model: ModelSpec, layout: Layout, flags: Flags) -> list[str]:
    if flags.scatter_gather_tensors_in_pipeline and layout.pipeline_sends_whole:
        raise refuse(
            KIND,
            "--scatter-gather-tensors-in-pipeline: Megatron-LM sends whole activations since "
            "its pipeline code moved to megatron-core (2023-03); add --sequence-parallel to "
            "split them over the TP ranks",
        )
    if not flags.async_tensor_model_parallel_allreduce and layout.tp > 1:
        raise refuse(
            KIND,
            "--no-async-tensor-model-parallel-allreduce: Megatron-LM runs the column-parallel "
            "backward collectives asynchronously since 2021-09 and has ignored the flag since "
            "2024-04; price the plan with them to launch it",
        )
    args = []
    if flags.cuda_graphs:
        args.append("--enable-cuda-graph")
    # Every overlap the plan priced (`frameworks.flag_checks` refused those Megatron asserts
    # against): the param gather only with the grad reduce, TP overlap only with SP.
    if flags.overlap_grad_reduce:
        args.append("--overlap-grad-reduce")
        if flags.overlap_param_gather and layout.distributed_optimizer:
            args.append("--overlap-param-gather")
            if not flags.align_param_gather and layout.vpp > 1:  # Megatron's default: on
                args.append("--no-align-param-gather")
    if layout.vpp > 1 and not flags.overlap_p2p_communication:  # Megatron's default: on
        args.append("--no-overlap-p2p-communication")
    group = flags.microbatch_group_size_per_vp_stage
    if group is not None and layout.vpp > 1:
        args.append(f"--microbatch-group-size-per-virtual-pipeline-stage {group}")
    if layout.cp > 1:
        args.append(f"--cp-comm-type {flags.cp_comm}")
    if flags.tp_comm_overlap and layout.tp > 1:  # (at tp 1 Megatron turns SP off, then asserts)
        args.append("--tp-comm-overlap")
    if flags.attention_backend != "flash":
        args.append(f"--attention-backend {flags.attention_backend}")
    if model.moe is not None:
        args.append(f"--moe-token-dispatcher-type {flags.moe_token_dispatcher_type}")
        if flags.moe_router_force_load_balancing:
            args.append("--moe-router-force-load-balancing")
        if model.moe.capacity_factor:
            args.append(f"--moe-expert-capacity-factor {model.moe.capacity_factor:g}")
        if flags.overlap_moe_expert_parallel_comm:
            args.append("--overlap-moe-expert-parallel-comm")
        if flags.delay_wgrad_compute:  # (priced for the expert all-to-all alone)
            args.append("--delay-wgrad-compute")
    order = ORDER_FLAG.get(tuple(flags.order))
    if order is not None:
        args.append(order)
    return args


def megatron_args(model: ModelSpec, layout: Layout, flags: Flags = Flags()) -> list[str]:
    """Megatron-LM ``pretrain_gpt.py`` arguments for the layout and model shape."""
    check_runs(FW, layout, flags, model)
    if tuple(flags.order) not in (Flags().order, *ORDER_FLAG):
        raise refuse(KIND, f"rank order {'-'.join(flags.order)}: Megatron-LM runs tp-cp-ep-dp-pp "
                     "or, with --use-tp-pp-dp-mapping, tp-cp-ep-pp-dp")  # fmt: skip
    args = [
        f"--tensor-model-parallel-size {layout.tp}",
        f"--pipeline-model-parallel-size {layout.pp}",
        f"--context-parallel-size {layout.cp}",
        f"--expert-model-parallel-size {layout.ep}",
        *([f"--expert-tensor-parallel-size {layout.etp}"] if layout.expert_tp != layout.tp else []),
        f"--micro-batch-size {layout.mbs}",
        f"--global-batch-size {layout.global_batch}",
        f"--seq-length {layout.seq}",
        *model_args(model, layout.seq),
        *_pipeline_args(model, layout),
    ]
    if layout.sp_enabled:
        args.append("--sequence-parallel")
    if layout.distributed_optimizer:
        args.append("--use-distributed-optimizer")
    if layout.grad_reduce_bf16:
        args.append("--grad-reduce-in-bf16")
    args += _recompute_args(model, layout)
    args += _precision_args(layout, flags)
    if layout.activation_offload_layers:  # Megatron sets cpu_offloading from it
        args.append(f"--cpu-offloading-num-layers {layout.activation_offload_layers}")
    return args + _behaviour_args(model, layout, flags)


def environment(layout: Layout) -> dict[str, str]:
    """What Megatron-LM's ``validate_args`` requires of the environment (module docstring)."""
    return {"CUDA_DEVICE_MAX_CONNECTIONS": "1"} if layout.tp > 1 or layout.cp > 1 else {}


def config_text(model: ModelSpec, layout: Layout, flags: Flags) -> str:
    """The arguments, one per line (what ``--emit megatron`` prints and writes)."""
    return " \\\n  ".join(megatron_args(model, layout, flags)) + "\n"


def launch(model: ModelSpec, layout: Layout, flags: Flags) -> Launch:
    """``pretrain_gpt.py`` with the arguments, under torchrun on every node."""
    return Launch(
        environment(layout),
        ["pretrain_gpt.py", *megatron_args(model, layout, flags)],
        str(FW.launcher),
    )
