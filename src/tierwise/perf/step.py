"""Step time of one layout (or many, vectorised): compute, exposed comm, bubble, optimizer.

Per micro-batch on the busiest pipeline stage: compute (GEMMs at their shape's efficiency,
the causal attention core, HBM-bound elementwise work) + exposed TP / CP / EP / PP comm.
The pipeline runs (m + (pp-1)/vpp) such micro-batch slots (1F1B; interleaved with vpp);
DP/FSDP comm is hidden behind backward (gradients) and forward (weights) up to the compute
time available; then the optimizer step (HBM-bound). All functions take python scalars or
numpy arrays of layout fields (`tierwise.workload.layouts_to_arrays`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from tierwise.hardware.catalog import GPU
from tierwise.hardware.cluster import ClusterSpec
from tierwise.perf import comm as C
from tierwise.perf.efficiency import (
    CAUSAL_WORK_FRACTION,
    Gemm,
    attention_tflops,
    elementwise_seconds,
    gemm_seconds,
    hbm_bytes_per_s,
)
from tierwise.perf.precision import quantize_seconds
from tierwise.workload.flops import (
    RECOMPUTE_FULL,
    Array,
    LayerFlops,
    flops_batch,
    logits_flops,
    maximum,
    minimum,
    model_flops_per_step,
)
from tierwise.workload.layout import middle_stage_layers
from tierwise.workload.memory import GiB, main_grad_bytes, memory_batch
from tierwise.workload.params import ParamCounts, param_counts
from tierwise.workload.precision import FORMATS, GATHER_BYTES, LOW_PRECISION_SHARE, peak_of
from tierwise.workload.spec import ModelSpec

# Share of TP communication left exposed when the framework overlaps it with GEMMs
# (Megatron-core --tp-comm-overlap, userbuffers): assumed 30%.
TP_OVERLAP_EXPOSED = 0.3
# Share of the compute window that overlapped DP/FSDP communication can really use (the
# collectives steal SMs and memory bandwidth from the GEMMs they hide behind): assumed.
DP_OVERLAP_EFFICIENCY = 0.9
# Share of overlapped (hidden) communication time that still lands on the step: NCCL's
# kernels occupy 16-32 of the GPU's SMs and compete for HBM while the overlapped GEMMs run.
# Assumed (not fitted): the calibration runs overlap little communication.
OVERLAP_INTERFERENCE = 0.2
# HBM bytes the Adam step touches per parameter it updates: fp32 master, m, v read and
# written (24), the gradient read (4), the 16-bit weight written (2).
OPTIMIZER_BYTES_PER_PARAM = 30
FORWARD_SHARE = 1.0 / 3.0  # forward / (forward + backward) compute of one micro-batch
# Unfused attention (no flash kernel): HBM bytes per attention score element. Forward: fused
# scale-mask-softmax reads and writes 16-bit scores (4), dropout reads them, writes the
# dropped scores and a 1-byte mask (5). Backward: dropout grad (2 + 1 + 2), softmax grad
# reads the output and its grad and writes one (6). The batched GEMMs compute every score.
UNFUSED_SCORE_BYTES_FORWARD = 9
UNFUSED_SCORE_BYTES_BACKWARD = 11


@dataclass(frozen=True)
class Flags:
    """Framework behaviour a layout runs with."""

    tp_comm_overlap: bool = False
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    order: tuple[str, ...] = ("tp", "cp", "dp", "pp")
    scatter_nodes: bool = False
    cp_comm: str = "p2p"  # context parallelism: "p2p" ring attention or "a2a" (Ulysses)
    flash_attention: bool = True  # False: unfused attention (Megatron before 2022)


@cache
def _param_counts(m: ModelSpec) -> ParamCounts:
    return param_counts(m)


def _select(cond: Array, if_true: Callable[[], Array], if_false: Callable[[], Array]) -> Array:
    """`if_true()` where `cond`, else `if_false()`; a python bool calls only the one it picks."""
    if isinstance(cond, bool | np.bool_):
        return if_true() if cond else if_false()
    return cond * if_true() + (1 - cond) * if_false()


@cache
def _format_peaks(gpu: GPU) -> np.ndarray:
    """Dense peak (TFLOP/s) of each format's GEMMs on `gpu`; BF16's where the GPU lacks it."""
    return np.array([peak_of(gpu, code) or gpu.peak_bf16_tflops for code in range(len(FORMATS))])


def _pos(x: Array) -> Array:
    return x * (x > 0) + 0.0


def stage_gemms(
    m: ModelSpec,
    layer: LayerFlops,
    logits: Array,
    tokens: Array,
    tp: Array,
    ep: Array,
    precision: Array,
) -> list[Gemm]:
    """One layer's weight GEMMs (forward FLOPs, per-GPU M, N, K): QKV, output, MLP/expert
    (`layer`: the MoE layer of a MoE model) in the layout's format, the router and the layer's
    share `logits` of the logits GEMM in BF16. M = `tokens` of one micro-batch on one GPU (an
    expert's: the tokens its EP group routes to it, a grouped GEMM)."""
    h, moe = m.hidden, m.moe
    routed_share = moe.top_k * (moe.capacity_factor or 1.0) * ep / moe.experts if moe else 1.0
    expert_tokens = tokens * routed_share
    low = LOW_PRECISION_SHARE[precision]
    ffn = moe.expert_ffn_hidden if moe else m.ffn
    return [
        Gemm(layer.qkv, tokens, (m.q_dim + 2 * m.kv_dim) / tp, h, low),
        Gemm(layer.out, tokens, h, m.q_dim / tp, low),
        Gemm(layer.mlp, tokens, (moe.shared_ffn if moe else m.ffn) / tp, h, low),
        Gemm(layer.experts, expert_tokens, ffn / tp, h, low, expert_tokens if moe else None),
        Gemm(layer.router, tokens, moe.experts if moe else 1, h),
        Gemm(logits, tokens, m.vocab / tp, h),
    ]


def step_terms(
    m: ModelSpec,
    cluster: ClusterSpec,
    f: dict[str, Any],
    comm: C.CommFn,
    flags: Flags = Flags(),
    busiest_stage_layers: Array | None = None,
) -> dict[str, Any]:
    """Seconds per step of each component, plus the derived metrics (scalars or arrays)."""
    gpu, h = cluster.gpu, m.hidden
    tp, cp, pp, vpp, dp = f["tp"], f["cp"], f["pp"], f["vpp"], f["dp"]
    mbs, gbs, seq, sp = f["mbs"], f["gbs"], f["seq"], f["sp"]
    full = f["recompute"] == RECOMPUTE_FULL
    n = busiest_stage_layers
    if n is None:  # the planner's splits: first, last, and the same count on every other
        first, last = f["first_stage_layers"], f["last_stage_layers"]
        n = maximum(maximum(first, last), middle_stage_layers(m.layers, pp, first, last))
    sf = flops_batch(
        m, seq=seq, mbs=mbs, tp=tp, cp=cp, pp=pp, sp=sp, recompute=f["recompute"], stage_layers=n
    )

    # Compute of one micro-batch on the busiest stage (forward + backward + recompute): each
    # weight GEMM at the efficiency of its arithmetic intensity and format, scaled from one
    # layer's to the stage's FLOPs; and the casts of the low-precision operands.
    precision = f["precision"]
    gemms = stage_gemms(
        m,
        sf.moe_layer,
        logits_flops(m, seq, mbs, tp=tp, cp=cp) / n,
        mbs * seq / cp,
        tp,
        f["ep"],
        precision,
    )
    per_layer = sum([g.flops for g in gemms])
    t_gemm = (sf.hardware - sf.attention) * gemm_seconds(gpu, gemms, precision) / per_layer
    t_quant = n * quantize_seconds(gpu, gemms, precision, 1 + full)
    work = CAUSAL_WORK_FRACTION if flags.flash_attention else 1.0
    t_attn = sf.attention * work / (attention_tflops(gpu) * 1e12)
    t_elem = elementwise_seconds(gpu, sf.elementwise_bytes, fused=flags.flash_attention)
    if not flags.flash_attention:
        scores = n * mbs * m.heads / tp * seq / cp * seq
        forwards = 1 + (f["recompute"] > 0)
        score_bytes = UNFUSED_SCORE_BYTES_FORWARD * forwards + UNFUSED_SCORE_BYTES_BACKWARD
        t_elem = t_elem + scores * score_bytes / hbm_bytes_per_s(gpu)
    t_compute = t_gemm + t_attn + t_elem + t_quant

    tokens = mbs * seq / cp
    act = C.activation_bytes(tokens, h)
    # TP: 2 collectives per layer per pass (forward, backward, recompute forward).
    n_tp = n * C.TP_COLLECTIVES_PER_PASS * (2 + full)
    per_tp = _select(
        sp,
        lambda: comm("tp", "all_gather", act) + comm("tp", "reduce_scatter", act),
        lambda: comm("tp", "all_reduce", act),
    )
    tp_total = n_tp * per_tp
    tp_exposed = tp_total * (TP_OVERLAP_EXPOSED if flags.tp_comm_overlap else 1.0)
    kv_rank = m.kv_dim / minimum(tp, m.kv)
    if flags.cp_comm == "a2a":
        # Ulysses: per layer and pass, Q/K/V go from sequence- to head-sharded before
        # attention and the output comes back after it; nothing hides these all-to-alls.
        qkv = C.activation_bytes(tokens, m.q_dim / tp + C.KV_TENSORS * kv_rank)
        out = C.activation_bytes(tokens, m.q_dim / tp)
        cp_layer = (2 + full) * (comm("cp", "alltoall", qkv) + comm("cp", "alltoall", out))
        cp_exposed = n * cp_layer
        cp_bytes = n * (2 + full) * (qkv + out) * (cp - 1) / cp
    else:
        # Ring attention: cp-1 K/V block exchanges per layer and pass, hidden behind the
        # attention core they feed.
        kv_block = C.activation_bytes(tokens, C.KV_TENSORS * kv_rank)
        cp_layer = (cp - 1) * comm("cp", "sendrecv", kv_block) * (1 + 2 + full)
        cp_exposed = n * _pos(cp_layer - t_attn / n)
        cp_bytes = n * (cp - 1) * kv_block * (1 + 2 + full)
    # EP: dispatch + combine all-to-all per MoE layer and pass.
    moe_share = m.moe_layers / m.layers
    ep_exposed = 0.0
    if m.moe is not None:
        routed = tokens * m.moe.top_k * (m.moe.capacity_factor or 1.0) / (1 + sp * (tp - 1))
        ep_exposed = (
            n
            * moe_share
            * C.A2A_PER_MOE_PASS
            * (2 + full)
            * comm("ep", "alltoall", C.activation_bytes(routed, h))
        )
    # PP: activation forward, gradient backward, per virtual stage.
    boundary = act / (1 + sp * (tp - 1))
    pp_exposed = 2 * vpp * comm("pp", "sendrecv", boundary)

    t_mb = t_compute + tp_exposed + cp_exposed + ep_exposed + pp_exposed
    micro = gbs / (mbs * dp)
    bubble = (pp - 1) / vpp * t_mb

    # DP / ZeRO / FSDP over the dp*cp ranks of a stage.
    counts = _param_counts(m)
    experts = counts.experts
    stage_params = (counts.total - experts) / (tp * pp) + experts / (f["ep"] * f["etp"] * pp)
    grads = stage_params * main_grad_bytes(f["grad_reduce_bf16"])
    weights = stage_params * GATHER_BYTES[precision]  # FP8 parameter all-gathers
    shard = (f["zero"] >= 1) | f["distributed_optimizer"]
    fsdp = f["zero"] >= 3
    bwd_window = t_compute * (1 - FORWARD_SHARE) * DP_OVERLAP_EFFICIENCY * flags.overlap_grad_reduce
    fwd_window = t_compute * FORWARD_SHARE * DP_OVERLAP_EFFICIENCY * flags.overlap_param_gather
    # Sharded optimizer (and FSDP): reduce-scatter + all-gather; else one all-reduce.
    rs = _select(shard, lambda: comm("dpcp", "reduce_scatter", grads), lambda: 0.0)
    ag = _select(shard, lambda: comm("dpcp", "all_gather", weights), lambda: 0.0)
    ar = _select(shard, lambda: 0.0, lambda: comm("dpcp", "all_reduce", grads))
    once = shard * (_pos(rs - bwd_window) + _pos(ag - fwd_window)) + (1 - shard) * _pos(
        ar - bwd_window
    )
    per_micro = micro * _pos(2 * ag + rs - t_compute * DP_OVERLAP_EFFICIENCY)
    dp_exposed = fsdp * per_micro + (1 - fsdp) * once
    dp_traffic = fsdp * micro * (2 * ag + rs) + (1 - fsdp) * (shard * (rs + ag) + (1 - shard) * ar)
    dp_window = fsdp * micro * t_compute * DP_OVERLAP_EFFICIENCY + (1 - fsdp) * (
        bwd_window + shard * fwd_window
    )
    opt_params = stage_params / (1 + shard * (dp * cp - 1))
    t_opt = opt_params * OPTIMIZER_BYTES_PER_PARAM / hbm_bytes_per_s(gpu)

    # Hidden communication still costs: its kernels take SMs and HBM bandwidth from the
    # compute it overlaps.
    hidden = micro * (tp_total - tp_exposed + n * cp_layer - cp_exposed) + _pos(
        dp_traffic - dp_exposed
    )
    interference = hidden * OVERLAP_INTERFERENCE
    step = micro * t_mb + bubble + dp_exposed + t_opt + interference
    world = tp * cp * pp * dp
    model_flops = model_flops_per_step(m, seq, gbs)
    tflops = model_flops / (step * world) / 1e12
    flash = flags.flash_attention
    mem = memory_batch(m, **f, flash_attention=flash, dropout=not flash)
    mem_bytes = mem.total_bytes
    return {
        "step_time_s": step,
        "tokens_per_s": gbs * seq / step,
        "tflops_per_gpu": tflops,
        "hw_tflops_per_gpu": tflops * sf.hardware / sf.model,
        "mfu": tflops / gpu.peak_bf16_tflops,
        "mfu_at_dtype_peak": tflops / _format_peaks(gpu)[precision],
        "memory": mem,
        "memory_gib_per_gpu": mem_bytes / GiB,
        "fits": mem_bytes <= gpu.hbm_gib * GiB,
        "breakdown": {
            "compute_s": micro * t_compute,
            "tp_comm_s": micro * tp_exposed,
            "cp_comm_s": micro * cp_exposed,
            "ep_comm_s": micro * ep_exposed,
            "pp_comm_s": micro * pp_exposed,
            "pipeline_bubble_s": bubble,
            "dp_comm_s": dp_exposed,
            "optimizer_s": t_opt,
            "overlap_interference_s": interference,
        },
        "comm_total_s": {
            "tp": micro * tp_total,
            "cp": micro * n * cp_layer,
            "ep": micro * ep_exposed,
            "pp": micro * pp_exposed,
            "dp": dp_traffic,
        },
        "comm_bytes_per_gpu": {
            "tp": micro * n_tp * act * (tp - 1) / tp * (2 - sp + sp * 2) / 2 * 2,
            "cp": micro * cp_bytes,
            "ep": 0.0
            if m.moe is None
            else micro
            * n
            * moe_share
            * C.A2A_PER_MOE_PASS
            * (2 + full)
            * C.activation_bytes(routed, h)
            * (f["ep"] - 1)
            / f["ep"],
            "pp": micro * 2 * vpp * boundary * (pp > 1),
            "dp": (dp * cp - 1)
            / (dp * cp)
            * (
                fsdp * micro * (2 * weights + grads)
                + (1 - fsdp) * (shard * (grads + weights) + (1 - shard) * 2 * grads)
            ),
        },
        "dp_overlap_window_s": dp_window,
        "dp_bytes_per_gpu": fsdp * micro * (2 * weights + grads)
        + (1 - fsdp) * (shard * (grads + weights) + (1 - shard) * grads),
        "compute_parts_s": {
            "gemm": micro * t_gemm,
            "attention": micro * t_attn,
            "elementwise": micro * t_elem,
            "quantize": micro * t_quant,
        },
    }
