"""Pipeline point-to-point: per micro-batch one activation send forward and one gradient
send backward per stage boundary (per virtual stage when interleaved), scattered over the
TP ranks with sequence parallelism. Without it every TP rank sends the whole activation,
unless the sends are scattered over the TP ranks and all-gathered over TP on arrival
(`Flags.scatter_gather_tensors_in_pipeline`: Megatron-LM of 2021-23, DeepSpeed's pipeline
engine): each rank then sends 1/tp of it, and the receive waits for that all-gather too.

Exposed, except where Megatron's --overlap-p2p-communication (its default; interleaved
schedule only: megatron/core/pipeline_parallel/schedules.py) runs a virtual stage's sends
and receives while the next chunk computes: then only the first send of each micro-batch's
pass waits (one boundary's, as without interleaving). DualPipe's paired forward and backward
chunks hide each other's sends entirely (DeepSeek-V3 report, section 3.2.1) but on the step's
first micro-batch.
"""

from __future__ import annotations

from tierwise.perf import comm as C
from tierwise.perf.terms.stage import CommTerm, Stage
from tierwise.records import record


def pp_comm(
    s: Stage,
    comm: C.CommFn,
    overlap: bool = True,
    paired: bool = False,
    scatter_gather: bool = False,
) -> CommTerm:
    """PP sends and receives of one micro-batch on the stage `s` (`overlap`:
    --overlap-p2p-communication; `paired`: DualPipe / DualPipeV; `scatter_gather`:
    --scatter-gather-tensors-in-pipeline)."""
    f = s.f
    tp, sp, pp, vpp = f["tp"], f["sp"], f["pp"], f["vpp"]
    split = sp + (1 - sp) * scatter_gather * (tp > 1) * (pp > 1)  # sent as 1/tp per rank
    boundary = s.act / (1 + split * (tp - 1))
    regathered = split - sp  # 1 where the sends are split without SP: re-assembled on arrival
    if isinstance(regathered, int) and regathered == 0:  # one layout without: nothing to price
        gather = 0.0
    else:
        gather = regathered * comm("tp", "all_gather", s.act)
    total = 2 * vpp * (comm("pp", "sendrecv", boundary) + gather)
    hidden = overlap * (vpp > 1)  # all but one of the vpp boundaries' sends
    exposed = total / s.micro if paired else total / (1 + hidden * (vpp - 1))
    return record(CommTerm, (exposed, total, 2 * vpp * boundary * (pp > 1), "pp"))
