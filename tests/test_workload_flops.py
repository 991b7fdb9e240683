"""FLOPs: Megatron's formula, GQA/SwiGLU/MoE terms, recompute, causal, vectorisation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierwise.workload import ModelSpec, load_model, param_counts
from tierwise.workload.flops import (
    RECOMPUTE_FULL,
    RECOMPUTE_NONE,
    RECOMPUTE_SELECTIVE,
    attention_proj_macs,
    causal_keys,
    core_attention_macs,
    flops_batch,
    forward_flops,
    layer_flops,
    logits_flops,
    megatron_eq3_flops,
    model_flops_per_step,
    model_flops_per_token,
    padded_vocab,
    training_flops,
)
from tierwise.workload.params import mla_latent_params


def gpt(layers: int, hidden: int, heads: int, vocab: int = 51200) -> ModelSpec:
    return ModelSpec.from_fields(
        {"id": "gpt", "layers": layers, "hidden": hidden, "heads": heads},
        vocab=vocab,
        activation="gelu",
    )


def test_megatron_eq3_hand_value() -> None:
    # GPT-3 175B shape, B = 1536, s = 2048: 96*B*s*l*h^2*(1 + s/6h + V/16lh)
    hand = 96 * 1536 * 2048 * 96 * 12288**2 * (1 + 2048 / 73728 + 51200 / 18874368)
    assert megatron_eq3_flops(1536, 2048, 96, 12288, 51200) == pytest.approx(hand, rel=1e-12)
    assert hand == pytest.approx(4.511e18, rel=1e-3)


@pytest.mark.parametrize(
    ("layers", "hidden", "heads"), [(96, 12288, 96), (24, 2304, 24), (128, 25600, 160)]
)
def test_full_recompute_training_equals_megatron_eq3(layers: int, hidden: int, heads: int) -> None:
    m = gpt(layers, hidden, heads)
    ours = training_flops(m, 2048, 512, recompute=RECOMPUTE_FULL)
    assert ours == pytest.approx(megatron_eq3_flops(512, 2048, layers, hidden, 51200), rel=0.01)


def test_layer_terms_by_hand() -> None:
    m = load_model("llama3-8b")  # h 4096, 32 heads, 8 kv heads, hd 128, ffn 14336
    f = layer_flops(m, seq=4096, mbs=2)
    t = 2 * 4096
    assert f.qkv == 2 * t * 4096 * (4096 + 2 * 1024)
    assert f.attention == 2 * 2 * t * 4096 * 4096  # QK^T and PV, full s^2
    assert f.out == 2 * t * 4096 * 4096
    assert f.mlp == 3 * 2 * t * 4096 * 14336  # SwiGLU: 3 matmuls
    half = layer_flops(m, seq=4096, mbs=2, causal=True)
    assert half.attention == f.attention / 2 and half.gemm == f.gemm


def test_gelu_mlp_has_two_matmuls() -> None:
    m = gpt(2, 1024, 16)
    assert layer_flops(m, 128, 1).mlp == 2 * 2 * 128 * 1024 * 4096


def test_forward_is_about_2N_per_token_for_short_sequences() -> None:
    m = load_model("llama3-70b")
    per_token = forward_flops(m, seq=128, mbs=1) / 128
    non_embedding = param_counts(m).total - param_counts(m).embedding
    assert per_token == pytest.approx(2 * non_embedding, rel=0.01)


def test_moe_active_experts_and_capacity_factor() -> None:
    m = load_model("mixtral-8x7b")
    f = layer_flops(m, 4096, 1, moe_layer=True)
    tokens = 4096
    assert f.experts == 2 * 3 * 2 * tokens * 4096 * 14336  # top_2 SwiGLU experts
    assert f.router == 2 * tokens * 4096 * 8
    assert f.mlp == 0
    padded = m.model_copy(update={"moe": m.moe.model_copy(update={"capacity_factor": 1.25})})
    assert layer_flops(padded, 4096, 1, moe_layer=True).experts == pytest.approx(1.25 * f.experts)
    per_token = forward_flops(m, 128, 1) / 128
    assert per_token == pytest.approx(2 * (param_counts(m).active - 32000 * 4096), rel=0.01)


def test_shared_experts_and_dense_layers() -> None:
    m = load_model("deepseek-moe-16b")
    moe = layer_flops(m, 1024, 1, moe_layer=True)
    assert moe.mlp == 2 * 1024 * 2048 * 1408 * 3 * 2  # two shared experts
    assert moe.experts == 2 * 1024 * 2048 * 1408 * 3 * 6
    dense = layer_flops(m, 1024, 1)
    expected = dense.total + 27 * moe.total + logits_flops(m, 1024, 1)
    assert forward_flops(m, 1024, 1) == pytest.approx(expected)


def test_recompute_factors() -> None:
    m = load_model("llama3-8b")
    base = training_flops(m, 8192, 1, recompute=RECOMPUTE_NONE)
    full = training_flops(m, 8192, 1, recompute=RECOMPUTE_FULL)
    sel = training_flops(m, 8192, 1, recompute=RECOMPUTE_SELECTIVE)
    assert base == pytest.approx(3 * forward_flops(m, 8192, 1))
    logits = 3 * logits_flops(m, 8192, 1)
    assert (full - logits) / (base - logits) == pytest.approx(4 / 3)
    assert sel - base == pytest.approx(32 * layer_flops(m, 8192, 1).attention)
    # model FLOPs count the causal half of the s^2 core, as Megatron does
    attention = 32 * layer_flops(m, 8192, 1).attention * 3
    assert model_flops_per_step(m, 8192, 128) == pytest.approx(128 * (base - attention / 2))


def test_tp_and_cp_split_work() -> None:
    m = load_model("llama3-70b")
    whole = forward_flops(m, 8192, 1)
    assert forward_flops(m, 8192, 1, tp=8) == pytest.approx(whole / 8)
    assert forward_flops(m, 8192, 1, tp=4, cp=2) == pytest.approx(whole / 8)
    # tp 16 > kv_heads 8: each rank still computes one whole KV head
    f16 = layer_flops(m, 8192, 1, tp=16)
    assert f16.qkv == 2 * 8192 * 8192 * (8192 / 16 + 2 * 128)


def test_elementwise_bytes_split_with_sp_only() -> None:
    m = load_model("llama3-70b")
    base = layer_flops(m, 4096, 1).elementwise_bytes
    no_sp = layer_flops(m, 4096, 1, tp=8, sp=False).elementwise_bytes
    sp = layer_flops(m, 4096, 1, tp=8, sp=True).elementwise_bytes
    assert sp == pytest.approx(base / 8)
    assert base / 8 < no_sp < base


def test_vectorised_equals_scalar() -> None:
    m = load_model("mixtral-8x7b")
    seq = np.array([2048, 4096, 8192, 4096])
    mbs = np.array([1, 2, 1, 4])
    tp = np.array([1, 2, 4, 8])
    pp = np.array([1, 2, 4, 8])
    rc = np.array([RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL, RECOMPUTE_NONE])
    batch = flops_batch(m, seq=seq, mbs=mbs, tp=tp, pp=pp, recompute=rc)
    for i in range(4):
        one = flops_batch(
            m, seq=int(seq[i]), mbs=int(mbs[i]), tp=int(tp[i]), pp=int(pp[i]), recompute=int(rc[i])
        )
        assert batch.hardware[i] == pytest.approx(one.hardware)
        assert batch.elementwise_bytes[i] == pytest.approx(one.elementwise_bytes)
    assert np.all(batch.hardware >= batch.model)


def test_stage_flops_sum_to_training_when_one_stage() -> None:
    m = load_model("deepseek-moe-16b")
    stage = flops_batch(m, seq=4096, mbs=1, recompute=RECOMPUTE_FULL)
    assert stage.hardware == pytest.approx(training_flops(m, 4096, 1, recompute=RECOMPUTE_FULL))
    assert stage.model == pytest.approx(training_flops(m, 4096, 1))


@given(seq=st.integers(2, 4096), window=st.integers(1, 8192))
def test_sliding_window_keys_are_exact_mean(seq: int, window: int) -> None:
    m = ModelSpec(
        name="swa",
        layers=2,
        hidden=64,
        heads=4,
        vocab=128,
        local_attention={"window": window, "global_every": None},
    )
    exact = sum(min(i + 1, window) for i in range(seq)) / seq
    expected = exact if window < seq else seq / 2  # Megatron: a window >= seq is plain causal
    assert causal_keys(m, seq) == pytest.approx(expected)


def test_local_global_pattern_and_chunks() -> None:
    gemma = load_model("gemma3-27b")  # 5 local (1024) per global layer, 62 layers
    assert (gemma.local_layers, gemma.layers - gemma.local_layers) == (52, 10)
    swa = 1024 - 1024 * 1023 / (2 * 8192)
    assert causal_keys(gemma, 8192) == pytest.approx((52 * swa + 10 * 4096) / 62)
    scout = load_model("llama4-scout")  # chunked 8192, every 4th layer global
    assert causal_keys(scout, 32768) == pytest.approx((36 * 4096 + 12 * 16384) / 48)
    assert causal_keys(scout, 4096) == pytest.approx(2048)  # one chunk: plain causal


def test_mla_flops_by_hand() -> None:
    m = load_model("deepseek-v3")
    h, n = 7168, 128
    q = 1536 * (h + 1 + n * 192)
    kv = h * (512 + 64) + 512 * (1 + n * (128 + 128))
    assert attention_proj_macs(m) == q + kv + n * 128 * h
    assert core_attention_macs(m, 4096) == 2048 * n * (192 + 128)


def test_model_flops_per_token_by_hand_llama() -> None:
    m = load_model("llama3-70b")
    h, s, q, kv, ffn, v = 8192, 8192, 8192, 1024, 28672, 128256
    per_layer = h * (q + 2 * kv) + q * h + s / 2 * 2 * q + 3 * h * ffn
    hand = 6 * (80 * per_layer + h * v)
    assert model_flops_per_token(m, s) == pytest.approx(hand, rel=1e-12)


def test_padded_vocab() -> None:
    assert padded_vocab(50257) == 50304 and padded_vocab(128256) == 128256


@pytest.mark.parametrize("name", ["deepseek-v3", "gpt-oss-120b", "llama4-maverick", "gemma3-27b"])
def test_hardware_count_agrees_with_megatron_counter(name: str) -> None:
    """The per-GPU count (MLA, windows, MTP) and Megatron's model count differ only by the
    router GEMM Megatron leaves out (< 0.5%)."""
    m = load_model(name)
    causal = training_flops(m, 4096, 1, causal=True) / 4096
    assert causal == pytest.approx(model_flops_per_token(m, 4096), rel=0.005)
    assert causal >= model_flops_per_token(m, 4096)


def test_mla_latents_are_computed_whole_on_every_tp_rank() -> None:
    m = load_model("deepseek-v3")
    one, eight = layer_flops(m, 4096, 1), layer_flops(m, 4096, 1, tp=8)
    latents = mla_latent_params(m)
    assert eight.qkv == pytest.approx(2 * 4096 * (latents + (one.qkv / 8192 - latents) / 8))


def test_pre_2025_megatron_counter_counts_the_full_square() -> None:
    m = load_model("llama3-70b")
    full, causal = model_flops_per_token(m, 8192, causal=False), model_flops_per_token(m, 8192)
    assert full - causal == pytest.approx(6 * 80 * 4096 * 2 * 8192)
