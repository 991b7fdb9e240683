"""Step time of one layout (or many, vectorised): compute, exposed comm, bubble, optimizer.

Composes the cost terms of `tierwise.perf.terms`: per micro-batch, each pipeline rank's
compute plus exposed TP / CP / EP / PP communication (its layers; the embedding on the
first rank, the logits and loss on the last); the slowest rank sets the pace and the
pipeline schedule (`tierwise.perf.pipeline`) adds its bubble; DP/FSDP communication hides
behind the compute up to the window it gets; then the optimizer step. Hidden communication
still steals some of the compute it overlaps. All functions take python scalars or numpy
arrays of layout fields (`tierwise.workload.layouts_to_arrays`).
"""

from __future__ import annotations

from typing import Any

from tierwise.frameworks import DUAL_SCHEDULES, RECOMPUTE_OP_SAC, SHARDED_ZERO3
from tierwise.hardware.catalog import GPU
from tierwise.hardware.cluster import ClusterSpec
from tierwise.memo import by_identity
from tierwise.perf import comm as C
from tierwise.perf.flags import Flags
from tierwise.perf.pipeline import bubble_seconds, ranks
from tierwise.perf.terms.compute import compute
from tierwise.perf.terms.cp import cp_comm
from tierwise.perf.terms.dp import deepspeed_live_bytes, dp_comm
from tierwise.perf.terms.ep import NO_EP, ep_comm, permute_scale, routing
from tierwise.perf.terms.offload import offload
from tierwise.perf.terms.pp import pp_comm
from tierwise.perf.terms.stage import stage_of
from tierwise.perf.terms.straggler import straggler_s
from tierwise.perf.terms.tp import column_gemms, edge_tp_comm, tp_comm, tp_ops
from tierwise.workload.flops import (
    TRAINING_PASSES,
    Array,
    StageFlops,
    model_flops_per_step,
    mtp_flops,
    pos,
)
from tierwise.workload.memory import (
    GiB,
    MemoryBreakdown,
    main_grad_bytes,
    memory_batch,
    replica_fields,
)
from tierwise.workload.precision import FORMATS, ByCode, peak_of
from tierwise.workload.recompute import DEFAULT_MASK, framework_mask
from tierwise.workload.spec import ModelSpec

__all__ = ["Flags", "memory_terms", "step_terms"]

# Share of overlapped (hidden) communication time that still lands on the step: NCCL's
# kernels occupy 16-32 of the GPU's SMs and compete for HBM while the overlapped GEMMs run.
# Assumed (not fitted): the calibration runs overlap little communication.
OVERLAP_INTERFERENCE = 0.2


@by_identity()
def _format_peaks(gpu: GPU) -> ByCode:
    """Dense peak (TFLOP/s) of each format's GEMMs on `gpu`; BF16's where the GPU lacks it."""
    return ByCode(peak_of(gpu, code) or gpu.peak_bf16_tflops for code in range(len(FORMATS)))


def memory_terms(m: ModelSpec, f: dict[str, Any], flags: Flags = Flags()) -> MemoryBreakdown:
    """Bytes per GPU of each layout as `step_terms` counts them (a `memory_batch` result):
    cheap beside the step time, so a search prunes on it before pricing."""
    runner = flags.runner
    if runner.selective_recompute == RECOMPUTE_OP_SAC:  # torchtitan's op-level SAC
        f = f | {"recompute_modules": framework_mask(flags.framework, DEFAULT_MASK)}
    flash = flags.flash_attention
    return memory_batch(
        m,
        **replica_fields(f),
        flash_attention=flash,
        dropout=not flash,
        low_precision_params=flags.fp8_param_gather and runner.low_precision_param_gather,
        schedule=flags.pipeline_schedule or "1F1B",
        zero3_buffer_bytes=deepspeed_live_bytes(m, f["tp"], main_grad_bytes(f["grad_reduce_bf16"]))
        if runner.sharded_dp == SHARDED_ZERO3  # DeepSpeed's live-parameter buffers
        else None,
        cache_expert_inputs=flags.cache_expert_inputs,
        microbatch_group=flags.microbatch_group_size_per_vp_stage,
        # Megatron's interleaved schedule runs one more warmup forward to overlap the expert
        # all-to-all (schedules.py get_pp_rank_microbatches)
        warmup_ahead=int(flags.overlap_moe_expert_parallel_comm and m.moe is not None),
    )


def mtp_share(m: ModelSpec, flops: StageFlops, f: dict[str, Any]) -> float:
    """Share of the head's FLOPs (`flops.logits`: logits, MTP layers and their logits) in the
    MTP layers and projections, which a layout may place on another rank."""
    dense, moe = flops.dense_layer, flops.moe_layer
    seq, mbs, tp, cp = f["seq"], f["mbs"], f["tp"], f["cp"]
    return mtp_flops(m, seq, mbs, dense, moe, tp, cp) * TRAINING_PASSES / flops.logits


def step_terms(
    m: ModelSpec,
    cluster: ClusterSpec,
    f: dict[str, Any],
    comm: C.CommFn,
    flags: Flags = Flags(),
    middle_layers: Array | None = None,
    memory: MemoryBreakdown | None = None,
) -> dict[str, Any]:
    """Seconds per step of each component, plus the derived metrics (scalars or arrays).
    `middle_layers`: the most layers on a pipeline rank between the first and the last
    (default: the planner's split, the same count on every middle rank); `memory`: the
    layouts' `memory_terms`, where the caller has them already."""
    gpu, runner, moe = cluster.gpu, flags.runner, m.moe
    if runner.selective_recompute == RECOMPUTE_OP_SAC:  # torchtitan's op-level SAC
        f = f | {"recompute_modules": framework_mask(flags.framework, DEFAULT_MASK)}
    s = stage_of(m, gpu, f, middle_layers)
    route, load = routing(m, flags.moe_router_force_load_balancing)
    # Capacity routing pads every expert: its FLOPs already count the padded load.
    dispatcher = flags.moe_token_dispatcher_type
    cal = cluster.step_calibration
    work = compute(
        s,
        flags.flash_attention,
        1.0 if route == "capacity" else load,
        permute_scale(dispatcher, f["ep"], moe.top_k, moe.experts / f["ep"])
        if moe is not None
        else 1.0,
        flags.cuda_graphs,
        flags.fp8_dot_product_attention,
    ).scaled(1.0 / cal.compute_scale)
    # The named tuples' fields as locals from here on: each attribute read is a slow lookup.
    gemm_s, attention_s, elementwise_s, quantize_s, host_s, logits_s, loss_s, embedding_s = work
    layers_s, layers, micro = work.layers_s, s.layers, s.micro
    schedule = flags.pipeline_schedule or "1F1B"
    dual = schedule in DUAL_SCHEDULES  # two directions: each hides the other's a2a and sends
    paired_a2a = dual and runner.overlapped_f_b  # where the runtime overlaps the pair
    ops = tp_ops(s, comm)
    # the column-parallel backward GEMMs the async TP collectives hide behind, where the
    # framework runs them so (one layout without TP has none to hide)
    tp = f["tp"]
    async_tp = runner.async_tp_backward and flags.async_tensor_model_parallel_allreduce
    gemms = column_gemms(s, gemm_s) if async_tp and not (type(tp) is int and tp == 1) else None
    tp_exposed, tp_total, tp_bytes, _ = tp_comm(s, comm, flags.tp_comm_overlap, ops, gemms)
    edge = edge_tp_comm(s, comm, ops, None if gemms is None else logits_s / TRAINING_PASSES)
    edge_embedding_s, edge_loss_s, edge_embedding_bytes, edge_loss_bytes, edge_hidden_s = edge
    cp_exposed, cp_total, cp_bytes, _ = cp_comm(s, comm, attention_s, flags.cp_comm)
    # (a dense model has no EP traffic: its arguments are not worth building)
    ep_exposed, ep_total, ep_bytes, _ = (
        NO_EP
        if moe is None
        else ep_comm(
            s,
            comm,
            dispatcher,
            flags.moe_router_force_load_balancing,
            flags.overlap_moe_expert_parallel_comm or paired_a2a,
            layers_s / layers,
            cluster.domain_gpus,
            flags.delay_wgrad_compute or paired_a2a,
        )
    )
    pp_exposed, pp_total, pp_bytes, _ = pp_comm(
        s, comm, flags.overlap_p2p_communication, dual, flags.scatter_gather_tensors_in_pipeline
    )
    mem = memory_terms(m, f, flags) if memory is None else memory
    host_exposed = offload(gpu, mem.host_offload, layers_s).exposed_s
    # The terms are priced for s.layers layers; each rank runs its own count of them.
    exposed = tp_exposed + cp_exposed + ep_exposed + host_exposed
    per_layer = (layers_s + exposed) / layers
    # A layout's MTP layers on a rank of their own: their share of the head GEMMs moves there.
    mtp = None
    if "mtp_rank" in f:
        mtp_s = logits_s * mtp_share(m, s.flops, f)
        logits_s -= mtp_s
        mtp = (f["mtp_rank"], f["mtp_rank_layers"], mtp_s)
    pipe = ranks(
        f["pp"],
        m.layers,
        s.first,
        s.middle,
        s.last,
        per_layer,
        embedding_s + edge_embedding_s,
        logits_s + loss_s + edge_loss_s,
        pp_exposed,
        schedule,
        mtp,
    )
    # the busiest rank: its time, its layers, whether it runs the embedding, the loss and MTP
    busiest_s, busiest_layers, runs_embedding, runs_loss, _, runs_mtp = pipe
    share = busiest_layers / layers  # of each layer-priced term, on the busiest rank
    t_compute = share * layers_s + runs_embedding * embedding_s + runs_loss * (logits_s + loss_s)
    mtp_part = 0.0 if mtp is None else runs_mtp * mtp[2]  # the MTP layers' GEMMs there
    t_compute = t_compute + mtp_part
    full = s.passes - 2  # the share of layers full recompute re-runs
    bubble = bubble_seconds(
        pipe, f["pp"], f["vpp"], micro, schedule, full, flags.microbatch_group_size_per_vp_stage
    )
    dp = dp_comm(
        s,
        comm,
        t_compute,
        flags.overlap_grad_reduce,
        flags.overlap_param_gather,
        runner,
        flags.fp8_param_gather,
        flags.align_param_gather,
        flags.legacy_zero3,
    )
    dp_exposed, dp_total, dp_bytes, dp_group = dp.comm

    # Hidden communication still costs: its kernels take SMs and HBM bandwidth from the
    # compute it overlaps.
    overlapped = tp_total - tp_exposed + cp_total - cp_exposed + ep_total - ep_exposed
    hidden = micro * (share * overlapped + runs_loss * edge_hidden_s) + pos(dp_total - dp_exposed)
    share_lost = (
        OVERLAP_INTERFERENCE if cal.overlap_interference is None else cal.overlap_interference
    )
    interference = hidden * share_lost
    world = f["tp"] * f["cp"] * f["pp"] * f["dp"]
    straggler = straggler_s(cluster.fleet, world, cluster.gpus_per_node, micro * t_compute)
    step = micro * busiest_s + bubble + dp_exposed + dp.optimizer_s + interference + straggler
    model_flops = model_flops_per_step(m, f["seq"], f["gbs"])
    tflops = model_flops / (step * world) / 1e12
    mem_bytes = mem.total_bytes
    per_rank = micro * share  # the layer-priced terms, scaled to the busiest rank's layers
    edge_s = micro * (runs_embedding * edge_embedding_s + runs_loss * edge_loss_s)
    edge_total_s = edge_s + micro * runs_loss * edge_hidden_s
    edge_bytes = micro * (runs_embedding * edge_embedding_bytes + runs_loss * edge_loss_bytes)
    return {
        "step_time_s": step,
        "tokens_per_s": f["gbs"] * f["seq"] / step,
        "tflops_per_gpu": tflops,
        "hw_tflops_per_gpu": tflops * s.flops.hardware / s.flops.model,
        "mfu": tflops / gpu.peak_bf16_tflops,
        "mfu_at_dtype_peak": tflops / _format_peaks(gpu)[f["precision"]],
        "memory": mem,
        "memory_gib_per_gpu": mem_bytes / GiB,
        "fits": mem_bytes <= gpu.hbm_gib * GiB,
        "breakdown": {
            "compute_s": micro * t_compute,
            "tp_comm_s": per_rank * tp_exposed + edge_s,
            "cp_comm_s": per_rank * cp_exposed,
            "ep_comm_s": per_rank * ep_exposed,
            "offload_s": per_rank * host_exposed,
            "pp_comm_s": micro * pp_exposed,
            "pipeline_bubble_s": bubble,
            "dp_comm_s": dp_exposed,
            "optimizer_s": dp.optimizer_s,
            "overlap_interference_s": interference,
            "straggler_s": straggler,
        },
        "comm_total_s": {
            "tp": per_rank * tp_total + edge_total_s,
            "cp": per_rank * cp_total,
            "ep": per_rank * ep_total,
            "pp": micro * pp_total,
            "dp": dp_total,
        },
        "comm_bytes_per_gpu": {
            "tp": per_rank * tp_bytes + edge_bytes,
            "cp": per_rank * cp_bytes,
            "ep": per_rank * ep_bytes,
            "pp": micro * pp_bytes,
            "dp": dp_bytes,
        },
        "comm_groups": {"tp": "tp", "cp": "cp", "ep": "ep", "pp": "pp", "dp": dp_group},
        "dp_overlap_window_s": dp.window_s,
        "dp_bytes_per_gpu": dp.buffer_bytes,
        "compute_parts_s": {
            "gemm": micro * (share * gemm_s + runs_loss * logits_s + mtp_part),
            "attention": per_rank * attention_s,
            "elementwise": micro
            * (share * elementwise_s + runs_embedding * embedding_s + runs_loss * loss_s),
            "quantize": micro * share * quantize_s,
            "host_sync": micro * share * host_s,
        },
        "pipeline_bubble_fraction": bubble / step,
        "moe_routing": route if moe is not None else None,
        "moe_load": load,
    }
