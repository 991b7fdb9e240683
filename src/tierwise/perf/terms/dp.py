"""Data parallelism over the dp*cp ranks of a stage: gradient reduction, weight gathers,
and the optimizer step they shard.

Replicated optimizer: one gradient all-reduce per step. Sharded optimizer (ZeRO-1/2,
Megatron's distributed optimizer): a gradient reduce-scatter and an all-gather of the
updated 16-bit weights per step. ZeRO-3/FSDP: weights gathered forward and backward and
gradients reduce-scattered every micro-batch. Gradients hide behind backward, gathers behind
forward (FSDP: behind the whole micro-batch), up to the compute time available.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

from tierwise.perf import comm as C
from tierwise.perf.efficiency import hbm_bytes_per_s
from tierwise.perf.terms.stage import CommTerm, Stage, pos, select
from tierwise.workload.flops import Array
from tierwise.workload.memory import main_grad_bytes
from tierwise.workload.params import ParamCounts, param_counts
from tierwise.workload.precision import GATHER_BYTES
from tierwise.workload.spec import ModelSpec

# Share of the compute window that overlapped DP/FSDP communication can really use (the
# collectives steal SMs and memory bandwidth from the GEMMs they hide behind): assumed.
DP_OVERLAP_EFFICIENCY = 0.9
FORWARD_SHARE = 1.0 / 3.0  # forward / (forward + backward) compute of one micro-batch
# HBM bytes the Adam step touches per parameter it updates: fp32 master, m, v read and
# written (24), the gradient read (4), the 16-bit weight written (2).
OPTIMIZER_BYTES_PER_PARAM = 30


class DataParallel(NamedTuple):
    """DP/FSDP communication per step (`comm`: a `CommTerm`), the compute window it may hide
    in (`window_s`), the collectives' buffer bytes per GPU (`buffer_bytes`: what a NIC must
    carry in that window) and the optimizer step's seconds (`optimizer_s`)."""

    comm: CommTerm
    window_s: Array
    buffer_bytes: Array
    optimizer_s: Array


@cache
def _param_counts(m: ModelSpec) -> ParamCounts:
    return param_counts(m)


def stage_params(s: Stage) -> Array:
    """Parameters one GPU of the stage holds: dense ones split over tp*pp, experts over
    ep*etp*pp."""
    f = s.f
    counts = _param_counts(s.model)
    experts = counts.experts
    return (counts.total - experts) / (f["tp"] * f["pp"]) + experts / (f["ep"] * f["etp"] * f["pp"])


def dp_comm(
    s: Stage,
    comm: C.CommFn,
    compute_s: Array,
    overlap_grad_reduce: bool = True,
    overlap_param_gather: bool = True,
) -> DataParallel:
    """DP/ZeRO/FSDP communication and optimizer step of the stage `s`, per step; `compute_s`:
    one micro-batch's compute, the window the collectives hide in."""
    f, micro = s.f, s.micro
    params = stage_params(s)
    grads = params * main_grad_bytes(f["grad_reduce_bf16"])
    weights = params * GATHER_BYTES[f["precision"]]  # FP8 parameter all-gathers
    shard = (f["zero"] >= 1) | f["distributed_optimizer"]
    fsdp = f["zero"] >= 3
    bwd_window = compute_s * (1 - FORWARD_SHARE) * DP_OVERLAP_EFFICIENCY * overlap_grad_reduce
    fwd_window = compute_s * FORWARD_SHARE * DP_OVERLAP_EFFICIENCY * overlap_param_gather
    rs = select(shard, lambda: comm("dpcp", "reduce_scatter", grads), lambda: 0.0)
    ag = select(shard, lambda: comm("dpcp", "all_gather", weights), lambda: 0.0)
    ar = select(shard, lambda: 0.0, lambda: comm("dpcp", "all_reduce", grads))
    once = shard * (pos(rs - bwd_window) + pos(ag - fwd_window)) + (1 - shard) * pos(
        ar - bwd_window
    )
    per_micro = micro * pos(2 * ag + rs - compute_s * DP_OVERLAP_EFFICIENCY)
    exposed = fsdp * per_micro + (1 - fsdp) * once
    traffic = fsdp * micro * (2 * ag + rs) + (1 - fsdp) * (shard * (rs + ag) + (1 - shard) * ar)
    window = fsdp * micro * compute_s * DP_OVERLAP_EFFICIENCY + (1 - fsdp) * (
        bwd_window + shard * fwd_window
    )
    ranks = f["dp"] * f["cp"]
    sent = (
        (ranks - 1)
        / ranks
        * (
            fsdp * micro * (2 * weights + grads)
            + (1 - fsdp) * (shard * (grads + weights) + (1 - shard) * 2 * grads)
        )
    )
    buffers = fsdp * micro * (2 * weights + grads) + (1 - fsdp) * (
        shard * (grads + weights) + (1 - shard) * grads
    )
    opt_params = params / (1 + shard * (ranks - 1))
    optimizer = opt_params * OPTIMIZER_BYTES_PER_PARAM / hbm_bytes_per_s(s.gpu)
    return DataParallel(CommTerm(exposed, traffic, sent, "dpcp"), window, buffers, optimizer)
