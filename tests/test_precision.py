"""Precision: the catalog's per-format peaks, formats and recipes, their time and memory."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.errors import SpecError
from tierwise.hardware.catalog import entries, gpu
from tierwise.hardware.cluster import load_cluster
from tierwise.perf.efficiency import (
    ATTENTION_RELATIVE_EFFICIENCY,
    FORMAT_EFFICIENCY,
    Gemm,
    attention_tflops,
    gemm_seconds,
)
from tierwise.perf.estimate import estimate
from tierwise.perf.precision import quantize_bytes, quantize_seconds
from tierwise.perf.step import Flags
from tierwise.plan.emit.megatron import megatron_args
from tierwise.plan.emit.torchtitan import torchtitan_args
from tierwise.plan.search import search
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model
from tierwise.workload.memory import memory
from tierwise.workload.precision import (
    DTYPES,
    FP8_RECIPES,
    check_supported,
    dtype_and_recipe,
    precision_code,
)
from tierwise.workload.spec import ModelSpec

H100, B200, A100 = gpu("h100-sxm"), gpu("b200"), gpu("a100-sxm-80gb")
L8 = load_model("llama3-8b")


@pytest.mark.parametrize(
    ("key", "bf16", "fp8", "nvfp4"),
    [
        ("h200", 989, 1979, None),
        ("b200", 2250, 4500, 9000),
        ("b300", 2250, 4500, 13500),
        ("gb200", 2500, 5000, 10000),
        ("gb300", 2500, 5000, 15000),
    ],
)
def test_catalog_dense_peaks_per_precision(key: str, bf16: float, fp8: float, nvfp4) -> None:
    g = gpu(key)
    assert (g.peak_bf16_tflops, g.peak_fp8_tflops, g.peak_nvfp4_tflops) == (bf16, fp8, nvfp4)
    # Blackwell runs block-scaled MXFP8 at the FP8 rate; Hopper has no MX tensor cores.
    assert g.peak_mxfp8_tflops == (fp8 if nvfp4 else None)


def test_every_low_precision_peak_is_at_least_the_bf16_one() -> None:
    for g in entries("gpus").values():
        for dtype in DTYPES:
            peak = g.peak_tflops(dtype)
            assert peak is None or peak >= g.peak_bf16_tflops, (g.key, dtype)


def test_blackwell_rack_presets() -> None:
    gb300 = load_cluster("gb300-nvl72")
    assert (gb300.gpu.key, gb300.nvlink_domain_gpus, gb300.gpus_per_node) == ("gb300", 72, 4)
    assert gb300.inter.nic.rate_Gbps == 800 and gb300.inter.nics_per_node == 4
    b300 = load_cluster("dgx-b300")
    assert (b300.gpu.hbm_tbps, b300.intra.bw_GBps, b300.inter.nics_per_node) == (8.0, 900, 8)


def test_codes_round_trip_and_recipes() -> None:
    assert dtype_and_recipe(precision_code("bf16")) == ("bf16", None)
    assert dtype_and_recipe(precision_code("fp8")) == ("fp8", None)  # delayed: the default
    for recipe in ("tensorwise", "blockwise"):
        assert dtype_and_recipe(precision_code("fp8", recipe)) == ("fp8", recipe)
    assert dtype_and_recipe(precision_code("mxfp8")) == ("mxfp8", None)
    with pytest.raises(SpecError, match="--fp8-recipe: 'current'; allowed: delayed"):
        precision_code("fp8", "current")
    with pytest.raises(SpecError, match="--dtype: 'fp16'; allowed: bf16, fp8, mxfp8, nvfp4"):
        precision_code("fp16")


def test_unsupported_pairs_are_one_line_errors() -> None:
    with pytest.raises(SpecError, match=r"mxfp8 does not run on h100-sxm .*allowed: bf16, fp8$"):
        check_supported(H100, "mxfp8")
    with pytest.raises(SpecError, match=r"fp8 does not run on a100-sxm-80gb .*allowed: bf16$"):
        check_supported(A100, "fp8")
    check_supported(B200, "nvfp4")
    proc = run_cli("estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1",
                   "--gbs", "64", "--dtype", "mxfp8", check=False)  # fmt: skip
    assert_user_error(proc, "--dtype: mxfp8 does not run on h100-sxm")
    proc = run_cli("plan", "--model", "llama3-8b", "--cluster", "dgx-a100", "--nodes", "1",
                   "--dtype", "fp8", check=False)  # fmt: skip
    assert_user_error(proc, "--dtype: fp8 does not run on a100-sxm-80gb")
    with pytest.raises(SpecError, match="fp8_recipe tensorwise needs dtype fp8"):
        Layout(seq=1024, fp8_recipe="tensorwise").validate_for(L8)


def test_quantize_bytes_by_hand() -> None:
    g = [Gemm(1.0, 1024, 2048, 4096, 1.0)]
    elements = 1024 * 4096 + 1024 * 2048  # one forward input cast, one output-gradient cast
    tensorwise = precision_code("fp8", "tensorwise")
    # Current scaling reads each 16-bit operand twice (amax, then cast): 4 B; Hopper writes a
    # row-wise and a transposed FP8 copy: 2 B.
    assert quantize_bytes(H100, g, tensorwise, 1) == pytest.approx(elements * 6)
    # Blackwell's FP8 GEMMs take any layout: one copy.
    assert quantize_bytes(B200, g, tensorwise, 1) == pytest.approx(elements * 5)
    # Delayed scaling: no amax pass. MXFP8: row- and column-wise copies with 1/32 B of scales.
    assert quantize_bytes(H100, g, precision_code("fp8"), 1) == pytest.approx(elements * 4)
    assert quantize_bytes(B200, g, precision_code("mxfp8"), 1) == pytest.approx(
        elements * (2 + 2 * (1 + 1 / 32))
    )
    # Full recompute casts the input once more; BF16 casts nothing.
    twice = quantize_bytes(H100, g, tensorwise, 2) - quantize_bytes(H100, g, tensorwise, 1)
    assert twice == pytest.approx(1024 * 4096 * 6)
    assert quantize_seconds(H100, g, precision_code("bf16"), 1) == 0


@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (16384, 28672 // 8, 8192)])
def test_fp8_speedup_for_large_gemms_on_h100(shape: tuple[int, int, int]) -> None:
    m, n, k = shape
    flops = 3 * 2 * m * n * k  # fprop + dgrad + wgrad
    bf16 = gemm_seconds(H100, [Gemm(flops, m, n, k, 1.0)], precision_code("bf16"))
    for recipe in FP8_RECIPES:
        code = precision_code("fp8", recipe)
        g = [Gemm(flops, m, n, k, 1.0)]
        fp8 = gemm_seconds(H100, g, code) + quantize_seconds(H100, g, code, 1)
        assert 1.3 <= bf16 / fp8 <= 1.8, (recipe, bf16 / fp8)


def test_memory_low_precision_weight_copies_and_quantized_linear_inputs() -> None:
    bf16 = memory(L8, Layout(seq=4096))
    mx = memory(L8, Layout(seq=4096, dtype="mxfp8"))
    assert mx.weights == pytest.approx(bf16.weights * (2 + 2 * (1 + 1 / 32)) / 2)
    fp8 = memory(L8, Layout(seq=4096, dtype="fp8"))
    # Per token and layer the QKV and fc1 inputs (2h), the out-projection input (q_dim) and
    # the fc2 input (ffn) are kept in 1 B instead of 2.
    saved = 4096 * L8.layers * (2 * L8.hidden + L8.q_dim + L8.ffn)
    assert bf16.activations - fp8.activations == pytest.approx(saved, rel=1e-9)


def test_mfu_is_against_bf16_and_mfu_at_dtype_peak_against_the_format() -> None:
    c = load_cluster("dgx-h100", nodes=1)
    r = estimate(L8, c, Layout(dp=8, mbs=1, gbs=64, seq=4096, dtype="fp8"))
    assert r["mfu"] == pytest.approx(r["tflops_per_gpu"] / 989)
    assert r["mfu_at_dtype_peak"] == pytest.approx(r["tflops_per_gpu"] / 1979)
    flags = ["--nodes", "1", "--gbs", "64", "--dtype", "fp8", "--fp8-recipe", "tensorwise"]
    data = cli_json("estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", *flags)
    assert data["layout"]["fp8_recipe"] == "tensorwise" and "mfu_at_dtype_peak" in data
    text = run_cli("estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1",
                   "--gbs", "64", "--dtype", "fp8").stdout  # fmt: skip
    assert "of the BF16 dense peak" in " ".join(text.split())


def test_fsdp_gathers_parameters_in_fp8_not_in_nvfp4() -> None:
    c = load_cluster("dgx-b200", nodes=2)

    def dp_bytes(dtype: str) -> float:
        lay = Layout(dp=16, mbs=1, gbs=64, seq=4096, zero=3, dtype=dtype)
        return estimate(L8, c, lay)["comm_total_s"]["dp"]

    assert dp_bytes("fp8") < dp_bytes("bf16")
    assert dp_bytes("nvfp4") == pytest.approx(dp_bytes("bf16"))


@settings(max_examples=30, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    recipe=st.sampled_from((None, *FP8_RECIPES)),
    tp=st.sampled_from((1, 2, 8)),
)
def test_low_precision_is_never_slower_per_gemm_than_bf16_on_blackwell(
    dtype: str, recipe: str | None, tp: int
) -> None:
    recipe = recipe if dtype == "fp8" else None
    c = load_cluster("dgx-b200", nodes=1)
    lay = Layout(tp=tp, dp=8 // tp, mbs=1, gbs=32, seq=4096, dtype=dtype, fp8_recipe=recipe)
    low = estimate(L8, c, lay)["compute_parts_s"]
    base = estimate(L8, c, lay.model_copy(update={"dtype": "bf16", "fp8_recipe": None}))
    if dtype == "bf16":
        assert low == base["compute_parts_s"]
        return
    assert low["gemm"] < base["compute_parts_s"]["gemm"] and low["quantize"] > 0


def test_emitters_write_each_format() -> None:
    args = " ".join(megatron_args(L8, Layout(dp=8, seq=4096, dtype="mxfp8")))
    assert "--fp8-format e4m3" in args and "--fp8-recipe mxfp8" in args and "--bf16" in args
    args = " ".join(megatron_args(L8, Layout(dp=8, seq=4096, dtype="nvfp4")))
    assert "--fp4-format e2m1 --fp4-recipe nvfp4" in args
    lay = Layout(dp=8, seq=4096, dtype="fp8", fp8_recipe="tensorwise")
    assert "--fp8-recipe tensorwise" in " ".join(megatron_args(L8, lay))
    mx = torchtitan_args(L8, Layout(dp=8, seq=4096, dtype="mxfp8", zero=3))
    assert "--config llama3_8b_mxfp8" in mx
    with pytest.raises(SpecError, match="torchtitan trains in bf16, fp8, mxfp8"):
        torchtitan_args(L8, Layout(dp=8, seq=4096, dtype="nvfp4", zero=3))


def test_plan_searches_a_pinned_format() -> None:
    data = cli_json("plan", "--model", "llama3-8b", "--cluster", "gb200-nvl72", "--gbs", "288",
                    "--dtype", "mxfp8", "--top", "2", "--json")  # fmt: skip
    assert {p["dtype"] for p in data["plans"]} == {"mxfp8"}
    assert all(p["mfu_at_dtype_peak"] < p["mfu"] for p in data["plans"])


def test_a100_plans_stay_within_what_the_a100_calibration_runs_reach(calibration_dir: Path) -> None:
    """The best A100 run of ../shared/calibration (SC'21, 1008B) keeps 163 of 312 TFLOP/s
    busy (52%, Megatron's hardware-FLOP count); planned with the same kernels (Megatron-LM
    of 2021: no flash attention, unfused softmax), no A100 layout of those models does
    better by more than a few points."""
    runs = yaml.safe_load((calibration_dir / "training_runs.yaml").read_text())["runs"]
    best = max(r["pct_of_peak"] for r in runs if "pct_of_peak" in r) / 100
    assert best == 0.52
    for run in runs[:2]:  # the two SC'21 models whose GPU counts a test can search
        shape = {k: run[k] for k in ("layers", "hidden", "heads")}
        model = ModelSpec.parse({"name": run["id"], **shape, "vocab": 51200, "activation": "gelu"})
        nodes = run["gpus"] // 8
        cluster = load_cluster("dgx-a100", nodes=nodes if nodes < 20 else -(-nodes // 20) * 20)
        flags = Flags(attention_backend="unfused")
        plan = search(model, cluster, run["gbs"], 2048, top=1, flags=flags, framework="megatron")
        assert plan.plans[0]["hw_tflops_per_gpu"] / 312 <= best + 0.03


def test_flash_attention_efficiency_per_generation() -> None:
    # Ampere: FlashAttention-2's published share of A100's peak, not the Hopper/Blackwell fit,
    # in flash-attention's own FLOP count (backward 2.5x the forward), the model's counts 2x.
    assert attention_tflops(A100) == pytest.approx(312 * 0.6 * 3 / 3.5)
    assert attention_tflops(H100) == pytest.approx(989 * 0.75 * ATTENTION_RELATIVE_EFFICIENCY)


def test_a100_flash_attention_time_is_flash_attentions_own_count_at_its_published_share() -> None:
    """llama3-8b, one sequence of 4096 per GPU: 32 layers of causal flash attention, forward
    4 s^2 h / 2 FLOPs and backward 2.5x that (flash-attention's benchmark count, scores
    recomputed), at FlashAttention-2's 0.6 of A100's 312 TFLOP/s."""
    a100 = load_cluster("dgx-a100", nodes=1)
    parts = estimate(L8, a100, Layout(dp=8, mbs=1, gbs=8, seq=4096))["compute_parts_s"]
    forward = 4 * 4096**2 * 4096 / 2
    assert parts["attention"] == pytest.approx(32 * 3.5 * forward / (0.6 * 312e12))


def test_a100_dense_bf16_mfu_stays_within_what_the_calibration_runs_reach(
    calibration_dir: Path,
) -> None:
    """Issue 21's sanity test, on what the A100 calibration runs measured: llama3-8b planned
    on dgx-a100 (one node and all 160 GPUs) with the kernels those runs used (Megatron-LM of
    2021: unfused softmax, full recompute) keeps no more of the BF16 peak, in hardware FLOPs
    as SC'21 counts, than the best of them (52%, the 1008B run). FlashAttention-2 and running
    without recompute, which no A100 calibration run measured, are what take the default plan
    above it (bounded by published A100 runs in the next test)."""
    runs = yaml.safe_load((calibration_dir / "training_runs.yaml").read_text())["runs"]
    best = max(r["pct_of_peak"] for r in runs if "pct_of_peak" in r) / 100
    worst = min(r["pct_of_peak"] for r in runs if "pct_of_peak" in r) / 100
    model = load_model("llama3-8b")
    for nodes in (1, 20):
        cluster = load_cluster("dgx-a100", nodes=nodes)
        flags = Flags(attention_backend="unfused", framework="megatron")
        plan = search(model, cluster, cluster.world, 4096, top=1, flags=flags,
                      fix={"recompute": "full"}, framework="megatron").plans[0]  # fmt: skip
        assert worst - 0.03 <= plan["hw_tflops_per_gpu"] / 312 <= best + 0.03


# Best published A100 MFU with FlashAttention-class kernels: MPT-7B, 8 x A100 80GB, seq 2048,
# no activation checkpointing, 64.23% (mosaicml/llm-foundry, scripts/train/benchmarking/
# README.md, A100 80GB table). Not a calibration run: a bound, nothing is fitted on it.
PUBLISHED_A100_MFU = 0.6423


def test_a100_dense_bf16_mfu_stays_within_what_published_a100_runs_reach() -> None:
    """The planner's llama3-8b plans on dgx-a100, one node and all 160 GPUs, keep no more of
    the BF16 peak than published A100 training with modern kernels (+3 points, the issue's
    tolerance); the issue's 70% would fail."""
    for nodes in ("1", "20"):
        plan = cli_json("plan", "--model", "llama3-8b", "--cluster", "dgx-a100", "--nodes", nodes,
                        "--top", "1", "--json")  # fmt: skip
        assert 0.5 < plan["plans"][0]["mfu"] <= PUBLISHED_A100_MFU + 0.03


def test_fp8_dot_product_attention_runs_the_attention_core_at_the_fp8_rate() -> None:
    c = load_cluster("dgx-b200", nodes=1)
    lay = Layout(dp=8, mbs=1, gbs=64, seq=8192, dtype="fp8")
    bf16 = estimate(L8, c, lay)["compute_parts_s"]["attention"]
    fp8 = estimate(L8, c, lay, Flags(fp8_dot_product_attention=True))["compute_parts_s"]
    ratio = 4500 / 2250 * FORMAT_EFFICIENCY["fp8-tensorwise"]  # FP8 peak x FP8 efficiency
    assert bf16 / fp8["attention"] == pytest.approx(ratio)
    a100 = load_cluster("dgx-a100", nodes=1)  # no FP8 tensor cores: stays BF16
    plain = estimate(L8, a100, lay.model_copy(update={"dtype": "bf16"}))
    flagged = estimate(L8, a100, lay.model_copy(update={"dtype": "bf16"}),
                       Flags(fp8_dot_product_attention=True))  # fmt: skip
    assert flagged["compute_parts_s"] == plain["compute_parts_s"]


def test_fp8_param_gather_is_megatrons_flag() -> None:
    c = load_cluster("dgx-h100", nodes=2)
    lay = Layout(dp=16, mbs=1, gbs=64, seq=4096, distributed_optimizer=True, dtype="fp8")
    fp8 = estimate(L8, c, lay)["comm_total_s"]["dp"]
    bf16_gather = estimate(L8, c, lay, Flags(fp8_param_gather=False))["comm_total_s"]["dp"]
    assert fp8 < bf16_gather
    assert "--fp8-param-gather" in megatron_args(L8, lay)
    assert "--fp8-param-gather" not in megatron_args(L8, lay, Flags(fp8_param_gather=False))
    assert "--fp8-param-gather" not in megatron_args(L8, lay.model_copy(update={"dtype": "bf16"}))


def test_catalog_cli_lists_peaks_per_format() -> None:
    gpus = {g["key"]: g for g in cli_json("catalog", "gpus")["gpus"]}
    assert (
        gpus["gb300"]["peak_nvfp4_tflops"] == 15000 and gpus["gb300"]["arch"] == "blackwell-ultra"
    )
    assert gpus["h100-sxm"]["peak_mxfp8_tflops"] is None
    assert "peak_nvfp4_tflops" in run_cli("catalog", "gpus").stdout
