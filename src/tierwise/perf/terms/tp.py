"""Tensor parallelism: two collectives per layer and pass on the activation.

Without sequence parallelism each is an all-reduce; with it an all-gather plus a
reduce-scatter of the same size. Megatron-core's --tp-comm-overlap (userbuffers) hides most
of it behind the GEMMs it splits.
"""

from __future__ import annotations

from tierwise.perf import comm as C
from tierwise.perf.terms.stage import CommTerm, Stage, select

# Share of TP communication left exposed when the framework overlaps it with GEMMs
# (Megatron-core --tp-comm-overlap, userbuffers): assumed 30%.
TP_OVERLAP_EXPOSED = 0.3


def tp_comm(s: Stage, comm: C.CommFn, overlap: bool = False) -> CommTerm:
    """TP communication of one micro-batch on the stage `s` (`overlap`: --tp-comm-overlap)."""
    tp, sp, act = s.f["tp"], s.f["sp"], s.act
    collectives = s.layers * C.TP_COLLECTIVES_PER_PASS * s.tp_passes
    per = select(
        sp,
        lambda: comm("tp", "all_gather", act) + comm("tp", "reduce_scatter", act),
        lambda: comm("tp", "all_reduce", act),
    )
    total = collectives * per
    exposed = total * (TP_OVERLAP_EXPOSED if overlap else 1.0)
    # An all-reduce, or an all-gather plus a reduce-scatter, sends 2(tp-1)/tp of the buffer.
    sent = collectives * act * 2 * (tp - 1) / tp
    return CommTerm(exposed, total, sent, "tp")
