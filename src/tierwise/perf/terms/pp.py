"""Pipeline point-to-point: per micro-batch one activation send forward and one gradient
send backward per stage boundary (per virtual stage when interleaved), scattered over the
TP ranks with sequence parallelism. Counted as exposed."""

from __future__ import annotations

from tierwise.perf import comm as C
from tierwise.perf.terms.stage import CommTerm, Stage


def pp_comm(s: Stage, comm: C.CommFn) -> CommTerm:
    """PP sends and receives of one micro-batch on the stage `s`."""
    f = s.f
    tp, sp, pp, vpp = f["tp"], f["sp"], f["pp"], f["vpp"]
    boundary = s.act / (1 + sp * (tp - 1))
    exposed = 2 * vpp * comm("pp", "sendrecv", boundary)
    return CommTerm(exposed, exposed, 2 * vpp * boundary * (pp > 1), "pp")
