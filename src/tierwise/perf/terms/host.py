"""Host time on the critical path of MoE layers run without CUDA graphs.

Megatron's token dispatchers learn how many tokens go to each expert on the host (a
device-to-host copy that synchronises the stream) before they size the all-to-all and the
grouped GEMM; until the host has launched the kernels after it, the GPU idles. With CUDA
graphs over the MoE layer (Megatron's ``--cuda-graph-impl`` with the moe_preprocess scope or
a full-iteration graph, whose padded buffers need no host sync) this time is gone. Dense
layers launch ahead of the GPU and leave no such gap.
"""

from __future__ import annotations

from tierwise.perf.terms.stage import Stage
from tierwise.workload.flops import Array

# Seconds of host time per MoE layer and pass (forward, backward, recompute) left on the
# GPU's critical path without CUDA graphs. Fitted on the calibration runs
# (benchmarks/validate_estimate.py --fit): three of them run MoE layers without graphs.
MOE_HOST_SYNC_S = 1e-3


def host_seconds(s: Stage, cuda_graphs: bool) -> Array:
    """Exposed host seconds of one micro-batch on the stage `s` (0 for a dense model)."""
    m = s.model
    if m.moe is None or cuda_graphs:
        return 0.0
    return s.layers * (m.moe_layers / m.layers) * s.passes * MOE_HOST_SYNC_S
