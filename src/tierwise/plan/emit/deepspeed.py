"""DeepSpeed for a plan: a JSON config of keys DeepSpeed knows, and one launcher convention,
the ``deepspeed`` launcher running the user's training script with ``--deepspeed
--deepspeed_config`` (``deepspeed.add_config_arguments``).

DeepSpeed has no trainer of its own: the script builds the model and its TP/PP groups (the
Slurm script states the degrees and the model's Hugging Face path in a comment); the JSON
holds batch sizes, ZeRO, precision and activation checkpointing. DeepSpeedConfig checks
``train_batch_size = micro batch x accumulation x dp`` with dp = world / (tp x pp).
"""

from __future__ import annotations

import json
from typing import Any

from tierwise import frameworks
from tierwise.perf.flags import Flags
from tierwise.plan.emit.common import Launch, check_runs, refuse
from tierwise.workload.layout import Layout
from tierwise.workload.spec import ModelSpec

FW = frameworks.DEEPSPEED
KIND = str(FW.emitter)
FILE = "deepspeed.json"
SCRIPT = '"${TRAIN_SCRIPT:?set TRAIN_SCRIPT to your DeepSpeed training script}"'


def zero_stage(layout: Layout) -> int:
    """DeepSpeed's ZeRO stage for the layout (Megatron's distributed optimizer is ZeRO-1)."""
    return max(layout.zero, 1 if layout.distributed_optimizer else 0)


def check_launchable(layout: Layout, flags: Flags) -> None:
    """Refuse, in one line, what today's DeepSpeed cannot run as the plan was priced: the
    table row's refusals, and ZeRO-3 priced as the releases before `legacy_zero3_before`."""
    check_runs(FW, layout, flags)
    if flags.legacy_zero3 and layout.zero >= 3:
        raise refuse(
            KIND,
            f"--legacy-zero3: the plan is priced as DeepSpeed before {FW.legacy_zero3_before} "
            "ran ZeRO-3 (every gather and reduce-scatter waited on); today's DeepSpeed runs "
            "this config with its prefetching ZeRO-3, which the plan did not price; drop "
            "--legacy-zero3 to launch it",
        )


def deepspeed_config(layout: Layout, flags: Flags | None = None) -> dict[str, Any]:
    """A DeepSpeed JSON config: batch sizes, ZeRO stage, bf16, activation checkpointing,
    pipeline stages and whether its sends are partitioned over the model-parallel ranks
    (`flags`, DeepSpeed's defaults when None), and an fp32 gradient reduce where the layout
    has fp32 grads."""
    flags = flags or Flags.resolve(FW.name, {})
    check_launchable(layout, flags)
    partitioned = flags.scatter_gather_tensors_in_pipeline
    reduce = {} if layout.grad_reduce_bf16 else {"communication_data_type": "fp32"}
    return {
        **reduce,
        "train_batch_size": layout.global_batch,
        "train_micro_batch_size_per_gpu": layout.mbs,
        "gradient_accumulation_steps": layout.num_microbatches,
        "bf16": {"enabled": True},
        "zero_optimization": {
            "stage": zero_stage(layout),
            # the gradient reduce overlapped with backward, as priced (--overlap-grad-reduce)
            "overlap_comm": flags.overlap_grad_reduce,
            "contiguous_gradients": True,
        },
        "activation_checkpointing": {
            "partition_activations": layout.recompute != "none",
            "contiguous_memory_optimization": layout.recompute == "full",
        },
        "pipeline": {
            "stages": layout.pp,
            "pipe_partitioned": partitioned,
            "grad_partitioned": partitioned,
        },
    }


def config_text(model: ModelSpec, layout: Layout, flags: Flags) -> str:
    """The JSON (what ``--emit deepspeed`` prints and writes)."""
    return json.dumps(deepspeed_config(layout, flags), indent=2) + "\n"


def launch(model: ModelSpec, layout: Layout, flags: Flags) -> Launch:
    """The user's script with DeepSpeed's config arguments, started by the deepspeed
    launcher (which runs srun itself: `tierwise.plan.emit.slurm`)."""
    check_launchable(layout, flags)
    return Launch({}, [SCRIPT, "--deepspeed", f"--deepspeed_config {FILE}"], str(FW.launcher), FILE)
