"""Host time of MoE layers without CUDA graphs: counted per local expert, layer and pass."""

from __future__ import annotations

import pytest

from tests.conftest import cli_json
from tierwise.hardware.cluster import load_cluster
from tierwise.perf.estimate import estimate
from tierwise.perf.step import Flags
from tierwise.perf.terms.host import MOE_HOST_PER_EXPERT_S, host_seconds
from tierwise.perf.terms.stage import stage_of
from tierwise.plan.emit import megatron_args
from tierwise.workload.layout import Layout, layout_fields
from tierwise.workload.load import load_model

H100 = load_cluster("dgx-h100", nodes=2).gpu


def test_host_seconds_by_hand() -> None:
    m = load_model("mixtral-8x7b")  # 32 MoE layers of 8 experts
    lay = Layout(pp=4, dp=4, ep=4, seq=4096, gbs=64)
    s = stage_of(m, H100, layout_fields(lay, m))
    # 8 layers on the stage x (forward, backward) x 8/4 local experts.
    assert host_seconds(s, cuda_graphs=False) == pytest.approx(8 * 2 * 2 * MOE_HOST_PER_EXPERT_S)
    assert host_seconds(s, cuda_graphs=True) == 0
    full = stage_of(m, H100, layout_fields(lay.model_copy(update={"recompute": "full"}), m))
    assert host_seconds(full, cuda_graphs=False) == pytest.approx(8 * 3 * 2 * MOE_HOST_PER_EXPERT_S)
    dense = load_model("llama3-8b")
    s = stage_of(dense, H100, layout_fields(Layout(dp=16, seq=4096, gbs=64), dense))
    assert host_seconds(s, cuda_graphs=False) == 0


def test_cuda_graphs_remove_the_host_time_from_the_step() -> None:
    m, c = load_model("qwen3-30b-a3b"), load_cluster("dgx-h100", nodes=2)
    lay = Layout(dp=16, ep=16, mbs=1, gbs=256, seq=4096)
    plain = estimate(m, c, lay, Flags())
    graphed = estimate(m, c, lay, Flags(cuda_graphs=True))
    host = plain["compute_parts_s"]["host_sync"]
    assert host > 0 and graphed["compute_parts_s"]["host_sync"] == 0
    assert plain["step_time_s"] - graphed["step_time_s"] == pytest.approx(host, rel=0.05)


def test_estimate_enable_cuda_graph_flag() -> None:
    args = ["estimate", "--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--nodes", "2"]
    args += ["--ep", "16", "--gbs", "64", "--json"]
    plain, graphed = cli_json(*args), cli_json(*args, "--enable-cuda-graph")
    assert graphed["compute_parts_s"]["host_sync"] == 0 < plain["compute_parts_s"]["host_sync"]


def test_plan_takes_the_cuda_graph_flag() -> None:
    args = ["plan", "--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--nodes", "2"]
    args += ["--gbs", "256", "--top", "1", "--json"]
    plain, graphed = cli_json(*args), cli_json(*args, "--enable-cuda-graph")
    assert graphed["plans"][0]["step_time_s"] < plain["plans"][0]["step_time_s"]


def test_megatron_emitter_writes_the_cuda_graph_flag() -> None:
    m = load_model("qwen3-30b-a3b")
    lay = Layout(dp=16, ep=16, seq=4096, gbs=256)
    assert "--enable-cuda-graph" in megatron_args(m, lay, Flags(cuda_graphs=True))
    assert "--enable-cuda-graph" not in megatron_args(m, lay)
