"""Megatron's selective-recompute modules, CPU activation offloading and FP8 primary weights:
memory and time against hand-computed values, the checks Megatron-core makes, the emitters,
and the calibration runs that use them (golden: every published run fits)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import assert_user_error, cli_json, run_cli
from tests.test_emit import framework_names
from tierwise.errors import SpecError
from tierwise.hardware import catalog
from tierwise.hardware.cluster import load_cluster
from tierwise.perf.estimate import estimate
from tierwise.perf.flags import Flags
from tierwise.perf.terms.dp import FORWARD_SHARE
from tierwise.perf.terms.offload import HOST_COPY_EFFICIENCY, host_GBps, offload
from tierwise.plan.emit.deepspeed import deepspeed_config
from tierwise.plan.emit.megatron import megatron_args
from tierwise.plan.emit.torchtitan import torchtitan_args
from tierwise.plan.search import search
from tierwise.workload.flops import (
    RECOMPUTE_FULL,
    RECOMPUTE_NONE,
    RECOMPUTE_SELECTIVE,
    flops_batch,
    training_flops,
)
from tierwise.workload.layout import Layout, partial_recompute_fields
from tierwise.workload.load import load_model
from tierwise.workload.memory import activation_bytes_per_token, memory
from tierwise.workload.recompute import DEFAULT_MASK, OP_SAC_MASK, modules_mask

GPT_OSS = load_model("gpt-oss-120b")  # hidden 2880, top 4 of 128 experts, expert ffn 2880
L8 = load_model("llama3-8b")  # hidden 4096, ffn 14336, SwiGLU
L70 = load_model("llama3-70b")


def kept(model, mask: int, moe_layer: bool = False, linear_bytes: float = 2) -> float:
    """Bytes one layer keeps per token (tp 1) with `mask`'s modules recomputed."""
    return activation_bytes_per_token(
        model, 4096, moe_layer=moe_layer, linear_bytes=linear_bytes, discard=mask
    )[0]


def test_layernorm_and_moe_act_free_the_norm_outputs_and_the_expert_fc2_inputs() -> None:
    h, top_k, ffn = 2880, 4, 2880
    base = kept(GPT_OSS, 0, moe_layer=True)
    norms = kept(GPT_OSS, modules_mask(["layernorm"]), moe_layer=True)
    act = kept(GPT_OSS, modules_mask(["moe_act"]), moe_layer=True)
    both = kept(GPT_OSS, modules_mask(["layernorm", "moe_act"]), moe_layer=True)
    # Transformer Engine fuses the input norm into QKV: only the pre-MLP norm is a module.
    assert base - norms == pytest.approx(h * 2)  # the MoE MLP's input, 16-bit
    assert base - act == pytest.approx(top_k * ffn * 2)  # the SwiGLU outputs, 16-bit
    assert base - both == pytest.approx(h * 2 + top_k * ffn * 2)
    dense = load_model("llama3-8b")  # both norms fused: nothing to recompute, nothing freed
    assert kept(dense, modules_mask(["layernorm"]), moe_layer=False) == kept(dense, 0, False)
    # In FP8 the GEMMs keep the original inputs instead of a quantized copy: the same tensors go.
    fp8 = kept(GPT_OSS, 0, True, 1.0) - kept(GPT_OSS, modules_mask(["moe_act"]), True, 1.0)
    assert fp8 == pytest.approx(top_k * ffn * 1.0)


def test_mla_layers_recompute_their_input_norm_too() -> None:
    # MLA's input norm is a module of its own (no Transformer Engine linear to fuse into):
    # DeepSeek-V3's MoE layers free two 16-bit norm outputs (MLA's and the pre-MLP norm's),
    # its dense layers one (MLA's; the dense MLP's norm is fused into fc1).
    ds3 = load_model("tests/data/hf/deepseek-v3.json")
    h, norms = 7168, modules_mask(["layernorm"])
    moe, dense = kept(ds3, 0, moe_layer=True), kept(ds3, 0, moe_layer=False)
    assert moe - kept(ds3, norms, moe_layer=True) == pytest.approx(2 * h * 2)
    assert dense - kept(ds3, norms, moe_layer=False) == pytest.approx(h * 2)


def test_mlp_module_frees_the_dense_mlp_and_reruns_its_gemms() -> None:
    ffn, h = 14336, 4096
    assert kept(L8, 0) - kept(L8, modules_mask(["mlp"])) == pytest.approx(6 * ffn)
    mask = modules_mask(["mlp"])
    extra = training_flops(
        L8, 4096, 1, recompute=RECOMPUTE_SELECTIVE, recompute_modules=mask
    ) - training_flops(L8, 4096, 1, recompute=RECOMPUTE_NONE)
    assert extra == pytest.approx(32 * 2 * 4096 * 3 * h * ffn)  # 3 matmuls, forward, 32 layers


def test_core_attn_is_megatrons_default_and_frees_the_unfused_scores_only() -> None:
    assert modules_mask(["core_attn"]) == DEFAULT_MASK
    lay = Layout(seq=4096, dp=8, recompute="selective")
    named = lay.model_copy(update={"recompute_modules": ("core_attn",)})
    assert memory(L8, lay).activations == memory(L8, named).activations
    keeps_scores = lay.model_copy(update={"recompute_modules": ("mlp",)})
    unfused = {"flash_attention": False}
    assert memory(L8, keeps_scores, **unfused).activations > memory(L8, lay, **unfused).activations


def test_moe_module_reruns_dispatch_and_combine() -> None:
    c = load_cluster("dgx-h100", nodes=8)
    lay = Layout(seq=4096, gbs=64, ep=8, dp=64, recompute="selective")
    whole = lay.model_copy(update={"recompute_modules": ("moe",)})
    base, again = estimate(GPT_OSS, c, lay), estimate(GPT_OSS, c, whole)
    assert again["comm_total_s"]["ep"] / base["comm_total_s"]["ep"] == pytest.approx(3 / 2)
    assert again["memory_gib_per_gpu"] < base["memory_gib_per_gpu"]


def test_offloaded_layers_leave_the_gpu_and_their_copies_hide_behind_compute() -> None:
    lay = Layout(seq=8192, mbs=2, gbs=256, dp=64, zero=3, dtype="fp8", fp8_recipe="tensorwise")
    off = lay.model_copy(update={"activation_offload_layers": 40})
    resident, all_layers = memory(L70, off), memory(L70, lay)
    assert resident.activations == pytest.approx(all_layers.activations / 2)
    assert resident.host_offload == pytest.approx(all_layers.activations / 2)  # one in flight
    gb200 = load_cluster("gb200-nvl72", nodes=16, nics_per_node=4)
    result = estimate(L70, gb200, off)
    assert result["breakdown"]["offload_s"] == 0.0  # NVLink-C2C keeps up
    assert host_GBps(gb200.gpu) == pytest.approx(450 * HOST_COPY_EFFICIENCY)


def test_offload_over_pcie_stalls_by_what_each_pass_cannot_hide() -> None:
    h100 = load_cluster("dgx-h100", nodes=1).gpu
    rate = host_GBps(h100) * 1e9
    assert rate == pytest.approx(64e9 * catalog.link("pcie5").efficiency)
    # 12 s of compute: 4 s forward, 8 s backward.
    assert offload(h100, 1 * rate, 12.0).exposed_s == pytest.approx(0.0)
    term = offload(h100, 10 * rate, 12.0)  # 10 s each way: 6 + 2 s stalled
    assert term.exposed_s == pytest.approx(10 - 12 * FORWARD_SHARE + 10 - 12 * (1 - FORWARD_SHARE))
    assert term.total_s == pytest.approx(20.0)
    assert term.bytes == pytest.approx(20 * rate)


def test_fp8_primary_weights_drop_the_bf16_copy_with_a_sharded_optimizer() -> None:
    lay = Layout(seq=4096, dp=8, distributed_optimizer=True, dtype="fp8", fp8_recipe="tensorwise")
    held = memory(L8, lay, low_precision_params=True).weights
    both = memory(L8, lay).weights
    assert both - held == pytest.approx(
        memory(L8, lay.model_copy(update={"dtype": "bf16", "fp8_recipe": None})).weights
    )
    unsharded = lay.model_copy(update={"distributed_optimizer": False})
    assert memory(L8, unsharded, low_precision_params=True).weights == memory(L8, unsharded).weights


@pytest.mark.parametrize(
    ("update", "needle"),
    [
        ({"recompute_modules": ("mlp",)}, "needs recompute selective"),
        ({"recompute": "selective", "recompute_modules": ("moe_act",)}, "needs a MoE model"),
        ({"recompute": "selective", "recompute_modules": ("mla_up_proj",)}, "needs MLA"),
        (
            {"recompute": "selective", "recompute_modules": ("layernorm",), "dtype": "fp8"},
            "tensorwise or blockwise",
        ),
        ({"activation_offload_layers": 32}, "below layers"),
        ({"activation_offload_layers": 4, "pp": 2, "dp": 4}, "needs pp 1"),
        ({"activation_offload_layers": 4, "recompute": "full"}, "needs recompute none"),
    ],
)
def test_megatron_core_checks(update: dict, needle: str) -> None:
    with pytest.raises(SpecError, match=needle):
        Layout(**{"seq": 4096, "dp": 8, **update}).validate_for(L8)


def test_emitters_name_the_modules_and_the_offload_or_refuse_them() -> None:
    lay = Layout(
        seq=4096, ep=8, dp=8, recompute="selective", recompute_modules=("layernorm", "moe_act")
    )
    assert "--recompute-modules layernorm moe_act" in megatron_args(GPT_OSS, lay)
    off = Layout(seq=4096, dp=8, distributed_optimizer=True, activation_offload_layers=8)
    emitted = megatron_args(L8, off) + megatron_args(GPT_OSS, lay)
    assert "--cpu-offloading-num-layers 8" in emitted
    assert {arg.split(" ")[0] for arg in emitted} <= framework_names("megatron_arguments.txt")
    with pytest.raises(SpecError, match="torchtitan has no Megatron recompute modules"):
        torchtitan_args(L8, lay.model_copy(update={"ep": 1}))
    with pytest.raises(SpecError, match="DeepSpeed has no CPU offloading"):
        deepspeed_config(off.model_copy(update={"distributed_optimizer": False, "zero": 1}))


def test_estimate_cli_takes_the_megatron_flags() -> None:
    base = ["estimate", "--model", "gpt-oss-120b", "--cluster", "dgx-b200", "--nodes", "8",
            "--ep", "8", "--mbs", "4", "--gbs", "1024", "--recompute", "selective"]  # fmt: skip
    plain = cli_json(*base, "--json")
    modules = cli_json(*base, "--recompute-modules", "layernorm,moe_act", "--json")
    assert modules["memory_gib_per_gpu"] < plain["memory_gib_per_gpu"]
    assert modules["step_time_s"] > plain["step_time_s"] * 0.99
    proc = run_cli(*base, "--recompute-modules", "attention", check=False)
    assert_user_error(proc, "--recompute-modules", "attention")
    off = cli_json("estimate", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1",
                   "--cpu-offloading-num-layers", "16", "--json")  # fmt: skip
    assert off["memory"]["host_offload_gib"] > 0
    assert "offload_s" in off["breakdown"]


def test_every_modern_calibration_run_fits(calibration_dir: Path) -> None:
    """Golden: each run of training_runs_modern.yaml trained as stated, so the memory model
    must fit it in its GPU's HBM (CPU offloading, recompute modules and FP8 primary weights
    as the runs' recipes set them)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import modern_runs

    for run in modern_runs.load_runs():
        model = modern_runs.model_of(run)
        cluster = modern_runs.cluster_of(run)
        result = estimate(
            model, cluster, modern_runs.layout_of(run, model), modern_runs.flags_of(run)
        )
        assert result["fits"], (run["id"], result["memory_gib_per_gpu"], cluster.gpu.hbm_gib)


def test_torchtitan_selective_is_op_level_sac() -> None:
    """torchtitan's selective AC ("op") re-runs every second matmul and every other op, not
    the attention kernel: half the layers' weight-GEMM forward FLOPs more than none."""
    none = flops_batch(L8, seq=4096, mbs=1, recompute=RECOMPUTE_NONE, stage_layers=32)
    sac = flops_batch(L8, seq=4096, mbs=1, recompute=RECOMPUTE_SELECTIVE,
                      recompute_modules=OP_SAC_MASK, stage_layers=32)  # fmt: skip
    assert sac.hardware - none.hardware == pytest.approx(32 * 0.5 * none.dense_layer.gemm)
    assert sac.attention == none.attention
    assert sac.elementwise_bytes - none.elementwise_bytes == pytest.approx(
        32 * none.dense_layer.elementwise_bytes
    )
    c = load_cluster("dgx-a100", nodes=8)
    lay = Layout(seq=8192, gbs=64, dp=64, zero=3, recompute="selective")
    titan = estimate(L8, c, lay, Flags(framework="torchtitan"))
    megatron_like = estimate(L8, c, lay)  # Megatron's default selective: core_attn
    assert titan["hw_tflops_per_gpu"] / titan["tflops_per_gpu"] > 1.1
    assert titan["memory"]["activations_gib"] < megatron_like["memory"]["activations_gib"]


def test_megatron_plans_search_the_light_recompute_modules() -> None:
    """Megatron's space holds selective recompute of the norms and the experts' activation (MLA:
    its up-projections too) beside the default; never with delayed FP8 scaling."""
    cluster = load_cluster("dgx-b200", nodes=8)
    fix = {"dtype": "bf16", "recompute": "selective", "pp": "1", "mbs": "4"}
    plans = search(GPT_OSS, cluster, 1024, 4096, top=10, fix=fix, framework="megatron").plans
    by_modules = {p["layout"]["recompute_modules"]: p for p in plans}
    light = by_modules[("layernorm", "moe_act")]
    assert light["memory_gib_per_gpu"] < by_modules[None]["memory_gib_per_gpu"]
    assert "--recompute-modules layernorm moe_act" in megatron_args(
        GPT_OSS, Layout(**light["layout"])
    )
    delayed = {**fix, "dtype": "fp8"}
    plans = search(GPT_OSS, load_cluster("dgx-h100", nodes=8), 1024, 4096, top=10, fix=delayed,
                   framework="megatron").plans  # fmt: skip
    assert all(p["layout"]["recompute_modules"] is None for p in plans)
    titan = search(L8, load_cluster("dgx-h100", nodes=1), 8, 4096, top=20,
                   fix={"recompute": "selective"}, framework="torchtitan").plans  # fmt: skip
    assert all(p["layout"]["recompute_modules"] is None for p in titan)


def test_module_lists_are_canonical_and_host_links_are_not_gpu_links() -> None:
    given = Layout.parse({"seq": 4096, "recompute": "selective",
                          "recompute_modules": ["moe_act", "layernorm", "moe_act"]})  # fmt: skip
    assert given.recompute_modules == ("layernorm", "moe_act")  # Megatron's order, no repeats
    default = Layout.parse(
        {"seq": 4096, "recompute": "selective", "recompute_modules": ["core_attn"]}
    )
    assert default.recompute_modules is None  # Megatron's default: runs in every framework
    with pytest.raises(SpecError, match="intra"):
        load_cluster("dgx-h100", nodes=1, intra="c2c")  # NVLink-C2C reaches host memory only


def test_recomputed_tp_mlp_repeats_its_collective() -> None:
    """With TP, re-running the dense MLP repeats its all-gather / reduce-scatter: one of the
    layer's two collectives per pass, so TP traffic is (2 + 1/2) / 2 of the default's."""
    c = load_cluster("dgx-h100", nodes=1)
    lay = Layout(seq=4096, gbs=8, tp=4, dp=2, recompute="selective")
    mlp = lay.model_copy(update={"recompute_modules": ("mlp",)})
    base, again = estimate(L8, c, lay), estimate(L8, c, mlp)
    # Of the layers' 2 passes x 2 collective pairs, one pair more; the sequence-parallel
    # backward re-gathers (one all-gather per column-parallel linear) and the embedding's
    # and output layer's collectives stay as they were, so TP time grows by a bit less.
    ratio = again["comm_total_s"]["tp"] / base["comm_total_s"]["tp"]
    assert 1.15 < ratio < 1.25


def test_block_recompute_reruns_and_frees_only_its_layers() -> None:
    # Megatron's --recompute-method block --recompute-num-layers 5 on llama3-70b (80 layers)
    # at pp 4: the first 5 of each stage's 20 layers keep only their input and run their
    # forward again; the other 15 keep everything, as recompute none does.
    base = Layout(tp=8, pp=4, dp=4, gbs=64, seq=8192)
    none, full = base, base.model_copy(update={"recompute": "full"})
    block = full.model_copy(update={"recompute_method": "block", "recompute_num_layers": 5})
    fields = partial_recompute_fields(block, L70)
    assert fields == {"recompute_share": 0.25, "recompute_group": 1}
    acts = {k: memory(L70, lay).activations for k, lay in (("none", none), ("full", full))}
    assert memory(L70, block).activations == pytest.approx(
        0.25 * acts["full"] + 0.75 * acts["none"],
        rel=0.02,  # the working layer aside
    )
    hw = {
        k: flops_batch(L70, seq=8192, mbs=1, tp=8, pp=4, recompute=code, **extra).hardware
        for k, code, extra in (
            ("none", RECOMPUTE_NONE, {}),
            ("full", RECOMPUTE_FULL, {}),
            ("block", RECOMPUTE_FULL, {"recompute_share": 0.25}),
        )
    }
    assert hw["block"] - hw["none"] == pytest.approx(0.25 * (hw["full"] - hw["none"]))
    cluster = load_cluster("dgx-h100", nodes=16)
    step = {k: estimate(L70, cluster, lay)["step_time_s"] for k, lay in
            (("none", none), ("full", full), ("block", block))}  # fmt: skip
    assert step["none"] < step["block"] < step["full"]
    # Every layer of a 20-layer stage: full recompute, layer by layer.
    whole = full.model_copy(update={"recompute_method": "block", "recompute_num_layers": 20})
    assert estimate(L70, cluster, whole)["step_time_s"] == pytest.approx(step["full"])


def test_uniform_groups_keep_one_input_per_group_and_rerun_everything() -> None:
    full = Layout(tp=8, pp=4, dp=4, gbs=64, seq=8192, recompute="full")
    grouped = full.model_copy(update={"recompute_num_layers": 4})
    assert partial_recompute_fields(grouped, L70) == {"recompute_share": 1.0, "recompute_group": 4}
    assert partial_recompute_fields(full, L70) == {}  # uniform 1: layer by layer
    cluster = load_cluster("dgx-h100", nodes=16)
    assert estimate(L70, cluster, grouped)["step_time_s"] == pytest.approx(
        estimate(L70, cluster, full)["step_time_s"], rel=1e-3
    )
    inputs = memory(L70, full).activations
    assert memory(L70, grouped).activations != pytest.approx(inputs)


def test_uniform_groups_must_divide_each_virtual_stage() -> None:
    # megatron-core 0.16.1 transformer_block.py _checkpointed_forward, uniform: groups
    # custom(i, i + N) from each virtual stage's first layer; N = 3 over a 20-layer stage
    # reaches self.layers[20] (IndexError), as does N = 25; block stops at the last layer.
    # Its MTP modules assert recompute_num_layers == 1 (multi_token_prediction.py).
    full = Layout(tp=8, pp=4, dp=4, gbs=64, seq=8192, recompute="full")
    for n in (2, 4, 5, 10, 20):
        full.model_copy(update={"recompute_num_layers": n}).validate_for(L70, 128)
    for n in (3, 25):
        with pytest.raises(SpecError, match=rf"recompute_num_layers {n} \(uniform\) must divide"):
            full.model_copy(update={"recompute_num_layers": n}).validate_for(L70, 128)
    interleaved = full.model_copy(update={"vpp": 2, "recompute_num_layers": 4})  # 10 a stage
    with pytest.raises(SpecError, match=r"must divide the layers of each virtual stage \(10\)"):
        interleaved.validate_for(L70, 128)
    block = full.model_copy(update={"recompute_method": "block", "recompute_num_layers": 25})
    block.validate_for(L70, 128)
    v3 = load_model("deepseek-v3")
    with pytest.raises(SpecError, match="MTP modules: Megatron needs 1"):
        Layout(pp=1, seq=4096, recompute="full", recompute_num_layers=61).validate_for(v3, 1)


def test_partial_recompute_is_megatrons_and_needs_full_recompute() -> None:
    lay = Layout(tp=8, pp=4, dp=4, gbs=64, seq=8192, recompute="full", recompute_method="block",
                 recompute_num_layers=5)  # fmt: skip
    args = megatron_args(L70, lay)
    assert "--recompute-method block" in args and "--recompute-num-layers 5" in args
    with pytest.raises(SpecError, match="recomputes every layer or none"):
        torchtitan_args(L70, lay, Flags(framework="torchtitan"))
    with pytest.raises(SpecError, match="need recompute full, not selective"):
        Layout(seq=4096, recompute="selective", recompute_num_layers=2).validate_for(L8, 1)
    base = ["estimate", "-m", "llama3-70b", "--nodes", "16", "--tp", "8", "--pp", "4"]
    out = cli_json(*base, "--recompute", "full", "--recompute-method", "block",
                   "--recompute-num-layers", "5")  # fmt: skip
    assert out["layout"]["recompute_method"] == "block"
    assert out["layout"]["recompute_num_layers"] == 5


def test_plan_searches_block_recompute_where_only_part_of_a_stage_must_be_recomputed() -> None:
    # Llama 3 405B at Meta's 8,192-GPU degrees (tp 8, pp 16, dp 64, 32 micro-batches): 1F1B
    # fits without recompute but idles; interleaved it fits only if some layers recompute.
    # Recomputing one layer of each 2-layer virtual stage beats both.
    model, cluster = load_model("llama3-405b"), load_cluster("dgx-h100", nodes=1024)
    fix = {"tp": "8", "cp": "1", "pp": "16", "dp": "64", "dtype": "bf16"}
    plans = search(model, cluster, 2048, 8192, top=3, fix=fix).plans
    best = Layout(**plans[0]["layout"])
    assert (best.recompute, best.recompute_method, best.recompute_num_layers) == (
        "full",
        "block",
        1,
    )
    assert best.vpp == 4 and plans[0]["fits"]
    every = best.model_copy(update={"recompute_method": None, "recompute_num_layers": None})
    none = best.model_copy(update={"recompute_method": None, "recompute_num_layers": None,
                                   "recompute": "none"})  # fmt: skip
    full_s = estimate(model, cluster, every)["step_time_s"]
    assert plans[0]["step_time_s"] < full_s and not estimate(model, cluster, none)["fits"]
    assert "--recompute-method block" in megatron_args(model, best)
    # A framework that recomputes every layer or none is not offered a block.
    titan = search(model, cluster, 2048, 8192, top=3, fix=fix, framework="torchtitan").plans
    assert all(p["layout"]["recompute_method"] is None for p in titan)


def test_fix_recompute_method_pins_every_layer_or_the_block() -> None:
    model, cluster = load_model("llama3-405b"), load_cluster("dgx-h100", nodes=1024)
    fix = {"tp": "8", "cp": "1", "pp": "16", "dp": "64", "dtype": "bf16"}
    every = {**fix, "recompute": "full", "recompute_method": "uniform"}
    uniform = search(model, cluster, 2048, 8192, top=5, fix=every).plans
    assert {(p["layout"]["recompute"], p["layout"]["recompute_method"]) for p in uniform} == {
        ("full", None)
    }
    block = search(model, cluster, 2048, 8192, top=5,
                   fix={**fix, "recompute_method": "block"}).plans  # fmt: skip
    assert {p["layout"]["recompute_method"] for p in block} == {"block"}
    with pytest.raises(SpecError, match="recompute_method=block needs recompute full, not none"):
        search(model, cluster, 2048, 8192, fix={**fix, "recompute": "none",
                                                "recompute_method": "block"})  # fmt: skip
    with pytest.raises(SpecError, match="torchtitan recomputes every layer or none"):
        search(model, cluster, 2048, 8192, framework="torchtitan",
               fix={**fix, "recompute_method": "block"})  # fmt: skip
