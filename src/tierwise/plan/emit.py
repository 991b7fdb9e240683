"""Launch configurations a user can paste: Megatron-LM, torchtitan, DeepSpeed, Slurm."""

from __future__ import annotations

import itertools
import json
import shlex
from bisect import bisect_right
from typing import Any

from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.perf.pipeline import schedule_for
from tierwise.perf.step import Flags
from tierwise.workload.layout import Layout
from tierwise.workload.pipeline import chunk_layers, layout_string
from tierwise.workload.spec import ModelSpec

EMITTERS = ("megatron", "torchtitan", "deepspeed", "slurm")
LAUNCHERS = ("megatron", "torchtitan", "deepspeed", "any")
"""What the Slurm script runs (`emit(..., framework=)`); "any" runs Megatron-LM."""
EMIT_FILES = {
    "megatron": "megatron_args.txt",
    "torchtitan": "torchtitan.toml",
    "deepspeed": "deepspeed.json",
    "slurm": "job.sbatch",
}


def _reject(framework: str, checks: list[tuple[bool, str, object, str]]) -> None:
    """Raise SpecError for the first (unsupported, field, value, what is supported) that holds."""
    for unsupported, field, value, supported in checks:
        if unsupported:
            raise SpecError(f"--emit {framework}: {field}={value!r}: {supported}")


def _megatron_only(layout: Layout, framework: str) -> list[tuple[bool, str, object, str]]:
    """The `_reject` checks of what only Megatron runs: its selective-recompute modules and
    CPU activation offloading."""
    return [
        (
            layout.recompute_modules is not None,
            "recompute_modules",
            list(layout.recompute_modules or ()),
            f"{framework} has no Megatron recompute modules; recompute none, selective or full",
        ),
        (
            layout.activation_offload_layers > 0,
            "activation_offload_layers",
            layout.activation_offload_layers,
            f"{framework} has no CPU activation offloading of whole layers (Megatron's)",
        ),
    ]


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


def megatron_moe_layer_freq(model: ModelSpec) -> str:
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


def megatron_model_args(model: ModelSpec, seq: int) -> list[str]:
    """Megatron-LM arguments that build ``model``'s shape (names from its ``arguments.py``):
    norm, MLP activation, position embedding and rotary base, biases, untied embeddings, GQA,
    head width, QK-norm, MLA, MoE, MTP, attention sinks and sliding windows. The vocabulary
    comes from the tokenizer: the model's Hugging Face tokenizer (`hf_model_path`)."""
    local = model.local_attention
    _reject(
        "megatron",
        [
            (
                model.activation == "geglu",
                "activation",
                model.activation,
                "Megatron-LM's arguments have --swiglu, --squared-relu or plain GELU, no GeGLU",
            ),
            (
                local is not None and local.kind == "chunked",
                "local_attention.kind",
                "chunked",
                "Megatron-LM's arguments have sliding windows (--window-size), no chunked "
                "attention (Llama 4)",
            ),
        ],
    )
    args = [
        "--tokenizer-type HuggingFaceTokenizer",
        f"--tokenizer-model {shlex.quote(hf_model_path(model))}",
        f"--max-position-embeddings {model.max_seq or seq}",
        f"--num-layers {model.layers}",
        f"--hidden-size {model.hidden}",
        f"--ffn-hidden-size {model.ffn}",
        f"--num-attention-heads {model.heads}",
        f"--normalization {NORMALIZATION[model.norm]}",
        *ACTIVATION_FLAG[model.activation],
        f"--position-embedding-type {POSITION[model.position]}",
    ]
    if model.position == "rope" and model.rope_theta is not None:
        args.append(f"--rotary-base {round(model.rope_theta)}")
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
    if model.moe is not None:
        moe = model.moe
        args += [
            f"--num-experts {moe.experts}",
            f"--moe-router-topk {moe.top_k}",
            f"--moe-ffn-hidden-size {moe.expert_ffn_hidden}",
        ]
        if moe.shared_experts:
            total = moe.shared_experts * moe.shared_ffn
            args.append(f"--moe-shared-expert-intermediate-size {total}")
        if model.moe_layers != model.layers:
            args.append(f'--moe-layer-freq "{megatron_moe_layer_freq(model)}"')
        if moe.router == "sigmoid":
            args.append("--moe-router-score-function sigmoid")
        if moe.expert_bias:
            args.append("--moe-router-enable-expert-bias")
    if model.mtp_layers:
        args.append(f"--mtp-num-layers {model.mtp_layers}")
    return args


def megatron_args(model: ModelSpec, layout: Layout, flags: Flags = Flags()) -> list[str]:
    """Megatron-LM `pretrain_gpt.py` arguments for the layout and model shape."""
    _reject(
        "megatron",
        [
            (
                layout.zero >= 1,
                "zero",
                layout.zero,
                "Megatron runs plain DDP or its distributed optimizer (zero 0); plan with "
                "--framework megatron",
            )
        ],
    )
    args = [
        f"--tensor-model-parallel-size {layout.tp}",
        f"--pipeline-model-parallel-size {layout.pp}",
        f"--context-parallel-size {layout.cp}",
        f"--expert-model-parallel-size {layout.ep}",
        *([f"--expert-tensor-parallel-size {layout.etp}"] if layout.expert_tp != layout.tp else []),
        f"--micro-batch-size {layout.mbs}",
        f"--global-batch-size {layout.global_batch}",
        f"--seq-length {layout.seq}",
        *megatron_model_args(model, layout.seq),
    ]
    stages = layout.stage_layers(model)
    first, last, middle = stages[0], stages[-1], set(stages[1:-1])
    if len(middle) > 1 or any(n % layout.vpp for n in stages):
        # Only a layout string states middle stages that differ or chunks that do (it also
        # sets the virtual stages per rank).
        layout_text = layout_string(stages, layout.vpp)
        args.append(f'--pipeline-model-parallel-layout "{layout_text}"')
    else:
        if layout.pp_layers is not None and layout.pp > 1:
            args += [
                f"--decoder-first-pipeline-num-layers {first}",
                f"--decoder-last-pipeline-num-layers {last}",
            ]
        if layout.vpp > 1:
            args.append(f"--num-layers-per-virtual-pipeline-stage {first // layout.vpp}")
    if layout.sp_enabled:
        args.append("--sequence-parallel")
    if layout.distributed_optimizer:
        args.append("--use-distributed-optimizer")
    if layout.grad_reduce_bf16:
        args.append("--grad-reduce-in-bf16")
    if layout.recompute == "selective":
        args.append("--recompute-granularity selective")
        if layout.recompute_modules is not None:
            args.append(f"--recompute-modules {' '.join(layout.recompute_modules)}")
    elif layout.recompute == "full":
        args += [
            "--recompute-granularity full",
            "--recompute-method uniform",
            "--recompute-num-layers 1",
        ]
    # Low precision runs Transformer Engine's GEMMs inside a bf16 model; without --bf16 the
    # rest would run in fp32. FP8: E4M3 forward, E5M2 backward; --fp8-recipe only when not the
    # default (delayed), which keeps Megatron-LM releases without that flag working. MXFP8 is
    # E4M3 throughout (Megatron-LM arguments.py); NVFP4 is --fp4-format e2m1 --fp4-recipe nvfp4.
    args.append("--bf16")
    args += LOW_PRECISION_ARGS[layout.dtype]
    if layout.fp8_recipe is not None:
        args.append(f"--fp8-recipe {layout.fp8_recipe}")
    sharded = layout.distributed_optimizer or layout.zero >= 1
    if flags.fp8_param_gather and layout.dtype in ("fp8", "mxfp8") and sharded:
        args.append("--fp8-param-gather")  # the gathers the plan priced in FP8
    if layout.activation_offload_layers:  # Megatron sets cpu_offloading from it
        args.append(f"--cpu-offloading-num-layers {layout.activation_offload_layers}")
    if flags.cuda_graphs:
        args.append("--enable-cuda-graph")
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
    if flags.tp_comm_overlap and layout.tp > 1:
        args.append("--tp-comm-overlap")
    if flags.attention_backend != "flash":
        args.append(f"--attention-backend {flags.attention_backend}")
    if model.moe is not None:
        args.append(f"--moe-token-dispatcher-type {flags.moe_token_dispatcher_type}")
        if layout.expert_tp != layout.tp:
            args.append(f"--expert-tensor-parallel-size {layout.expert_tp}")
        if flags.moe_router_force_load_balancing:
            args.append("--moe-router-force-load-balancing")
        if model.moe.capacity_factor:
            args.append(f"--moe-expert-capacity-factor {model.moe.capacity_factor:g}")
        if flags.overlap_moe_expert_parallel_comm:
            args.append("--overlap-moe-expert-parallel-comm")
    if flags.delay_wgrad_compute:
        args.append("--delay-wgrad-compute")
    return args


def _check_torchtitan(layout: Layout) -> None:
    """Raise SpecError where torchtitan cannot run the layout as planned."""
    _reject(
        "torchtitan",
        [
            (
                layout.zero == 1,
                "zero",
                layout.zero,
                "torchtitan replicates (zero 0) or shards with FSDP: zero 2 (parameters kept "
                "after forward) or 3; it has no ZeRO-1",
            ),
            (
                layout.distributed_optimizer,
                "distributed_optimizer",
                True,
                "torchtitan has no Megatron distributed optimizer; use zero 2 or 3 (FSDP)",
            ),
            (
                layout.grad_reduce_bf16,
                "grad_reduce_bf16",
                True,
                "torchtitan reduces gradients in float32 only (mixed_precision_reduce)",
            ),
            *_megatron_only(layout, "torchtitan"),
        ],
    )


TORCHTITAN_FLAVORS: dict[str, tuple[str, str]] = {
    "llama3-8b": ("llama3", "8B"),
    "llama3-70b": ("llama3", "70B"),
    "llama3-405b": ("llama3", "405B"),
    "llama4-scout": ("llama4", "17bx16e"),
    "llama4-maverick": ("llama4", "17bx128e"),
    "deepseek-v3": ("deepseek_v3", "671B"),
    "qwen3-8b": ("qwen3", "8B"),
    "qwen3-32b": ("qwen3", "32B"),
    "qwen3-30b-a3b": ("qwen3", "30B-A3B"),
    "qwen3-235b-a22b": ("qwen3", "235B-A22B"),
}
"""Preset -> torchtitan ``[model] name`` and ``flavor``: the registries in pytorch/torchtitan
``torchtitan/models/{llama3,deepseek_v3,qwen3}/__init__.py`` @b5bcd76c; llama4 (17bx16e,
17bx128e) as registered before its removal in d92336fe (2026), i.e. in earlier releases."""


HF_REPOS: dict[str, str] = {
    "llama2-7b": "meta-llama/Llama-2-7b-hf",
    "llama2-13b": "meta-llama/Llama-2-13b-hf",
    "llama2-70b": "meta-llama/Llama-2-70b-hf",
    "llama3-8b": "meta-llama/Meta-Llama-3-8B",
    "llama3-70b": "meta-llama/Meta-Llama-3-70B",
    "llama3-405b": "meta-llama/Llama-3.1-405B",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "mixtral-8x22b": "mistralai/Mixtral-8x22B-v0.1",
    "deepseek-moe-16b": "deepseek-ai/deepseek-moe-16b-base",
    "qwen1.5-moe-a2.7b": "Qwen/Qwen1.5-MoE-A2.7B",
    "mpt-7b": "mosaicml/mpt-7b",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "kimi-k2": "moonshotai/Kimi-K2-Instruct",
    "qwen3-8b": "Qwen/Qwen3-8B",
    "qwen3-32b": "Qwen/Qwen3-32B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B",
    "gpt-oss-20b": "openai/gpt-oss-20b",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "llama4-scout": "meta-llama/Llama-4-Scout-17B-16E",
    "llama4-maverick": "meta-llama/Llama-4-Maverick-17B-128E",
    "gemma3-27b": "google/gemma-3-27b-pt",
}
"""Preset -> Hugging Face Hub repository whose config.json it was written from (the
sources in ``workload/data/models.yaml``)."""


def hf_model_path(model: ModelSpec) -> str:
    """The Hub repository of a preset (or a model of the same shape); else the model's name,
    which for an imported ``config.json`` is its ``_name_or_path`` or folder."""
    from tierwise.workload.load import preset

    for name, repo in HF_REPOS.items():
        if model.name == name or _same_shape(model, preset(name)):
            return repo
    return model.name


def _same_shape(a: ModelSpec, b: ModelSpec) -> bool:
    """Equal architecture (the name and the trained context do not matter)."""
    skip = {"name", "max_seq"}
    return a.model_dump(exclude=skip) == b.model_dump(exclude=skip)


def torchtitan_model(model: ModelSpec) -> tuple[str, str]:
    """torchtitan's model name and flavor for ``model`` (a preset, or the same shape)."""
    from tierwise.workload.load import preset

    for name, entry in TORCHTITAN_FLAVORS.items():
        if model.name == name or _same_shape(model, preset(name)):
            return entry
    raise SpecError(
        f"--emit torchtitan: model {model.name!r}: torchtitan has no {model.name}; it has "
        f"{', '.join(sorted({f'{n} {f}' for n, f in TORCHTITAN_FLAVORS.values()}))}"
    )


def _split_points(stage_layers: tuple[int, ...], vpp: int) -> list[int]:
    """First layer of every (virtual) pipeline stage but the first. torchtitan's looped
    schedules put virtual stage j*pp + r on pipeline rank r; each holds about 1/vpp of its
    layers (`chunk_layers`)."""
    return list(itertools.accumulate(chunk_layers(stage_layers, vpp)))[:-1]


def torchtitan_toml(
    layout: Layout, model: ModelSpec | None = None, schedule: str | None = None
) -> str:
    """A torchtitan job config's [parallelism], [training] and [activation_checkpoint], the
    [model] name and flavor (`model` given; SpecError where torchtitan lacks it), and for an
    FP8 or MXFP8 layout [model] converters + [float8] or [mx]. `model` also gives the layer
    count behind the split points of an even pipeline split (`layout.pp_layers` states an
    uneven one);
    `schedule` the pipeline schedule (default 1F1B, Interleaved1F1B with vpp > 1)."""
    _check_torchtitan(layout)
    shard = layout.zero >= 1  # FSDP over the data-parallel ranks; zero 0 replicates (DDP)
    pipeline, local_batch = [], layout.mbs
    if layout.pp > 1:
        stages = layout.stage_layers(model) if model is not None else layout.pp_layers
        if stages is None:
            raise SpecError(
                f"--emit torchtitan: pp={layout.pp}: the split points need the model's layers "
                "or pp_layers"
            )
        points = ", ".join(f'"layers.{s}"' for s in _split_points(stages, layout.vpp))
        schedule = schedule_for(schedule, layout.pp, layout.vpp, "torchtitan")
        pipeline = [
            f'pipeline_parallel_schedule = "{schedule}"',
            f"pipeline_parallel_split_points = [{points}]",
            f"pipeline_parallel_microbatch_size = {layout.mbs}",
        ]
        # torchtitan (config/job_config.py, train.py, distributed/pipeline_parallel.py): a
        # step accumulates global_batch_size / (local_batch_size * dp) local batches; with
        # pp > 1 the schedule splits each local batch into local_batch_size /
        # pipeline_parallel_microbatch_size microbatches. One local batch = one step here.
        local_batch = layout.mbs * layout.num_microbatches
    fp8, model_table = [], []
    if model is not None:
        name, flavor = torchtitan_model(model)
        model_table = [f'name = "{name}"', f'flavor = "{flavor}"']
    if layout.dtype == "fp8":  # torchao Float8Linear; FSDP gathers the weights in float8
        model_table.append('converters = ["float8"]')
        fp8 = ["[float8]", f"enable_fsdp_float8_all_gather = {str(shard).lower()}", ""]
        if layout.fp8_recipe not in (None, "tensorwise"):
            raise SpecError(
                f"--emit torchtitan: fp8_recipe={layout.fp8_recipe!r}; torchao's float8 "
                "training runs tensorwise (current) scaling"
            )
    elif layout.dtype == "mxfp8":  # torchao MX training (MXLinear)
        model_table.append('converters = ["mx"]')
        fp8 = ["[mx]", 'recipe_name = "mxfp8"', ""]
    elif layout.dtype == "nvfp4":
        raise SpecError("--emit torchtitan: dtype='nvfp4'; torchtitan trains in bf16, fp8, mxfp8")
    if model_table:
        fp8 = ["[model]", *model_table, "", *fp8]
    # mode "selective" alone would mean torchtitan's default selective_ac_option "2"
    # (full AC on every 2nd layer); "op" is op-level selective AC.
    selective = ['selective_ac_option = "op"'] if layout.recompute == "selective" else []
    # FSDP2 keeps the gathered parameters from forward to backward ("never": ZeRO-2, the
    # SHARD_GRAD_OP strategy) or frees and gathers them again ("always": ZeRO-3).
    shard_degree = layout.dp_shard_degree or layout.dp  # HSDP: replicas of this many ranks
    reshard = (
        [f'fsdp_reshard_after_forward = "{"always" if layout.zero >= 3 else "never"}"']
        if shard
        else []
    )
    return "\n".join(
        [
            "[parallelism]",
            f"data_parallel_replicate_degree = {layout.dp // shard_degree if shard else layout.dp}",
            f"data_parallel_shard_degree = {shard_degree if shard else 1}",
            *reshard,
            f"tensor_parallel_degree = {layout.tp}",
            f"context_parallel_degree = {layout.cp}",
            f"pipeline_parallel_degree = {layout.pp}",
            *pipeline,
            f"expert_parallel_degree = {layout.ep}",
            "",
            "[training]",
            f"local_batch_size = {local_batch}",
            f"global_batch_size = {layout.global_batch}",
            f"seq_len = {layout.seq}",
            'mixed_precision_param = "bfloat16"',
            "",
            "[activation_checkpoint]",
            f'mode = "{layout.recompute}"',
            *selective,
            "",
            *fp8,
        ]
    )


def _zero_stage(layout: Layout) -> int:
    """DeepSpeed's ZeRO stage for the layout (Megatron's distributed optimizer is ZeRO-1)."""
    return max(layout.zero, 1 if layout.distributed_optimizer else 0)


def _check_deepspeed(layout: Layout) -> None:
    """Raise SpecError where DeepSpeed cannot run the layout as planned."""
    stage = _zero_stage(layout)
    _reject(
        "deepspeed",
        [
            (
                layout.dtype != "bf16",
                "dtype",
                layout.dtype,
                "DeepSpeed's JSON config has no FP8 (bf16 or fp16)",
            ),
            (
                layout.pp > 1 and stage >= 2,
                "zero",
                stage,
                f"DeepSpeed's pipeline engine runs ZeRO stage 0 or 1 with pp > 1 (pp={layout.pp})",
            ),
            (layout.vpp > 1, "vpp", layout.vpp, "DeepSpeed's pipeline engine runs plain 1F1B"),
            (
                layout.cp > 1,
                "cp",
                layout.cp,
                "DeepSpeed's config has no context parallelism (its train batch counts "
                "dp = world / (tp * pp))",
            ),
            *_megatron_only(layout, "deepspeed"),
        ],
    )


def deepspeed_config(layout: Layout) -> dict[str, Any]:
    """A DeepSpeed JSON config: batch sizes, ZeRO stage, bf16, checkpointing, pipeline stages
    (and an fp32 gradient reduce where the layout has fp32 grads). tp has no JSON key: the
    training script builds the groups, and DeepSpeed checks
    train_batch_size = micro batch * accumulation * dp with dp = world / (tp * pp)."""
    _check_deepspeed(layout)
    reduce = {} if layout.grad_reduce_bf16 else {"communication_data_type": "fp32"}
    return {
        **reduce,
        "train_batch_size": layout.global_batch,
        "train_micro_batch_size_per_gpu": layout.mbs,
        "gradient_accumulation_steps": layout.num_microbatches,
        "bf16": {"enabled": True},
        "zero_optimization": {
            "stage": _zero_stage(layout),
            "overlap_comm": True,
            "contiguous_gradients": True,
        },
        "activation_checkpointing": {
            "partition_activations": layout.recompute != "none",
            "contiguous_memory_optimization": layout.recompute == "full",
        },
        "pipeline": {"stages": layout.pp},
    }


def launch_command(
    framework: str, model: ModelSpec, layout: Layout, flags: Flags = Flags()
) -> list[str]:
    """What torchrun starts on every node for `framework` (`LAUNCHERS`): Megatron-LM's
    `pretrain_gpt.py`, torchtitan's trainer on `torchtitan.toml`, or the user's DeepSpeed
    script (`$TRAIN_SCRIPT`, DeepSpeed's `--deepspeed --deepspeed_config` arguments) on
    `deepspeed.json`. DeepSpeed has no trainer of its own: the script builds the TP/PP
    groups (the sbatch comment states the degrees) and loads the model from its Hugging Face
    path and config (``--model_name_or_path``, the transformers/DeepSpeed-Chat convention);
    the JSON holds batch sizes and ZeRO."""
    if framework == "torchtitan":
        _check_torchtitan(layout)
        return ["-m torchtitan.train", f"--job.config_file {EMIT_FILES['torchtitan']}"]
    if framework == "deepspeed":
        _check_deepspeed(layout)
        script = '"${TRAIN_SCRIPT:?set TRAIN_SCRIPT to your DeepSpeed training script}"'
        return [
            script,
            f"--model_name_or_path {shlex.quote(hf_model_path(model))}",
            "--deepspeed",
            f"--deepspeed_config {EMIT_FILES['deepspeed']}",
        ]
    if framework in ("megatron", "any"):
        return ["pretrain_gpt.py", *megatron_args(model, layout, flags)]
    raise SpecError(f"--framework: {framework!r}; allowed: {', '.join(LAUNCHERS)}")


def slurm_script(
    cluster: ClusterSpec, layout: Layout, command: list[str], hostnames: list[str] | None = None
) -> str:
    """An sbatch script: one torchrun per node running `command`, nodes in the order the
    placement assumes (consecutive ranks on consecutive nodes of as few leaves as possible):
    the allocation's block order, or `hostnames` in the given order."""
    nodes = -(-layout.world // cluster.gpus_per_node)
    per_node = layout.world // nodes  # a job smaller than one node uses part of it
    if per_node * nodes != layout.world:
        raise SpecError(
            f"--emit slurm: {layout.world} GPUs do not fill whole {cluster.gpus_per_node}-GPU "
            "nodes; torchrun starts the same number of ranks on every node"
        )
    leaves = bisect_right(cluster.leaf_starts, nodes - 1)  # leaves nodes 0..nodes-1 fill
    if hostnames is not None and len(hostnames) != nodes:
        raise SpecError(f"hostnames: {len(hostnames)} given, the layout needs {nodes} nodes")
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=tierwise-tp{layout.tp}-cp{layout.cp}-pp{layout.pp}-dp{layout.dp}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={per_node}",
        "#SBATCH --exclusive",
        f"#SBATCH --switches={leaves}",
        f"# layout: tp={layout.tp} cp={layout.cp} ep={layout.ep} pp={layout.pp} "
        f"vpp={layout.vpp} dp={layout.dp}, rank order tp-cp-ep-dp-pp",
    ]
    if hostnames:
        lines += [
            f"#SBATCH --nodelist={','.join(hostnames)}",
            "",
            "# Task i runs on line i of the hostfile (arbitrary distribution).",
            'hostfile="tierwise-hosts.$SLURM_JOB_ID"',
            f"printf '%s\\n' {' '.join(map(shlex.quote, hostnames))} > \"$hostfile\"",
            'export SLURM_HOSTFILE="$hostfile"',
            f"export MASTER_ADDR={shlex.quote(hostnames[0])}",
        ]
        distribution = "arbitrary"
    else:
        lines += [
            "",
            "# Task i runs on node i of the allocation (block distribution): consecutive",
            "# ranks share a node and consecutive nodes share a leaf switch.",
            'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        ]
        distribution = "block:block"
    # Static rendezvous: the task's own SLURM_PROCID (expanded by each task's shell, hence
    # the single quotes) is its node rank, so node i of that order holds ranks i*G..i*G+G-1.
    torchrun = [
        f"exec torchrun --nnodes={nodes} --nproc-per-node={per_node}",
        '--node-rank="$SLURM_PROCID" --master-addr="$MASTER_ADDR" --master-port="$MASTER_PORT"',
        *command,
    ]
    lines += [
        "export MASTER_PORT=29500",
        f"srun --ntasks={nodes} --distribution={distribution} bash -c "
        + shlex.quote("\n  " + " \\\n  ".join(torchrun)),
        "",
    ]
    return "\n".join(lines)


def emit(
    kind: str,
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    flags: Flags = Flags(),
    *,
    framework: str = "megatron",
) -> str:
    """The text of one emitter (`EMITTERS`); `framework` picks what the Slurm script runs."""
    if kind == "megatron":
        return " \\\n  ".join(megatron_args(model, layout, flags)) + "\n"
    if kind == "torchtitan":
        return torchtitan_toml(layout, model, flags.pipeline_schedule)
    if kind == "deepspeed":
        return json.dumps(deepspeed_config(layout), indent=2) + "\n"
    return slurm_script(cluster, layout, launch_command(framework, model, layout, flags))
