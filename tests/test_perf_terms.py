"""Each cost term of perf/terms against hand-computed values, with a fake collective model
(seconds = bytes x a per-op rate), so only the term's own counting is under test."""

from __future__ import annotations

import pytest

from tierwise.hardware.cluster import load_cluster
from tierwise.perf.efficiency import elementwise_seconds
from tierwise.perf.terms.compute import LOSS_BYTES_PER_LOGIT, compute
from tierwise.perf.terms.cp import cp_comm
from tierwise.perf.terms.dp import (
    DP_OVERLAP_EFFICIENCY,
    FORWARD_SHARE,
    dp_comm,
    stage_param_split,
    stage_params,
)
from tierwise.perf.terms.ep import ep_comm
from tierwise.perf.terms.pp import pp_comm
from tierwise.perf.terms.stage import Stage, stage_of
from tierwise.perf.terms.tp import (
    TP_OVERLAP_EXPOSED,
    ColumnGemms,
    column_gemms,
    edge_tp_comm,
    regather_count,
    tp_comm,
    tp_ops,
)
from tierwise.workload.layout import Layout, layout_fields
from tierwise.workload.load import load_model

H100 = load_cluster("dgx-h100", nodes=8).gpu
RATE = {"all_reduce": 2e-12, "all_gather": 1e-12, "reduce_scatter": 1e-12, "sendrecv": 3e-12}
RATE |= {"alltoall": 5e-12}
ACT = 4096 * 4096 * 2  # one bf16 activation: seq 4096 x hidden 4096


def fake_comm(kind: str, op: str, nbytes: float) -> float:
    return RATE[op] * nbytes


def stage(model: str = "llama3-8b", **layout: object) -> Stage:
    """A stage of 8 layers (32 over pp 4) unless the layout says otherwise."""
    m = load_model(model)
    lay = Layout(**{"seq": 4096, "gbs": 64, "pp": 4, "dp": 2, **layout})
    return stage_of(m, H100, layout_fields(lay, m))


def test_tp_two_collectives_per_layer_and_pass() -> None:
    # 8 layers x 2 collectives x (forward, backward) = 32 all-reduces of one activation.
    t = tp_comm(stage(tp=4, sp=False), fake_comm)
    assert t.total_s == pytest.approx(32 * 2e-12 * ACT)
    assert t.exposed_s == t.total_s and t.group == "tp"
    assert t.bytes == pytest.approx(32 * ACT * 2 * 3 / 4)  # ring: 2(p-1)/p of the buffer
    # Full recompute adds a forward pass; SP turns each all-reduce into AG + RS, and each of
    # the 8 x 2 column-parallel linears re-gathers its input once in backward.
    sp = tp_comm(stage(tp=4, recompute="full"), fake_comm, overlap=True)
    assert sp.total_s == pytest.approx((48 * (1e-12 + 1e-12) + 16 * 1e-12) * ACT)
    assert sp.exposed_s == pytest.approx(TP_OVERLAP_EXPOSED * sp.total_s)


def slow_reduce_scatter(kind: str, op: str, nbytes: float) -> float:
    """`fake_comm` with a reduce-scatter 3x an all-gather (AG and RS told apart)."""
    return (3e-12 if op == "reduce_scatter" else RATE[op]) * nbytes


def test_sequence_parallel_regather_is_one_all_gather_per_column_parallel_linear() -> None:
    # Megatron's LinearWithGradAccumulationAndAsyncCommunication.backward: 8 layers x (QKV,
    # fc1) = 16 more all-gathers per micro-batch, whatever the recompute; none without SP.
    calls: list[str] = []

    def counting(kind: str, op: str, nbytes: float) -> float:
        calls.append(op)
        return 0.0

    for recompute in ("none", "full"):
        calls.clear()
        s = stage(tp=4, sp=True, recompute=recompute)
        tp_comm(s, counting)
        pairs = 8 * 2 * s.tp_passes
        assert regather_count(s) == 16
        # One AG and one RS priced; the re-gathers reuse the all-gather's time.
        assert calls.count("all_gather") == 1 and calls.count("reduce_scatter") == 1
        total = tp_comm(s, fake_comm).total_s
        assert total == pytest.approx((pairs * 2e-12 + 16 * 1e-12) * ACT)
        # each re-gather is an all-gather, not priced as the reduce-scatter beside it
        total = tp_comm(s, slow_reduce_scatter).total_s
        assert total == pytest.approx((pairs * 4e-12 + 16 * 1e-12) * ACT)
    assert regather_count(stage(tp=4, sp=False)) == 0


def test_column_parallel_backward_hides_its_collectives_behind_the_gemms() -> None:
    # One layer, forward + backward. Without SP: 2 all-reduces forward (after the row-parallel
    # linears), 2 backward (the QKV and fc1 input gradients): 4 x 2e-12 x ACT exposed whole;
    # the async backward hides each backward one behind its linear's weight-gradient GEMM.
    ar, ag = 2e-12 * ACT, 1e-12 * ACT
    one = stage(tp=4, sp=False, pp=32)
    assert one.layers == 1
    whole = tp_comm(one, fake_comm)
    assert whole.exposed_s == pytest.approx(4 * ar)
    long = ColumnGemms(qkv_s=1.0, fc1_s=1.0, dense=1.0)
    assert tp_comm(one, fake_comm, async_gemms=long).exposed_s == pytest.approx(2 * ar)
    assert tp_comm(one, fake_comm, async_gemms=long).total_s == pytest.approx(4 * ar)
    # A GEMM shorter than its collective hides only its own time: QKV 0.25 x the all-reduce.
    short = ColumnGemms(qkv_s=0.25 * ar, fc1_s=1.0, dense=1.0)
    assert tp_comm(one, fake_comm, async_gemms=short).exposed_s == pytest.approx(2.75 * ar)
    # A MoE layer (dense 0): only QKV's; the dispatcher's TP collectives wait.
    moe = ColumnGemms(qkv_s=1.0, fc1_s=1.0, dense=0.0)
    assert tp_comm(one, fake_comm, async_gemms=moe).exposed_s == pytest.approx(3 * ar)
    # SP: AG + RS forward per linear pair, AG (row-parallel output gradient) + RS (column
    # input gradient) backward, 2 re-gathers: 4 x (AG + RS) + 2 AG = 10 AG-times; hidden per
    # column-parallel linear: its RS (behind wgrad) and its re-gather (behind dgrad).
    sp = stage(tp=4, sp=True, pp=32)
    assert tp_comm(sp, fake_comm).exposed_s == pytest.approx(10 * ag)
    assert tp_comm(sp, fake_comm, async_gemms=long).exposed_s == pytest.approx(6 * ag)
    # --tp-comm-overlap (userbuffers) replaces the async path: 30% of the total.
    over = tp_comm(sp, fake_comm, overlap=True, async_gemms=long)
    assert over.exposed_s == pytest.approx(TP_OVERLAP_EXPOSED * 10 * ag)


def test_column_gemms_are_qkv_and_fc1_shares_of_the_weight_gemm_time() -> None:
    # llama3-8b, 8 layers, tp 4, 4096 tokens: per layer forward weight-GEMM FLOPs
    # 2 x 4096 x 4096 x (6144 QKV + 4096 out + 3 x 14336 SwiGLU) / 4, three passes; QKV's
    # forward is the 6144 share of one layer-pass, fc1's (gate + up) the 2 x 14336 share.
    s = stage(tp=4, sp=True)
    per_layer_pass = 6144 + 4096 + 3 * 14336
    g = column_gemms(s, 24.0)  # 24 s of weight GEMMs over 8 layers x 3 passes
    assert g.qkv_s == pytest.approx(6144 / per_layer_pass)
    assert g.fc1_s == pytest.approx(2 * 14336 / per_layer_pass)
    assert g.dense == 1.0
    # Mixtral: every layer MoE, so no dense fc1 hides anything.
    assert column_gemms(stage("mixtral-8x7b", tp=4), 1.0).dense == 0.0


def test_tp_bytes_with_sequence_parallelism_add_the_regather() -> None:
    # AG + RS each send (p-1)/p of the activation: 2(p-1)/p in all, as one all-reduce does;
    # SP's backward re-gathers send (p-1)/p more per column-parallel linear.
    with_sp = tp_comm(stage(tp=4, sp=True), fake_comm)
    without = tp_comm(stage(tp=4, sp=False), fake_comm)
    assert with_sp.bytes == pytest.approx(without.bytes + 16 * ACT * 3 / 4)


def test_edge_tp_collectives_of_embedding_and_loss() -> None:
    # SP: embedding RS fwd + AG bwd; output layer AG fwd, RS + re-gather AG bwd; the loss's
    # three fp32 all-reduces per token. Without TP: nothing.
    s = stage(tp=4, sp=True)
    edge = edge_tp_comm(s, fake_comm, tp_ops(s, fake_comm))
    assert edge.embedding_s == pytest.approx(2e-12 * ACT)
    ce = 3 * 2e-12 * 4096 * 4
    assert edge.loss_s == pytest.approx(3e-12 * ACT + ce)
    one = stage(tp=1)
    assert edge_tp_comm(one, fake_comm, tp_ops(one, fake_comm)).loss_s == 0
    # The output layer's async backward: its RS behind the logits weight-gradient GEMM, its
    # re-gather behind the input-gradient GEMM; a GEMM of half an AG hides half of each.
    ag = 1e-12 * ACT
    hid = edge_tp_comm(s, fake_comm, tp_ops(s, fake_comm), logits_gemm_s=0.5 * ag)
    assert hid.loss_hidden_s == pytest.approx(ag)
    assert hid.loss_s == pytest.approx(2e-12 * ACT + ce)
    assert hid.embedding_s == edge.embedding_s  # its collectives wait: none is async
    # Without SP: the input gradient's all-reduce behind the weight-gradient GEMM, whole.
    nosp = stage(tp=4, sp=False)
    flat = edge_tp_comm(nosp, fake_comm, tp_ops(nosp, fake_comm), logits_gemm_s=1.0)
    assert flat.loss_hidden_s == pytest.approx(2e-12 * ACT) and flat.loss_s == pytest.approx(ce)


def test_cp_ring_hides_behind_attention_and_ulysses_does_not() -> None:
    s = stage(cp=2, dp=1)
    tokens = 4096 / 2
    kv_block = tokens * 2 * 8 * 128 * 2  # K and V of the 8 KV heads, bf16
    ring = cp_comm(s, fake_comm, attention_s=0.0)
    # 8 layers x (cp-1) exchanges x (1 forward + 2 backward) passes.
    assert ring.total_s == pytest.approx(8 * 3 * 3e-12 * kv_block)
    assert ring.exposed_s == pytest.approx(ring.total_s)
    hidden = cp_comm(s, fake_comm, attention_s=ring.total_s)
    assert hidden.exposed_s == 0.0 and hidden.bytes == pytest.approx(8 * 3 * kv_block)
    a2a = cp_comm(s, fake_comm, attention_s=1.0, kind="a2a")
    qkv, out = tokens * (4096 + kv_block / tokens / 2) * 2, tokens * 4096 * 2
    assert a2a.exposed_s == pytest.approx(8 * 2 * 5e-12 * (qkv + out))
    assert a2a.bytes == pytest.approx(8 * 2 * (qkv + out) / 2)


def test_cp_allgather_gathers_k_and_v_every_pass_and_scatters_their_gradients() -> None:
    # TE's AttnFuncWithCPAndKVAllGather: K and V of all cp ranks gathered before the forward
    # core and again in backward, dK and dV reduce-scattered; nothing hides them.
    tokens = 4096 / 4
    kv_block = tokens * 2 * 8 * 128 * 2  # K and V of the 8 KV heads, bf16, one rank's share
    for recompute, passes in (("none", 2), ("full", 3)):
        s = stage(cp=4, dp=1, recompute=recompute)
        ag = cp_comm(s, fake_comm, attention_s=1.0, kind="allgather")
        gathered = 4 * kv_block  # every rank's K and V
        assert ag.exposed_s == ag.total_s == pytest.approx(8 * (passes + 1) * 1e-12 * gathered)
        assert ag.bytes == pytest.approx(8 * (passes + 1) * 3 * kv_block) and ag.group == "cp"


def test_ep_dispatch_and_combine_per_moe_layer() -> None:
    s = stage("mixtral-8x7b", ep=2, dp=2)
    routed = 4096 * 2 * 4096 * 2  # top-2 copies of each token, bf16 (balanced routing)
    e = ep_comm(s, fake_comm, force_balance=True)
    # 8 MoE layers x (dispatch + combine) x (forward + backward).
    assert e.exposed_s == pytest.approx(8 * 2 * 2 * 5e-12 * routed)
    assert e.bytes == pytest.approx(8 * 2 * 2 * routed / 2) and e.group == "ep"
    assert ep_comm(stage(), fake_comm).total_s == 0.0


def test_pp_one_send_each_way_per_virtual_stage() -> None:
    p = pp_comm(stage(vpp=2), fake_comm, overlap=False)
    assert p.exposed_s == p.total_s == pytest.approx(2 * 2 * 3e-12 * ACT)
    assert p.bytes == pytest.approx(4 * ACT)
    # --overlap-p2p-communication: one virtual stage's sends wait, the other's hide.
    hidden = pp_comm(stage(vpp=2), fake_comm, overlap=True)
    assert hidden.exposed_s == pytest.approx(p.total_s / 2) and hidden.total_s == p.total_s
    # Without interleaving there is nothing to overlap with.
    plain = pp_comm(stage(vpp=1), fake_comm, overlap=True)
    assert plain.exposed_s == plain.total_s
    # DualPipe pairs chunks: only the first of the 32 micro-batches' sends wait.
    dual = pp_comm(stage(vpp=1), fake_comm, paired=True)
    assert dual.exposed_s == pytest.approx(plain.total_s / 32)
    assert pp_comm(stage(pp=1, dp=8), fake_comm).bytes == 0.0


def test_pp_scatter_gather_sends_a_tp_share_and_gathers_it_over_tp() -> None:
    whole = pp_comm(stage(tp=4, sp=False), fake_comm, overlap=False)
    assert whole.total_s == pytest.approx(2 * 3e-12 * ACT)  # every TP rank sends it all
    split = pp_comm(stage(tp=4, sp=False), fake_comm, overlap=False, scatter_gather=True)
    # each way: a quarter of the activation sent, then the whole all-gathered over TP
    assert split.total_s == pytest.approx(2 * (3e-12 * ACT / 4 + 1e-12 * ACT))
    assert split.bytes == pytest.approx(2 * ACT / 4)
    # Sequence parallelism splits the sends already; tp 1 and pp 1 have nothing to split.
    sp = pp_comm(stage(tp=4, sp=True), fake_comm, overlap=False)
    assert pp_comm(stage(tp=4, sp=True), fake_comm, False, False, True) == sp
    one = pp_comm(stage(), fake_comm, overlap=False)
    assert pp_comm(stage(), fake_comm, False, False, True) == one
    alone = stage(pp=1, dp=8, tp=4, sp=False)
    assert pp_comm(alone, fake_comm, scatter_gather=True) == pp_comm(alone, fake_comm)


def test_dp_all_reduce_hides_behind_backward() -> None:
    s = stage(pp=1, dp=8, gbs=16)  # 2 micro-batches
    grads = stage_params(s) * 4  # fp32 main grads
    window = 1e-3 * (1 - FORWARD_SHARE) * DP_OVERLAP_EFFICIENCY
    d = dp_comm(s, fake_comm, compute_s=1e-3)
    assert d.comm.total_s == pytest.approx(2e-12 * grads)
    assert d.comm.exposed_s == pytest.approx(max(2e-12 * grads - window, 0.0))
    assert d.window_s == pytest.approx(window) and d.buffer_bytes == pytest.approx(grads)
    assert d.comm.bytes == pytest.approx(7 / 8 * 2 * grads)
    # FSDP: weights gathered forward and backward and grads reduce-scattered per micro-batch.
    f = dp_comm(stage(pp=1, dp=8, gbs=16, zero=3), fake_comm, compute_s=1e-3)
    per_micro = 2 * 1e-12 * stage_params(s) * 2 + 1e-12 * grads
    assert f.comm.total_s == pytest.approx(2 * per_micro)
    assert f.comm.exposed_s == pytest.approx(2 * (per_micro - 1e-3 * DP_OVERLAP_EFFICIENCY))


def test_compute_parts_add_up_and_unfused_attention_costs_more() -> None:
    s = stage(tp=2)
    fused, unfused = compute(s), compute(s, flash_attention=False)
    assert fused.layers_s == fused.gemm_s + fused.attention_s + fused.elementwise_s
    assert unfused.attention_s == pytest.approx(2 * fused.attention_s)  # no causal skipping
    assert unfused.elementwise_s > fused.elementwise_s and unfused.gemm_s == fused.gemm_s


def test_logits_and_embedding_are_priced_apart_from_the_layers() -> None:
    s = stage()
    c = compute(s)
    # 3 passes x 2 x 4096 tokens x 4096 x 128256 vocab; the GEMM runs below peak.
    logits_flops = 3 * 2 * 4096 * 4096 * 128256
    assert 1.0 < c.logits_s * H100.peak_bf16_tflops * 1e12 / logits_flops < 2.0
    # 14 bytes per token and hidden element at 70% of 3.35 TB/s.
    assert c.embedding_s == pytest.approx(4096 * 4096 * 14 / (3.35e12 * 0.7), rel=1e-3)
    # The layers' GEMM time is the same with or without the logits on the stage.
    assert c.gemm_s == pytest.approx(compute(stage(pp=2, dp=4)).gemm_s / 2)


def test_expert_gradients_reduce_over_the_expert_data_parallel_group() -> None:
    s = stage("mixtral-8x7b", pp=1, dp=16, ep=8, gbs=64)
    dense, experts = stage_param_split(s)
    # Mixtral 8x7B: 8 experts over ep 8, one per GPU; 46.7B parameters of which 45.1B in experts.
    assert experts == pytest.approx(32 * 3 * 4096 * 14336)  # 32 layers x one expert's 3 matrices
    assert dense + 8 * experts == pytest.approx(stage_params(stage("mixtral-8x7b", pp=1, dp=16)))
    rates = {"dpcp": 1e-12, "edp": 10e-12}  # an edp group spanning nodes: 10x slower per byte
    d = dp_comm(s, lambda kind, op, n: rates[kind] * n, compute_s=0.0)
    grads = 4  # fp32 main grads all-reduced (no distributed optimizer)
    assert d.comm.total_s == pytest.approx(grads * (1e-12 * dense + 10e-12 * experts))
    dense_only = dp_comm(stage(pp=1, dp=16), lambda kind, op, n: rates[kind] * n, 0.0)
    assert dense_only.comm.total_s == pytest.approx(4e-12 * stage_params(stage(pp=1, dp=16)))


def test_loss_reads_and_writes_every_logit_on_the_last_rank() -> None:
    s = stage(tp=2)
    # 4096 tokens x 128256 / tp 2 logits (vocab a multiple of 128) x 6 bytes, fused factor.
    assert LOSS_BYTES_PER_LOGIT == 6
    loss = elementwise_seconds(H100, 4096 * 128256 / 2 * 6)
    assert compute(s).loss_s == pytest.approx(loss)
