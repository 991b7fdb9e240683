"""Megatron-LM's communication-overlap and schedule flags, shared by `estimate` and `plan`:
one option per `tierwise.perf.flags.Flags` field, named as Megatron-LM names it, booleans
with their --no- form, the default shown from `Flags` (the one default). The command receives
`overlap_flags` (field -> value) to pass on to `Flags`.

A Megatron-LM run of before August 2023 had none of the overlaps: --no-overlap-grad-reduce
--no-overlap-param-gather --no-tp-comm-overlap --no-overlap-p2p-communication
--no-align-param-gather (`tierwise.perf.flags.MEGATRON_2023_NO_OVERLAP`).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from tierwise.cli.options import signature_with
from tierwise.perf.flags import Flags

OVERLAP_OPTIONS: dict[str, tuple[str, str]] = {
    "overlap_grad_reduce": (
        "--overlap-grad-reduce",
        "Megatron's: DP gradient buckets reduced as backward produces them (off: after "
        "backward, as Megatron-LM before 2023-08 ran it).",
    ),
    "overlap_param_gather": (
        "--overlap-param-gather",
        "Megatron's: the distributed optimizer's weight buckets gathered ahead of the forward "
        "(off: after the optimizer step).",
    ),
    "tp_comm_overlap": (
        "--tp-comm-overlap",
        "Megatron's: TP collectives (SP gathers, reduce-scatters, the backward re-gather) "
        "overlapped with the GEMMs they feed (Transformer Engine userbuffers).",
    ),
    "overlap_p2p_communication": (
        "--overlap-p2p-communication",
        "Megatron's (interleaved schedule): a virtual stage's sends and receives overlap the "
        "next chunk's compute.",
    ),
    "delay_wgrad_compute": (
        "--delay-wgrad-compute",
        "Megatron's: weight-gradient GEMMs after the input gradient's, so the backward expert "
        "all-to-all (with --overlap-moe-expert-parallel-comm) hides behind them.",
    ),
    "align_param_gather": (
        "--align-param-gather",
        "Megatron's (interleaved): every virtual stage's first weight bucket gathered at the "
        "start of the step (off: each waits as its chunk's forward begins).",
    ),
    "microbatch_group_size_per_vp_stage": (
        "--microbatch-group-size-per-virtual-pipeline-stage",
        "Megatron's: micro-batches run through each virtual stage in groups of this size "
        "(default pp); fewer than pp idle at every chunk change.",
    ),
    "cache_expert_inputs": (
        "--cache-expert-inputs",
        "DeepSeek-V3's low-precision activation caching (report section 3.3.3): routed experts "
        "keep their dispatched and SwiGLU inputs in the layout's format and recompute the "
        "SwiGLU output.",
    ),
}
"""`Flags` field -> (Megatron-LM's option name, help)."""

F = TypeVar("F", bound=Callable[..., Any])


def _option(field: dataclasses.Field[Any], kind: Any) -> tuple[Any, Any]:
    """The typer option of one `Flags` field, defaulting to the field's default."""
    name, text = OVERLAP_OPTIONS[field.name]
    if kind is bool:
        name = f"{name}/--no-{name.removeprefix('--')}"
        return Annotated[bool, typer.Option(name, help=text)], field.default
    return Annotated[kind | None, typer.Option(name, help=text)], field.default


def _options() -> dict[str, tuple[Any, Any]]:
    hints = typing.get_type_hints(Flags)
    out = {}
    for field in dataclasses.fields(Flags):
        if field.name in OVERLAP_OPTIONS:
            kind = hints[field.name]
            kind = next((a for a in typing.get_args(kind) if a is not type(None)), kind)
            out[field.name] = _option(field, kind)
    return out


def overlap_options(func: F) -> F:
    """Give a command the overlap options; it receives `overlap_flags` (Flags field -> value)."""
    options = _options()

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        picked = {name: kwargs.pop(name) for name in options}
        return func(overlap_flags=picked, **kwargs)

    signature = signature_with(func, options, {"overlap_flags"})
    wrapper.__signature__ = signature  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
