"""The behaviour options as given (`Behaviour`) and the HBM a plan leaves free: what
`estimate`, `plan`, `sweep` and `report` resolve alike. No numpy here: a small `estimate`
starts without it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tierwise import frameworks
from tierwise.errors import SpecError
from tierwise.frameworks import option_text
from tierwise.perf.flags import Flags
from tierwise.plan.routing import resolve_routing
from tierwise.workload.layout import Layout
from tierwise.workload.precision import GATHER_LOW_DTYPES
from tierwise.workload.spec import ModelSpec

DEFAULT_HEADROOM = "5%"
"""HBM a plan leaves free by default (allocator fragmentation, NCCL buffers, CUDA graphs)."""


def headroom_gib(text: str, hbm_gib: float) -> float:
    """``--mem-headroom``: GiB (``4``, ``4GiB``) or a share of HBM (``5%``); one-line error
    otherwise."""
    value = text.strip().removesuffix("GiB").strip()
    share = value.endswith("%")
    try:
        number = float(value.removesuffix("%"))
    except ValueError:
        number = -1.0
    gib = hbm_gib * number / 100 if share else number
    if not 0 <= gib < hbm_gib:
        raise SpecError(
            f"--mem-headroom: {text!r}; allowed: GiB (e.g. 4) or a share of HBM (e.g. 5%) "
            f"below the GPU's {hbm_gib:g} GiB"
        )
    return gib


@dataclass(frozen=True)
class Behaviour:
    """The behaviour options as given: `given` maps `Flags` fields to a value (None: not
    given), plus ``--framework`` and the MoE routing options that reshape the model."""

    given: Mapping[str, Any] = field(default_factory=dict)
    framework: str | None = None
    moe_routing: str | None = None
    moe_expert_capacity_factor: float | None = None

    def resolve(self, model: ModelSpec, framework: str | None) -> tuple[ModelSpec, Flags]:
        """(`model` with the capacity factor its routing uses, the flags a layout runs with
        under `framework`: None for the generic model); one-line errors for contradictions."""
        given = dict(self.given)
        force = given.pop("moe_router_force_load_balancing", None)
        routed = self.moe_routing is not None or force or self.moe_expert_capacity_factor
        spec, balanced = resolve_routing(
            model, self.moe_routing, bool(force), self.moe_expert_capacity_factor
        )
        given["moe_router_force_load_balancing"] = balanced if routed else None
        return spec, Flags.resolve(framework, given)


def idle_options(
    given: Mapping[str, Any], flags: Flags, layout: Layout, model: ModelSpec | None = None
) -> list[str]:
    """One line for each behaviour option in `given` (`Behaviour.given`) that changes nothing
    for `layout` of `model` under `flags`."""
    notes = _idle_tp(given, flags, layout) + _idle_precision(given, layout, model)
    if model is not None and model.moe is None:
        notes += [
            f"{option_text(name, given[name])} changes nothing for a dense model; the launch "
            "leaves it out"
            for name in frameworks.MOE_ONLY_FLAGS
            if given.get(name)
        ]
    runner = flags.runner
    reduce = given.get("overlap_grad_reduce")
    if reduce is not None and layout.pp > 1 and runner.pipeline_fp32_grads:
        notes.append(
            f"{option_text('overlap_grad_reduce', reduce)} changes nothing under {runner.title} "
            "with pp > 1: its pipeline engine reduces the gradients after the last micro-batch"
        )
    gather = given.get("overlap_param_gather")
    if gather is not None and not (layout.distributed_optimizer or layout.zero):
        notes.append(
            f"{option_text('overlap_param_gather', gather)} changes nothing without a sharded "
            "optimizer (no weight gather); the launch leaves it out"
        )
    elif gather is not None and not runner.param_gather_overlap:
        notes.append(
            f"{option_text('overlap_param_gather', gather)} changes nothing under {runner.title}: "
            "its ZeRO weight gather runs after the optimizer step"
        )
    align = given.get("align_param_gather")
    if align is not None and not runner.dp_buckets:
        notes.append(
            f"{option_text('align_param_gather', align)} changes nothing under {runner.title} "
            "(Megatron's weight buckets only)"
        )
    elif align is not None and (layout.vpp == 1 or not layout.distributed_optimizer):
        notes.append(
            f"{option_text('align_param_gather', align)} changes nothing here: it aligns the "
            "distributed optimizer's weight gathers over virtual stages (vpp > 1)"
        )
    p2p = given.get("overlap_p2p_communication")
    if p2p is not None and layout.vpp == 1:
        notes.append(
            f"{option_text('overlap_p2p_communication', p2p)} changes nothing at --vpp 1 "
            "(Megatron overlaps the interleaved schedule's sends only)"
        )
    if flags.legacy_zero3 and layout.zero < 3:
        notes.append(f"--legacy-zero3 changes nothing at --zero {layout.zero} (ZeRO-3 only)")
    if given.get("scatter_gather_tensors_in_pipeline") and not layout.pipeline_sends_whole:
        notes.append(
            "--scatter-gather-tensors-in-pipeline changes nothing here: it splits pipeline "
            "sends (pp > 1) over tp > 1 ranks without sequence parallelism"
        )
    if given.get("cp_comm") is not None and layout.cp == 1:
        notes.append(f"--cp-comm-type {flags.cp_comm} changes nothing at --cp 1")
    return notes + _idle_pipeline(given, layout) + _idle_dp(given, layout, model)


def _idle_dp(given: Mapping[str, Any], layout: Layout, model: ModelSpec | None) -> list[str]:
    """`idle_options`' lines of the data-parallel overlaps on a dense model with one
    replica (dp x cp = 1): no gradient to reduce, no weight to gather."""
    if layout.dp * layout.cp > 1 or model is None or model.moe is not None:
        return []
    return [
        f"{option_text(name, given[name])} changes nothing with one data-parallel replica "
        "(dp x cp = 1: nothing to reduce or gather)"
        for name in ("overlap_grad_reduce", "overlap_param_gather")
        if given.get(name) is not None
    ]


def _idle_pipeline(given: Mapping[str, Any], layout: Layout) -> list[str]:
    """`idle_options`' lines of the pipeline schedule's options: none at pp 1, no micro-batch
    groups without virtual stages."""
    notes = []
    schedule = given.get("pipeline_schedule")
    if schedule is not None and layout.pp == 1:
        notes.append(f"--pipeline-schedule {schedule} changes nothing at --pp 1 (no pipeline)")
    group = given.get("microbatch_group_size_per_vp_stage")
    if group is not None and layout.vpp == 1 and layout.pp > 1:
        notes.append(
            f"--microbatch-group-size-per-virtual-pipeline-stage {group} changes nothing at "
            "--vpp 1 (it groups the interleaved schedule's micro-batches)"
        )
    return notes


def _idle_tp(given: Mapping[str, Any], flags: Flags, layout: Layout) -> list[str]:
    """`idle_options`' lines of the TP collectives' options: none at tp 1, and no
    asynchronous backward under a framework that never runs one."""
    notes = []
    if given.get("tp_comm_overlap") and layout.tp == 1:
        notes.append("--tp-comm-overlap changes nothing at --tp 1 (no TP collectives)")
    name = "async_tensor_model_parallel_allreduce"
    value, runner = given.get(name), flags.runner
    if value is not None and layout.tp == 1:
        notes.append(f"{option_text(name, value)} changes nothing at --tp 1 (no TP collectives)")
    elif value is not None and not runner.async_tp_backward:
        notes.append(
            f"{option_text(name, value)} changes nothing under {runner.title}: its TP backward "
            "collectives are waited on after the GEMMs either way"
        )
    return notes


def _idle_precision(given: Mapping[str, Any], layout: Layout, model: ModelSpec | None) -> list[str]:
    """`idle_options`' lines of the options of a precision or of MoE layers that the layout or
    a dense `model` does not have (the launch keeps them; the price has nothing to change)."""
    notes = []
    gather = given.get("fp8_param_gather")
    if gather is not None and layout.dtype not in GATHER_LOW_DTYPES:
        notes.append(
            f"{option_text('fp8_param_gather', gather)} changes nothing at --dtype "
            f"{layout.dtype} (weights gathered in {', '.join(GATHER_LOW_DTYPES)} only)"
        )
    if model is not None and model.moe is None:
        if given.get("cuda_graphs"):
            notes.append(
                "--enable-cuda-graph changes nothing for a dense model: the host time it "
                "removes is the MoE layers' (tierwise.perf.terms.host)"
            )
        if given.get("cache_expert_inputs"):
            notes.append("--cache-expert-inputs changes nothing for a dense model (no experts)")
    return notes
