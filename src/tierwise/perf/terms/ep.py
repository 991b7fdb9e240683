"""Expert parallelism: a dispatch and a combine all-to-all per MoE layer and pass.

Each carries the routed tokens (top_k copies of every local token, padded by the capacity
factor; with sequence parallelism each TP rank routes its 1/tp share). Nothing hides them.
"""

from __future__ import annotations

from tierwise.perf import comm as C
from tierwise.perf.terms.stage import CommTerm, Stage


def ep_comm(s: Stage, comm: C.CommFn) -> CommTerm:
    """EP communication of one micro-batch on the stage `s` (zero for a dense model)."""
    m, f = s.model, s.f
    if m.moe is None:
        return CommTerm(0.0, 0.0, 0.0, "ep")
    tp, sp, ep = f["tp"], f["sp"], f["ep"]
    routed = s.tokens * m.moe.top_k * (m.moe.capacity_factor or 1.0) / (1 + sp * (tp - 1))
    routed_bytes = C.activation_bytes(routed, m.hidden)
    a2as = s.layers * (m.moe_layers / m.layers) * C.A2A_PER_MOE_PASS * s.passes
    exposed = a2as * comm("ep", "alltoall", routed_bytes)
    return CommTerm(exposed, exposed, a2as * routed_bytes * (ep - 1) / ep, "ep")
