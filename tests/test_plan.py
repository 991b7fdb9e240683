"""Planner: search properties, design rules that must emerge, emitters, errors."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import assert_user_error, cli_json, run_cli
from tests.emit_views import torchtitan_view
from tests.test_emit import framework_names
from tierwise.errors import SpecError
from tierwise.frameworks import frameworks_for, interleave_runs
from tierwise.hardware.cluster import ClusterSpec, load_cluster
from tierwise.perf.estimate import estimate, estimate_batch
from tierwise.perf.flags import Flags
from tierwise.perf.terms.dp import deepspeed_live_bytes
from tierwise.plan.emit.megatron import megatron_args
from tierwise.plan.emit.torchtitan import torchtitan_args
from tierwise.plan.mapping import process_groups
from tierwise.plan.placement import placement_ratios
from tierwise.plan.search import PlanResult, search
from tierwise.plan.space import parse_fix
from tierwise.plan.sweep import workload_needed_bandwidth
from tierwise.workload.layout import Layout, layout_fields, layouts_to_arrays
from tierwise.workload.load import load_model
from tierwise.workload.memory import GiB, main_grad_bytes, memory, memory_batch
from tierwise.workload.pipeline import parse_layout
from tierwise.workload.spec import ModelSpec


def parse_megatron(args: list[str], layers: int) -> dict[str, object]:
    """Read a layout back out of Megatron flags."""
    flags: dict[str, str] = {}
    for arg in args:
        name, _, value = arg.partition(" ")
        flags[name] = value
    known = framework_names("megatron_arguments.txt")
    assert set(flags) <= known, set(flags) - known
    pp = int(flags["--pipeline-model-parallel-size"])
    vpp = (
        layers // (pp * int(flags["--num-layers-per-virtual-pipeline-stage"]))
        if ("--num-layers-per-virtual-pipeline-stage" in flags)
        else 1
    )
    ends: dict[str, object] = {}
    if "--pipeline-model-parallel-layout" in flags:  # uneven chunks: Megatron's layout string
        split = parse_layout(flags["--pipeline-model-parallel-layout"].strip('"'), pp, layers)
        vpp = split.vpp
        if len(set(split.stage_layers)) > 1:
            ends["pp_layers"] = list(split.stage_layers)
    elif "--decoder-first-pipeline-num-layers" in flags:
        first = int(flags["--decoder-first-pipeline-num-layers"])
        last = int(flags["--decoder-last-pipeline-num-layers"])
        ends["pp_layers"] = [first, *[(layers - first - last) // (pp - 2)] * (pp - 2), last]
    return ends | {
        "tp": int(flags["--tensor-model-parallel-size"]),
        "pp": pp,
        "vpp": vpp,
        "cp": int(flags["--context-parallel-size"]),
        "ep": int(flags["--expert-model-parallel-size"]),
        "mbs": int(flags["--micro-batch-size"]),
        "gbs": int(flags["--global-batch-size"]),
        "seq": int(flags["--seq-length"]),
        "recompute": flags.get("--recompute-granularity", "none"),
        "sp": "--sequence-parallel" in flags,
        "zero": 0,
        "distributed_optimizer": "--use-distributed-optimizer" in flags,
        "grad_reduce_bf16": "--grad-reduce-in-bf16" in flags,
        "dtype": "fp8" if "--fp8-format" in flags else "bf16",
    }


PROPERTY_MODELS = ("llama3-8b", "llama2-13b", "mixtral-8x7b", "llama3-70b", "deepseek-moe-16b")
PROPERTY_CLUSTERS = {"dgx-h100": 1, "dgx-a100": 1, "pcie-h100": 1, "dgx-b200": 1, "gb200-nvl72": 18}
"""Cluster presets and the node granularity they accept (NVL72: whole 18-tray racks)."""


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(PROPERTY_MODELS),
    cname=st.sampled_from(sorted(PROPERTY_CLUSTERS)),
    units=st.integers(1, 8),
    per_gpu=st.sampled_from([1, 2, 3, 4]),
    seq=st.sampled_from([2048, 4096, 8192]),
    framework=st.sampled_from(["any", "megatron", "torchtitan", "deepspeed"]),
)
def test_every_plan_divides_gpus_fits_and_round_trips_megatron(
    name: str, cname: str, units: int, per_gpu: int, seq: int, framework: str
) -> None:
    model = load_model(name)
    cluster = load_cluster(cname, nodes=units * PROPERTY_CLUSTERS[cname])
    try:
        priced = Flags(framework=None if framework == "any" else framework)  # as plan's CLI
        result = search(
            model, cluster, cluster.world * per_gpu, seq, top=5, flags=priced, framework=framework
        )
    except SpecError as exc:  # a model too big for a small cluster says so
        assert "fits" in str(exc)
        return
    check_plans(
        model,
        cluster,
        result,
        round_trip=framework == "megatron",
        framework=framework,
    )
    for plan in result.plans:  # the space and the capability table agree
        runs_in = frameworks_for(Layout(**plan["layout"]))
        assert framework in runs_in if framework != "any" else runs_in


@pytest.mark.parametrize("pp", [3, 6])
def test_short_end_stage_plans_divide_fit_and_round_trip_megatron(pp: int) -> None:
    # deepseek-moe-16b's 28 layers do not divide over 3 or 6 stages: 9+10+9, 4+5x4+4.
    model, cluster = load_model("deepseek-moe-16b"), load_cluster("dgx-h100", nodes=3)
    result = search(model, cluster, 96, 4096, top=5, fix={"pp": str(pp)}, framework="megatron")
    check_plans(model, cluster, result)
    assert all(p["layout"]["pp_layers"] for p in result.plans)
    with pytest.raises(SpecError, match="no layout"):  # DeepSpeed's JSON states no split
        search(model, cluster, 96, 4096, fix={"pp": str(pp)}, framework="deepspeed")


def check_plans(
    model: ModelSpec,
    cluster: ClusterSpec,
    result: PlanResult,
    round_trip: bool = True,
    framework: str = "megatron",
) -> None:
    """Every plan divides the GPUs, fits (by the memory model, computed again here as
    `framework` runs it: FP8 primary weights where Megatron's --fp8-param-gather holds them,
    torchtitan's selective recompute), is ranked, and (`round_trip`) its Megatron flags give
    it back."""
    assert result.candidates_evaluated >= result.candidates_fitting >= len(result.plans) >= 1
    for plan in result.plans:
        lay = Layout(**plan["layout"])
        assert lay.tp * lay.cp * lay.pp * lay.dp == cluster.world
        assert lay.global_batch % (lay.mbs * lay.dp) == 0
        assert sum(lay.stage_layers(model)) == model.layers
        if framework == "deepspeed" and lay.zero == 3:  # its live-parameter buffers
            grads = main_grad_bytes(lay.grad_reduce_bf16)
            held = memory_batch(
                model,
                **layout_fields(lay, model),
                zero3_buffer_bytes=deepspeed_live_bytes(model, lay.tp, grads),
            )
        else:
            held = memory(
                model,
                lay,
                low_precision_params=framework in ("any", "megatron"),
                framework=framework if framework == "torchtitan" else None,
            )
        assert held.total_bytes <= cluster.gpu.hbm_gib * GiB
        assert plan["fits"]
        if round_trip:
            back = parse_megatron(megatron_args(model, lay), model.layers)
            assert back == {k: plan["layout"][k] for k in back} | {"gbs": lay.global_batch}
    times = [p["step_time_s"] for p in result.plans]
    tie = 1 + 2e-3  # near-equal step times are ranked by memory headroom
    assert all(a <= b * tie for a, b in itertools.pairwise(times))


def test_tp_stays_inside_the_nvlink_domain_on_dgx_h100() -> None:
    result = search(
        load_model("llama3-70b"),
        load_cluster("dgx-h100", nodes=32),
        512,
        4096,
        top=5,
        framework="megatron",
    )
    assert all(p["layout"]["tp"] <= 8 for p in result.plans)
    assert all(p["comm_tiers"]["tp"] in {"intra", "none"} for p in result.plans)


def test_dp_tolerates_tens_of_gbps_while_tp_across_nodes_needs_hundreds() -> None:
    # The bandwidth each workload needs, re-planned at every rate, with only one kind of
    # parallelism allowed to cross nodes (the search picks everything else).
    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100", nodes=8)
    only_dp = {"tp": "1", "pp": "1", "cp": "1"}
    dp = workload_needed_bandwidth(model, cluster, 512, 4096, 0.10, fix=only_dp)
    tp = workload_needed_bandwidth(model, cluster, 512, 4096, 0.10, fix={"tp": "16"})
    assert 10 <= dp["needed_Gbps_per_gpu"] < 100  # tens of Gb/s
    assert dp["layout_at_needed"]["dp"] == 64
    assert tp["needed_Gbps_per_gpu"] >= 200  # hundreds
    assert tp["needed_Gbps_per_gpu"] > 3 * dp["needed_Gbps_per_gpu"]


def test_pp_across_nodes_needs_far_less_than_tp_across_nodes() -> None:
    # Only stage-boundary activations cross (the second article's "span PP across
    # low-latency links"); the first article's "hundreds of Gb/s" for PP is not what the
    # model finds: tens.
    model, cluster = load_model("llama3-70b"), load_cluster("dgx-h100", nodes=8)
    only_pp = {"tp": "8", "cp": "1", "dp": "1"}
    pp = workload_needed_bandwidth(model, cluster, 512, 4096, 0.10, fix=only_pp)
    tp = workload_needed_bandwidth(model, cluster, 512, 4096, 0.10, fix={"tp": "16"})
    best = search(model, cluster, 512, 4096, top=1, fix=only_pp).plans[0]
    assert best["comm_tiers"]["pp"] in {"leaf", "spine"}  # the stages sit on 8 nodes
    assert pp["needed_Gbps_per_gpu"] < 100
    assert tp["needed_Gbps_per_gpu"] > 3 * pp["needed_Gbps_per_gpu"]


def test_pcie_only_nodes_lose_a_large_share_for_large_models() -> None:
    def best(model: str, cluster: ClusterSpec) -> dict:
        return search(load_model(model), cluster, 256, 4096, top=1, fix={"dtype": "bf16"}).plans[0]

    dgx = load_cluster("dgx-h100", nodes=8)
    pcie_box = load_cluster("pcie-h100", nodes=8)  # the H100 PCIe product: GPU and links
    same_gpu = load_cluster("dgx-h100", nodes=8, intra="pcie5", nics_per_node=2)
    loss = {}
    for model in ("llama3-8b", "llama3-70b"):
        nvlink = best(model, dgx)["tokens_per_s"]
        loss[model] = 1 - best(model, same_gpu)["tokens_per_s"] / nvlink
        if model == "llama3-70b":
            assert best(model, pcie_box)["tokens_per_s"] < 0.7 * nvlink
    assert loss["llama3-70b"] > 0.12  # the interconnect alone, same GPU (14.7% at the refit)
    assert loss["llama3-70b"] > loss["llama3-8b"] + 0.03  # and more for the larger model


def test_naive_placement_costs_a_ratio() -> None:
    model, cluster = (
        load_model("llama3-70b"),
        load_cluster("dgx-h100", nodes=64, oversubscription=4),
    )
    lay = Layout(tp=8, pp=4, dp=16, gbs=512, seq=4096, distributed_optimizer=True)
    r = placement_ratios(model, cluster, lay)
    assert r["naive_dp_innermost_ratio"] > 1.3
    assert r["scattered_nodes_ratio"] >= 1.0
    assert r["orders_step_time_s"]["tp-cp-ep-dp-pp"] == pytest.approx(r["aware_step_time_s"])


def test_process_groups_partition_the_ranks() -> None:
    lay = Layout(tp=4, cp=2, pp=2, dp=4, gbs=64, seq=4096)
    groups = process_groups(lay)
    for kind, size in {"tp": 4, "cp": 2, "pp": 2, "dp": 4}.items():
        flat = sorted(r for g in groups[kind] for r in g)
        assert flat == list(range(64)) and {len(g) for g in groups[kind]} == {size}
    assert groups["tp"][0] == [0, 1, 2, 3] and groups["cp"][0] == [0, 4]
    assert groups["dp"][0] == [0, 8, 16, 24] and groups["pp"][0] == [0, 32]


def test_plan_cli_json_and_emit(tmp_path: Path) -> None:
    base = ("plan", "-m", "llama3-8b", "-c", "dgx-h100", "--nodes", "2", "--gbs", "64")
    out = cli_json(
        *base,
        "--seq",
        "4096",
        "--top",
        "3",
        "--emit",
        "megatron",
        "--emit",
        "slurm",
        "--out",
        str(tmp_path),
    )
    assert len(out["plans"]) == 3 and out["candidates_evaluated"] > 100
    assert out["search_time_s"] < 5
    assert {
        "tp",
        "cp",
        "ep",
        "pp",
        "vpp",
        "dp",
        "mbs",
        "recompute",
        "zero",
        "step_time_s",
        "tokens_per_s",
        "mfu",
        "memory_gib_per_gpu",
    } <= set(out["plans"][0])
    sbatch = (tmp_path / "job.sbatch").read_text()
    assert "#SBATCH --nodes=2" in sbatch and "--nproc-per-node=8" in sbatch
    assert re.search(r"--tensor-model-parallel-size \d+", out["emitted"]["megatron"])
    assert all(p["zero"] == 0 for p in out["plans"])  # --emit megatron plans for Megatron
    deepspeed = cli_json(*base, "--emit", "deepspeed", "--out", str(tmp_path))
    assert json.loads((tmp_path / "deepspeed.json").read_text())["train_batch_size"] == 64
    assert all(p["dtype"] == "bf16" for p in deepspeed["plans"])  # DeepSpeed's JSON has no FP8
    titan = cli_json(*base, "--emit", "torchtitan")
    assert "data_parallel_shard_degree" in titan["emitted"]["torchtitan"]
    mixed = run_cli(*base, "--emit", "megatron", "--emit", "torchtitan", check=False)
    assert_user_error(mixed, "--emit", "--framework")
    human = run_cli("plan", "-m", "llama3-8b", "-c", "dgx-h100", "--nodes", "2", "--gbs", "64")
    assert "top plans" in human.stdout and "mapping of plan 1" in human.stdout


def test_fix_pins_degrees() -> None:
    out = cli_json(
        "plan",
        "-m",
        "llama3-70b",
        "-c",
        "dgx-h100",
        "--nodes",
        "4",
        "--gbs",
        "64",
        "--fix",
        "tp=8,pp=2",
    )
    assert {(p["tp"], p["pp"]) for p in out["plans"]} == {(8, 2)}


def test_plan_table_says_none_where_no_framework_runs_the_plan() -> None:
    """DualPipe runs in DeepSeek's own framework only: the 'runs in' cell was left blank."""
    args = ("plan", "-m", "llama3-8b", "--nodes", "2", "--gbs", "64", "--top", "1")
    dual = (*args, "--pipeline-schedule", "DualPipe", "--fix", "pp=2")
    assert cli_json(*dual)["plans"][0]["frameworks"] == []
    text = run_cli(*dual).stdout
    row = next(line for line in text.splitlines() if line.startswith("│ 1 "))
    assert [c.strip() for c in row.split("│")][13] == "none"


def test_fix_with_two_values_of_one_key_is_a_user_error() -> None:
    proc = run_cli(
        "plan", "-m", "llama3-8b", "--nodes", "4", "--fix", "tp=8,pp=1,tp=4", check=False
    )
    assert_user_error(proc, "--fix", "tp=8", "tp=4", "one value per key")
    assert parse_fix("tp=8,tp=8") == {"tp": "8"}  # the same value twice says one thing


def test_fix_given_once_per_pair_pins_every_pair() -> None:
    """`--fix tp=8 --fix pp=3` kept only pp=3 (the option took one value, the last); each
    pair now pins, and 80 layers over pp 3 split as estimate splits them (26/27/27)."""
    base = ("plan", "-m", "llama3-70b", "--nodes", "6")
    plans = cli_json(*base, "--fix", "tp=8", "--fix", "pp=3")["plans"]
    assert {(p["tp"], p["pp"]) for p in plans} == {(8, 3)}
    assert all(p["pp_layers"] == [26, 27, 27] for p in plans)
    est = cli_json("estimate", "-m", "llama3-70b", "--nodes", "6", "--tp", "8", "--pp", "3")
    assert est["pipeline"]["stage_layers"] == [26, 27, 27]
    assert parse_fix(["tp=8", "pp=3,mbs=1"]) == {"tp": "8", "pp": "3", "mbs": "1"}
    assert_user_error(run_cli(*base, "--fix", "tp=8", "--fix", "tp=4", check=False), "tp=4")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "recompute_num_layers=2",
            "--fix: 'recompute_num_layers' (in 'recompute_num_layers=2'); allowed: tp,",
        ),
        ("tp", "--fix: 'tp' is not KEY=VALUE; KEY one of tp,"),
    ],
)
def test_fix_names_an_unknown_key_apart_from_a_missing_value(text: str, needle: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_fix(text)
    assert str(caught.value).startswith(needle)


def test_pipeline_ends_one_layer_short_when_layers_do_not_divide() -> None:
    # Llama 3 405B: 126 layers over 16 stages as 7 + 14 x 8 + 7 (Dubey et al. 2024).
    model = load_model("llama3-405b")
    cluster = load_cluster("dgx-h100", nodes=1024)
    plans = search(
        model, cluster, 2048, 8192, top=3, fix={"tp": "8", "pp": "16"}, framework="megatron"
    ).plans
    for plan in plans:
        assert plan["layout"]["pp_layers"] == [7, *[8] * 14, 7]
        lay = Layout(**plan["layout"])
        args = megatron_args(model, lay)
        if lay.vpp == 1:
            assert "--decoder-first-pipeline-num-layers 7" in args
        else:  # 7 layers do not divide into vpp chunks: a layout string states them
            assert any(a.startswith("--pipeline-model-parallel-layout") for a in args)
        back = parse_megatron(args, model.layers)
        assert back["pp_layers"] == plan["layout"]["pp_layers"] and back["vpp"] == lay.vpp
        fsdp = lay.model_copy(
            update={"zero": 3, "distributed_optimizer": False, "vpp": 1, "dtype": "fp8"}
        )
        view = torchtitan_view(torchtitan_args(model, fsdp))["parallelism"]
        parts = view["module_fqns_per_model_part"].split()
        assert len(parts) == 16 and parts[1].split(",")[0] == "layers.7"
        assert parts[0].split(",")[-1] == "layers.6" and parts[2].startswith("layers.15,")
        # Memory peaks on the second stage: 8 layers x 15 micro-batches in flight > 7 x 16.
        assert plan["memory"]["stage"] == 1
        # The search's batch model finds the busiest stage (a middle one, 8 layers) as the
        # one-layout estimate does from the whole split.
        batch = estimate_batch(model, cluster, layouts_to_arrays([lay], model))
        assert float(batch["step_time_s"][0]) == pytest.approx(plan["step_time_s"], rel=1e-9)
        assert float(batch["memory_gib_per_gpu"][0]) == pytest.approx(
            plan["memory_gib_per_gpu"], rel=1e-9
        )


def test_fp8_is_searched_where_the_gpu_has_it() -> None:
    model = load_model("llama3-8b")
    every = {"dtype": "any"}  # low precision only when asked for
    h100 = search(model, load_cluster("dgx-h100", nodes=1), 64, 4096, top=50, fix=every).plans
    a100 = search(model, load_cluster("dgx-a100", nodes=1), 64, 4096, top=50, fix=every).plans
    assert h100[0]["layout"]["dtype"] == "fp8"  # Transformer Engine FP8 GEMMs are faster
    default = search(model, load_cluster("dgx-h100", nodes=1), 64, 4096, top=50).plans
    assert {p["layout"]["dtype"] for p in default} == {"bf16"}
    assert {p["layout"]["dtype"] for p in a100} == {"bf16"}
    pinned = search(model, load_cluster("dgx-h100", nodes=1), 64, 4096, fix={"dtype": "bf16"})
    assert {p["layout"]["dtype"] for p in pinned.plans} == {"bf16"}
    with pytest.raises(SpecError, match="dtype='fp8' on a100-sxm-80gb; allowed: bf16"):
        search(model, load_cluster("dgx-a100", nodes=1), 64, 4096, fix={"dtype": "fp8"})


def test_fix_sharding_ddp_searches_plain_data_parallelism() -> None:
    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100", nodes=2)
    fix = {"sharding": "ddp"}
    plans = search(model, cluster, 64, 4096, framework="megatron", fix=fix).plans
    assert {(p["layout"]["zero"], p["layout"]["distributed_optimizer"]) for p in plans} == {
        (0, False)
    }
    default = search(model, cluster, 64, 4096, framework="megatron").plans
    assert all(p["layout"]["distributed_optimizer"] for p in default)


@pytest.mark.parametrize(
    ("fix", "framework", "needle"),
    [
        ({"sharding": "zero7"}, "megatron", "sharding='zero7'"),
        ({"zero": "2"}, "megatron", "zero=2"),  # zero=0 is DDP, zero=1 the distributed optimizer
    ],
)
def test_fix_sharding_or_zero_outside_the_framework_is_an_error(
    fix: dict[str, str], framework: str, needle: str
) -> None:
    with pytest.raises(SpecError, match=re.escape(needle)) as err:
        search(
            load_model("llama3-8b"),
            load_cluster("dgx-h100", nodes=1),
            8,
            4096,
            framework=framework,
            fix=fix,
        )
    assert "allowed" in str(err.value)


def test_nothing_divides_or_fits_says_why() -> None:
    assert_user_error(
        run_cli(
            "plan",
            "-m",
            "llama3-8b",
            "-c",
            "dgx-h100",
            "--nodes",
            "3",
            "--gbs",
            "7",
            "--fix",
            "pp=1",
            check=False,
        ),
        "no layout",
        "gbs",
    )
    assert_user_error(
        run_cli(
            "plan", "-m", "llama3-405b", "-c", "dgx-h100", "--nodes", "1", "--gbs", "8", check=False
        ),
        "fits",
        "closest",
    )
    assert_user_error(
        run_cli("plan", "-m", "llama3-8b", "-c", "dgx-h100", "--fix", "tq=2", check=False), "--fix"
    )
    with pytest.raises(SpecError):
        search(
            load_model("llama3-8b"),
            load_cluster("dgx-h100", nodes=1),
            8,
            4096,
            framework="megatron-ds",
        )


def test_sweep_plot(tmp_path: Path) -> None:
    png = tmp_path / "sweep.png"
    run_cli(
        "sweep",
        "-m",
        "llama3-8b",
        "-c",
        "dgx-h100",
        "--nodes",
        "2",
        "--gbs",
        "64",
        "--vary",
        "nic=ndr400,eth100",
        "--vary",
        "nics_per_node=1,8",
        "--plot",
        str(png),
    )
    assert png.stat().st_size > 10_000


def test_sweep_cli() -> None:
    out = cli_json(
        "sweep",
        "-m",
        "llama3-8b",
        "-c",
        "dgx-h100",
        "--nodes",
        "2",
        "--gbs",
        "64",
        "--vary",
        "nics_per_node=1,8",
    )
    assert [r["nics_per_node"] for r in out["rows"]] == [1, 8]
    assert out["rows"][0]["tokens_per_s"] <= out["rows"][1]["tokens_per_s"]
    assert out["needed_Gbps_per_gpu"] > 0
    assert_user_error(
        run_cli("sweep", "--vary", "colour=red", check=False),
        "--vary: 'colour' in 'colour=red'; allowed keys: nodes,",
    )


@pytest.mark.parametrize(
    ("varies", "needles"),
    [
        (["nodes=2,4", "nodes=8"], ["--vary nodes: given twice", "two different keys"]),
        (["nodes=2,2"], ["--vary nodes: 2 given twice", "each value once"]),
    ],
)
def test_sweep_of_one_key_twice_is_a_user_error(varies: list[str], needles: list[str]) -> None:
    """--vary nodes=2,4 --vary nodes=8 printed two 'nodes' columns both 8 (the later value
    won); nodes=2,2 two identical rows; both exited 0."""
    args = [a for v in varies for a in ("--vary", v)]
    proc = run_cli("sweep", "-m", "llama3-8b", "--nodes", "4", *args, check=False)
    assert_user_error(proc, *needles)


def test_nvl72_domain_makes_wider_ep_attractive() -> None:
    # A DeepSeek-V3-sized MoE (MHA in place of MLA) on 2,304 GPUs, 4 sequences per GPU and
    # step: inside NVL72 racks running 64 GPUs each (16 of their 18 trays, so that groups of
    # a power of two ranks stay in one rack) the search spreads the experts 64 ways; with
    # 8-GPU nodes it keeps EP inside the node and reaches a lower MFU. (At one sequence per
    # GPU the expert gradients, reduced once per step across nodes on the expert-data-
    # parallel group, cost an 8-GPU node as much as spreading EP over InfiniBand.) On full
    # 72-GPU racks some EP groups of 16 or more ranks straddle two racks (ranks 64-79 for 16,
    # 64-127 for 64), their all-to-all goes over InfiniBand and the step waits for them: the
    # search keeps EP at 8.
    moe = ModelSpec.parse(
        {
            "name": "deepseek-v3-sized",
            "layers": 61,
            "hidden": 7168,
            "heads": 128,
            "ffn_hidden": 18432,
            "vocab": 129280,
            "activation": "swiglu",
            "moe": {
                "experts": 256,
                "top_k": 8,
                "expert_ffn_hidden": 2048,
                "shared_experts": 1,
                "dense_layers": 3,
            },
        },
        "test",
    )
    best = {}
    for name, nodes, domain in (
        ("gb200-nvl72", 576, 64),
        ("dgx-b200", 288, None),
        ("gb200-nvl72", 576, None),
    ):
        cluster = load_cluster(name, nodes=nodes, nvlink_domain_gpus=domain)
        fix = {"dtype": "bf16", "recompute": "none"}
        plan = search(moe, cluster, 4 * 2304, 4096, top=1, fix=fix).plans[0]
        best[name if domain or name != "gb200-nvl72" else "full racks"] = plan
    nvl, b200 = best["gb200-nvl72"], best["dgx-b200"]
    assert nvl["layout"]["ep"] > 8 and nvl["comm_tiers"]["ep"] == "intra"
    assert b200["layout"]["ep"] <= 8
    assert nvl["mfu"] > 1.2 * b200["mfu"]
    assert best["full racks"]["layout"]["ep"] == 8


def test_nvl72_domain_makes_wider_tp_cheaper() -> None:
    # NVL72 racks running 64 GPUs each (16 of 18 trays): a tp 16 group stays in its rack.
    # On full 72-GPU racks the fifth tp 16 group (ranks 64-79) straddles two, runs over
    # InfiniBand, and the step waits for it as on 8-GPU nodes.
    big = load_model("llama3-405b")
    ratios, tiers = {}, {}
    for name, nodes, domain in (
        ("gb200-nvl72", 36, 64),
        ("dgx-b200", 18, None),
        ("full racks", 36, None),
    ):
        preset = "gb200-nvl72" if name == "full racks" else name
        c = load_cluster(preset, nodes=nodes, nvlink_domain_gpus=domain)
        tp8, tp16 = (estimate_of(big, c, tp) for tp in (8, 16))
        ratios[name] = tp16["step_time_s"] / tp8["step_time_s"]
        tiers[name] = tp16["comm_tiers"]["tp"]
    assert tiers == {"gb200-nvl72": "intra", "dgx-b200": "leaf", "full racks": "leaf"}
    assert ratios["gb200-nvl72"] < ratios["dgx-b200"] - 0.15
    assert ratios["full racks"] > ratios["gb200-nvl72"] + 0.15


def estimate_of(model: object, cluster: object, tp: int) -> dict:
    """tp x pp x dp=1 layout of 144 GPUs with full recompute (fits either domain size)."""
    return estimate(
        model,
        cluster,
        Layout(
            tp=tp,
            pp=144 // tp,
            dp=1,
            gbs=576,
            seq=8192,
            recompute="full",
            distributed_optimizer=True,
        ),
    )


@pytest.mark.parametrize(
    ("pp", "vpp", "micro", "group", "runs"),
    [
        # megatron-core 0.16.1 forward_backward_pipelining_with_interleaving, by hand:
        # pp <= group <= micro, and micro % group is 0 or >= pp (group: default pp)
        (4, 1, 2, None, True),  # 1F1B: any count
        (4, 2, 8, None, True),
        (4, 2, 2, None, False),  # group 4 > 2 micro-batches
        (4, 2, 6, None, False),  # last group of 2 < pp
        (16, 6, 24, None, False),  # last group of 8 < 16
        (4, 2, 12, 6, True),  # two groups of 6
        (4, 2, 9, 5, True),  # last group of 4 = pp
        (8, 2, 12, 8, False),
        (4, 2, 8, 2, False),  # a group below pp
    ],
)
def test_interleave_runs_as_megatron_checks(
    pp: int, vpp: int, micro: int, group: int | None, runs: bool
) -> None:
    assert bool(interleave_runs(pp, vpp, micro, group)) is runs


def test_megatron_interleaved_plans_fill_the_micro_batch_groups() -> None:
    # GPT-3 175B on 256 H100s, gbs 48: Megatron's best interleaved layouts had been pp 16
    # with 24 micro-batches a pipeline (or pp 32 with 48), which its schedule refuses.
    model, cluster = load_model("gpt3-175b"), load_cluster("dgx-h100", nodes=32)
    plans = search(model, cluster, 48, 2048, top=5, framework="megatron").plans
    for p in plans:
        lay = Layout(**p["layout"])
        assert interleave_runs(lay.pp, lay.vpp, lay.num_microbatches)
    assert any(Layout(**p["layout"]).vpp > 1 for p in plans)
    llama = load_model("llama3-8b")
    fix = {"pp": "4", "vpp": "2", "dp": "2"}
    with pytest.raises(SpecError, match="no layout"):
        search(llama, load_cluster("dgx-h100", nodes=1), 4, 4096, fix=fix, framework="megatron")
    six = Flags(microbatch_group_size_per_vp_stage=6)
    grouped = search(llama, load_cluster("dgx-h100", nodes=1), 12, 4096, fix=fix,
                     framework="megatron", flags=six)  # fmt: skip
    assert Layout(**grouped.plans[0]["layout"]).num_microbatches == 6
    two = Layout(pp=4, vpp=2, dp=2, gbs=4, seq=4096)
    assert "megatron" not in frameworks_for(two)
    assert "megatron" in frameworks_for(two.model_copy(update={"gbs": 8}))
    proc = run_cli("estimate", "-m", "llama3-8b", "--nodes", "1", "--pp", "4", "--vpp", "2",
                   "--dp", "2", "--gbs", "4", "--framework", "megatron", check=False)  # fmt: skip
    assert_user_error(proc, "2 micro-batches per pipeline", "groups of 4")
