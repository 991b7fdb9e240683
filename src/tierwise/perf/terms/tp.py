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

Without any flag, a column-parallel linear's backward launches its collectives
asynchronously, each behind the next GEMM (megatron-core 0.16.1 LinearWithGradAccumulation
AndAsyncCommunication.backward; Transformer Engine's Linear, LayerNormLinear and LayerNormMLP
alike; CUDA_DEVICE_MAX_CONNECTIONS=1 queues the collective first): with SP the re-gather
behind the input-gradient GEMM and the input gradient's reduce-scatter behind the
weight-gradient GEMM, without SP the input gradient's all-reduce behind the weight-gradient
GEMM. Each hides up to that GEMM's time (as many FLOPs as the linear's forward, at the stage's
mean weight-GEMM rate); what it hides still costs `step.OVERLAP_INTERFERENCE` of itself. The
rest stays exposed: the forward all-gather (SP) before each column-parallel linear, the
reduce-scatter or all-reduce after each row-parallel one, and in backward the row-parallel
linear's output-gradient all-gather (SP). The column-parallel linears are QKV in every
layer and fc1 in the dense ones (a MoE layer's token dispatcher runs its own TP collectives
synchronously). Where the framework has no such code (`Framework.async_tp_backward`: Megatron-
LM before 2021-09, torchtitan's eager DTensor) or `--no-async-tensor-model-parallel-
allreduce`, every collective is exposed. The output layer is one more column-parallel
linear (Megatron's ColumnParallelLinear, the same autograd function): its backward
collectives hide behind the logits GEMMs alike.

Megatron-core's --tp-comm-overlap (Transformer Engine userbuffers, which replace the async
path) hides most of the layers' collectives, the re-gather included, behind the GEMMs they
feed; the embedding and the output layer run outside Transformer Engine: the embedding's
collectives stay exposed, the output layer's backward ones hide as above.
"""

from __future__ import annotations

from typing import NamedTuple

from tierwise.memo import by_identity
from tierwise.perf import comm as C
from tierwise.perf.terms.stage import CommTerm, Stage, select
from tierwise.records import record
from tierwise.workload.flops import Array, minimum
from tierwise.workload.spec import ModelSpec, model_dims

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


class ColumnGemms(NamedTuple):
    """Seconds of one backward GEMM (input or weight gradient: each the FLOPs of the forward)
    of a layer's column-parallel linears, QKV and fc1, and the share of layers with a dense
    MLP (whose fc1 it is)."""

    qkv_s: Array
    fc1_s: Array
    dense: Array


def column_gemms(s: Stage, gemm_s: Array) -> ColumnGemms:
    """`ColumnGemms` of the stage at its mean weight-GEMM rate (`gemm_s`: its weight-GEMM
    seconds per micro-batch, `Compute.gemm_s`; gate and up are one fc1 GEMM)."""
    _, hardware, attention, logits, _, _, layer, _ = s.flops  # (a `StageFlops`)
    fc1_share, dense = _mlp_shares(s.model)
    per_flop = gemm_s / (hardware - attention - logits)
    return record(ColumnGemms, (layer.qkv * per_flop, layer.mlp * fc1_share * per_flop, dense))


@by_identity()
def _mlp_shares(m: ModelSpec) -> tuple[float, float]:
    """fc1's share of a dense MLP's FLOPs (gate and up of a gated one), and the share of
    `m`'s layers with a dense MLP."""
    d = model_dims(m)
    return (d.matmuls_per_mlp - 1) / d.matmuls_per_mlp, 1 - d.moe_layers / m.layers


def backward_hidden(ops: TpOps, gemms: ColumnGemms) -> Array:
    """Seconds of one layer's TP collectives its column-parallel linears' backward hides
    (module docstring): per linear, the input gradient's reduce-scatter (SP) or all-reduce
    behind the weight-gradient GEMM and SP's re-gather behind the input-gradient GEMM, each
    up to the GEMM's time."""
    ag, rs, ar = ops
    grad = rs + ar  # one of them is 0
    qkv, fc1, dense = gemms
    least = min if type(grad) is float and type(qkv) is float else minimum  # one layout: min
    return least(grad, qkv) + least(ag, qkv) + dense * (least(grad, fc1) + least(ag, fc1))


def tp_comm(
    s: Stage,
    comm: C.CommFn,
    overlap: bool = False,
    ops: TpOps | None = None,
    async_gemms: ColumnGemms | None = None,
) -> CommTerm:
    """TP communication of one micro-batch on the stage `s` (`overlap`: --tp-comm-overlap;
    `ops`: `tp_ops`, priced here if not given; `async_gemms`: the column-parallel backward
    GEMMs the async collectives hide behind, None where the framework waits on them)."""
    ops = tp_ops(s, comm) if ops is None else ops
    tp, act = s.f["tp"], s.act
    collectives = s.layers * C.TP_COLLECTIVES_PER_PASS * s.tp_passes
    regathers = regather_count(s)
    per = ops.all_gather + ops.reduce_scatter + ops.all_reduce
    total = collectives * per + regathers * ops.all_gather
    if overlap:
        exposed = total * TP_OVERLAP_EXPOSED
    elif async_gemms is None:
        exposed = total
    else:
        exposed = total - s.layers * (tp > 1) * backward_hidden(ops, async_gemms)
    # An all-reduce, or an all-gather plus a reduce-scatter, sends 2(tp-1)/tp of the buffer;
    # an all-gather alone half that.
    sent = (2 * collectives + regathers) * act * (tp - 1) / tp
    return record(CommTerm, (exposed, total, sent, "tp"))


class EdgeTp(NamedTuple):
    """TP seconds per micro-batch of the embedding (first rank) and of the output layer and
    loss (last rank) left exposed, the bytes each sends per GPU, and the output layer's
    seconds its async backward hides behind the logits GEMMs."""

    embedding_s: Array
    loss_s: Array
    embedding_bytes: Array
    loss_bytes: Array
    loss_hidden_s: Array = 0.0


NO_EDGE_TP = EdgeTp(0.0, 0.0, 0.0, 0.0, 0.0)  # a layout without TP (one shared, immutable tuple)


def edge_tp_comm(
    s: Stage, comm: C.CommFn, ops: TpOps, logits_gemm_s: Array | None = None
) -> EdgeTp:
    """The embedding's and the output layer's / loss's TP collectives (module docstring);
    `ops`: `tp_ops` of the stage; `logits_gemm_s`: seconds of one logits GEMM (a third of
    forward + backward) where the output layer's backward collectives run asynchronously
    behind them (None: waited on)."""
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
    hidden = 0.0
    if logits_gemm_s is not None:  # behind wgrad: RS or AR; behind dgrad: the re-gather (SP)
        ag, rs, ar = ops
        least = min if type(rs) is float and type(logits_gemm_s) is float else minimum
        hidden = on * (least(rs + ar, logits_gemm_s) + least(ag, logits_gemm_s))
    share = (tp - 1) / tp
    emb_bytes = act * share * (1 + (1 - sp))  # RS + AG, or one all-reduce (2x)
    loss_bytes = act * share * (2 + sp) + 2 * CROSS_ENTROPY_ALLREDUCES * losses * share
    values = (on * embedding, on * (output + ce) - hidden, on * emb_bytes, on * loss_bytes, hidden)
    return record(EdgeTp, values)
