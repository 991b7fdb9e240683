"""Memory per GPU: Korthikanti et al. 2022 activations, ZeRO model states, pipeline, batch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.perf.flags import Flags
from tierwise.perf.step import memory_terms
from tierwise.workload import Layout, ModelSpec, layouts_to_arrays, load_model, memory, memory_batch
from tierwise.workload.flops import RECOMPUTE_FULL
from tierwise.workload.layout import layout_fields
from tierwise.workload.memory import (
    GiB,
    activation_bytes_per_token,
    inflight_microbatches,
    model_state_bytes,
)
from tierwise.workload.params import attention_params, expert_params, param_counts

GPT3 = ModelSpec.from_fields(
    {"id": "gpt3-175b", "layers": 96, "hidden": 12288, "heads": 96}, vocab=51200
)
S, B, H, A, T = 2048, 1, 12288, 96, 8
SBH = S * B * H  # 25,165,824


def korthikanti_layer(tp: int, sp: bool, recompute: str = "none") -> float:
    """Our per-layer activation bytes, Korthikanti's accounting (unfused softmax, dropout)."""
    kept, scores, layer_input = activation_bytes_per_token(
        GPT3, S, tp=tp, sp=sp, flash_attention=False, dropout=True
    )
    per_token = {"none": kept + scores, "selective": kept, "full": layer_input}[recompute]
    return S * B * per_token


@pytest.mark.parametrize(
    ("tp", "sp", "recompute", "paper_bytes"),
    [
        # Korthikanti et al. 2022 Table 2, evaluated by hand for s=2048, b=1, h=12288, a=96
        (1, False, "none", SBH * (34 + 5 * A * S / H)),  # 2.869e9: 114 sbh
        (T, False, "none", SBH * (10 + 24 / T + 5 * A * S / (H * T))),  # 578.8 MB: 23 sbh
        (T, True, "none", SBH * (34 / T + 5 * A * S / (H * T))),  # 358.6 MB: 14.25 sbh
        (T, False, "selective", SBH * (10 + 24 / T)),  # 327.2 MB
        (T, True, "selective", SBH * (34 / T)),  # 106.95 MB
        (1, False, "full", SBH * 2),  # 50.3 MB
    ],
)
def test_korthikanti_table2_per_layer(
    tp: int, sp: bool, recompute: str, paper_bytes: float
) -> None:
    assert korthikanti_layer(tp, sp, recompute) == pytest.approx(paper_bytes, rel=0.05)


def test_korthikanti_hand_numbers() -> None:
    assert korthikanti_layer(T, True) / 1e6 == pytest.approx(358.6, rel=0.01)
    assert korthikanti_layer(T, True, "selective") / 1e6 == pytest.approx(106.95, rel=0.01)


def test_first_stage_holds_all_layers_worth_of_activations() -> None:
    # 1F1B: stage 0 keeps pp micro-batches of layers/pp layers = layers x one micro-batch.
    lay = Layout(tp=8, pp=8, dp=1, mbs=1, gbs=64, seq=S, recompute="selective")
    mem = memory(GPT3, lay, flash_attention=False, dropout=True)
    assert mem.stage == 0
    assert mem.activations == pytest.approx(96 * korthikanti_layer(T, True, "selective"))
    interleaved = memory(
        GPT3, lay.model_copy(update={"vpp": 4}), flash_attention=False, dropout=True
    )
    assert interleaved.activations / mem.activations == pytest.approx(1 + 7 / 32)
    few = memory(GPT3, lay.model_copy(update={"gbs": 2}), flash_attention=False, dropout=True)
    assert few.activations == pytest.approx(mem.activations * 2 / 8)


@pytest.mark.parametrize(
    ("pp", "vpp", "micro", "group", "rank", "held"),
    [
        # Megatron's warmup, by hand: pp - rank - 1 forwards (1F1B), or interleaved
        # 2 (pp - rank - 1) + (vpp - 1) group chunks; one more in the steady state; all
        # micro x vpp chunks at most; over vpp chunks a micro-batch.
        (8, 1, 64, 8, 0, 8.0),  # 7 + 1
        (8, 1, 64, 8, 1, 7.0),  # 6 + 1
        (8, 1, 4, 8, 0, 4.0),  # fewer micro-batches than pp: all of them
        (8, 8, 288, 8, 0, 71 / 8),  # 14 + 56 + 1 = pp + (pp - 1) / vpp
        (8, 8, 288, 8, 1, 69 / 8),  # 12 + 56 + 1
        (8, 4, 64, 4, 0, 27 / 4),  # group 4: 14 + 12 + 1
        (16, 2, 16, 16, 0, 16.0),  # 30 + 16 + 1 > 32 chunks: every forward before a backward
        (16, 4, 8, 16, 1, 8.0),  # fewer micro-batches than pp, interleaved: all of them
    ],
)
def test_inflight_microbatches_follow_megatron_warmup(
    pp: int, vpp: int, micro: int, group: int, rank: int, held: float
) -> None:
    assert inflight_microbatches(pp, vpp, micro, group, rank) == pytest.approx(held)


def test_expert_all_to_all_overlap_runs_one_more_interleaved_warmup_forward() -> None:
    # Megatron's get_pp_rank_microbatches: --overlap-moe-expert-parallel-comm adds one warmup
    # forward to the interleaved schedule (none to 1F1B). Mixtral pp 4 x vpp 2, 8 micro-batches,
    # rank 0: 2 x 3 + 1 x 4 + 1 + 1 = 12 chunks of 2 = 6 micro-batches (5.5 without).
    assert inflight_microbatches(4, 2, 8, 4, 0, ahead=1) == pytest.approx(12 / 2)
    assert inflight_microbatches(4, 1, 8, 4, 0, ahead=1) == inflight_microbatches(4, 1, 8, 4, 0)
    m = load_model("mixtral-8x7b")
    lay = Layout(tp=2, ep=4, pp=4, vpp=2, dp=4, mbs=1, gbs=32, seq=4096)
    fields = layout_fields(lay, m)
    plain, ahead = memory_batch(m, **fields), memory_batch(m, **fields, warmup_ahead=1)
    assert ahead.activations / plain.activations == pytest.approx(12 / 11)
    flags = Flags(overlap_moe_expert_parallel_comm=True)
    assert memory_terms(m, fields, flags).activations == pytest.approx(ahead.activations)


def test_interleaved_last_rank_holds_its_warmup_chunks() -> None:
    # Megatron's schedules.py get_pp_rank_microbatches at rank pp - 1, interleaved:
    # 2 x 0 + (vpp - 1) x group warmup chunks, one more in the steady state; by hand for
    # Llama 3 8B, pp 4 x vpp 4 (2 layers a chunk), 16 micro-batches, full recompute (the last
    # rank, with the fp32 logits, is the busiest): 13 chunks of 2 layers keep their inputs,
    # plus one layer's working set; without interleaving one micro-batch of 8 layers.
    m = load_model("llama3-8b")
    act, scores, layer_input = activation_bytes_per_token(m, 4096, tp=1, sp=False)
    for vpp, layers_held in ((1, 8), (4, (3 * 4 + 1) * 2)):
        lay = Layout(pp=4, vpp=vpp, mbs=1, gbs=16, seq=4096, recompute="full")
        mem = memory(m, lay)
        assert mem.stage == 3
        assert mem.activations == pytest.approx(4096 * (layers_held * layer_input + act + scores))


def test_interleaving_with_pp_micro_batches_holds_no_more_than_all_of_them() -> None:
    # Llama 3 405B as Meta ran it on 16,384 GPUs (tp 8, pp 16, dp 128, 16 micro-batches of
    # one sequence per replica): interleaved, each rank runs all 16 micro-batches forward
    # before its first backward, which is what 1F1B's first stage holds too; a smaller
    # micro-batch group runs fewer ahead.
    model = load_model("llama3-405b")
    lay = Layout(tp=8, pp=16, dp=128, mbs=1, gbs=2048, seq=8192, pp_layers=(8,) * 15 + (6,))
    plain = memory(model, lay)
    for vpp in (2, 4):
        interleaved = memory(model, lay.model_copy(update={"vpp": vpp, "pp_layers": None}))
        assert interleaved.activations == pytest.approx(plain.activations)
    fields = layout_fields(lay.model_copy(update={"vpp": 4, "pp_layers": None}), model)
    grouped = memory_batch(model, **fields, microbatch_group=4)  # 30 + 3 x 4 + 1 chunks of 64
    assert grouped.activations / plain.activations == pytest.approx((30 + 12 + 1) / 4 / 16)


@pytest.mark.parametrize(("zero", "paper_gb"), [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.88)])
def test_zero_paper_model_states(zero: int, paper_gb: float) -> None:
    # Rajbhandari et al. 2020, Figure 1: 7.5B parameters, 64-way data parallel, K = 12,
    # fp16 training (16-bit grads)
    w, g, o = model_state_bytes(7.5e9, zero=zero, shard=64, grad_reduce_bf16=True)
    assert (w + g + o) / 1e9 == pytest.approx(paper_gb, rel=0.05)


@pytest.mark.parametrize("d", [1, 8, 64])
def test_megatron_distributed_optimizer_bytes_per_param(d: int) -> None:
    # Megatron-LM docs (distributed optimizer): bf16 params, fp32 grads: 18 -> 6 + 12/d bytes
    w, g, o = model_state_bytes(1.0, zero=0, shard=d, distributed_optimizer=True)
    assert w + g + o == pytest.approx(6 + 12 / d)
    w, g, o = model_state_bytes(1.0, zero=0, shard=d)
    assert w + g + o == 18
    # --grad-reduce-in-bf16 keeps 16-bit main grads
    w, g, o = model_state_bytes(1.0, zero=0, shard=d, grad_reduce_bf16=True)
    assert w + g + o == 16


def test_weights_are_the_whole_model_at_one_gpu() -> None:
    m = load_model("llama3-8b")
    mem = memory(m, Layout(seq=1024))
    assert mem.weights == pytest.approx(2 * 8.03e9, rel=0.01)
    assert mem.optimizer == pytest.approx(12 * 8.03e9, rel=0.01)
    fp8 = memory(m, Layout(seq=1024, dtype="fp8"))
    # Transformer Engine keeps row- and column-wise FP8 copies beside the BF16 weights: 2+1+1 B.
    assert fp8.weights == pytest.approx(2.0 * mem.weights)


def test_zero3_shards_everything_and_adds_gather_buffers() -> None:
    m = load_model("llama3-8b")
    mem = memory(m, Layout(dp=8, seq=2048, zero=3, grad_reduce_bf16=True))
    assert mem.model_states == pytest.approx(16 * 8.03e9 / 8, rel=0.01)
    fp32_grads = memory(m, Layout(dp=8, seq=2048, zero=3))  # torchtitan's float32 reduce
    assert fp32_grads.grads == pytest.approx(2 * mem.grads)
    assert mem.fsdp_buffers > 0
    assert memory(m, Layout(dp=8, seq=2048, zero=2)).fsdp_buffers == 0


def test_cp_shards_model_states_and_activations() -> None:
    m = load_model("llama3-8b")
    a = memory(m, Layout(dp=4, seq=8192, zero=1))
    b = memory(m, Layout(dp=2, cp=2, seq=8192, zero=1))
    assert b.optimizer == pytest.approx(a.optimizer)
    assert b.activations == pytest.approx(a.activations / 2, rel=0.01)


def test_experts_sharded_by_ep_and_expert_dp() -> None:
    m = load_model("mixtral-8x7b")
    ep1 = memory(m, Layout(dp=8, seq=4096, zero=0))
    ep8 = memory(m, Layout(dp=8, ep=8, seq=4096, zero=0))
    expert_share = 45_097_156_608 / 46_702_792_704
    assert ep8.weights / ep1.weights == pytest.approx(1 - expert_share * 7 / 8, rel=0.01)
    # ZeRO-1: expert optimizer states shard over expert-dp = dp/ep = 1 only
    z1 = memory(m, Layout(dp=8, ep=8, seq=4096, zero=1))
    dense = (46_702_792_704 - 45_097_156_608) * 12 / 8
    experts = 45_097_156_608 / 8 * 12
    assert z1.optimizer == pytest.approx(dense + experts, rel=0.01)


def test_recompute_lowers_memory() -> None:
    m = load_model("llama3-70b")
    base = Layout(tp=8, pp=4, dp=2, gbs=32, seq=8192)
    none = memory(m, base)
    full = memory(m, base.model_copy(update={"recompute": "full"}))
    assert full.activations < 0.2 * none.activations
    assert full.total_bytes < none.total_bytes


def test_tp_beyond_kv_heads_replicates_kv_weights() -> None:
    m = load_model("llama3-70b")
    w8 = memory(m, Layout(tp=8, seq=4096)).weights
    w16 = memory(m, Layout(tp=16, seq=4096)).weights
    assert w8 / 2 < w16 < w8 * 0.6


def test_published_run_fits_80gb() -> None:
    # MPT-7B on 8 H100 80GB (79.6 GiB usable), FSDP, mbs 6, seq 2048, no recompute (llm-foundry)
    mpt = memory(load_model("mpt-7b"), Layout(dp=8, mbs=6, gbs=48, seq=2048, zero=3))
    assert 40 < mpt.total_gib < 79.6
    # the same with mbs 12 would not have fitted
    assert (
        memory(load_model("mpt-7b"), Layout(dp=8, mbs=12, gbs=96, seq=2048, zero=3)).total_gib > 80
    )


def test_breakdown_dict_and_totals() -> None:
    mem = memory(load_model("llama3-8b"), Layout(tp=2, dp=4, seq=4096, zero=1))
    d = mem.to_gib_dict()
    terms = [k for k in d if k not in {"total_gib", "stage"}]
    assert sum(d[k] for k in terms) == pytest.approx(d["total_gib"])
    assert d["total_gib"] == pytest.approx(mem.total_bytes / GiB)


MODELS = [load_model(n) for n in ("llama3-70b", "mixtral-8x7b", "deepseek-moe-16b", "gpt3-175b")]


@st.composite
def layouts(draw: st.DrawFn) -> tuple[ModelSpec, Layout]:
    m = draw(st.sampled_from(MODELS))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4]))
    lay = Layout(
        tp=tp,
        pp=pp,
        vpp=draw(st.sampled_from([1, 2])) if pp > 1 else 1,
        cp=draw(st.sampled_from([1, 2])),
        dp=8,
        ep=draw(st.sampled_from([1, 2, 4])) if m.moe else 1,
        mbs=draw(st.sampled_from([1, 2])),
        gbs=draw(st.sampled_from([16, 64])),
        seq=draw(st.sampled_from([2048, 4096])),
        recompute=draw(st.sampled_from(["none", "selective", "full"])),
        zero=draw(st.integers(0, 3)),
        distributed_optimizer=draw(st.booleans()),
        dtype=draw(st.sampled_from(["bf16", "fp8"])),
    )
    return m, lay


@settings(max_examples=40, deadline=None)
@given(st.lists(layouts(), min_size=1, max_size=4))
def test_batch_equals_scalar(cases: list[tuple[ModelSpec, Layout]]) -> None:
    m = cases[0][0]
    lays = [lay for _, lay in cases]
    batch = memory_batch(m, **layouts_to_arrays(lays, m))
    for i, lay in enumerate(lays):
        one = memory(m, lay)
        assert batch.total_bytes[i] == pytest.approx(one.total_bytes)
        assert batch.activations[i] == pytest.approx(one.activations)
        assert batch.stage[i] == one.stage
    assert np.all(batch.total_bytes > 0)


def test_batch_keeps_partial_recompute() -> None:
    # layouts_to_arrays of a block / uniform layout beside a plain one: the batch prices each
    # as the scalar path does (block 5 of 20 layers: a quarter keep only their input).
    m = load_model("llama3-70b")
    full = Layout(tp=8, pp=4, dp=4, gbs=64, seq=8192, recompute="full")
    lays = [
        full,
        full.model_copy(update={"recompute_method": "block", "recompute_num_layers": 5}),
        full.model_copy(update={"recompute_num_layers": 4}),
        full.model_copy(update={"recompute": "none"}),
    ]
    batch = memory_batch(m, **layouts_to_arrays(lays, m))
    one = [memory(m, lay).activations for lay in lays]
    assert list(batch.activations) == pytest.approx(one)
    assert one[0] < one[1] < one[3] and one[1] != pytest.approx(one[0], rel=0.5)


def test_a_middle_stage_can_be_the_fullest() -> None:
    # deepseek-moe-16b's first layer is dense: stage 0 holds 1 dense + 6 MoE layers and 4
    # micro-batches in flight, stage 1 holds 7 MoE layers (each ~8x the dense one's weights)
    # and 3 in flight; without recompute stage 1 needs the most, with full recompute the last
    # stage (logits) does.
    model = load_model("deepseek-moe-16b")
    layout = Layout(tp=1, pp=4, dp=2, mbs=1, gbs=16, seq=4096)
    assert memory(model, layout).stage == 1
    assert memory(model, layout.model_copy(update={"recompute": "full"})).stage == 3


def test_mla_keeps_latent_projections_whole_under_tp() -> None:
    mla = {
        "q_lora_rank": 32,
        "kv_lora_rank": 16,
        "qk_nope_head_dim": 8,
        "qk_rope_head_dim": 4,
        "v_head_dim": 8,
    }
    m = ModelSpec(name="mla", layers=2, hidden=64, heads=4, vocab=256, ffn_hidden=128, mla=mla)
    h = 64
    latents = 32 * (h + 1) + h * (16 + 4) + 16  # Q and KV down-projections + latent norms
    q = 32 * 4 * 12  # Q up-projection: 4 heads x (8 + 4)
    kv = 16 * 4 * (8 + 8)  # KV up-projection: 4 heads x (nope + v)
    out = 4 * 8 * h
    assert attention_params(m) == latents + q + kv + out
    per_layer = latents + (q + kv + out) / 2 + 2 * h + 2 * 128 * h / 2  # GELU MLP split by 2
    expected = 2 * (2 * per_layer + 2 * 256 * h / 2 + h)  # bf16; embedding + output split
    assert memory_batch(m, tp=2, seq=64, zero=0).weights == pytest.approx(expected)


def test_moe_activations_split_by_expert_tp() -> None:
    m = load_model("qwen3-30b-a3b")
    moe = m.moe
    assert moe is not None
    etp1, _, _ = activation_bytes_per_token(m, 4096, tp=2, sp=True, etp=1, moe_layer=True)
    etp2, _, _ = activation_bytes_per_token(m, 4096, tp=2, sp=True, etp=2, moe_layer=True)
    # etp=2 gathers the 2 TP ranks' tokens (2x tokens), then splits the expert columns by 2:
    # the intermediates stay, the permuted h-wide copies double
    dispatch = 2 * moe.top_k * 2 * m.hidden  # top_k copies in and out, 16-bit
    assert etp2 - etp1 == pytest.approx(dispatch * (1 - 0.5))


def test_mtp_module_memory() -> None:
    """A single stage holds the MTP module: its weights (routed experts split by ep), one more
    layer of activations and one more fp32 logits tensor."""
    m = load_model("deepseek-v3")
    no_mtp = m.model_copy(update={"mtp_layers": 0})
    kw = dict(ep=8, dp=8, seq=4096, zero=0, recompute=RECOMPUTE_FULL)
    with_mtp, without = memory_batch(m, **kw), memory_batch(no_mtp, **kw)
    routed = 256 * expert_params(m)
    mtp_on_rank = param_counts(m).mtp - routed + routed / 8
    assert with_mtp.weights - without.weights == pytest.approx(2 * mtp_on_rank)
    assert with_mtp.logits == pytest.approx(2 * without.logits)
    assert with_mtp.activations > without.activations
