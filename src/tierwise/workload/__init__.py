"""Workload layer: model specs, parameter counts, FLOPs, bytes, layouts and memory per GPU.

Pure Python + numpy (no torch). See README.md in this folder for conventions.
"""

from tierwise.workload.flops import (
    LayerFlops,
    StageFlops,
    flops_batch,
    forward_flops,
    layer_flops,
    logits_flops,
    megatron_eq3_flops,
    model_flops_per_step,
    model_flops_per_token,
    training_flops,
)
from tierwise.workload.layout import (
    RECOMPUTE_CODES,
    Layout,
    layout_fields,
    layouts_to_arrays,
)
from tierwise.workload.load import load_model, model_from_record, preset, preset_names
from tierwise.workload.memory import (
    MemoryBreakdown,
    activation_bytes_per_token,
    expert_token_share,
    memory,
    memory_batch,
    model_state_bytes,
)
from tierwise.workload.params import ParamCounts, param_counts
from tierwise.workload.spec import ModelSpec, MoESpec

__all__ = [
    "RECOMPUTE_CODES",
    "LayerFlops",
    "Layout",
    "MemoryBreakdown",
    "MoESpec",
    "ModelSpec",
    "ParamCounts",
    "StageFlops",
    "activation_bytes_per_token",
    "expert_token_share",
    "flops_batch",
    "forward_flops",
    "layer_flops",
    "layout_fields",
    "layouts_to_arrays",
    "load_model",
    "logits_flops",
    "megatron_eq3_flops",
    "memory",
    "memory_batch",
    "model_flops_per_step",
    "model_flops_per_token",
    "model_from_record",
    "model_state_bytes",
    "param_counts",
    "preset",
    "preset_names",
    "training_flops",
]
