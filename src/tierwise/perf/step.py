"""Step time of one layout (or many, vectorised): compute, exposed comm, bubble, optimizer.

Composes the cost terms of `tierwise.perf.terms` on the busiest pipeline stage: per
micro-batch, compute plus exposed TP / CP / EP / PP communication; the pipeline schedule
(`tierwise.perf.pipeline`) adds its bubble; DP/FSDP communication hides behind the compute
up to the window it gets; then the optimizer step. Hidden communication still steals some
of the compute it overlaps. All functions take python scalars or numpy arrays of layout
fields (`tierwise.workload.layouts_to_arrays`).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from tierwise.hardware.catalog import GPU
from tierwise.hardware.cluster import ClusterSpec
from tierwise.perf import comm as C
from tierwise.perf.flags import Flags
from tierwise.perf.pipeline import bubble_seconds
from tierwise.perf.terms.compute import compute
from tierwise.perf.terms.cp import cp_comm
from tierwise.perf.terms.dp import dp_comm
from tierwise.perf.terms.ep import ep_comm
from tierwise.perf.terms.pp import pp_comm
from tierwise.perf.terms.stage import pos, stage_of
from tierwise.perf.terms.tp import tp_comm
from tierwise.workload.flops import Array, model_flops_per_step
from tierwise.workload.memory import GiB, memory_batch
from tierwise.workload.precision import FORMATS, peak_of
from tierwise.workload.spec import ModelSpec

__all__ = ["Flags", "step_terms"]

# Share of overlapped (hidden) communication time that still lands on the step: NCCL's
# kernels occupy 16-32 of the GPU's SMs and compete for HBM while the overlapped GEMMs run.
# Assumed (not fitted): the calibration runs overlap little communication.
OVERLAP_INTERFERENCE = 0.2


@cache
def _format_peaks(gpu: GPU) -> np.ndarray:
    """Dense peak (TFLOP/s) of each format's GEMMs on `gpu`; BF16's where the GPU lacks it."""
    return np.array([peak_of(gpu, code) or gpu.peak_bf16_tflops for code in range(len(FORMATS))])


def step_terms(
    m: ModelSpec,
    cluster: ClusterSpec,
    f: dict[str, Any],
    comm: C.CommFn,
    flags: Flags = Flags(),
    busiest_stage_layers: Array | None = None,
) -> dict[str, Any]:
    """Seconds per step of each component, plus the derived metrics (scalars or arrays)."""
    gpu = cluster.gpu
    s = stage_of(m, gpu, f, busiest_stage_layers)
    work = compute(s, flags.flash_attention)
    t_compute = work.total_s
    tp = tp_comm(s, comm, flags.tp_comm_overlap)
    cp = cp_comm(s, comm, work.attention_s, flags.cp_comm)
    ep = ep_comm(s, comm)
    pp = pp_comm(s, comm)
    t_mb = t_compute + tp.exposed_s + cp.exposed_s + ep.exposed_s + pp.exposed_s
    micro = s.micro
    bubble = bubble_seconds(f["pp"], f["vpp"], t_mb)
    dp = dp_comm(s, comm, t_compute, flags.overlap_grad_reduce, flags.overlap_param_gather)

    # Hidden communication still costs: its kernels take SMs and HBM bandwidth from the
    # compute it overlaps.
    hidden = micro * (tp.total_s - tp.exposed_s + cp.total_s - cp.exposed_s) + pos(
        dp.comm.total_s - dp.comm.exposed_s
    )
    interference = hidden * OVERLAP_INTERFERENCE
    step = micro * t_mb + bubble + dp.comm.exposed_s + dp.optimizer_s + interference
    world = f["tp"] * f["cp"] * f["pp"] * f["dp"]
    model_flops = model_flops_per_step(m, f["seq"], f["gbs"])
    tflops = model_flops / (step * world) / 1e12
    flash = flags.flash_attention
    mem = memory_batch(m, **f, flash_attention=flash, dropout=not flash)
    mem_bytes = mem.total_bytes
    per_micro = {"tp": tp, "cp": cp, "ep": ep, "pp": pp}
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
            **{f"{k}_comm_s": micro * t.exposed_s for k, t in per_micro.items()},
            "pipeline_bubble_s": bubble,
            "dp_comm_s": dp.comm.exposed_s,
            "optimizer_s": dp.optimizer_s,
            "overlap_interference_s": interference,
        },
        "comm_total_s": {
            **{k: micro * t.total_s for k, t in per_micro.items()},
            "dp": dp.comm.total_s,
        },
        "comm_bytes_per_gpu": {
            **{k: micro * t.bytes for k, t in per_micro.items()},
            "dp": dp.comm.bytes,
        },
        "dp_overlap_window_s": dp.window_s,
        "dp_bytes_per_gpu": dp.buffer_bytes,
        "compute_parts_s": {
            "gemm": micro * work.gemm_s,
            "attention": micro * work.attention_s,
            "elementwise": micro * work.elementwise_s,
            "quantize": micro * work.quantize_s,
        },
    }
