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
        f"--micro-batch-size {layout.mbs}",
        f"--global-batch-size {layout.global_batch}",
        f"--seq-length {layout.seq}",
        f"--max-position-embeddings {layout.seq}",
        f"--num-layers {model.layers}",
        f"--hidden-size {model.hidden}",
        f"--ffn-hidden-size {model.ffn}",
        f"--num-attention-heads {model.heads}",
    ]
    if model.kv != model.heads:
        args += ["--group-query-attention", f"--num-query-groups {model.kv}"]
    if model.moe is not None:
        args += [f"--num-experts {model.moe.experts}", f"--moe-router-topk {model.moe.top_k}"]
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
    elif layout.recompute == "full":
        args += [
            "--recompute-granularity full",
            "--recompute-method uniform",
            "--recompute-num-layers 1",
        ]
    if model.activation == "swiglu":
        args.append("--swiglu")
    # FP8 runs Transformer Engine's FP8 GEMMs (E4M3 forward, E5M2 backward) inside a bf16
    # model; without --bf16 the rest would run in fp32. --fp8-recipe is left at its default
    # (delayed scaling), which also keeps Megatron-LM releases without that flag working.
    args.append("--bf16")
    if layout.dtype == "fp8":
        args.append("--fp8-format hybrid")
    if flags.overlap_grad_reduce:
        args.append("--overlap-grad-reduce")
    if flags.overlap_param_gather and layout.distributed_optimizer:
        args.append("--overlap-param-gather")
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
            args += ["--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"]
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
        ],
    )


def _split_points(stage_layers: tuple[int, ...], vpp: int) -> list[int]:
    """First layer of every (virtual) pipeline stage but the first. torchtitan's looped
    schedules put virtual stage j*pp + r on pipeline rank r; each holds about 1/vpp of its
    layers (`chunk_layers`)."""
    return list(itertools.accumulate(chunk_layers(stage_layers, vpp)))[:-1]


def torchtitan_toml(
    layout: Layout, model: ModelSpec | None = None, schedule: str | None = None
) -> str:
    """A torchtitan job config's [parallelism], [training] and [activation_checkpoint] (and
    [model] converters + [float8] for an FP8 layout). `model` gives the layer count behind
    the split points of an even pipeline split (`layout.pp_layers` states an uneven one);
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
    fp8 = []
    if layout.dtype == "fp8":  # torchao Float8Linear; FSDP gathers the weights in float8
        fp8 = ["[model]", 'converters = ["float8"]', "", "[float8]"]
        fp8 += [f"enable_fsdp_float8_all_gather = {str(shard).lower()}", ""]
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
                layout.dtype == "fp8",
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
    groups (the sbatch comment states the degrees); the JSON holds batch sizes and ZeRO."""
    if framework == "torchtitan":
        _check_torchtitan(layout)
        return ["-m torchtitan.train", f"--job.config_file {EMIT_FILES['torchtitan']}"]
    if framework == "deepspeed":
        _check_deepspeed(layout)
        script = '"${TRAIN_SCRIPT:?set TRAIN_SCRIPT to your DeepSpeed training script}"'
        return [script, "--deepspeed", f"--deepspeed_config {EMIT_FILES['deepspeed']}"]
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
