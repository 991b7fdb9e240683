"""Tensor parallelism: the collectives Megatron-LM runs on the TP group.

Per layer and pass, each column-parallel linear (QKV, fc1) and the row-parallel linear after
it (out-projection, fc2) cost one collective pair: without sequence parallelism an
all-reduce, with it an all-gather (before the column-parallel linear) plus a reduce-scatter
(after the row-parallel one) of the same size. Recompute passes repeat theirs
(`Stage.tp_passes`).

With sequence parallelism the column-parallel linear keeps only its sequence shard of the
input and all-gathers it again in backward for the weight gradient
(megatron/core/tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication
.backward; Transformer Engine's Linear does the same): one more all-gather per
column-parallel linear per backward pass.

The first pipeline rank's vocab-parallel embedding reduces its output (all-reduce, with SP a
reduce-scatter, whose backward is an all-gather); the last rank's output layer is one more
column-parallel linear (with SP: all-gather forward, reduce-scatter and the re-gather
backward; without: an all-reduce of its input gradient) and the vocab-parallel cross-entropy
all-reduces three fp32 values per token (logit max, target logit, sum of exponentials:
megatron/core/tensor_parallel/cross_entropy.py).

Megatron-core's --tp-comm-overlap (Transformer Engine userbuffers) hides most of the layers'
collectives, the re-gather included, behind the GEMMs they feed; the embedding's and output
layer's run outside Transformer Engine and stay exposed.
"""

from __future__ import annotations

from typing import NamedTuple

from tierwise.perf import comm as C
from tierwise.perf.terms.stage import CommTerm, Stage, select
from tierwise.records import record
from tierwise.workload.flops import Array

# Share of TP communication left exposed when the framework overlaps it with GEMMs
# (Megatron-core --tp-comm-overlap, userbuffers): assumed 30%.
TP_OVERLAP_EXPOSED = 0.3
# Column-parallel linears per layer (QKV, fc1), each followed by a row-parallel one.
COLUMN_PARALLEL_PER_LAYER = C.TP_COLLECTIVES_PER_PASS
# fp32 values per token the vocab-parallel cross-entropy all-reduces.
CROSS_ENTROPY_ALLREDUCES = 3
LOSS_BYTES = 4


def regather_count(s: Stage) -> Array:
    """All-gathers of the sequence-parallel re-gather per micro-batch on the stage: one per
    column-parallel linear per backward pass (0 without SP)."""
    return s.layers * COLUMN_PARALLEL_PER_LAYER * s.f["sp"] * (s.f["tp"] > 1)


class TpOps(NamedTuple):
    """Seconds of one activation's TP collectives: with SP an all-gather and a
    reduce-scatter (`all_reduce` 0), without it an all-reduce (the others 0)."""

    all_gather: Array
    reduce_scatter: Array
    all_reduce: Array


def tp_ops(s: Stage, comm: C.CommFn) -> TpOps:
    """The TP collectives of one activation on the stage's TP group (each priced once)."""
    act, sp = s.act, s.f["sp"]
    if sp is True:  # one layout with SP: no all-reduce (`select` would price the same)
        return record(
            TpOps, (comm("tp", "all_gather", act), comm("tp", "reduce_scatter", act), 0.0)
        )
    return TpOps(
        select(sp, lambda: comm("tp", "all_gather", act), _none),
        select(sp, lambda: comm("tp", "reduce_scatter", act), _none),
        select(sp, _none, lambda: comm("tp", "all_reduce", act)),
    )


def _none() -> float:
    return 0.0


def tp_comm(s: Stage, comm: C.CommFn, overlap: bool = False, ops: TpOps | None = None) -> CommTerm:
    """TP communication of one micro-batch on the stage `s` (`overlap`: --tp-comm-overlap;
    `ops`: `tp_ops`, priced here if not given)."""
    ops = tp_ops(s, comm) if ops is None else ops
    tp, act = s.f["tp"], s.act
    collectives = s.layers * C.TP_COLLECTIVES_PER_PASS * s.tp_passes
    regathers = regather_count(s)
    per = ops.all_gather + ops.reduce_scatter + ops.all_reduce
    total = collectives * per + regathers * ops.all_gather
    exposed = total * (TP_OVERLAP_EXPOSED if overlap else 1.0)
    # An all-reduce, or an all-gather plus a reduce-scatter, sends 2(tp-1)/tp of the buffer;
    # an all-gather alone half that.
    sent = (2 * collectives + regathers) * act * (tp - 1) / tp
    return record(CommTerm, (exposed, total, sent, "tp"))


class EdgeTp(NamedTuple):
    """TP seconds per micro-batch of the embedding (first rank) and of the output layer and
    loss (last rank), all exposed, and the bytes each sends per GPU."""

    embedding_s: Array
    loss_s: Array
    embedding_bytes: Array
    loss_bytes: Array


NO_EDGE_TP = EdgeTp(0.0, 0.0, 0.0, 0.0)  # a layout without TP (one shared, immutable tuple)


def edge_tp_comm(s: Stage, comm: C.CommFn, ops: TpOps) -> EdgeTp:
    """The embedding's and the output layer's / loss's TP collectives (module docstring);
    `ops`: `tp_ops` of the stage."""
    tp, sp, act = s.f["tp"], s.f["sp"], s.act
    if isinstance(tp, int) and tp == 1:  # one layout without TP: nothing to price
        return NO_EDGE_TP
    on = tp > 1
    losses = s.tokens * LOSS_BYTES
    ce = CROSS_ENTROPY_ALLREDUCES * comm("tp", "all_reduce", losses)
    # SP: RS forward, AG backward; without: one all-reduce forward.
    embedding = ops.reduce_scatter + ops.all_gather + ops.all_reduce
    # SP: AG forward, RS and the re-gather backward; without: the input gradient's all-reduce.
    output = 2 * ops.all_gather + ops.reduce_scatter + ops.all_reduce
    share = (tp - 1) / tp
    emb_bytes = act * share * (1 + (1 - sp))  # RS + AG, or one all-reduce (2x)
    loss_bytes = act * share * (2 + sp) + 2 * CROSS_ENTROPY_ALLREDUCES * losses * share
    return record(EdgeTp, (on * embedding, on * (output + ce), on * emb_bytes, on * loss_bytes))
