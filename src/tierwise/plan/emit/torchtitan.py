"""torchtitan 0.3.0 arguments for a plan: ``--module M --config C`` of the nearest registered
config, then dotted overrides that tyro parses (``--parallelism.tensor_parallel_degree 8``)
and the activation-checkpointing subcommand. torchtitan 0.3 reads no TOML: its
``ConfigManager`` loads ``config_registry.C()`` of ``torchtitan.models.M`` and applies the
command line (``torchtitan/config/manager.py``).

A registered config fixes the model and its converters (float8 / MXFP8 linear layers), which
the command line cannot change; so the plan's precision picks the config, and a model or a
precision torchtitan registers no config for is refused in one line.
"""

from __future__ import annotations

import itertools

from tierwise import frameworks
from tierwise.perf.flags import Flags
from tierwise.perf.pipeline import schedule_for
from tierwise.plan.emit.common import Launch, check_runs, preset_like, refuse
from tierwise.workload.layout import Layout
from tierwise.workload.pipeline import chunk_layers
from tierwise.workload.spec import ModelSpec

FW = frameworks.TORCHTITAN
KIND = str(FW.emitter)
FILE = "torchtitan_args.txt"
TRAIN = "-m torchtitan.train"

REGISTRY: dict[str, tuple[str, dict[str, str]]] = {
    "llama3-8b": ("llama3", {"bf16": "llama3_8b", "mxfp8": "llama3_8b_mxfp8"}),
    "llama3-70b": ("llama3", {"bf16": "llama3_70b"}),
    "llama3-405b": ("llama3", {"fp8": "llama3_405b"}),
    "deepseek-moe-16b": ("deepseek_v3", {"bf16": "deepseek_v3_16b"}),
    "deepseek-v3": ("deepseek_v3", {"bf16": "deepseek_v3_671b", "fp8": "deepseek_v3_671b_float8"}),
    "qwen3-32b": ("qwen3", {"bf16": "qwen3_32b"}),
    "qwen3-30b-a3b": ("qwen3", {"bf16": "qwen3_30b_a3b"}),
    "gpt-oss-20b": ("gpt_oss", {"bf16": "gpt_oss_20b"}),
    "gpt-oss-120b": ("gpt_oss", {"bf16": "gpt_oss_120b"}),
}
"""Preset -> torchtitan module and its registered config per precision: the
``config_registry`` functions of ``torchtitan/models/{llama3,deepseek_v3,qwen3,gpt_oss}`` in
torchtitan 0.3.0 (pypi), the converters each sets (llama3_405b: Float8 linear;
llama3_8b_mxfp8: MXFP8; deepseek_v3_671b_float8: Float8 linear and grouped experts)."""
AC_SUBCOMMAND = {
    "none": "activation-checkpoint:none",
    "selective": "activation-checkpoint:selective",  # op-level SAC (SelectiveAC)
    "full": "activation-checkpoint:full",
}
"""tyro subcommands of ``Trainer.Config.activation_checkpoint`` (FullAC, SelectiveAC)."""
ASYNC_TP = [
    "--compile.enable",
    "--compile.components model,loss",
    "--compile.enable_async_tensor_parallel",
]
"""torchtitan 0.3.0's async TP (``--tp-comm-overlap``): CompileConfig asserts it runs only
under torch.compile with "model" in compile.components (a comma-separated list to its
ConfigManager); tierwise does not price the compiled kernels' other speed-ups."""
NO_ASYNC_TP = ["--compile.no_enable_async_tensor_parallel"]
EMBEDDING, FINAL = ["tok_embeddings"], ["norm", "lm_head"]
"""Module FQNs of the first and last model parts (pipeline_parallel._pipeline_module_split)."""


def registered(model: ModelSpec, dtype: str) -> tuple[str, str]:
    """``(module, config)`` of `model` (a preset or the same shape) at `dtype`."""
    name = preset_like(model, tuple(REGISTRY))
    if name is None:
        known = ", ".join(sorted(REGISTRY))
        raise refuse(KIND, f"model {model.name!r}: torchtitan 0.3.0 registers no config for "
                     f"it (it has {known})")  # fmt: skip
    module, configs = REGISTRY[name]
    if dtype not in configs:
        raise refuse(KIND, f"dtype={dtype}: torchtitan 0.3.0 registers {name} as "
                     f"{', '.join(f'{c} ({d})' for d, c in configs.items())}")  # fmt: skip
    return module, configs[dtype]


def model_parts(stage_layers: tuple[int, ...], vpp: int) -> list[list[str]]:
    """Module FQNs of every model part (virtual stage j*pp + r runs on pipeline rank r):
    each rank's layers cut into `vpp` chunks, the embedding first, the norm and output last."""
    sizes = chunk_layers(stage_layers, vpp)
    starts = [0, *itertools.accumulate(sizes)]
    parts = [[f"layers.{i}" for i in range(a, b)] for a, b in itertools.pairwise(starts)]
    parts[0] = EMBEDDING + parts[0]
    parts[-1] = parts[-1] + FINAL
    return parts


def _pipeline(model: ModelSpec, layout: Layout, flags: Flags) -> list[str]:
    if layout.pp == 1:
        return []
    schedule = schedule_for(flags.pipeline_schedule, layout.pp, layout.vpp, FW.name)
    parts = " ".join(",".join(part) for part in model_parts(layout.stage_layers(model), layout.vpp))
    return [
        # torchtitan 0.3.0's trainer refuses its default CUDA graphs with pipelining
        # (torchtitan/trainer.py: "CUDA graphs do not support pipeline parallelism yet").
        "--training.disable_cuda_graphs",
        f"--parallelism.pipeline_parallel_schedule {schedule}",
        f"--parallelism.pipeline_parallel_microbatch_size {layout.mbs}",
        f"--parallelism.module_fqns_per_model_part {parts}",
    ]


def torchtitan_args(model: ModelSpec, layout: Layout, flags: Flags = Flags()) -> list[str]:
    """``--module``, ``--config``, the overrides and the activation-checkpointing
    subcommand (last: tyro reads its options after it)."""
    check_runs(FW, layout, flags, model)
    if layout.fp8_recipe not in (None, *(FW.fp8_recipes or ())):
        raise refuse(KIND, f"fp8_recipe={layout.fp8_recipe}: torchao's float8 runs tensorwise")
    module, config = registered(model, layout.dtype)
    shard = layout.zero >= 2  # FSDP over the data-parallel ranks; zero 0 replicates (DDP)
    shard_degree = (layout.dp_shard_degree or layout.dp) if shard else 1
    # A step accumulates global_batch_size / (local_batch_size * dp) local batches
    # (torchtitan/trainer.py); with pp > 1 the schedule cuts each local batch into
    # local_batch_size / pipeline_parallel_microbatch_size micro-batches: one local batch
    # is the whole step there.
    local_batch = layout.mbs * (layout.num_microbatches if layout.pp > 1 else 1)
    args = [
        f"--module {module}",
        f"--config {config}",
        f"--parallelism.data_parallel_replicate_degree {layout.dp // shard_degree}",
        f"--parallelism.data_parallel_shard_degree {shard_degree}",
        f"--parallelism.tensor_parallel_degree {layout.tp}",
        f"--parallelism.context_parallel_degree {layout.cp}",
        f"--parallelism.pipeline_parallel_degree {layout.pp}",
        f"--parallelism.expert_parallel_degree {layout.ep}",
        f"--training.local_batch_size {local_batch}",
        f"--training.global_batch_size {layout.global_batch}",
        f"--training.seq_len {layout.seq}",
    ]
    if shard_degree > 1:  # FSDP2 keeps gathered weights to backward (ZeRO-2) or not (ZeRO-3)
        reshard = "always" if layout.zero >= 3 else "never"
        args.append(f"--parallelism.fsdp_reshard_after_forward {reshard}")
    if layout.tp > 1 and not layout.sp_enabled:
        args.append("--parallelism.no_enable_sequence_parallel")
    if layout.tp > 1:  # async TP as priced (llama3_405b's registered config turns it on)
        args += ASYNC_TP if flags.tp_comm_overlap else NO_ASYNC_TP
    if flags.moe_router_force_load_balancing and model.moe is not None:
        args.append("--debug.moe_force_load_balance")
    return [*args, *_pipeline(model, layout, flags), AC_SUBCOMMAND[layout.recompute]]


def config_text(model: ModelSpec, layout: Layout, flags: Flags) -> str:
    """The arguments, one per line (what ``--emit torchtitan`` prints and writes)."""
    return " \\\n  ".join(torchtitan_args(model, layout, flags)) + "\n"


def launch(model: ModelSpec, layout: Layout, flags: Flags) -> Launch:
    """``torchtitan.train`` with the arguments, under torchrun on every node."""
    return Launch({}, [TRAIN, *torchtitan_args(model, layout, flags)], str(FW.launcher))
