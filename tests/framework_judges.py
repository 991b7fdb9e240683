"""The frameworks' own code reading tierwise's emitted launches (the ``[frameworks]`` extra):

- Megatron-LM: megatron-core 0.16.1's ``TransformerConfig`` (or ``MLATransformerConfig``) built
  from the arguments as ``core_transformer_config_from_args`` does (every argument whose name
  is a config field), its ``__post_init__`` checks; plus the ``validate_args`` rules that
  megatron-core lacks, recorded below from NVIDIA/Megatron-LM
  ``megatron/training/arguments.py`` @d98e8a64ddf34856e74b24714e3bedb2f5a39553.
- torchtitan 0.3.0: its ``ConfigManager`` parsing the arguments (tyro) and ``ParallelDims``
  validating the degrees against the world size.
- DeepSpeed 0.19.8: ``DeepSpeedConfig`` with the plan's data-parallel size.

Each judge also reads back the layout the launch runs, to compare with the plan's.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import typing
from typing import Any

MEGATRON_COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
RENAMED = {  # Megatron-LM argument dest -> TransformerConfig field (core_transformer_config_...)
    "num_experts": "num_moe_experts",
    "norm_epsilon": "layernorm_epsilon",
    "fp8_param_gather": "fp8_param",
    "decoder_first_pipeline_num_layers": "num_layers_in_first_pipeline_stage",
    "decoder_last_pipeline_num_layers": "num_layers_in_last_pipeline_stage",
    "rope_scaling_factor": None,  # the embedding's, not the config's
    "rotary_base": None,
}


def megatron_values(args: list[str]) -> dict[str, Any]:
    """Argument dests and values (``--a-b 3`` -> ``a_b: "3"``, a bare flag -> True)."""
    out: dict[str, Any] = {}
    for arg in args:
        name, _, value = arg.partition(" ")
        dest = name.removeprefix("--").replace("-", "_")
        out[dest] = value.strip('"') if value else True
    return out


def _typed(kind: Any, value: Any) -> Any:
    """`value` (a string or True) as the config field's type."""
    origin = typing.get_origin(kind)
    options = [a for a in typing.get_args(kind) if a is not type(None)]
    if origin is typing.Union or (
        origin is not None and str(origin) == "<class 'types.UnionType'>"
    ):
        kind = options[0] if options else kind
        origin = typing.get_origin(kind)
    if value is True or kind is bool:
        return bool(value)
    if origin is list or kind is list:
        return str(value).split()
    if kind is int:
        return int(value)
    if kind is float:
        return float(value)
    if origin is tuple:
        return tuple(int(v) for v in str(value).split(","))
    return value


def megatron_config(args: list[str]) -> Any:
    """megatron-core's TransformerConfig of the arguments (its checks run as it is built)."""
    import torch
    from megatron.core.transformer.enums import AttnBackend
    from megatron.core.transformer.transformer_config import (
        MLATransformerConfig,
        TransformerConfig,
    )

    values = megatron_values(args)
    cls = MLATransformerConfig if values.get("multi_latent_attention") else TransformerConfig
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    special = {"moe_layer_freq", "attention_backend", "pipeline_model_parallel_layout"}
    for dest, value in values.items():
        field = RENAMED.get(dest, dest)
        if field in fields and dest not in special:
            kwargs[field] = _typed(hints[field], value)
    if values.get("swiglu"):
        kwargs.update(gated_linear_unit=True, activation_func=torch.nn.functional.silu)
    if "attention_backend" in values:
        kwargs["attention_backend"] = AttnBackend[values["attention_backend"]]
    if values.get("bf16"):
        kwargs.update(params_dtype=torch.bfloat16, bf16=True, pipeline_dtype=torch.bfloat16)
    if "fp8_format" in values:
        kwargs["fp8"] = values["fp8_format"]
    if "moe_layer_freq" in values:
        kwargs["moe_layer_freq"] = list(eval(values["moe_layer_freq"], {"__builtins__": {}}))
    if "num_layers_per_virtual_pipeline_stage" in values:
        per_rank = int(values["num_layers"]) // int(values["pipeline_model_parallel_size"])
        vpp = per_rank // int(values["num_layers_per_virtual_pipeline_stage"])
        kwargs["virtual_pipeline_model_parallel_size"] = vpp
    layout = values.get("pipeline_model_parallel_layout")
    if layout is not None:
        kwargs["pipeline_model_parallel_layout"] = layout
    return cls(**kwargs)


def _rule(failed: bool, text: str) -> list[str]:
    return [text] if failed else []


def megatron_validate_args(args: list[str], env: dict[str, str], world: int) -> list[str]:
    """The ``validate_args`` rules (Megatron-LM @MEGATRON_COMMIT) that megatron-core's
    config does not check, broken by the arguments: the messages of those that fail."""
    v = megatron_values(args)
    tp, pp = int(v["tensor_model_parallel_size"]), int(v["pipeline_model_parallel_size"])
    cp, ep = int(v.get("context_parallel_size", 1)), int(v.get("expert_model_parallel_size", 1))
    seq, layers = int(v["seq_length"]), int(v["num_layers"])
    dp = world // (tp * pp * cp)
    mbs, gbs = int(v["micro_batch_size"]), int(v["global_batch_size"])
    uneven = "decoder_first_pipeline_num_layers" in v or "pipeline_model_parallel_layout" in v
    vpp = "num_layers_per_virtual_pipeline_stage" in v or "pipeline_model_parallel_layout" in v
    return [
        *_rule(world % (tp * pp * cp) != 0, "world size divisible by tp*pp*cp"),
        *_rule(int(v["max_position_embeddings"]) < seq, "max_position_embeddings >= seq_length"),
        *_rule(cp > 1 and seq % (2 * cp) != 0, "seq-length a multiple of 2*cp"),
        *_rule(gbs % (mbs * dp) != 0, "global batch divisible by micro batch * dp"),
        *_rule(not uneven and layers % pp != 0, "layers divisible by pp (even split)"),
        *_rule(
            (tp > 1 or cp > 1) and env.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1",
            "CUDA_DEVICE_MAX_CONNECTIONS=1 with tp or cp > 1 (before Blackwell)",
        ),
        *_rule(
            "overlap_param_gather" in v
            and not ("use_distributed_optimizer" in v and "overlap_grad_reduce" in v),
            "--overlap-param-gather needs the distributed optimizer and --overlap-grad-reduce",
        ),
        *_rule("tp_comm_overlap" in v and "sequence_parallel" not in v, "tp-comm-overlap needs SP"),
        *_rule(
            "recompute_granularity" in v
            and v["recompute_granularity"] == "selective"
            and "recompute_method" in v,
            "selective recompute takes no recompute method",
        ),
        *_rule(vpp and pp == 1, "interleaving needs pp > 1"),
        *_rule("num_experts" in v and int(v["num_experts"]) % ep != 0, "experts divisible by ep"),
        *_rule(ep > 1 and "num_experts" not in v, "expert parallelism needs experts"),
    ]


def megatron_stage_layers(args: list[str]) -> list[int]:
    """Layers per pipeline rank the arguments give (first/last counts or a layout string)."""
    v = megatron_values(args)
    pp, layers = int(v["pipeline_model_parallel_size"]), int(v["num_layers"])
    layout = v.get("pipeline_model_parallel_layout")
    if layout is not None:
        from megatron.core.transformer.pipeline_parallel_layer_layout import (
            PipelineParallelLayerLayout,
        )

        stages = PipelineParallelLayerLayout.parse_str_to_list(layout)
        counts = [sum(1 for m in stage if m.name == "decoder") for stage in stages]
        return [sum(counts[r::pp]) for r in range(pp)]
    if "decoder_first_pipeline_num_layers" in v:
        first = int(v["decoder_first_pipeline_num_layers"])
        last = int(v["decoder_last_pipeline_num_layers"])
        middle = [(layers - first - last) // (pp - 2)] * (pp - 2) if pp > 2 else []
        return [first, *middle, last] if pp > 1 else [layers]
    return [layers // pp] * pp


def torchtitan_config(args: list[str]) -> Any:
    """torchtitan's ConfigManager parsing the arguments (``--module``/``--config`` and the
    dotted overrides, tyro)."""
    from torchtitan.config import ConfigManager

    return ConfigManager().parse_args(shlex.split(" ".join(args)))  # as the shell splits it


def torchtitan_dims(config: Any, world: int) -> Any:
    """torchtitan's ParallelDims of the parsed config on `world` GPUs (it validates)."""
    from torchtitan.distributed import ParallelDims

    return ParallelDims.from_config(config.parallelism, world)


def torchtitan_stage_layers(config: Any, pp: int) -> list[int]:
    """Layers per pipeline rank of the parsed model parts (part j*pp + r on rank r)."""
    parts = config.parallelism.module_fqns_per_model_part or []
    counts = [sum(1 for m in part if re.fullmatch(r"layers\.\d+", m)) for part in parts]
    return [sum(counts[r::pp]) for r in range(pp)]


def deepspeed_config(config: dict[str, Any], dp: int, monkeypatch: Any) -> Any:
    """DeepSpeed's DeepSpeedConfig of the JSON for `dp` data-parallel ranks (an mpu that
    states them; no process group is needed to read a config)."""
    import deepspeed.runtime.config as ds_config

    class Mpu:
        def get_data_parallel_world_size(self) -> int:
            return dp

    monkeypatch.setattr(ds_config.dist, "get_rank", lambda *a, **k: 0)
    return ds_config.DeepSpeedConfig(config, mpu=Mpu())
