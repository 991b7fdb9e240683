"""Step-time model: physics sanity, breakdown consistency, batch = scalar, bad layouts."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.hardware.cluster import load_cluster
from tierwise.hardware.fleet import FleetSpec
from tierwise.perf.efficiency import GEMM_RIDGE_MULTIPLE, Gemm, gemm_intensity, gemm_seconds
from tierwise.perf.estimate import estimate, estimate_batch
from tierwise.perf.step import Flags
from tierwise.workload.layout import Layout, layouts_to_arrays
from tierwise.workload.load import load_model

L70 = load_model("llama3-70b")
PER_STEP_TERMS = {
    "pipeline_bubble_s",
    "dp_comm_s",
    "optimizer_s",
    "overlap_interference_s",
    "straggler_s",
}


def est(cluster: str = "dgx-h100", nodes: int = 8, flags: Flags = Flags(), **layout: object):
    c = load_cluster(cluster, nodes=nodes)
    lay = Layout(**{"seq": 4096, "gbs": 256, "distributed_optimizer": True, **layout})
    return estimate(L70, c, lay, flags)


def test_gemm_time_by_arithmetic_intensity() -> None:
    a100 = load_cluster("dgx-a100", nodes=1).gpu
    flops = 2 * 4096**3
    # I = 4096/3 FLOP/byte; ridge = 312 TFLOP/s / 2.039 TB/s = 153.0 FLOP/byte; half-efficiency
    # intensity = GEMM_RIDGE_MULTIPLE x ridge (x 2/2: 16-bit operands);
    # 2*4096^3 * (1 + 0.9109 * 153.0/1365.3) / (312e12 * 0.85 cuBLAS peak fraction) = 571.2 us.
    assert GEMM_RIDGE_MULTIPLE == 0.9109
    assert gemm_intensity(4096, 4096, 4096) == pytest.approx(1365.33, abs=0.01)
    assert gemm_seconds(a100, [Gemm(flops, 4096, 4096, 4096)]) == pytest.approx(571.15e-6, rel=1e-4)
    # A skinny GEMM (a TP=8 rank's 768 columns) loses more on H100, whose ridge is ~295.
    h100 = load_cluster("dgx-h100", nodes=1).gpu
    shapes = [Gemm(flops, 4096, 4096, 4096)], [Gemm(flops, 8192, 768, 12288)]
    slowdown = {
        gpu.key: gemm_seconds(gpu, shapes[1]) / gemm_seconds(gpu, shapes[0]) for gpu in (a100, h100)
    }
    assert 1 < slowdown["a100-sxm-80gb"] < slowdown["h100-sxm"]


def test_breakdown_sums_to_step_time() -> None:
    r = est(tp=8, pp=2, dp=4)
    assert sum(r["breakdown"].values()) == pytest.approx(r["step_time_s"])
    assert r["tokens_per_s"] == pytest.approx(256 * 4096 / r["step_time_s"])
    assert r["mfu"] == pytest.approx(r["tflops_per_gpu"] / 989)
    assert r["comm_tiers"]["tp"] == "intra" and r["comm_tiers"]["dp"] == "leaf"
    assert set(r["bytes_per_tier"]) == {"intra", "leaf"}


def test_tp_across_nodes_is_much_slower() -> None:
    inside = est(nodes=4, tp=8, dp=4, recompute="full")
    across = est(nodes=4, tp=16, dp=2, recompute="full")
    assert across["comm_tiers"]["tp"] == "leaf"
    assert across["step_time_s"] > 1.4 * inside["step_time_s"]


def test_pcie_only_nodes_lose_a_large_share_for_tp8() -> None:
    nvlink = est(tp=8, pp=2, dp=4)
    c = load_cluster("dgx-h100", nodes=8, intra="pcie5", nics_per_node=2)
    pcie = estimate(L70, c, Layout(tp=8, pp=2, dp=4, seq=4096, gbs=256, distributed_optimizer=True))
    assert pcie["tokens_per_s"] < 0.6 * nvlink["tokens_per_s"]


def test_bubble_shrinks_as_pp_minus_one_over_vpp_m() -> None:
    # The last rank also runs the logits, so the stages are not quite equal: the bubble is
    # the other ranks' time once, (pp-1)/(vpp*m) of the step's micro-batches within a few %.
    scaled = []
    for gbs, vpp in ((32, 1), (128, 1), (32, 5), (128, 5)):
        r = est(tp=8, pp=4, vpp=vpp, dp=2, gbs=gbs)
        m = gbs // 2
        b = r["breakdown"]
        per_mb_total = sum(v for k, v in b.items() if k not in PER_STEP_TERMS)
        relative = b["pipeline_bubble_s"] / per_mb_total
        assert relative == pytest.approx(3 / (vpp * m), rel=0.05)
        assert r["pipeline"]["schedule"] == ("Interleaved1F1B" if vpp > 1 else "1F1B")
        scaled.append(relative * m)
    assert scaled[0] == pytest.approx(scaled[1], rel=1e-9)  # exactly 1/m at a fixed layout
    assert scaled[2] == pytest.approx(scaled[3], rel=1e-9)


def test_full_recompute_adds_a_third_of_hardware_flops_and_saves_memory() -> None:
    none = est(tp=8, pp=2, dp=4, recompute="none")
    full = est(tp=8, pp=2, dp=4, recompute="full")
    assert full["hw_tflops_per_gpu"] / full["tflops_per_gpu"] == pytest.approx(4 / 3, rel=0.03)
    assert none["hw_tflops_per_gpu"] == pytest.approx(none["tflops_per_gpu"])
    assert full["memory_gib_per_gpu"] < none["memory_gib_per_gpu"] - 5
    assert full["step_time_s"] > none["step_time_s"]


def test_dp_comm_hidden_until_bandwidth_runs_out() -> None:
    fast = est(tp=8, dp=8, gbs=64, mbs=1, grad_reduce_bf16=True)
    slow = estimate(
        L70,
        load_cluster("dgx-h100", nodes=8, nic="eth100", nics_per_node=1),
        Layout(tp=8, dp=8, gbs=64, seq=4096, distributed_optimizer=True),
    )
    assert fast["breakdown"]["dp_comm_s"] < 0.1 * fast["step_time_s"]
    assert slow["breakdown"]["dp_comm_s"] > 10 * max(fast["breakdown"]["dp_comm_s"], 1e-3)
    assert fast["nic_GBps_needed_per_gpu"] > 0


def test_tp_comm_overlap_hides_tp_traffic() -> None:
    plain = est(tp=8, pp=2, dp=4, flags=Flags(async_tensor_model_parallel_allreduce=False))
    overlap = est(tp=8, pp=2, dp=4, flags=Flags(tp_comm_overlap=True))
    # The layers' collectives keep 30%; the embedding's and the output layer's forward ones
    # stay whole (a few percent of the TP time on this 32-layer model), its backward ones hide
    # behind the logits GEMMs (async, no flag: `plain` turns that off).
    layers = plain["breakdown"]["tp_comm_s"]
    assert 0.3 * layers < overlap["breakdown"]["tp_comm_s"] < 0.33 * layers
    assert overlap["comm_total_s"]["tp"] == pytest.approx(plain["comm_total_s"]["tp"])


def test_every_overlap_flag_off_leaves_dp_and_tp_whole() -> None:
    # A Megatron-LM run of before September 2021 (no async column-parallel backward either):
    # DP and TP communication whole in the breakdown (exposed = total), and the JSON says
    # what was assumed. One of 2021-09 to 2023-08 has no overlap flag, yet its column-parallel
    # linears hide their backward reduce-scatters and re-gathers behind their GEMMs.
    from tierwise.perf.flags import ASYNC_TP_FLAG, MEGATRON_2023_NO_OVERLAP, OVERLAP_FLAGS

    sync = {"async_tensor_model_parallel_allreduce": False}
    v2_6 = Flags(framework="megatron", **MEGATRON_2023_NO_OVERLAP, **sync)
    of_2022 = Flags(framework="megatron", **MEGATRON_2023_NO_OVERLAP)
    for kw in ({}, {"distributed_optimizer": False}):
        r = est(tp=8, pp=2, dp=4, vpp=2, flags=v2_6, **kw)
        assert r["breakdown"]["tp_comm_s"] == pytest.approx(r["comm_total_s"]["tp"])
        assert r["breakdown"]["dp_comm_s"] == pytest.approx(r["comm_total_s"]["dp"])
        assert r["breakdown"]["pp_comm_s"] == pytest.approx(r["comm_total_s"]["pp"])
        # nothing hidden, so nothing charged as overlap interference either
        assert r["breakdown"]["overlap_interference_s"] == 0.0
        assert r["overlap"] == dict.fromkeys((*OVERLAP_FLAGS, ASYNC_TP_FLAG), False)
        mid = est(tp=8, pp=2, dp=4, vpp=2, flags=of_2022, **kw)
        assert mid["overlap"][ASYNC_TP_FLAG] and not mid["overlap"]["tp_comm_overlap"]
        assert mid["breakdown"]["tp_comm_s"] < 0.8 * mid["comm_total_s"]["tp"]
        assert mid["comm_total_s"]["tp"] == pytest.approx(r["comm_total_s"]["tp"])
        assert mid["breakdown"]["dp_comm_s"] == pytest.approx(r["breakdown"]["dp_comm_s"])
        on = est(tp=8, pp=2, dp=4, vpp=2, flags=Flags(framework="megatron"), **kw)
        assert on["step_time_s"] < mid["step_time_s"] < r["step_time_s"]
        assert on["breakdown"]["dp_comm_s"] < r["breakdown"]["dp_comm_s"]


def test_torchtitan_waits_on_every_tp_collective() -> None:
    # DTensor's eager TP: no async backward, whatever the flag says; Megatron's hides some.
    for fw in ("torchtitan", "megatron"):
        r = est(tp=8, dp=8, gbs=64, distributed_optimizer=False, zero=3 * (fw == "torchtitan"),
                flags=Flags(framework=fw))  # fmt: skip
        whole = r["breakdown"]["tp_comm_s"] == pytest.approx(r["comm_total_s"]["tp"])
        assert whole == (fw == "torchtitan")


def test_moe_expert_parallel_all_to_all_costs_more_across_nodes() -> None:
    mix = load_model("mixtral-8x7b")
    c = load_cluster("dgx-h100", nodes=4)
    inside = estimate(mix, c, Layout(tp=1, ep=8, dp=32, seq=4096, gbs=256))
    across = estimate(mix, c, Layout(tp=4, ep=8, dp=8, seq=4096, gbs=256))
    assert inside["comm_tiers"]["ep"] == "intra"
    assert across["comm_tiers"]["ep"] == "leaf"
    assert across["breakdown"]["ep_comm_s"] > inside["breakdown"]["ep_comm_s"]


def test_batch_equals_scalar() -> None:
    c = load_cluster("dgx-h100", nodes=8)
    layouts = [
        Layout(
            tp=t,
            pp=p,
            dp=64 // (t * p),
            mbs=mb,
            gbs=256,
            seq=4096,
            recompute=rc,
            distributed_optimizer=True,
        )
        for t in (2, 4, 8)
        for p in (1, 2, 4)
        for mb in (1, 2)
        for rc in ("none", "full")
    ]
    batch = estimate_batch(L70, c, layouts_to_arrays(layouts, L70))
    one = [estimate(L70, c, lay)["step_time_s"] for lay in layouts]
    assert np.allclose(batch["step_time_s"], one, rtol=1e-9)


def test_does_not_fit_is_a_result_not_an_error() -> None:
    out = cli_json(
        "estimate",
        "--model",
        "llama3-70b",
        "-c",
        "dgx-h100",
        "--nodes",
        "1",
        "--tp",
        "8",
        "--seq",
        "4096",
        "--gbs",
        "8",
    )
    assert out["fits"] is False and out["memory_gib_per_gpu"] > 80
    assert {
        "step_time_s",
        "tokens_per_s",
        "tflops_per_gpu",
        "hw_tflops_per_gpu",
        "mfu",
        "memory_gib_per_gpu",
        "fits",
        "breakdown",
        "memory",
        "bytes_per_tier",
        "nic_GBps_needed_per_gpu",
    } <= set(out)


def test_human_output() -> None:
    out = run_cli(
        "estimate",
        "--model",
        "llama3-8b",
        "-c",
        "dgx-h100",
        "--nodes",
        "2",
        "--tp",
        "2",
        "--gbs",
        "64",
    ).stdout
    assert "time per step" in out and "memory per GPU" in out and "MFU" in out


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--tp", "3", "--dp", "1"], ["tp 3 must divide heads"]),
        (["--tp", "8", "--dp", "3"], ["must equal the GPUs (16)"]),
        (["--tp", "8", "--dp", "2", "--gbs", "7"], ["gbs 7 must be divisible by mbs*dp"]),
        (["--pp", "16", "--dp", "1", "--model", "llama3-8b", "--tp", "1", "--nodes", "2"], []),
        (
            ["--model", "mixtral-8x7b", "--tp", "8", "--dp", "2", "--ep", "3"],
            ["ep 3 must divide experts"],
        ),
        (
            ["--model", "mixtral-8x7b", "--tp", "8", "--pp", "2", "--dp", "1", "--ep", "4"],
            ["must divide tp*cp*dp"],
        ),
        (["--recompute", "most"], ["recompute"]),
    ],
)
def test_bad_layouts_are_one_line_errors(args: list[str], needles: list[str]) -> None:
    base = ["estimate", "-c", "dgx-h100", "--nodes", "2", "--seq", "4096"]
    proc = run_cli(*base, *args, check=False)
    if needles:
        assert_user_error(proc, *needles)
    else:
        assert proc.returncode == 0, proc.stderr


def test_pp_more_than_layers_is_rejected() -> None:
    proc = run_cli(
        "estimate",
        "--model",
        "llama3-8b",
        "-c",
        "dgx-h100",
        "--nodes",
        "8",
        "--tp",
        "1",
        "--pp",
        "64",
        "--dp",
        "1",
        check=False,
    )
    assert_user_error(proc, "pp 64 must be <= layers (32)")


def test_cp_all_to_all_variant_is_exposed_and_needs_heads_to_split() -> None:
    ring = est(tp=2, cp=4, pp=4, dp=2, gbs=64, seq=32768)
    a2a = est(tp=2, cp=4, pp=4, dp=2, gbs=64, seq=32768, flags=Flags(cp_comm="a2a"))
    assert ring["comm_tiers"]["cp"] == a2a["comm_tiers"]["cp"] == "intra"
    assert a2a["breakdown"]["cp_comm_s"] > 0 == ring["breakdown"]["cp_comm_s"]
    proc = run_cli(
        "estimate",
        "-m",
        "llama3-70b",
        "-c",
        "dgx-h100",
        "--nodes",
        "8",
        "--tp",
        "8",
        "--cp",
        "4",
        "--dp",
        "2",
        "--gbs",
        "64",
        "--seq",
        "32768",
        "--cp-comm-type",
        "a2a",
        check=False,
    )
    assert_user_error(proc, "cp 4 must divide", "a2a")


def test_uneven_pipeline_split_is_set_by_its_busiest_stage() -> None:
    even = est(tp=8, pp=4, dp=2, gbs=64)
    uneven = est(tp=8, pp=4, dp=2, gbs=64, pp_layers=(19, 21, 21, 19))
    edges = est(tp=8, pp=4, dp=2, gbs=64, pp_layers=(21, 19, 19, 21))
    # Even: the last rank (20 layers + logits) is the slowest; uneven: a 21-layer middle rank;
    # edges: the last rank with 21 layers and the logits, slower still.
    assert even["step_time_s"] < uneven["step_time_s"] < edges["step_time_s"]
    assert uneven["pipeline"]["split"] == "given"
    out = cli_json(
        "estimate",
        "-m",
        "llama3-70b",
        "-c",
        "dgx-h100",
        "--nodes",
        "8",
        "--tp",
        "8",
        "--pp",
        "4",
        "--dp",
        "2",
        "--gbs",
        "64",
        "--pp-layers",
        "19,21,21,19",
    )
    assert out["layout"]["pp_layers"] == [19, 21, 21, 19]


def test_cli_overlap_flags_in_help_and_json() -> None:
    """Each Megatron overlap flag has its --no- form and its default in --help; the JSON says
    what the estimate assumed; a Megatron-LM run of before 2021-09 is every --no- form."""
    from tests.conftest import cli_json, run_cli

    help_text = run_cli("estimate", "--help").stdout
    # (rich shortens long option names in a narrow table: their first 16 characters)
    for name in ("overlap-grad-reduce", "overlap-param-gather", "tp-comm-overlap"):
        assert f"--no-{name}"[:16] in help_text and f"--{name}"[:16] in help_text
    flat = " ".join(help_text.split()).replace("│ ", "")
    # --overlap-grad-reduce: tierwise's default beside Megatron-LM's own
    assert (
        "unless it is given. [default: on, as priced and emitted; Megatron-LM's own: off]" in flat
    )
    base = ["estimate", "-m", "llama3-70b", "--nodes", "8", "--tp", "8", "--pp", "2"]
    base += ["--vpp", "2", "--gbs", "256", "--use-distributed-optimizer", "--framework"]
    base += ["megatron"]
    old = ["--no-overlap-grad-reduce", "--no-overlap-param-gather", "--no-tp-comm-overlap"]
    old += ["--no-overlap-p2p-communication", "--no-align-param-gather"]
    old += ["--no-async-tensor-model-parallel-allreduce"]
    r = cli_json(*base, *old)
    assert not any(r["overlap"].values())
    for kind in ("dp", "tp", "pp"):
        assert r["breakdown"][f"{kind}_comm_s"] == pytest.approx(r["comm_total_s"][kind])
    now = cli_json(*base)
    assert now["overlap"]["overlap_grad_reduce"] and now["overlap"]["align_param_gather"]
    assert now["step_time_s"] < r["step_time_s"]


@pytest.mark.parametrize(
    ("model", "framework", "layout"),
    [
        ("llama3-70b", None, {"tp": 8, "pp": 2, "dp": 4}),
        ("llama3-70b", None, {"tp": 4, "cp": 2, "dp": 8, "zero": 3, "recompute": "full"}),
        ("llama3-70b", "torchtitan", {"tp": 8, "dp": 8, "zero": 3, "dtype": "fp8"}),
        ("llama3-8b", "deepspeed", {"dp": 64, "zero": 3, "distributed_optimizer": False}),
        ("mixtral-8x7b", None, {"tp": 2, "ep": 8, "pp": 2, "dp": 16, "recompute": "selective"}),
    ],
)
def test_one_layout_terms_are_python_floats(
    model: str, framework: str | None, layout: dict
) -> None:
    """estimate hands out the step model's values and term dicts as they are (no copy):
    every value must already be a python float (or bool), on every path (stragglers, FSDP,
    ZeRO-3, MoE, FP8)."""
    c = load_cluster("dgx-h100", nodes=8)
    fleet = FleetSpec(slow_node_share=0.005, slow_node_slowdown=0.1, gpu_speed_spread=0.01)
    c = c.model_copy(update={"fleet": fleet})
    lay = Layout(**{"seq": 4096, "gbs": 256, "distributed_optimizer": True, **layout})
    r = estimate(load_model(model), c, lay, Flags(framework=framework))
    assert r["breakdown"]["straggler_s"] > 0
    for key in ("breakdown", "compute_parts_s", "comm_total_s", "bytes_per_tier"):
        assert all(type(v) is float for v in r[key].values()), (key, r[key])
    scalars = ("step_time_s", "tokens_per_s", "tflops_per_gpu", "hw_tflops_per_gpu", "mfu")
    scalars += ("mfu_at_dtype_peak", "memory_gib_per_gpu", "nic_GBps_needed_per_gpu")
    assert all(type(r[key]) is float for key in scalars), {key: r[key] for key in scalars}
    assert type(r["pipeline"]["bubble_fraction"]) is float and type(r["fits"]) is bool
