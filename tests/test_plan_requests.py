"""Planner requests: the tokens-per-dollar objective, sweeps with gaps, and bad input."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.errors import SpecError
from tierwise.hardware.cluster import load_cluster
from tierwise.plan.emit import deepspeed_config
from tierwise.plan.search import job_sizes, search, tokens_per_dollar
from tierwise.plan.space import build_space
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model


def test_job_sizes_for_tokens_per_dollar_are_whole_power_of_two_node_counts() -> None:
    cluster = load_cluster("dgx-h100", nodes=12)
    assert job_sizes(cluster, 96, "step_time") == [96]
    assert job_sizes(cluster, 96, "tokens_per_dollar") == [8, 16, 32, 64, 96]


def test_tokens_per_dollar_ranks_by_cost_and_may_use_fewer_gpus() -> None:
    model, cluster = load_model("llama3-70b"), load_cluster("dgx-h100", nodes=16)
    every = {"dtype": "any"}
    fast = search(model, cluster, 512, 4096, top=1, fix=every).plans[0]
    cheap = search(model, cluster, 512, 4096, top=5, objective="tokens_per_dollar", fix=every).plans
    per_dollar = [tokens_per_dollar(p["tokens_per_s"], p["gpus"], cluster) for p in cheap]
    tie = 1 - 2e-3  # near-equal plans are ranked by memory headroom
    assert all(a >= b * tie for a, b in itertools.pairwise(per_dollar))
    assert fast["gpus"] == 128
    assert cheap[0]["gpus"] < 128  # a smaller job runs at a higher MFU for this batch
    assert per_dollar[0] > tokens_per_dollar(fast["tokens_per_s"], 128, cluster)
    assert cheap[0]["step_time_s"] > fast["step_time_s"]


def test_plan_json_rows_carry_gpus_and_tokens_per_dollar() -> None:
    out = cli_json(
        "plan", "-m", "llama3-8b", "-c", "dgx-h100", "--nodes", "4", "--gbs", "128",
        "--objective", "tokens_per_dollar", "--top", "2",
    )  # fmt: skip
    row = out["plans"][0]
    gpu_hours_per_s = row["gpus"] / 3600
    assert row["tokens_per_dollar"] == pytest.approx(row["tokens_per_s"] / gpu_hours_per_s / 2.5)
    assert row["gpus"] in {8, 16, 32}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--gbs", "-4"), ("--gbs", "-4", "allowed: 1 to")),
        (("--gbs", "0"), ("--gbs", "0", "allowed: 1 to")),
        (("--seq", "0"), ("--seq", "0", "allowed: 1 to")),
        (("--top", "0"), ("--top", "0", "positive")),
        (("--fix", "mbs=0"), ("mbs=0", ">= 1")),
        (("--fix", "tp=-8"), ("tp=-8", ">= 1")),
        (("--fix", "vpp=x"), ("vpp", "integer")),
        (("--fix", "tp=3"), ("tp=3", "values with layouts: 1, 2, 4, 8")),
        (("--fix", "tp=8,pp=8"), ("tp=8", "other --fix values", "values with layouts: 1, 2")),
        (("--gbs", "7", "--nodes", "3", "--fix", "pp=1"), ("gbs 7", "pp=1 rules out")),
    ],
)
def test_bad_plan_requests_are_one_line_errors(args: tuple[str, ...], words: tuple) -> None:
    base = ("plan", "-m", "llama3-8b", "-c", "dgx-h100", "--nodes", "2", "--gbs", "64")
    assert_user_error(run_cli(*base, *args, check=False), *words)


def test_sweep_reports_rows_without_layouts_and_keeps_going() -> None:
    out = cli_json(
        "sweep", "-m", "llama3-8b", "-c", "dgx-h100", "--nodes", "2", "--gbs", "64",
        "--vary", "nodes=2,3", "--fix", "pp=1",
    )  # fmt: skip
    ok, gap = out["rows"]
    assert ok["tokens_per_s"] > 0 and "error" not in ok
    assert gap["tokens_per_s"] is None and "no layout" in gap["error"]
    # The base cluster itself may have no layout; the varied ones still plan.
    base_gap = cli_json(
        "sweep", "-m", "llama3-8b", "-c", "dgx-h100", "--nodes", "3", "--gbs", "64",
        "--vary", "nodes=2,4", "--fix", "pp=1",
    )  # fmt: skip
    assert base_gap["needed_Gbps_per_gpu"] is None and "no layout" in base_gap["error"]
    assert all(r["tokens_per_s"] > 0 for r in base_gap["rows"])
    # A value that is no cluster is the user's error, not a row.
    typo = run_cli("sweep", "-m", "llama3-8b", "--vary", "nic=foo", check=False)
    assert_user_error(typo, "foo")


def test_sweep_needed_bandwidth_replans_and_checks_within() -> None:
    out = cli_json(
        "sweep", "-m", "llama3-8b", "-c", "dgx-h100", "--nodes", "2", "--gbs", "64",
        "--within", "5", "--fix", "tp=1",
    )  # fmt: skip
    assert out["within_pct"] == 5
    assert out["step_time_at_needed_s"] <= out["best_step_time_s"] * 1.05
    assert out["best_layout"]["tp"] == 1
    assert out["layout_at_needed"]["tp"] == 1
    assert 1 < out["needed_Gbps_per_gpu"] < 12800
    for within in ("0", "-5", "150"):
        assert_user_error(
            run_cli("sweep", "-m", "llama3-8b", "--within", within, check=False), "--within"
        )


def test_out_dir_holds_every_group_of_the_best_plan(tmp_path: Path) -> None:
    out = cli_json(
        "plan", "-m", "llama3-70b", "-c", "dgx-h100", "--nodes", "4", "--gbs", "64",
        "--fix", "tp=8,pp=2,dtype=bf16", "--out", str(tmp_path),
    )  # fmt: skip
    members = json.loads((tmp_path / "mapping.json").read_text())
    best = out["plans"][0]
    assert len(members["tp"]) == 32 // 8 and len(members["pp"]) == 32 // 2
    # TP groups are whole nodes; the two stages of a pipeline sit on different nodes.
    assert all(len({gpu.split(":")[0] for gpu in g}) == 1 for g in members["tp"])
    assert all(len({gpu.split(":")[0] for gpu in g}) == 2 for g in members["pp"])
    gpus = sorted(gpu for g in members["tp"] for gpu in g)
    assert len(set(gpus)) == 32 == best["gpus"]


def test_each_framework_reduces_gradients_as_it_does_by_default() -> None:
    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100", nodes=2)
    for framework, bf16 in (("megatron", False), ("torchtitan", False), ("deepspeed", True)):
        arrays = build_space(model, cluster, 16, 64, 4096, framework=framework).arrays
        assert set(arrays["grad_reduce_bf16"].tolist()) == {bf16}
    mixed = build_space(model, cluster, 16, 64, 4096).arrays  # any: each framework's own
    pairs = zip(mixed["zero"].tolist(), mixed["grad_reduce_bf16"].tolist(), strict=True)
    assert set(pairs) == {
        (0, False),  # Megatron's distributed optimizer
        (2, False),  # torchtitan FSDP2 without resharding
        (3, False),  # torchtitan FSDP2
        (1, True),  # DeepSpeed ZeRO-1, -2, -3
        (2, True),
        (3, True),
    }
    # A fix one framework cannot run goes to another that can, else names each one's reason.
    zero3_bf16 = build_space(model, cluster, 16, 64, 4096, {"zero": "3", "grad_reduce_bf16": "1"})
    assert zero3_bf16.size and zero3_bf16.arrays["cp"].max() == 1  # DeepSpeed's
    with pytest.raises(SpecError, match=r"no framework runs it \(megatron: .*deepspeed: cp=2"):
        build_space(model, cluster, 16, 64, 4096, {"cp": "2", "zero": "2", "grad_reduce_bf16": "1"})
    with pytest.raises(SpecError, match="torchtitan reduces gradients in float32 only"):
        build_space(model, cluster, 16, 64, 4096, {"grad_reduce_bf16": "true"}, "torchtitan")
    fp32 = deepspeed_config(Layout(dp=8, seq=4096, zero=1))
    assert fp32["communication_data_type"] == "fp32"
    bf16 = deepspeed_config(Layout(dp=8, seq=4096, zero=1, grad_reduce_bf16=True))
    assert "communication_data_type" not in bf16


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 6), min_size=1, max_size=5),
    st.lists(st.lists(st.integers(1, 8), min_size=1, max_size=4), min_size=1, max_size=3),
    st.lists(st.integers(2, 5), min_size=3, max_size=3),
)
def test_pruning_axis_by_axis_keeps_the_full_products_survivors_in_order(
    base: list[int], axes_values: list[list[int]], moduli: list[int]
) -> None:
    """`_pruned_product` equals building the whole product and pruning it at the end."""
    from tierwise.plan.space import _pruned_product

    names = [f"a{i}" for i in range(len(axes_values))]
    axes = dict(zip(names, axes_values, strict=True))
    # a rule per axis reading that axis and the ones before it
    rules = {
        name: (lambda r, n=name, k=moduli[i % 3]: (r[n] + r["tp"]) % k != 0)
        for i, name in enumerate(names)
    }
    got = _pruned_product({"tp": np.array(base)}, axes, rules)
    full = [
        row
        for row in itertools.product(base, *axes_values)
        if all((row[i + 1] + row[0]) % moduli[i % 3] != 0 for i in range(len(names)))
    ]
    assert [tuple(int(got[k][j]) for k in ("tp", *names)) for j in range(len(got["tp"]))] == full
