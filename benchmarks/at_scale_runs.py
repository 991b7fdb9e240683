"""The runs of ../shared/calibration/training_runs_at_scale.yaml as tierwise inputs.

Each run states its model, cluster, layout, framework and recipe (MLPerf Training GPT-3 175B
and Llama 3.1 405B on H100, SC'21 ZeRO-3 530B and BLOOM-176B on A100). This module turns
them into a ModelSpec, a ClusterSpec, a Layout and Flags, reading every overlap flag from the
run's recipe (a flag the recipe does not state takes the framework's default).
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

RUNS = (
    Path(__file__).resolve().parents[2] / "shared" / "calibration" / "training_runs_at_scale.yaml"
)

# The cluster preset each catalog GPU of the file runs in (nodes and NICs from the run).
PRESET = {"h100": "dgx-h100", "a100-80": "dgx-a100", "gb200": "gb200-nvl72"}
# The recipe keys that are Megatron overlap flags (tierwise.perf.flags.Flags fields).
RECIPE_FLAGS = ("tp_comm_overlap", "overlap_grad_reduce", "overlap_param_gather")
# Runs trained before fused (flash) attention existed in their framework: BLOOM's
# Megatron-DeepSpeed fork (training from 2022-03; FlashAttention was published 2022-05)
# computes ALiBi attention with Megatron's scale-mask-softmax kernels, scores in HBM.
UNFUSED_ATTENTION = {"bloom-176b-384"}
# Runs whose TP layers wait on every collective: BLOOM's BigScience Megatron-DeepSpeed fork
# (megatron/mpu/layers.py: copy_to_tensor_model_parallel_region's synchronous all-reduce of
# the column-parallel input gradient; it never took Megatron-LM's async one of 2021-09).
SYNC_TP_BACKWARD = {"bloom-176b-384"}
# Runs of DeepSpeed's ZeRO-3 before its 0.5.5 release (2021-11-02): SC'21's Table 2 (the
# paper's final version, 2021-08) ran ZeRO-3 through the DeepSpeed of its day.
LEGACY_ZERO3 = {"sc21-zero3-530b-640", "sc21-zero3-530b-1120", "sc21-zero3-530b-2240"}


def load_runs() -> list[dict[str, Any]]:
    """The training runs of the at-scale calibration file (its collectives are elsewhere)."""
    return yaml.safe_load(RUNS.read_text())["runs"]


def model_of(run: dict[str, Any]) -> ModelSpec:
    """The run's model from its stated fields."""
    return model_from_record(run["model"])


def cluster_of(run: dict[str, Any]) -> ClusterSpec:
    """The run's nodes on the preset of its GPU, with the NICs the run states."""
    c = run["cluster"]
    return load_cluster(
        PRESET[c["gpu"]], nodes=c["nodes"], nic=c["nic"], nics_per_node=c["nics_per_node"]
    )


def layout_of(run: dict[str, Any], model: ModelSpec) -> Layout:
    """The run's layout: zero 1 is Megatron's distributed optimizer (DeepSpeed's ZeRO-1 for
    DeepSpeed runs), 3 ZeRO-3; its stated split (else the standard one: BLOOM's 70 layers
    on 12 stages); 16-bit gradient reduce where the recipe
    says so (MLPerf: grad_sync_dtype bf16) or the run trained with DeepSpeed (fp16/bf16
    gradients, its default)."""
    lay, recipe = run["layout"], run.get("recipe", {})
    stated = ("tp", "cp", "ep", "etp", "pp", "vpp", "dp", "mbs", "gbs", "seq", "sp", "recompute")
    megatron = lay["framework"] == "megatron"
    return Layout(
        **{key: lay[key] for key in stated},
        zero=0 if (megatron and lay["zero"] == 1) else lay["zero"],
        distributed_optimizer=megatron and lay["zero"] == 1,
        grad_reduce_bf16=bool(recipe.get("grad_reduce_bf16", not megatron)),
        dtype=lay["dtype"],
        fp8_recipe=recipe.get("fp8_recipe") if lay["dtype"] == "fp8" else None,
        pp_layers=tuple(lay["pp_layers"]) if lay.get("pp_layers") else None,
    )  # `estimate` validates it, after the standard split where layers do not divide


def flags_of(run: dict[str, Any]) -> Flags:
    """The run's framework (with its row's defaults), attention backend and the overlap flags
    its recipe states. align_param_gather: the Llama 3.1 rows' notes (ALIGN_PARAM_GATHER
    True)."""
    lay, recipe = run["layout"], run.get("recipe", {})
    stated = {key: bool(recipe[key]) for key in RECIPE_FLAGS if key in recipe}
    note = run.get("note", "")
    return Flags.resolve(
        lay["framework"],
        {
            **stated,
            "align_param_gather": "ALIGN_PARAM_GATHER" in note,
            "fp8_param_gather": bool(recipe.get("fp8_param_gather", False)),
            "legacy_zero3": run["id"] in LEGACY_ZERO3,
            "async_tensor_model_parallel_allreduce": run["id"] not in SYNC_TP_BACKWARD,
            "attention_backend": lay.get(
                "attention_backend", "unfused" if run["id"] in UNFUSED_ATTENTION else "flash"
            ),
        },
    )
