"""What every cost term reads: the busiest pipeline stage of a layout, per micro-batch."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NamedTuple

from tierwise.hardware.catalog import GPU
from tierwise.perf import comm as C
from tierwise.records import record
from tierwise.workload.flops import (
    RECOMPUTE_FULL,
    RECOMPUTE_SELECTIVE,
    Array,
    StageFlops,
    flops_batch,
    maximum,
)
from tierwise.workload.layout import middle_stage_layers
from tierwise.workload.recompute import DEFAULT_MASK, recomputes
from tierwise.workload.spec import ModelSpec


class CommTerm(NamedTuple):
    """One parallel dimension's communication on one GPU: seconds left on the critical path
    (`exposed_s`) and in all (`total_s`), bytes sent (`bytes`), and the group kind of
    `tierwise.perf.groups.GROUP_KINDS` it runs on (its tier). Per micro-batch, except DP
    (per step)."""

    exposed_s: Array
    total_s: Array
    bytes: Array
    group: str


class Stage(NamedTuple):
    """The busiest pipeline stage of a layout (scalars, or arrays over layouts)."""

    model: ModelSpec
    gpu: GPU
    f: dict[str, Any]
    """Layout fields (`tierwise.workload.layout.LAYOUT_ARRAY_FIELDS`)."""
    layers: Array
    """Layers the terms are priced for: the most any pipeline rank holds."""
    first: Array
    """Layers on the first pipeline rank (it also runs the input embedding)."""
    middle: Array
    """The most layers on a rank between the first and the last (0 where pp <= 2)."""
    last: Array
    """Layers on the last pipeline rank (it also runs the logits and the loss)."""
    flops: StageFlops
    """Training FLOPs and elementwise bytes of one micro-batch on the stage."""
    tokens: Array
    """Tokens of one micro-batch on one GPU: mbs * seq / cp."""
    act: Array
    """Bytes of one 16-bit activation tensor of `tokens` x hidden."""
    passes: Array
    """Passes over each layer per micro-batch: forward, backward, recompute forward (full)."""
    moe_passes: Array
    """Passes over each MoE layer's token dispatch and combine: `passes`, plus one where
    selective recompute re-runs the whole MoE layer (the ``moe`` module)."""
    tp_passes: Array
    """Passes' worth of each layer's TP collectives: `passes`, plus the MLP's half of one
    where selective recompute re-runs a TP-split MLP (``selective_tp_share``)."""
    micro: Array
    """Micro-batches per step on each pipeline: gbs / (mbs * dp)."""


def stage_of(
    m: ModelSpec, gpu: GPU, f: dict[str, Any], middle_layers: Array | None = None
) -> Stage:
    """The pipeline's stages: the first and last from `f`, the middle ones holding at most
    `middle_layers` (default the planner's split: the same count on every middle stage)."""
    first, last, pp = f["first_stage_layers"], f["last_stage_layers"], f["pp"]
    if middle_layers is None:
        middle_layers = middle_stage_layers(m.layers, pp, first, last)
    middle = (pp > 2) * middle_layers
    n = maximum(maximum(first, last), middle)
    mbs, seq, cp = f["mbs"], f["seq"], f["cp"]
    flops = flops_batch(
        m,
        seq=seq,
        mbs=mbs,
        tp=f["tp"],
        cp=cp,
        pp=f["pp"],
        sp=f["sp"],
        recompute=f["recompute"],
        recompute_modules=modules_of(f),
        stage_layers=n,
        recompute_share=f.get("recompute_share"),
    )
    tokens = mbs * seq / cp
    # forward, backward, and the recompute forward of the layers full recompute re-runs
    passes = 2 + f.get("recompute_share", f["recompute"] == RECOMPUTE_FULL)
    moe_passes = passes + selective_moe_pass(f) if m.moe is not None else passes
    tp_passes = passes + selective_tp_share(m, f)
    micro = f["gbs"] / (mbs * f["dp"])
    act = C.activation_bytes(tokens, m.hidden)
    values = (m, gpu, f, n, first, middle, last, flops, tokens, act, passes, moe_passes)
    return record(Stage, (*values, tp_passes, micro))  # (`tierwise.records`: the hot path)


def modules_of(f: dict[str, Any]) -> Array:
    """The layout's selective-recompute module mask (Megatron's default where unset)."""
    return f.get("recompute_modules", DEFAULT_MASK)


def selective_moe_pass(f: dict[str, Any]) -> Array:
    """1 where selective recompute re-runs whole MoE layers (dispatch and combine too)."""
    return (f["recompute"] == RECOMPUTE_SELECTIVE) * recomputes(modules_of(f), "moe")


def selective_tp_share(m: ModelSpec, f: dict[str, Any]) -> Array:
    """Passes' worth of a layer's TP collectives that selective recompute adds: the MLP's
    collective (one of the two per pass) where its modules re-run a TP-split MLP, the dense
    one (``mlp``) or a MoE layer's shared experts (``moe``, ``shared_experts``)."""
    if isinstance(f["recompute"], int) and f["recompute"] != RECOMPUTE_SELECTIVE:
        return 0.0
    mask, moe_share = modules_of(f), m.moe_layers / m.layers
    shared = m.moe is not None and m.moe.shared_experts > 0
    shared_rerun = maximum(recomputes(mask, "moe"), recomputes(mask, "shared_experts"))
    rerun = (1 - moe_share) * recomputes(mask, "mlp") + moe_share * shared * shared_rerun
    return (f["recompute"] == RECOMPUTE_SELECTIVE) * rerun / C.TP_COLLECTIVES_PER_PASS


def select(cond: Array, if_true: Callable[[], Array], if_false: Callable[[], Array]) -> Array:
    """`if_true()` where `cond`, else `if_false()`; a python bool calls only the one it picks."""
    if cond is True or cond is False:  # a python bool: the common one-layout case first
        return if_true() if cond else if_false()
    numpy = sys.modules.get("numpy")  # a numpy bool implies numpy is loaded already
    if numpy is not None and isinstance(cond, numpy.bool_):
        return if_true() if cond else if_false()
    return cond * if_true() + (1 - cond) * if_false()
