"""Overlap flags as each framework runs them: what the estimate prices is what the emitters
write, and what a framework's own code refuses is refused in one line (exit 2) first.

The judges (`tests/framework_judges.py`: megatron-core 0.16.1's TransformerConfig and
Megatron-LM's recorded validate_args rules, torchtitan 0.3.0's ConfigManager, DeepSpeed
0.19.8's DeepSpeedConfig) read every emitted launch; each refusal is also shown to be one the
framework's code makes, by handing it the flag the emitter would not write."""

from __future__ import annotations

from typing import Any

import pytest

from tests import framework_judges as judge
from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise import frameworks
from tierwise.errors import SpecError
from tierwise.perf.flags import PARAM_GATHER_FOLLOWS, Flags
from tierwise.plan.emit import deepspeed_config, megatron_args, torchtitan_args
from tierwise.plan.emit.megatron import environment
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model

pytest.importorskip("megatron.core", reason="the [frameworks] extra (make test installs it)")

L70 = ["-m", "llama3-70b", "-c", "dgx-h100", "--nodes", "8"]
MIXTRAL = ["-m", "mixtral-8x7b", "-c", "dgx-h100", "--nodes", "8", "--tp", "1", "--ep", "8"]
MEGATRON = ["--framework", "megatron"]


def megatron_ok(args: list[str], lay: Layout) -> Any:
    """megatron-core's config of `args` (its asserts run) with no validate_args rule broken."""
    config = judge.megatron_config(args)
    broken = judge.megatron_validate_args(args, environment(lay), lay.world)
    assert not broken, broken
    return config


# a. --overlap-param-gather only with --overlap-grad-reduce


def test_param_gather_overlap_follows_the_grad_reduce_when_not_given() -> None:
    assert Flags.resolve("megatron", {"overlap_grad_reduce": False}).overlap_param_gather is False
    assert Flags.resolve(None, {"overlap_grad_reduce": False}).overlap_param_gather is False
    given = {"overlap_grad_reduce": False, "overlap_param_gather": True}
    assert Flags.resolve(None, given).overlap_param_gather is True  # given: kept (generic)
    base = ["estimate", *L70, "--tp", "8", "--pp", "2", "--use-distributed-optimizer"]
    alone = cli_json(*base, "--no-overlap-grad-reduce")
    both = cli_json(*base, "--no-overlap-grad-reduce", "--no-overlap-param-gather")
    on = cli_json(*base)
    assert alone["breakdown"]["dp_comm_s"] == both["breakdown"]["dp_comm_s"]
    assert alone["breakdown"]["dp_comm_s"] > on["breakdown"]["dp_comm_s"]
    assert alone["overlap"]["overlap_param_gather"] is False
    assert PARAM_GATHER_FOLLOWS in alone["assumed"]


def test_megatron_refuses_the_param_gather_overlap_without_the_grad_reduce_overlap() -> None:
    run = run_cli(
        "estimate", *L70, "--tp", "8", "--pp", "2", "--use-distributed-optimizer", *MEGATRON,
        "--no-overlap-grad-reduce", "--overlap-param-gather", check=False,
    )  # fmt: skip
    assert_user_error(run, "--overlap-param-gather with --no-overlap-grad-reduce")
    model, lay = load_model("llama3-8b"), Layout(tp=8, dp=2, seq=4096, distributed_optimizer=True)
    wrong = Flags(framework="megatron", overlap_grad_reduce=False, overlap_param_gather=True)
    with pytest.raises(SpecError, match="--emit megatron: --overlap-param-gather"):
        megatron_args(model, lay, wrong)
    args = megatron_args(model, lay, Flags.resolve("megatron", {"overlap_grad_reduce": False}))
    assert "--overlap-grad-reduce" not in args and "--overlap-param-gather" not in args
    megatron_ok(args, lay)
    broken = judge.megatron_validate_args([*args, "--overlap-param-gather"], {}, lay.world)
    assert any("--overlap-grad-reduce" in b for b in broken)  # the rule Megatron-LM asserts


# b. --tp-comm-overlap only with sequence parallelism


def test_tp_comm_overlap_without_sp_is_refused_where_the_framework_refuses_it() -> None:
    base = ["estimate", *L70, "--tp", "8", "--no-sp", "--tp-comm-overlap"]
    assert_user_error(run_cli(*base, *MEGATRON, check=False), "--tp-comm-overlap without --sp")
    model, lay = load_model("llama3-8b"), Layout(tp=8, sp=False, dp=2, seq=4096)
    with pytest.raises(SpecError, match="--emit megatron: --tp-comm-overlap without --sp"):
        megatron_args(model, lay, Flags(tp_comm_overlap=True))
    plain = megatron_args(model, lay, Flags())
    broken = judge.megatron_validate_args([*plain, "--tp-comm-overlap"], {}, lay.world)
    assert "tp-comm-overlap needs SP" in broken
    generic = cli_json(*base)  # the generic model prices it and says no framework runs it
    assert any("no launched framework runs" in note for note in generic["assumed"])
    sp = Layout(tp=8, dp=2, seq=4096)
    args = megatron_args(model, sp, Flags(tp_comm_overlap=True))
    assert megatron_ok(args, sp).tp_comm_overlap


# c. torchtitan's async TP; DeepSpeed has none


def test_torchtitan_emits_the_async_tp_it_is_priced_with() -> None:
    model, lay = load_model("llama3-8b"), Layout(tp=8, dp=2, seq=4096, zero=3)
    on = judge.torchtitan_config(torchtitan_args(model, lay, Flags(tp_comm_overlap=True)))
    assert on.compile.enable and on.compile.enable_async_tensor_parallel
    assert "model" in on.compile.components  # CompileConfig asserts it with async TP
    off = judge.torchtitan_config(torchtitan_args(model, lay, Flags()))
    assert not off.compile.enable_async_tensor_parallel
    judge.torchtitan_dims(on, lay.world)
    no_sp = Layout(tp=8, sp=False, dp=2, seq=4096, zero=3)
    with pytest.raises(SpecError, match="--emit torchtitan: --tp-comm-overlap without --sp"):
        torchtitan_args(model, no_sp, Flags(tp_comm_overlap=True))
    base = ["estimate", "-m", "llama3-8b", "--nodes", "2", "--tp", "8", "--zero", "3"]
    priced = cli_json(*base, "--framework", "torchtitan", "--tp-comm-overlap")
    unhidden = cli_json(*base, "--framework", "torchtitan")
    assert priced["breakdown"]["tp_comm_s"] < unhidden["breakdown"]["tp_comm_s"]
    assert any("torch.compile" in note for note in priced["assumed"])


def test_deepspeed_has_no_tp_overlap() -> None:
    run = run_cli(
        "estimate", *L70, "--tp", "8", "--zero", "1", "--framework", "deepspeed",
        "--tp-comm-overlap", check=False,
    )  # fmt: skip
    assert_user_error(run, "DeepSpeed has no TP communication overlap")
    lay = Layout(tp=8, dp=2, seq=4096, zero=1)
    with pytest.raises(SpecError, match="--emit deepspeed: --tp-comm-overlap"):
        deepspeed_config(lay, Flags(framework="deepspeed", tp_comm_overlap=True))


# d, e. --delay-wgrad-compute and --overlap-moe-expert-parallel-comm as TransformerConfig asks


def test_delay_wgrad_compute_needs_the_expert_all_to_all_overlap() -> None:
    run = run_cli(
        "plan", "-m", "mixtral-8x7b", "-c", "dgx-h100", "--nodes", "8", "--gbs", "256",
        "--delay-wgrad-compute", "--emit", "megatron", check=False,
    )  # fmt: skip
    assert_user_error(run, "--delay-wgrad-compute without --overlap-moe-expert-parallel-comm")
    model = load_model("mixtral-8x7b")
    lay = Layout(tp=1, ep=8, dp=64, gbs=256, seq=4096, distributed_optimizer=True)
    with pytest.raises(SpecError, match="--delay-wgrad-compute"):
        megatron_args(model, lay, Flags(delay_wgrad_compute=True))
    plain = megatron_args(model, lay, Flags())
    with pytest.raises(AssertionError, match="delay_wgrad_compute"):
        judge.megatron_config([*plain, "--delay-wgrad-compute"])  # megatron-core refuses it
    both = Flags(delay_wgrad_compute=True, overlap_moe_expert_parallel_comm=True)
    config = megatron_ok(megatron_args(model, lay, both), lay)
    assert config.delay_wgrad_compute and config.overlap_moe_expert_parallel_comm


def test_delay_wgrad_compute_on_a_dense_model_is_left_out_not_refused() -> None:
    """A dense model's launch drops the MoE-only flag (estimate says so), so no framework
    refuses the plan over it, and megatron-core accepts Megatron's launch."""
    base = ["-m", "llama3-8b", "-c", "dgx-h100", "--nodes", "4", "--dp", "32"]
    priced = cli_json("estimate", *base, *MEGATRON, "--delay-wgrad-compute")
    assert any("--delay-wgrad-compute changes nothing" in n for n in priced["assumed"])
    plan = ["plan", *base[:6], "--top", "1"]
    with_flag = cli_json(*plan, "--delay-wgrad-compute")["plans"][0]["frameworks"]
    assert with_flag and with_flag == cli_json(*plan)["plans"][0]["frameworks"]
    model = load_model("llama3-8b")
    lay = Layout(dp=32, gbs=32, seq=4096, distributed_optimizer=True)
    args = megatron_args(model, lay, Flags(delay_wgrad_compute=True))
    assert "--delay-wgrad-compute" not in args
    megatron_ok(args, lay)


@pytest.mark.parametrize(
    ("options", "layout", "needle", "core"),
    [
        (["--pp", "2"], {"pp": 2, "dp": 32}, "needs virtual pipeline stages", "virtual_pipeline"),
        (["--recompute", "full"], {"recompute": "full"}, "full recompute", "recomput"),
        (
            ["--moe-token-dispatcher-type", "allgather"],
            {},
            "allgather dispatcher",
            "alltoall/flex",
        ),
    ],
)
def test_megatron_refuses_the_expert_all_to_all_overlap_where_megatron_core_does(
    options: list[str], layout: dict[str, Any], needle: str, core: str
) -> None:
    run = run_cli(
        "estimate", *MIXTRAL, *MEGATRON, "--overlap-moe-expert-parallel-comm", *options,
        check=False,
    )  # fmt: skip
    assert_user_error(run, "--overlap-moe-expert-parallel-comm", needle)
    model = load_model("mixtral-8x7b")
    fields = {"tp": 1, "ep": 8, "dp": 64, "gbs": 256, "seq": 4096, **layout}
    lay = Layout(**fields, distributed_optimizer=True)
    dispatcher = "allgather" if "allgather" in options else "alltoall"
    flags = Flags(overlap_moe_expert_parallel_comm=True, moe_token_dispatcher_type=dispatcher)
    with pytest.raises(SpecError, match=needle):
        megatron_args(model, lay, flags)
    plain = megatron_args(model, lay, Flags(moe_token_dispatcher_type=dispatcher))
    with pytest.raises(AssertionError, match=core):  # megatron-core's own assert
        judge.megatron_config([*plain, "--overlap-moe-expert-parallel-comm"])


def test_plan_with_the_expert_all_to_all_overlap_searches_what_megatron_runs() -> None:
    out = cli_json(
        "plan", "-m", "mixtral-8x7b", "-c", "dgx-h100", "--nodes", "8", "--gbs", "256",
        "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute", *MEGATRON, "--top", "5",
        "--emit", "megatron",
    )  # fmt: skip
    for row in out["plans"]:
        assert row["ep"] > 1 and row["recompute"] != "full" and row["moe_a2a_overlap"]
        assert row["pp"] == 1 or row["vpp"] > 1
        assert row["frameworks"] == ["megatron"]
    best = out["plans"][0]
    args = [a.strip() for a in out["emitted"]["megatron"].split("\\\n")]
    fields = {k: best[k] for k in ("tp", "ep", "pp", "vpp", "dp", "mbs", "gbs", "seq")}
    lay = Layout(**fields, distributed_optimizer=best["distributed_optimizer"])
    config = megatron_ok(args, lay)  # megatron-core's asserts on the launch plan 1 writes
    assert config.overlap_moe_expert_parallel_comm and config.delay_wgrad_compute


# f. DeepSpeed's overlap_comm as priced


def test_deepspeed_writes_the_gradient_reduce_overlap_it_is_priced_with(monkeypatch: Any) -> None:
    lay = Layout(tp=1, dp=16, seq=4096, zero=2)
    for overlap in (True, False):
        flags = Flags.resolve("deepspeed", {"overlap_grad_reduce": overlap})
        config = deepspeed_config(lay, flags)
        assert config["zero_optimization"]["overlap_comm"] is overlap
        read = judge.deepspeed_config(config, lay.dp, monkeypatch)
        assert read.zero_config.overlap_comm is overlap
    base = ["estimate", "-m", "llama3-8b", "--nodes", "2", "--zero", "2"]
    hidden = cli_json(*base, "--framework", "deepspeed")["breakdown"]["dp_comm_s"]
    exposed = cli_json(*base, "--framework", "deepspeed", "--no-overlap-grad-reduce")
    assert exposed["breakdown"]["dp_comm_s"] > hidden
    run = run_cli(*base[:-1], "3", "--framework", "deepspeed", "--no-overlap-grad-reduce",
                  check=False)  # fmt: skip
    assert_user_error(run, "--no-overlap-grad-reduce at --zero 3")


# g. facts


def test_megatron_fsdp_is_named_not_denied() -> None:
    run = run_cli("estimate", *L70, "--tp", "8", "--zero", "3", *MEGATRON, check=False)
    assert_user_error(run, "--use-megatron-fsdp", "tierwise neither prices nor emits")
    assert "has no FSDP" not in run.stderr


def test_megatron_argument_defaults_are_megatron_lms() -> None:
    own = frameworks.MEGATRON_ARGUMENTS
    assert own["align_param_gather"] is True  # --no-align-param-gather is store_false
    assert own["overlap_grad_reduce"] is own["overlap_param_gather"] is False
    # a log that prints no align_param_gather predates the option
    value, why = frameworks.LOGGED["megatron-lm"].unstated["align_param_gather"]
    assert value is False and "before --no-align-param-gather" in why


def test_plan_rows_name_only_frameworks_that_run_their_schedule_and_overlaps() -> None:
    out = cli_json(
        "plan", "-m", "deepseek-v3", "-c", "dgx-h100", "--nodes", "128", "--gbs", "2048",
        "--pipeline-schedule", "DualPipe", "--top", "2",
    )  # fmt: skip
    for row in out["plans"]:
        assert row["pipeline_schedule"] == "DualPipe"
        assert "megatron" not in row["frameworks"]  # Megatron-LM has no DualPipe
    plain = cli_json("plan", "-m", "llama3-8b", "--nodes", "2", "--gbs", "64", "--top", "1")
    row = plain["plans"][0]
    assert set(row["overlap"]) == set(Flags().overlaps())
    assert {"pipeline_schedule", "microbatch_group_size", "moe_a2a_overlap"} <= set(row)


def test_a_refusal_no_framework_can_take_says_why_each_cannot() -> None:
    run = run_cli(
        "estimate", *L70, "--tp", "8", "--pp", "4", "--vpp", "2", "--gbs", "4", *MEGATRON,
        "--use-distributed-optimizer", check=False,
    )  # fmt: skip
    assert_user_error(run, "frameworks that can: none (torchtitan: ", "deepspeed: ")


def test_the_estimate_says_which_overlaps_it_assumed() -> None:
    out = cli_json("estimate", *L70, "--tp", "8", "--pp", "2", *MEGATRON)
    notes = [n for n in out["assumed"] if n.startswith("overlap flags not given")]
    assert len(notes) == 1
    assert "--overlap-grad-reduce" in notes[0] and "--no-tp-comm-overlap" in notes[0]
    assert "Megatron-LM's own defaults: --no-overlap-grad-reduce" in notes[0]
    given = cli_json(
        "estimate", *L70, "--tp", "8", "--pp", "2", *MEGATRON, "--overlap-grad-reduce",
        "--overlap-param-gather", "--tp-comm-overlap",
    )  # fmt: skip
    assert not any(n.startswith("overlap flags not given") for n in given["assumed"])


def test_cuda_graphs_and_the_expert_all_to_all_overlap_are_refused_together() -> None:
    run = run_cli(
        "estimate", *MIXTRAL, *MEGATRON, "--overlap-moe-expert-parallel-comm",
        "--enable-cuda-graph", check=False,
    )  # fmt: skip
    assert_user_error(run, "--enable-cuda-graph")
    model = load_model("mixtral-8x7b")
    lay = Layout(tp=1, ep=8, dp=64, gbs=256, seq=4096, distributed_optimizer=True)
    plain = megatron_args(model, lay, Flags(cuda_graphs=True))
    with pytest.raises(AssertionError, match="CUDA graph"):  # --enable-cuda-graph is "local"
        judge.megatron_config([*plain, "--overlap-moe-expert-parallel-comm"])


def test_plan_says_the_options_that_change_nothing_for_its_best_plan() -> None:
    """plan says them too, of plan 1 (it was silent); a switch given off is named --no-x."""
    args = ["plan", "-m", "llama3-8b", "--nodes", "4", "--top", "1", "--fix", "vpp=1"]
    idle = [*args, "--delay-wgrad-compute", "--no-overlap-p2p-communication"]
    notes = cli_json(*idle)["notes"]
    assert any(n.startswith("--delay-wgrad-compute changes nothing") for n in notes)
    assert any(n.startswith("--no-overlap-p2p-communication changes nothing") for n in notes)
    assert "note: plan 1: --delay-wgrad-compute changes nothing" in run_cli(*idle).stdout
    assert cli_json(*args)["notes"] == []


def test_options_that_change_nothing_are_said_and_left_out() -> None:
    dense = cli_json(
        "estimate", *L70, "--tp", "8", "--overlap-moe-expert-parallel-comm",
        "--delay-wgrad-compute", "--overlap-p2p-communication",
    )  # fmt: skip
    notes = " | ".join(dense["assumed"])
    assert "--delay-wgrad-compute changes nothing for a dense model" in notes
    assert "--overlap-moe-expert-parallel-comm changes nothing for a dense model" in notes
    assert "--overlap-p2p-communication changes nothing at --vpp 1" in notes
    model, lay = load_model("llama3-8b"), Layout(tp=8, dp=2, seq=4096)
    flags = Flags(overlap_moe_expert_parallel_comm=True, delay_wgrad_compute=True)
    args = megatron_args(model, lay, flags)
    assert not {"--delay-wgrad-compute", "--overlap-moe-expert-parallel-comm"} & set(args)
    megatron_ok(args, lay)
    deep = cli_json(
        "estimate", "-m", "llama3-8b", "--nodes", "2", "--zero", "1", "--framework",
        "deepspeed", "--overlap-param-gather",
    )  # fmt: skip
    assert any(
        "--overlap-param-gather changes nothing under DeepSpeed" in n for n in deep["assumed"]
    )


@pytest.mark.parametrize(
    ("layout", "option", "said"),
    [
        (["--tp", "8", "--pp", "4"], "--no-overlap-param-gather", "without a sharded optimizer"),
        (["--tp", "8", "--pp", "4", *MEGATRON, "--use-distributed-optimizer"],
         "--no-align-param-gather", "here: it aligns"),
        (["--tp", "1", "--pp", "4"], "--no-async-tensor-model-parallel-allreduce", "at --tp 1"),
        (["--tp", "8", "--pp", "4", "--framework", "torchtitan", "--zero", "2"],
         "--no-async-tensor-model-parallel-allreduce", "under torchtitan"),
        (["--tp", "8", "--pp", "4", "--use-distributed-optimizer"], "--no-fp8-param-gather",
         "at --dtype bf16"),
        (["--tp", "8", "--pp", "4"], "--enable-cuda-graph", "for a dense model"),
        (["--tp", "8", "--pp", "4"], "--cache-expert-inputs", "for a dense model"),
        (["--tp", "8", "--pp", "4", "--framework", "deepspeed"], "--no-overlap-grad-reduce",
         "under DeepSpeed with pp > 1"),
        (["--tp", "8", "--pp", "1"], "--pipeline-schedule Interleaved1F1B", "at --pp 1"),
        (["--tp", "8", "--pp", "4"], "--microbatch-group-size-per-virtual-pipeline-stage 2",
         "at --vpp 1"),
        (["--tp", "8", "--pp", "8"], "--no-overlap-grad-reduce", "with one data-parallel"),
        (["--tp", "8", "--pp", "8", "--use-distributed-optimizer"], "--no-overlap-param-gather",
         "with one data-parallel"),
    ],
)  # fmt: skip
def test_options_the_price_ignores_are_said(layout: list[str], option: str, said: str) -> None:
    """Each option changes neither the step nor the memory of a layout that lacks what it
    acts on (weight gathers, virtual stages, TP, an FP8 layout, MoE layers), and says so."""
    base = cli_json("estimate", *L70, *layout)
    given = cli_json("estimate", *L70, *layout, *option.split())
    for key in ("step_time_s", "memory_gib_per_gpu"):
        assert given[key] == base[key]
    assert [n for n in given["assumed"] if n.startswith(f"{option} changes nothing {said}")]
