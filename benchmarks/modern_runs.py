"""The runs of ../shared/calibration/training_runs_modern.yaml as tierwise inputs.

Each run states its model (with its Hugging Face config), cluster, layout and published step
time; this module turns them into a ModelSpec, a ClusterSpec, a Layout and Flags, and states
which recipe facts of the runs' notes it uses (FP8 = current scaling, 16-bit gradient reduce,
TP communication overlap where the recipe enables it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tierwise.hardware.cluster import ClusterSpec, load_cluster
from tierwise.perf.step import Flags
from tierwise.workload.layout import Layout
from tierwise.workload.load import model_from_record
from tierwise.workload.spec import ModelSpec

RUNS = Path(__file__).resolve().parents[2] / "shared" / "calibration" / "training_runs_modern.yaml"

# The cluster preset each catalog GPU of the file runs in (nodes and NICs from the run).
PRESET = {"h100": "dgx-h100", "b200": "dgx-b200", "gb200": "gb200-nvl72", "gb300": "gb300-nvl72"}
# Every FP8 row of these sources is "FP8-CS": Transformer Engine's per-tensor current scaling.
FP8_RECIPE = "tensorwise"
# Runs whose recipe turns on Megatron's --tp-comm-overlap (the runs' notes).
TP_COMM_OVERLAP = {
    "mb-llama3-70b-gb200-mxfp8-64-26.04.01",
    "modelzoo-mixtral-8x22b-h100-bf16-128-dropless",
}
# MoE recipe facts of the runs' notes: the Qwen3 recipes dispatch with HybridEP (Megatron's
# flex dispatcher); the 26.08 ones also overlap the expert all-to-all with the other
# micro-batch (--overlap-moe-expert-parallel-comm). The others use the alltoall dispatcher.
FLEX_DISPATCH = {
    "mb-qwen3-30b-h100-fp8-16-26.06",
    "mb-qwen3-30b-b200-mxfp8-8-26.04.01",
    "mb-qwen3-30b-gb200-mxfp8-8-26.08",
    "mb-qwen3-30b-gb300-mxfp8-8-26.08",
}
A2A_OVERLAP = {"mb-qwen3-30b-gb200-mxfp8-8-26.08", "mb-qwen3-30b-gb300-mxfp8-8-26.08"}
# Runs whose recipe computes the attention core in FP8 (the notes: "fp8 DPA", 26.08).
FP8_ATTENTION = {"mb-qwen3-30b-gb200-mxfp8-8-26.08", "mb-qwen3-30b-gb300-mxfp8-8-26.08"}
# MoE runs whose recipe graphs the MoE layers (the notes: Qwen3 on B200 with the
# moe_router/moe_preprocess scopes, Qwen3 26.08 full-iteration, NeMo 25.04 CUDA graphs on);
# Qwen3 on H100 (FP8_CS config) and GPT-OSS run without; the ModelZoo script sets none.
CUDA_GRAPHS = {
    "mb-qwen3-30b-b200-mxfp8-8-26.04.01",
    "mb-qwen3-30b-gb200-mxfp8-8-26.08",
    "mb-qwen3-30b-gb300-mxfp8-8-26.08",
    "nemo-mixtral-8x7b-gb200-fp8-64-25.04",
}
# Selective-recompute modules the recipes name (the notes: GPT-OSS recomputes
# ['layernorm', 'moe_act']); other selective runs keep Megatron's default (core_attn).
RECOMPUTE_MODULES = {
    "mb-gpt-oss-120b-h100-bf16-64-26.04.01": ("layernorm", "moe_act"),
    "mb-gpt-oss-120b-b200-bf16-64-26.04.01": ("layernorm", "moe_act"),
}
# Runs that reduce gradients in fp32 (Megatron's default): the ModelZoo script sets no
# --grad-reduce-in-bf16; Megatron-Bridge and NeMo performance recipes reduce in bf16.
FP32_GRAD_REDUCE = {"modelzoo-mixtral-8x22b-h100-bf16-128-dropless"}


def load_runs() -> list[dict[str, Any]]:
    """The runs of the modern calibration file."""
    return yaml.safe_load(RUNS.read_text())["runs"]


def model_of(run: dict[str, Any]) -> ModelSpec:
    """The run's model (its HF config where tierwise reads that model type, else its fields),
    with the capacity factor of capacity routing."""
    return with_capacity(run, model_from_record(run["model"]))


def cluster_of(run: dict[str, Any]) -> ClusterSpec:
    """The run's nodes on the preset of its GPU, with the NICs the run states."""
    c = run["cluster"]
    return load_cluster(
        PRESET[c["gpu"]], nodes=c["nodes"], nic=c["nic"], nics_per_node=c["nics_per_node"]
    )


def layout_of(run: dict[str, Any], model: ModelSpec) -> Layout:
    """The run's layout; zero 1 is Megatron's distributed optimizer, 3 its FSDP; CPU
    activation offloading and recompute modules as the run states them."""
    lay = run["layout"]
    stated = ("tp", "cp", "ep", "etp", "pp", "vpp", "dp", "mbs", "gbs", "seq", "sp", "recompute")
    return Layout(
        **{key: lay[key] for key in stated},
        zero=3 if lay["zero"] == 3 else 0,
        distributed_optimizer=lay["zero"] == 1,
        grad_reduce_bf16=run["id"] not in FP32_GRAD_REDUCE,
        dtype=lay["dtype"],
        fp8_recipe=FP8_RECIPE if lay["dtype"] == "fp8" else None,
        recompute_modules=RECOMPUTE_MODULES.get(run["id"]),
        activation_offload_layers=lay.get("activation_offload_layers", 0),
    ).validate_for(model)


def flags_of(run: dict[str, Any]) -> Flags:
    """The run's framework (Megatron-core under NeMo / Megatron-Bridge), its MoE routing
    (balanced = forced balance) and dispatcher, and what its recipe turns on beyond that."""
    run_id, lay = run["id"], run["layout"]
    return Flags(
        tp_comm_overlap=run_id in TP_COMM_OVERLAP,
        framework=lay["framework"],
        moe_token_dispatcher_type="flex" if run_id in FLEX_DISPATCH else "alltoall",
        moe_router_force_load_balancing=lay.get("moe_routing") == "balanced",
        overlap_moe_expert_parallel_comm=run_id in A2A_OVERLAP,
        delay_wgrad_compute=run_id in A2A_OVERLAP,  # the notes: "EP A2A overlap + delay_wgrad"
        cuda_graphs=run_id in CUDA_GRAPHS,
        fp8_dot_product_attention=run_id in FP8_ATTENTION,
    )


def with_capacity(run: dict[str, Any], model: ModelSpec) -> ModelSpec:
    """Capacity routing (token drop, NeMo's MegatronTokenDropCallback): capacity factor 1.0."""
    if run["layout"].get("moe_routing") != "capacity" or model.moe is None:
        return model
    moe = model.moe.model_copy(update={"capacity_factor": 1.0})
    return model.model_copy(update={"moe": moe})
