"""A training-log record -> the model, layout, flags and cluster tierwise prices it with.

What the log states is used as stated; a field it leaves out takes the framework's default
(Megatron-LM's argument defaults, torchtitan's JobConfig) and is listed in `assumed`; a
setting the log states that no cost term reads is listed in `not_modelled`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from tierwise import frameworks
from tierwise.errors import SpecError
from tierwise.hardware.cluster import (
    ClusterSpec,
    apply_overrides,
    dump_cluster,
    load_cluster,
    presets,
)
from tierwise.perf.flags import Flags
from tierwise.specio import build
from tierwise.verify.trainlog.args import PRICED_SETTINGS
from tierwise.verify.trainlog.record import RunRecord
from tierwise.verify.trainlog.text import number
from tierwise.workload.layout import Layout
from tierwise.workload.precision import FP8_RECIPES
from tierwise.workload.recompute import MODULES
from tierwise.workload.spec import ModelSpec

DEFAULT_CLUSTER = "dgx-h100"
# Settings a cost term reads (and the bookkeeping ones); a record's others are not modelled.
PRICED = frozenset({*PRICED_SETTINGS, "log_interval"})
# GPT-2's BPE vocabulary padded to a multiple of 128 (Megatron's --make-vocab-size-divisible-by
# default): what a Megatron log that prints no vocabulary most likely trained.
GPT2_PADDED_VOCAB = 50304
# Megatron-LM before flash attention (2020-2022 logs: checkpoint_activations era, or
# use_flash_attn printed False) ran its own unfused softmax kernels.
_FLASH = {"flash": "flash", "fused": "fused", "unfused": "unfused", "local": "unfused"}


@dataclass(frozen=True)
class PricedRun:
    """A logged run as tierwise prices it."""

    record: RunRecord
    model: ModelSpec
    cluster: ClusterSpec
    cluster_source: dict[str, Any]
    layout: Layout
    flags: Flags
    assumed: tuple[str, ...] = ()
    not_modelled: tuple[str, ...] = ()

    def with_flags(self, **changes: Any) -> PricedRun:
        """The same run with other framework flags (a what-if)."""
        return replace(self, flags=replace(self.flags, **changes))

    def with_layout(self, **changes: Any) -> PricedRun:
        """The same run with other layout fields (a what-if)."""
        data = {**self.layout.model_dump(), **changes}
        return replace(self, layout=Layout.parse(data, "what-if layout"))

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.name,
            "layout": self.layout.to_json(),
            "framework": self.flags.framework,
            "flags": {
                "tp_comm_overlap": self.flags.tp_comm_overlap,
                "overlap_grad_reduce": self.flags.overlap_grad_reduce,
                "overlap_param_gather": self.flags.overlap_param_gather,
                "attention_backend": self.flags.attention_backend,
                "moe_token_dispatcher_type": self.flags.moe_token_dispatcher_type,
            },
            "cluster": self.cluster.name,
            "assumed": list(self.assumed),
            "not_modelled": list(self.not_modelled),
        }


class CannotPrice(SpecError):
    """The log leaves out what a prediction needs (the message names the fields)."""


def price(
    record: RunRecord, cluster: str | ClusterSpec | None = None, overrides: dict | None = None
) -> PricedRun:
    """The run as tierwise prices it; raises CannotPrice naming what the log leaves out."""
    assumed: list[str] = []
    model = _model(record, assumed)
    layout = _layout(record, assumed)
    flags = _flags(record, layout, assumed)
    spec, source = choose_cluster(record, layout.world, cluster, overrides)
    not_modelled = tuple(
        f"{k}={v}" for k, v in record.settings.items() if k not in PRICED and v is not None
    )
    return PricedRun(record, model, spec, source, layout, flags, tuple(assumed), not_modelled)


def _model(record: RunRecord, assumed: list[str]) -> ModelSpec:
    if record.model_spec is not None:
        return record.model_spec
    m = record.model
    missing = [k for k in ("layers", "hidden", "heads") if m.get(k) is None]
    if missing:
        raise CannotPrice(
            f"{record.source}: the log states no model {', '.join(missing)} and names no preset; "
            "give the run's HF config.json or launch command as a CONFIG"
        )
    fields: dict[str, Any] = {
        "name": m.get("name") or "logged-model",
        **{k: m.get(k) for k in ("layers", "hidden", "heads", "kv_heads", "head_dim")},
        "ffn_hidden": m.get("ffn_hidden"),
        "vocab": m.get("vocab"),
        "activation": m.get("activation"),
        "tied_embeddings": m.get("tied_embeddings"),
    }
    if fields["vocab"] is None:
        fields["vocab"] = GPT2_PADDED_VOCAB
        assumed.append(f"vocab {GPT2_PADDED_VOCAB} (GPT-2 BPE padded; the log states none)")
    if fields["activation"] is None:
        fields["activation"] = "gelu"
        assumed.append("activation gelu (Megatron's default without --swiglu)")
    if (m.get("experts") or 0) > 0:
        fields["moe"] = {
            "experts": m["experts"],
            "top_k": m.get("top_k") or 2,
            "expert_ffn_hidden": m.get("moe_ffn_hidden") or m.get("ffn_hidden") or 4 * m["hidden"],
        }
        if m.get("top_k") is None:
            assumed.append("moe_router_topk 2 (Megatron's default)")
        capacity = number(str(record.settings.get("moe_expert_capacity_factor")))
        if capacity is not None and capacity > 0:  # tokens over this share are dropped
            fields["moe"]["capacity_factor"] = capacity
    try:
        return ModelSpec.from_fields({k: v for k, v in fields.items() if v is not None})
    except SpecError as exc:
        raise CannotPrice(f"{record.source}: the logged model does not validate: {exc}") from None


def _layout(record: RunRecord, assumed: list[str]) -> Layout:
    lay = record.layout
    missing = [k for k in ("tp", "pp", "dp", "mbs", "gbs", "seq") if lay.get(k) is None]
    if missing:
        raise CannotPrice(
            f"{record.source}: the log states no {', '.join(missing)}; give the run's config "
            "(launch command, MLPerf config_*.sh, torchtitan TOML) as a CONFIG"
        )
    fields: dict[str, Any] = {k: lay[k] for k in ("tp", "pp", "dp", "mbs", "gbs", "seq")}
    for key, default in (("cp", 1), ("vpp", 1), ("ep", 1)):
        fields[key] = lay.get(key) or default
        if lay.get(key) is None:
            assumed.append(f"{key} {default} (not stated)")
    if lay.get("etp") is not None and lay["etp"] != lay["tp"]:
        fields["etp"] = lay["etp"]
    dtype = lay.get("dtype")
    if dtype in ("fp16", "fp32") or dtype is None:
        assumed.append(
            f"dtype {dtype or 'not stated'} priced as bf16"
            + (" (same tensor-core peak as fp16)" if dtype == "fp16" else "")
        )
        dtype = "bf16"
    fields |= _precision(dtype, record.settings.get("fp8_recipe"), assumed)
    recompute = lay.get("recompute")
    if recompute not in ("none", "selective", "full"):
        assumed.append(f"recompute {recompute or 'not stated'} priced as none")
        recompute = "none"
    fields["recompute"] = recompute
    modules = record.settings.get("recompute_modules")
    if recompute == "selective" and modules is not None:
        fields["recompute_modules"] = _recompute_modules(modules, assumed)
    method, layers = (
        record.settings.get("recompute_method"),
        record.settings.get("recompute_num_layers"),
    )
    if recompute == "full" and method in ("uniform", "block"):
        fields["recompute_method"] = method
    if (
        recompute == "full"
        and isinstance(layers, int)
        and not isinstance(layers, bool)
        and layers > 0
    ):
        fields["recompute_num_layers"] = layers
    known = frameworks.logged(record.framework)
    settings = record.settings
    defaults = known.argument_defaults if known else {}
    dist_opt = settings.get("use_distributed_optimizer", defaults.get("use_distributed_optimizer"))
    if known and known.row.sharded_dp == frameworks.SHARDED_FSDP2:
        fields["zero"] = 3  # FSDP2 over the data-parallel ranks
    elif dist_opt is True:
        fields["distributed_optimizer"] = True
        if "use_distributed_optimizer" not in settings and known:
            assumed.append(f"use_distributed_optimizer True ({known.whose}; not in the log)")
    if isinstance(settings.get("sequence_parallel"), bool) and fields["tp"] > 1:
        fields["sp"] = settings["sequence_parallel"]
    elif "scatter_gather_tensors_in_pipeline" in settings and fields["tp"] > 1:
        # A Megatron-LM argument dump (2021-02 on) without --sequence-parallel (2022-04 on).
        fields["sp"] = False
        assumed.append("sequence_parallel False (Megatron-LM before 2022-04; not in the log)")
    try:
        return Layout.parse(fields, "logged layout")
    except SpecError as exc:
        raise CannotPrice(f"{record.source}: the logged layout does not validate: {exc}") from None


def _flags(record: RunRecord, layout: Layout, assumed: list[str]) -> Flags:
    known = frameworks.logged(record.framework)
    s = record.settings
    values: dict[str, Any] = {"framework": known.row.name if known else None}
    if known and known.argument_defaults:
        whose = known.whose
        for key, default in known.argument_defaults.items():
            if key == "use_distributed_optimizer":
                continue  # a layout field (_layout)
            why = f"{whose}; not in the log"
            if key not in s and key in known.unstated:  # a release before the option
                default, why = known.unstated[key]
            values[key] = s.get(key, default)
            relevant = (key != "tp_comm_overlap" or layout.tp > 1) and (
                key != "align_param_gather" or layout.pp > 1
            )
            if key not in s and relevant and (key != "moe_token_dispatcher_type" or layout.ep > 1):
                assumed.append(f"{key} {default} ({why})")
    else:
        for key in ("overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap"):
            if isinstance(s.get(key), bool):
                values[key] = s[key]
    for key in ("overlap_moe_expert_parallel_comm", "align_param_gather", "delay_wgrad_compute"):
        if isinstance(s.get(key), bool):
            values[key] = s[key]
    if isinstance(s.get("overlap_p2p_comm"), bool) and layout.vpp > 1:
        values["overlap_p2p_communication"] = s["overlap_p2p_comm"]
    if s.get("scatter_gather_tensors_in_pipeline") is True and "overlap_p2p_comm" not in s:
        # Megatron-LM printed it True until 2026, but ran it only before megatron-core's p2p
        # (2023-03); a log without --overlap-p2p-communication (2023-05) predates that.
        values["scatter_gather_tensors_in_pipeline"] = True
    if layout.tp > 1 and record.framework in _ARGUMENT_DUMPS:
        _async_tp(s, values, assumed)
    group = s.get("microbatch_group_size_per_vp_stage")
    if isinstance(group, int) and not isinstance(group, bool) and group > 0 and layout.vpp > 1:
        values["microbatch_group_size_per_vp_stage"] = group
    if layout.cp > 1 and s.get("cp_comm_type") is not None:
        values["cp_comm"] = _cp_comm_type(s["cp_comm_type"], assumed)
    backend = str(s.get("attention_backend", "")).rsplit(".", 1)[-1].lower()
    if backend in _FLASH:
        values["attention_backend"] = _FLASH[backend]
    elif s.get("use_flash_attn") is False or _before_flash_attention(record):
        values["attention_backend"] = "unfused"
        assumed.append("attention unfused (Megatron-LM before flash attention)")
    if isinstance(s.get("fp8_param_gather"), bool):
        values["fp8_param_gather"] = s["fp8_param_gather"]
    if isinstance(s.get("fp8_dot_product_attention"), bool):
        values["fp8_dot_product_attention"] = s["fp8_dot_product_attention"]
    if isinstance(s.get("enable_cuda_graph"), bool):
        values["cuda_graphs"] = s["enable_cuda_graph"]
    dispatcher = values.get("moe_token_dispatcher_type")
    if dispatcher not in (None, "alltoall", "allgather", "flex"):
        values.pop("moe_token_dispatcher_type")
        assumed.append(f"moe_token_dispatcher_type {dispatcher} priced as alltoall")
    return Flags.resolve(values.pop("framework"), values)


# Logs that print Megatron-LM's argument dump (NeMo and Megatron-Bridge configs print
# async_tensor_model_parallel_allreduce too, for a megatron-core that ignores it).
_ARGUMENT_DUMPS = ("megatron-lm", "megatron-deepspeed")


def _async_tp(s: Any, values: dict[str, Any], assumed: list[str]) -> None:
    """Whether the column-parallel backward collectives ran asynchronously: as logged
    (--no-async-tensor-model-parallel-allreduce took effect from 2021-09 to 2024-04), or off
    for a dump of before 2021-09 (it prints --scatter-gather-tensors-in-pipeline, 2021-02 on,
    and not the async argument, 2021-09 on)."""
    logged = s.get("async_tensor_model_parallel_allreduce")
    if logged is False:
        values["async_tensor_model_parallel_allreduce"] = False
    elif logged is None and "scatter_gather_tensors_in_pipeline" in s:
        values["async_tensor_model_parallel_allreduce"] = False
        assumed.append(
            "async_tensor_model_parallel_allreduce False (Megatron-LM before 2021-09: its "
            "arguments have no such argument)"
        )


def _precision(dtype: str, recipe: Any, assumed: list[str]) -> dict[str, Any]:
    """The layout's dtype and FP8 recipe from Megatron's --fp8-recipe (an FP8 run only: BF16
    logs print its default too): delayed, tensorwise, blockwise; mxfp8 is its own dtype."""
    if dtype != "fp8" or recipe is None:
        return {"dtype": dtype}
    if recipe == "mxfp8":
        return {"dtype": "mxfp8"}
    if recipe in FP8_RECIPES:
        return {"dtype": dtype, "fp8_recipe": recipe}
    assumed.append(f"fp8_recipe {recipe} priced as delayed")
    return {"dtype": dtype}


def _recompute_modules(logged: Any, assumed: list[str]) -> tuple[str, ...] | None:
    """Megatron's --recompute-modules as a log prints them ("['core_attn', 'mlp']"); the names
    tierwise prices, the others said (None: Megatron's default, core_attn)."""
    names = re.findall(r"[a-z_]+", str(logged).lower())
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        assumed.append(f"recompute_modules {', '.join(unknown)} not priced (not recomputed)")
    known = tuple(n for n in names if n in MODULES)
    return known or None


def _cp_comm_type(logged: Any, assumed: list[str]) -> str:
    """The --cp-comm-type a log prints (one value, or a list of one per layer, "['p2p']"): one
    kind tierwise prices, else ring attention, said."""
    kinds = set(re.findall(r"[a-z0-9+]+", str(logged).lower()))
    if len(kinds) == 1 and (kind := kinds.pop()) in frameworks.CP_COMM_TYPES:
        return kind
    assumed.append(f"cp_comm_type {logged} priced as p2p (ring attention)")
    return "p2p"


def _before_flash_attention(record: RunRecord) -> bool:
    """A Megatron-LM log of 2020-2021 (v1 header or checkpoint_activations): unfused attention."""
    said = " ".join(record.sources.values())
    return "checkpoint_activations" in said or "Megatron-LM v1" in said


def holding(spec: ClusterSpec, world: int) -> tuple[ClusterSpec, str | None]:
    """``spec`` with enough nodes for ``world`` GPUs (and what was raised), else ``spec``."""
    if world <= spec.world:
        return spec, None
    nodes = -(-world // spec.gpus_per_node)
    data = apply_overrides(dump_cluster(spec), nodes=nodes)
    grown = build(ClusterSpec, data, f"cluster {spec.name}")
    return grown, f"nodes raised from {spec.nodes} to {nodes} to hold the run's {world} GPUs"


def preset_for_gpu(key: str | None) -> str | None:
    """The first cluster preset with GPU ``key``."""
    if key is None:
        return None
    return next((name for name, p in presets().items() if p.get("gpu") == key), None)


def choose_cluster(
    record: RunRecord,
    world: int,
    cluster: str | ClusterSpec | None = None,
    overrides: dict | None = None,
) -> tuple[ClusterSpec, dict[str, Any]]:
    """The cluster to price the run on and why: ``cluster`` when given, else the preset of the
    GPU the log names at the log's node count (big enough for the run's GPUs)."""
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    if cluster is not None:
        spec = cluster if isinstance(cluster, ClusterSpec) else load_cluster(cluster, **overrides)
        spec, grown = holding(spec, world)
        reason = "given" + (f"; {grown}" if grown else "")
        return spec, {"cluster": spec.name, "chosen_by": "--cluster", "reason": reason}
    gpu_key = record.run.get("gpu_key")
    preset = preset_for_gpu(gpu_key)
    said = []
    if preset is None:
        named = record.run.get("gpu")
        reason = f"the log names {named}, which no preset has" if named else "the log names no GPU"
        preset, by = DEFAULT_CLUSTER, "default"
        said.append(reason)
    else:
        by = "log"
        said.append(f"GPU {record.run.get('gpu')} -> {gpu_key}")
    base = load_cluster(preset)
    gpn = record.run.get("gpus_per_node") or base.gpus_per_node
    if "gpus_per_node" not in overrides and gpn != base.gpus_per_node:
        overrides["gpus_per_node"] = gpn
        said.append(f"{gpn} GPUs per node")
    nodes = record.run.get("nodes") or -(-world // gpn)
    if "nodes" not in overrides:
        overrides["nodes"] = max(nodes, -(-world // gpn))
        said.append(f"{overrides['nodes']} node(s)")
    spec = load_cluster(preset, **overrides)
    source = {"cluster": spec.name, "chosen_by": by, "reason": "; ".join(said)}
    return spec, source
