"""The framework table: its rows are the only place a framework is named, its refusals, the
behaviour option group built from `Flags`, and one price per layout across plan, sweep and
report."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise import frameworks
from tierwise.cli.behaviour import BEHAVIOUR_OPTIONS, _options
from tierwise.errors import SpecError
from tierwise.hardware.cluster import load_cluster
from tierwise.perf.estimate import estimate
from tierwise.perf.flags import Flags
from tierwise.plan.request import Behaviour, plan_request
from tierwise.plan.search import search
from tierwise.plan.sweep import sweep
from tierwise.report.inputs import ReportPlan, plans_from_search
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model

SRC = Path(__file__).resolve().parents[1] / "src" / "tierwise"
NAMES = "|".join(frameworks.TABLE)
NAMED = re.compile(rf"""(?<![\w-])["']({NAMES})["'](?![\w])""", re.IGNORECASE)
"""A framework's name as a string literal (how code compares or keys on it)."""


def test_no_module_but_the_table_names_a_framework() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "frameworks.py":
            continue
        for number, text in enumerate(path.read_text().splitlines(), 1):
            if NAMED.search(text):
                offenders.append(f"{path.relative_to(SRC)}:{number}: {text.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_grep_sees_comparisons_and_keys() -> None:
    assert NAMED.search('if framework == "megatron":')
    assert NAMED.search("{'torchtitan': fsdp2}")
    assert not NAMED.search("torchtitan's op-level SAC")
    assert not NAMED.search("--framework megatron")


def test_every_launched_row_emits_and_the_generic_row_runs_everything() -> None:
    assert frameworks.LAUNCHED == ("megatron", "torchtitan", "deepspeed")
    for name in frameworks.LAUNCHED:
        assert frameworks.TABLE[name].emitter is not None
    generic = frameworks.row(None)
    assert generic.emitter is None and generic.schedules == frameworks.SCHEDULES
    for field in dataclasses.fields(frameworks.Framework):  # the defaults name Flags fields
        assert field.name
    flag_fields = {f.name for f in dataclasses.fields(Flags)}
    for row in frameworks.TABLE.values():
        assert set(row.defaults) <= flag_fields


@pytest.mark.parametrize(
    ("layout", "framework", "reason"),
    [
        (dict(zero=1), "torchtitan", "torchtitan has no ZeRO-1"),
        (dict(distributed_optimizer=True), "deepspeed", "no Megatron's distributed optimizer"),
        (dict(zero=2), "megatron", "Megatron-LM has no ZeRO-2"),
        (dict(cp=2, dp=4), "deepspeed", "cp=2: DeepSpeed has no context parallelism"),
        (dict(pp=2, vpp=2, dp=4), "deepspeed", "no interleaved pipeline"),
        (dict(dtype="fp8"), "deepspeed", "dtype=fp8: DeepSpeed trains in bf16"),
        (dict(dtype="nvfp4"), "torchtitan", "torchtitan trains in bf16, fp8, mxfp8"),
        (dict(pp=2, dp=4, zero=2), "deepspeed", "ZeRO stage <= 1 with pipelining"),
        (dict(grad_reduce_bf16=True, zero=3), "torchtitan", "in float32 only"),
        (dict(recompute="selective", recompute_modules=["mlp"]), "torchtitan", "recompute"),
        (dict(zero=3, dp_shard_degree=2), "deepspeed", "no HSDP"),
    ],
)
def test_refusals_are_one_line_naming_the_field(
    layout: dict[str, object], framework: str, reason: str
) -> None:
    lay = Layout(**{"tp": 1, "dp": 8, "gbs": 64, "seq": 4096, **layout})  # type: ignore[arg-type]
    why = frameworks.refusal(frameworks.TABLE[framework], lay)
    assert why is not None and reason in why and "\n" not in why
    assert framework not in frameworks.frameworks_for(lay)
    with pytest.raises(SpecError, match=re.escape(reason)):
        frameworks.check_runs(frameworks.TABLE[framework], lay)


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--scatter-gather-tensors-in-pipeline"], "--scatter-gather-tensors-in-pipeline: "),
        (
            [
                "--vpp",
                "2",
                "--gbs",
                "64",
                "--microbatch-group-size-per-virtual-pipeline-stage",
                "2",
            ],
            "--microbatch-group-size-per-virtual-pipeline-stage 2: ",
        ),
    ],
)
def test_torchtitan_refuses_the_megatron_pipeline_options_it_has_not(
    option: list[str], said: str
) -> None:
    """Both were priced under --framework torchtitan (split sends; micro-batch groups changed
    the step and the memory) while its launch could state neither."""
    base = ["estimate", "-m", "llama3-8b", "--nodes", "4", "--tp", "2", "--no-sp", "--pp", "2"]
    run = run_cli(*base, "--framework", "torchtitan", *option, check=False)
    assert_user_error(run, "--framework torchtitan: ", said, "torchtitan")
    assert cli_json(*base, "--framework", "megatron", *option)["step_time_s"] > 0  # Megatron's
    flags = Flags(framework="torchtitan", scatter_gather_tensors_in_pipeline=True)
    lay = Layout(tp=2, sp=False, pp=2, dp=8, gbs=64, seq=4096, zero=3)
    assert "torchtitan" not in frameworks.frameworks_for(lay, None, flags, load_model("llama3-8b"))


def test_frameworks_for_matches_each_rows_space() -> None:
    """A planned layout runs in the framework whose space found it (the rules stated once)."""
    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100", nodes=2)
    for name in frameworks.LAUNCHED:
        for plan in search(model, cluster, 64, 4096, top=5, framework=name).plans:
            assert name in frameworks.frameworks_for(Layout(**plan["layout"]))


def test_flags_resolve_given_then_row_default_then_field_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tierwise.perf.flags as flags_module

    row = dataclasses.replace(frameworks.MEGATRON, defaults={"tp_comm_overlap": True})
    monkeypatch.setattr(flags_module, "row", lambda name: row if name else frameworks.GENERIC)
    assert Flags.resolve("megatron", {}).tp_comm_overlap is True
    assert Flags.resolve("megatron", {"tp_comm_overlap": False}).tp_comm_overlap is False
    assert Flags.resolve(None, {"tp_comm_overlap": None}).tp_comm_overlap is False
    with pytest.raises(TypeError, match="no field"):
        Flags.resolve(None, {"bogus": 1})


def test_every_behaviour_option_is_a_flags_field_with_its_default_in_the_help() -> None:
    fields = {f.name: f for f in dataclasses.fields(Flags)}
    options = _options()
    for name in BEHAVIOUR_OPTIONS:
        assert name in fields
        annotation, default = options[name]
        assert default is None  # not given: the framework's or the field's default
        help_text = annotation.__metadata__[0].help
        value = fields[name].default
        shown = "none" if value is None else str(value)
        if isinstance(value, bool):
            shown = "on" if value else "off"
        own = frameworks.MEGATRON_ARGUMENTS.get(name)
        if own is not None and own != value:  # Megatron-LM's own default, where it differs
            theirs = ("on" if own else "off") if isinstance(value, bool) else own
            shown += f", as priced and emitted; Megatron-LM's own: {theirs}"
        assert help_text.endswith(f"[default: {shown}]"), help_text
    # the overlaps tierwise assumes on where Megatron-LM's own default is off say so
    for name in ("overlap_grad_reduce", "overlap_param_gather"):
        assert "Megatron-LM's own: off" in options[name][0].__metadata__[0].help
    # a value, not on/off: Megatron-LM's own dispatcher is allgather
    dispatcher = options["moe_token_dispatcher_type"][0].__metadata__[0].help
    assert dispatcher.endswith(
        "[default: alltoall, as priced and emitted; Megatron-LM's own: allgather]"
    )


def test_estimate_without_options_prices_flags_defaults() -> None:
    out = cli_json("estimate", "-m", "llama3-8b", "--nodes", "1", "--tp", "2")
    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100", nodes=1)
    lay = Layout(**out["layout"])
    assert out["step_time_s"] == pytest.approx(estimate(model, cluster, lay)["step_time_s"])


def test_a_behaviour_flag_switches_off_what_a_framework_defaults_to() -> None:
    on = cli_json("estimate", "-m", "llama3-8b", "--nodes", "1", "--tp", "8", "--tp-comm-overlap")
    off = cli_json(
        "estimate", "-m", "llama3-8b", "--nodes", "1", "--tp", "8", "--no-tp-comm-overlap"
    )
    assert on["step_time_s"] < off["step_time_s"]


def test_unknown_framework_is_one_line() -> None:
    estimate_run = run_cli("estimate", "--framework", "nemo", check=False)
    assert_user_error(estimate_run, "--framework: 'nemo'; allowed:")
    plan_run = run_cli("plan", "--framework", "nemo", check=False)
    assert_user_error(plan_run, "--framework: 'nemo'; allowed: any")


@settings(max_examples=6, deadline=None)
@given(
    framework=st.sampled_from(["any", *frameworks.LAUNCHED]),
    tp_overlap=st.sampled_from([None, True]),
    backend=st.sampled_from([None, "fused", "unfused"]),
)
def test_plan_sweep_and_report_price_a_layout_alike(
    framework: str, tp_overlap: bool | None, backend: str | None
) -> None:
    """The same request through plan, sweep and report gives the same best step time."""
    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100", nodes=2)
    given_flags = {"tp_comm_overlap": tp_overlap, "attention_backend": backend}
    behaviour = Behaviour(given=given_flags, framework=framework)
    req = plan_request(model, cluster, behaviour, gbs=32, seq=4096)
    if tp_overlap and "tp_comm_overlap" in frameworks.row(req.flags.framework).fixed_flags:
        with pytest.raises(SpecError, match="no TP communication overlap"):  # DeepSpeed's
            search(model, cluster, req.gbs, req.seq, top=1, flags=req.flags, framework=framework)
        return
    best = search(model, cluster, req.gbs, req.seq, top=1, flags=req.flags, framework=framework)
    plan_step = best.plans[0]["step_time_s"]
    row = sweep(
        model,
        cluster,
        req.gbs,
        req.seq,
        [("nodes", [cluster.nodes])],
        flags=req.flags,
        framework=req.framework,
    )[0]
    report = plans_from_search(model, cluster, req.gbs, req.seq, 1, req.flags, req.framework)[0]
    again = ReportPlan.of(model, cluster, report.layout, flags=req.flags)
    assert row["step_time_s"] == pytest.approx(plan_step, rel=1e-9)
    assert report.estimate["step_time_s"] == pytest.approx(plan_step, rel=1e-9)
    assert again.estimate["step_time_s"] == pytest.approx(plan_step, rel=1e-9)


def test_plan_sweep_and_report_commands_agree(tmp_path: Path) -> None:
    """The commands themselves: one set of options, one step time for the best layout."""
    common = ["-m", "llama3-8b", "--nodes", "1", "--gbs", "16", "--seq", "4096"]
    flags = ["--framework", "megatron", "--tp-comm-overlap", "--attention-backend", "fused"]
    plan = cli_json("plan", *common, *flags, "--top", "1")["plans"][0]
    row = cli_json("sweep", *common, *flags, "--vary", "nodes=1")["rows"][0]
    report = cli_json("report", *common, *flags, "--out", str(tmp_path / "r.html"))["plans"][0]
    assert row["step_time_s"] == pytest.approx(plan["step_time_s"], rel=1e-9)
    assert report["step_time_s"] == pytest.approx(plan["step_time_s"], rel=1e-9)


def test_planning_code_stays_small() -> None:
    """`cli/commands/plan.py` parses and prints (< 120 lines); no function in plan/ or cli/
    over 100 lines."""
    import ast

    assert len((SRC / "cli" / "commands" / "plan.py").read_text().splitlines()) < 120
    long = []
    for folder in ("plan", "cli"):
        for path in sorted((SRC / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                    if lines > 100:
                        long.append(f"{path.relative_to(SRC)}:{node.name} {lines}")
    assert not long, long


@pytest.mark.parametrize("framework", [*frameworks.LAUNCHED])
def test_every_candidate_of_the_space_is_a_valid_layout(framework: str) -> None:
    """The space's vectorised rules against `Layout.validate_for`, over the whole space of a
    MoE model (uneven splits, ep, cp and every sharding scheme included)."""
    from tierwise.plan.search import layout_at
    from tierwise.plan.space import build_space

    model, cluster = load_model("mixtral-8x7b"), load_cluster("dgx-h100", nodes=3)
    space = build_space(model, cluster, 24, 48, 4096, {"dtype": "any"}, framework)
    assert space.size > 100
    for i in range(space.size):
        layout = layout_at(space.arrays, i, model.layers)
        layout.validate_for(model, cluster.world)  # raises on any rule the space broke
        assert framework in frameworks.frameworks_for(layout), (framework, layout)
