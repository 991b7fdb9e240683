"""Host time on the critical path of MoE layers run without CUDA graphs.

Per MoE layer and pass the host launches work for every local expert: Transformer Engine's
GroupedLinear issues one GEMM per expert (on several streams) for fc1 and fc2, forward and
backward, and the dispatcher splits and permutes the tokens by expert after learning the
per-expert counts on the host (a device-to-host copy that synchronises the stream). The
synchronisation keeps the host from running ahead, so that launch time adds to the GPU's.
CUDA graphs over the MoE layer (Megatron's ``--cuda-graph-impl`` with the moe_preprocess
scope, or a full-iteration graph with padded buffers) replay it without the host. Dense
layers launch ahead of the GPU and leave no such gap.
"""

from __future__ import annotations

from tierwise.perf.terms.stage import Stage
from tierwise.workload.flops import Array

# Host seconds per local expert, MoE layer and pass (forward, backward, recompute) left on
# the GPU's critical path without CUDA graphs. Fitted on the calibration runs
# (benchmarks/validate_estimate.py --fit): three of them run MoE layers without graphs.
MOE_HOST_PER_EXPERT_S = 0.0001732


def host_seconds(s: Stage, cuda_graphs: bool) -> Array:
    """Exposed host seconds of one micro-batch on the stage `s` (0 for a dense model)."""
    m = s.model
    if m.moe is None or cuda_graphs:
        return 0.0
    local_experts = m.moe.experts / s.f["ep"]
    moe_layers = s.layers * (m.moe_layers / m.layers)
    return moe_layers * s.moe_passes * local_experts * MOE_HOST_PER_EXPERT_S
