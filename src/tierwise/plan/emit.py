"""Launch configurations a user can paste: Megatron-LM, torchtitan, DeepSpeed, Slurm."""

from __future__ import annotations

import itertools
import json
from typing import Any

from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.perf.step import Flags
from tierwise.workload.layout import Layout
from tierwise.workload.spec import ModelSpec

EMITTERS = ("megatron", "torchtitan", "deepspeed", "slurm")


def megatron_args(model: ModelSpec, layout: Layout, flags: Flags = Flags()) -> list[str]:
    """Megatron-LM `pretrain_gpt.py` arguments for the layout and model shape."""
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
    if layout.pp_layers is not None and layout.pp > 1:
        first, *middle, last = layout.pp_layers
        if len(set(middle)) > 1:
            raise SpecError(
                f"--emit megatron: pp_layers {list(layout.pp_layers)}: Megatron sets the first "
                "and last stage's layers; the stages between them must hold the same number"
            )
        args += [
            f"--decoder-first-pipeline-num-layers {first}",
            f"--decoder-last-pipeline-num-layers {last}",
        ]
    if layout.vpp > 1:
        per_stage = layout.stage_layers(model)[0] // layout.vpp
        args.append(f"--num-layers-per-virtual-pipeline-stage {per_stage}")
    if layout.sp_enabled:
        args.append("--sequence-parallel")
    if layout.distributed_optimizer or layout.zero >= 1:
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
    args.append("--fp8-format hybrid" if layout.dtype == "fp8" else "--bf16")
    if flags.overlap_grad_reduce:
        args.append("--overlap-grad-reduce")
    if flags.overlap_param_gather and (layout.distributed_optimizer or layout.zero >= 1):
        args.append("--overlap-param-gather")
    if layout.cp > 1:
        args.append(f"--cp-comm-type {flags.cp_comm}")
    if flags.tp_comm_overlap and layout.tp > 1:
        args.append("--tp-comm-overlap")
    return args


def torchtitan_toml(layout: Layout) -> str:
    """A torchtitan job config's [parallelism], [training] and [activation_checkpoint] (and
    [model] converters + [float8] for an FP8 layout)."""
    replicate = 1 if layout.zero >= 3 else layout.dp
    shard = layout.dp if layout.zero >= 3 else 1
    schedule = "Interleaved1F1B" if layout.vpp > 1 else "1F1B"
    splits = []
    if layout.pp_layers is not None and layout.pp > 1:  # where every stage but the first starts
        starts = list(itertools.accumulate(layout.pp_layers))[:-1]
        points = ", ".join(f'"layers.{s}"' for s in starts)
        splits = [f"pipeline_parallel_split_points = [{points}]"]
    fp8 = []
    if layout.dtype == "fp8":  # torchao Float8Linear; FSDP gathers the weights in float8
        fsdp8 = "true" if layout.zero >= 3 else "false"
        fp8 = ["[model]", 'converters = ["float8"]', "", "[float8]"]
        fp8 += [f"enable_fsdp_float8_all_gather = {fsdp8}", ""]
    return "\n".join(
        [
            "[parallelism]",
            f"data_parallel_replicate_degree = {replicate}",
            f"data_parallel_shard_degree = {shard}",
            f"tensor_parallel_degree = {layout.tp}",
            f"context_parallel_degree = {layout.cp}",
            f"pipeline_parallel_degree = {layout.pp}",
            f'pipeline_parallel_schedule = "{schedule}"',
            *splits,
            f"expert_parallel_degree = {layout.ep}",
            "",
            "[training]",
            f"local_batch_size = {layout.mbs * layout.num_microbatches}",
            f"global_batch_size = {layout.global_batch}",
            f"seq_len = {layout.seq}",
            'mixed_precision_param = "bfloat16"',
            "",
            "[activation_checkpoint]",
            f'mode = "{layout.recompute}"',
            "",
            *fp8,
        ]
    )


def deepspeed_config(layout: Layout) -> dict[str, Any]:
    """A DeepSpeed JSON config: batch sizes, ZeRO stage, precision, checkpointing."""
    return {
        "train_batch_size": layout.global_batch,
        "train_micro_batch_size_per_gpu": layout.mbs,
        "gradient_accumulation_steps": layout.num_microbatches,
        "bf16": {"enabled": layout.dtype == "bf16"},
        "zero_optimization": {
            "stage": max(layout.zero, 1 if layout.distributed_optimizer else 0),
            "overlap_comm": True,
            "contiguous_gradients": True,
        },
        "activation_checkpointing": {
            "partition_activations": layout.recompute != "none",
            "contiguous_memory_optimization": layout.recompute == "full",
        },
        "pipeline": {"stages": layout.pp},
    }


def slurm_script(
    cluster: ClusterSpec, layout: Layout, launch_args: list[str], hostnames: list[str] | None = None
) -> str:
    """An sbatch script: one torchrun per node, nodes in the order the placement assumes
    (consecutive ranks on consecutive nodes of as few leaves as possible)."""
    nodes = -(-layout.world // cluster.gpus_per_node)
    leaves = -(-nodes // cluster.nodes_per_leaf)
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=tierwise-tp{layout.tp}-pp{layout.pp}-dp{layout.dp}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={cluster.gpus_per_node}",
        "#SBATCH --exclusive",
        f"#SBATCH --switches={leaves}",
        "",
        "# Keep the node order Slurm gave (block distribution) so that consecutive ranks",
        "# share a node and consecutive nodes share a leaf switch.",
    ]
    if hostnames:
        lines.append(f"export SLURM_HOSTFILE=<(printf '%s\\n' {' '.join(hostnames)})")
    lines += [
        'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "export MASTER_PORT=29500",
        "srun --distribution=block:block torchrun \\",
        f"  --nnodes={nodes} --nproc-per-node={cluster.gpus_per_node} \\",
        "  --node-rank=$SLURM_NODEID --rdzv-backend=c10d \\",
        "  --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT \\",
        "  pretrain_gpt.py \\",
        "  " + " \\\n  ".join(launch_args),
        "",
    ]
    return "\n".join(lines)


def emit(
    kind: str, model: ModelSpec, cluster: ClusterSpec, layout: Layout, flags: Flags = Flags()
) -> str:
    """The text of one emitter (`EMITTERS`)."""
    if kind == "megatron":
        return " \\\n  ".join(megatron_args(model, layout, flags)) + "\n"
    if kind == "torchtitan":
        return torchtitan_toml(layout)
    if kind == "deepspeed":
        return json.dumps(deepspeed_config(layout), indent=2) + "\n"
    return slurm_script(cluster, layout, megatron_args(model, layout, flags))


EMIT_FILES = {
    "megatron": "megatron_args.txt",
    "torchtitan": "torchtitan.toml",
    "deepspeed": "deepspeed.json",
    "slurm": "job.sbatch",
}
