"""The behaviour options shared by `estimate`, `plan`, `sweep` and `report`: how a layout runs
(the fields of `tierwise.perf.flags.Flags`), MoE routing and ``--framework``, so all four price
a layout identically.

Each option's default is the `Flags` field's (shown in its help), or the framework's where its
row in `tierwise.frameworks` says otherwise: an option not given is None here and is resolved
in `tierwise.plan.request.Behaviour.flags`. A new behaviour flag is one `Flags` field and one
entry of `BEHAVIOUR_OPTIONS` (see the `tierwise.frameworks` docstring).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from tierwise.cli.options import with_options
from tierwise.frameworks import MEGATRON_ARGUMENTS
from tierwise.perf.flags import Flags

BEHAVIOUR_OPTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    # Megatron-LM's communication-overlap and schedule flags. A Megatron-LM run of before
    # August 2023 had none of the overlaps: --no-overlap-grad-reduce --no-overlap-param-gather
    # --no-tp-comm-overlap --no-overlap-p2p-communication --no-align-param-gather
    # (`tierwise.perf.flags.MEGATRON_2023_NO_OVERLAP`).
    "overlap_grad_reduce": (
        ("--overlap-grad-reduce",),
        "Megatron's: DP gradient buckets reduced as backward produces them (off: after "
        "backward, as Megatron-LM before 2023-08 ran it; DeepSpeed's overlap_comm; torchtitan "
        "always overlaps). Off also turns --overlap-param-gather off unless it is given.",
    ),
    "overlap_param_gather": (
        ("--overlap-param-gather",),
        "Megatron's: the distributed optimizer's weight buckets gathered ahead of the forward "
        "(off: after the optimizer step).",
    ),
    "tp_comm_overlap": (
        ("--tp-comm-overlap",),
        "Megatron's: TP collectives (SP gathers, reduce-scatters, the backward re-gather) "
        "overlapped with the GEMMs they feed (Transformer Engine userbuffers; torchtitan's "
        "async TP under torch.compile; DeepSpeed has none). Needs sequence parallelism.",
    ),
    "async_tensor_model_parallel_allreduce": (
        ("--async-tensor-model-parallel-allreduce",),
        "Column-parallel linears' backward collectives (input-gradient all-reduce; with SP its "
        "reduce-scatter and the input's re-gather) behind their GEMMs, no flag needed "
        "(Megatron-LM from 2021-09, DeepSpeed's TP layers; never torchtitan's eager DTensor). "
        "--no-: every TP collective waited on (Megatron-LM v2.6 and older, BLOOM's fork).",
    ),
    "overlap_p2p_communication": (
        ("--overlap-p2p-communication",),
        "Megatron's (interleaved schedule): a virtual stage's sends and receives overlap the "
        "next chunk's compute.",
    ),
    "delay_wgrad_compute": (
        ("--delay-wgrad-compute",),
        "Megatron's: weight-gradient GEMMs after the input gradient's, so the backward expert "
        "all-to-all (with --overlap-moe-expert-parallel-comm) hides behind them.",
    ),
    "align_param_gather": (
        ("--align-param-gather",),
        "Megatron's (interleaved): every virtual stage's first weight bucket gathered at the "
        "start of the step (off: each waits as its chunk's forward begins).",
    ),
    "scatter_gather_tensors_in_pipeline": (
        ("--scatter-gather-tensors-in-pipeline",),
        "Pipeline sends split over the TP ranks and all-gathered on arrival, without sequence "
        "parallelism (Megatron-LM 2021-02 to 2023-03; DeepSpeed's pipeline engine's "
        "pipe_partitioned, its default).",
    ),
    "microbatch_group_size_per_vp_stage": (
        ("--microbatch-group-size-per-virtual-pipeline-stage",),
        "Megatron's: micro-batches run through each virtual stage in groups of this size "
        "(default pp); fewer than pp idle at every chunk change.",
    ),
    "cache_expert_inputs": (
        ("--cache-expert-inputs",),
        "DeepSeek-V3's low-precision activation caching (report section 3.3.3): routed experts "
        "keep their dispatched and SwiGLU inputs in the layout's format and recompute the "
        "SwiGLU output.",
    ),
    "legacy_zero3": (
        ("--legacy-zero3",),
        "DeepSpeed's ZeRO-3 as released before 0.5.5 (2021): each parameter gathered and each "
        "gradient reduce-scattered on its own through per-rank list collectives, a device "
        "synchronisation around every gather (no prefetch overlap).",
    ),
    "cp_comm": (
        ("--cp-comm-type",),
        "Context parallel comm (Megatron's flag): p2p (ring attention), a2a (Ulysses), "
        "allgather (K and V gathered before attention, exposed; Llama 3's).",
    ),
    "attention_backend": (
        ("--attention-backend",),
        "Megatron's: flash | fused (cuDNN) | unfused (softmax in HBM, 2021-22 Megatron).",
    ),
    "pipeline_schedule": (
        ("--pipeline-schedule",),
        "torchtitan's: 1F1B | Interleaved1F1B | InterleavedZeroBubble | ZBVZeroBubble | "
        "DualPipeV, or DeepSeek's DualPipe (none given: 1F1B, Interleaved1F1B with vpp > 1).",
    ),
    "moe_token_dispatcher_type": (
        ("--moe-token-dispatcher-type", "--moe-dispatcher"),
        "Megatron's: alltoall | allgather | flex (DeepEP / HybridEP).",
    ),
    "moe_router_force_load_balancing": (
        ("--moe-router-force-load-balancing",),
        "Megatron's: every expert gets the same tokens (balanced routing, as NVIDIA's "
        "benchmarks run); otherwise dropless with an imbalance factor.",
    ),
    "overlap_moe_expert_parallel_comm": (
        ("--overlap-moe-expert-parallel-comm", "--moe-a2a-overlap"),
        "Megatron's combined 1F1B: expert all-to-alls hidden behind the other micro-batch's "
        "compute.",
    ),
    "cuda_graphs": (
        ("--enable-cuda-graph",),
        "CUDA graphs over the layers (Megatron's): no host time per MoE layer and expert.",
    ),
    "fp8_dot_product_attention": (
        ("--fp8-dot-product-attention",),
        "The attention core in FP8 (Megatron-core's TransformerConfig "
        "fp8_dot_product_attention), not BF16.",
    ),
    "fp8_param_gather": (
        ("--fp8-param-gather",),
        "Megatron's: FP8/MXFP8 layouts all-gather parameters in their format (NeMo's recipes do).",
    ),
}
"""`Flags` field -> (option names, Megatron-LM's or torchtitan's spelling first; help)."""

OTHER_OPTIONS: dict[str, tuple[Any, Any]] = {
    "framework": (
        Annotated[
            str | None,
            typer.Option(
                "--framework",
                help="megatron | torchtitan | deepspeed (| any: plan, sweep, report): what runs "
                "the layouts and how (Megatron DDP buckets, FSDP2 per block, ZeRO-3 per module; "
                "its schedules and defaults). Default: any for plan, sweep and report, each "
                "layout priced by the generic model as estimate prices it without one.",
            ),
        ],
        None,
    ),
    "moe_routing": (
        Annotated[
            str | None,
            typer.Option(
                "--moe-routing",
                help="balanced (forced-balance dropless, as NVIDIA's benchmarks run) | dropless "
                "(with the documented imbalance factor) | capacity (the capacity factor: "
                "--moe-expert-capacity-factor or the model's). Default: the model's capacity "
                "factor if it has one, else dropless.",
            ),
        ],
        None,
    ),
    "moe_expert_capacity_factor": (
        Annotated[
            float | None,
            typer.Option(
                "--moe-expert-capacity-factor",
                help="Megatron's: capacity routing, experts padded to this factor (tokens "
                "beyond it dropped); overrides the model's capacity_factor.",
            ),
        ],
        None,
    ),
}

F = TypeVar("F", bound=Callable[..., Any])


def _flag_option(field: dataclasses.Field[Any], kind: Any) -> tuple[Any, Any]:
    """The typer option of one `Flags` field: default None (not given), its default shown."""
    names, text = BEHAVIOUR_OPTIONS[field.name]
    shown = field.default if field.default is not None else "none"
    if kind is bool:
        shown = "on" if shown else "off"
    own = MEGATRON_ARGUMENTS.get(field.name)
    if own is not None and own != field.default:  # the estimate assumes otherwise: say so
        theirs = ("on" if own else "off") if kind is bool else own
        shown = f"{shown}, as priced and emitted; Megatron-LM's own: {theirs}"
    # "\\[": a literal bracket in the help, which typer renders as rich markup
    text = f"{text} \\[default: {shown}]"
    if kind is bool:  # --x/--no-x, so a framework's default can be switched either way
        names = tuple(f"{n}/--no-{n.removeprefix('--')}" for n in names)
    option = typer.Option(*names, help=text, show_default=False)
    return Annotated[kind | None, option], None


def _options() -> dict[str, tuple[Any, Any]]:
    hints = typing.get_type_hints(Flags)
    flag_options = {}
    for field in dataclasses.fields(Flags):
        if field.name in BEHAVIOUR_OPTIONS:
            kind = hints[field.name]
            kind = next((a for a in typing.get_args(kind) if a is not type(None)), kind)
            flag_options[field.name] = _flag_option(field, kind)
    return {**flag_options, **OTHER_OPTIONS}


def _as_behaviour(picked: dict[str, Any]) -> dict[str, Any]:
    from tierwise.plan.behaviour import Behaviour

    others = {name: picked.pop(name) for name in OTHER_OPTIONS}
    return {"behaviour": Behaviour(given=picked, **others)}


def behaviour_options(func: F) -> F:
    """Give a command the behaviour options; it receives `behaviour`
    (`tierwise.plan.request.Behaviour`)."""
    return with_options(func, _options(), _as_behaviour, ("behaviour",))
