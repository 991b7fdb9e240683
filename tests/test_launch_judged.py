"""The frameworks' own code accepts every emitted launch of a matrix of plans (dense, GQA,
MoE, MLA; 1 to 128 nodes; H100, B200, GB200), and each launches the layout the plan printed
(`tests/framework_judges.py` says how each framework is asked).

Needs the ``[frameworks]`` extra (``make test`` installs it)."""

from __future__ import annotations

from typing import Any

import pytest

from tests import framework_judges as judge
from tierwise.errors import SpecError
from tierwise.hardware.cluster import load_cluster
from tierwise.plan.emit import deepspeed_config, launch_of, megatron_args, torchtitan_args
from tierwise.plan.emit.megatron import environment
from tierwise.plan.emit.torchtitan import REGISTRY
from tierwise.plan.request import Behaviour, plan_request
from tierwise.plan.search import search
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model

pytest.importorskip("megatron.core", reason="the [frameworks] extra (make test installs it)")

MATRIX = [  # (model, cluster, nodes, gbs, seq): dense MHA, GQA, MoE, MLA
    ("llama2-7b", "dgx-h100", 1, 64, 4096),
    ("llama3-70b", "dgx-h100", 3, 48, 4096),
    ("llama3-70b", "dgx-b200", 16, 256, 8192),
    ("llama3-405b", "dgx-h100", 128, 2048, 8192),
    ("mixtral-8x7b", "dgx-h100", 8, 256, 4096),
    ("qwen3-30b-a3b", "gb200-nvl72", 18, 512, 4096),
    ("deepseek-v3", "gb200-nvl72", 72, 1024, 4096),
    ("deepseek-v3", "dgx-b200", 128, 2048, 4096),
]


REGISTERED = {(name, dtype) for name, (_, configs) in REGISTRY.items() for dtype in configs}


def best(name: str, cluster_name: str, nodes: int, gbs: int, seq: int, framework: str) -> Any:
    """The plan's request and its best layout (None where the framework runs no layout)."""
    model, cluster = load_model(name), load_cluster(cluster_name, nodes=nodes)
    req = plan_request(model, cluster, Behaviour(framework=framework), gbs=gbs, seq=seq)
    try:
        plan = search(
            req.model, cluster, gbs, seq, top=1, flags=req.flags, framework=framework,
            headroom_gib=req.headroom_gib,
        ).plans[0]  # fmt: skip
    except SpecError:
        return req, None
    return req, Layout(**plan["layout"])


@pytest.mark.parametrize("case", MATRIX, ids=[f"{m}-{c}-{n}" for m, c, n, *_ in MATRIX])
def test_megatron_accepts_the_launch_of_the_plan(case: tuple[Any, ...]) -> None:
    req, lay = best(*case, "megatron")
    assert lay is not None
    args = megatron_args(req.model, lay, req.flags)
    config = judge.megatron_config(args)  # megatron-core's TransformerConfig checks
    broken = judge.megatron_validate_args(args, environment(lay), lay.world)
    assert not broken, broken
    assert (config.tensor_model_parallel_size, config.pipeline_model_parallel_size) == (
        lay.tp,
        lay.pp,
    )
    assert config.context_parallel_size == lay.cp
    assert config.expert_model_parallel_size == lay.ep
    assert judge.megatron_stage_layers(args) == list(lay.stage_layers(req.model))
    values = judge.megatron_values(args)
    assert int(values["global_batch_size"]) == lay.global_batch
    assert int(values["micro_batch_size"]) == lay.mbs
    assert lay.world // (lay.tp * lay.pp * lay.cp) == lay.dp
    if req.model.moe is not None:
        assert config.moe_grouped_gemm


def test_megatron_accepts_allgather_context_parallelism() -> None:
    model, cluster = load_model("llama3-70b"), load_cluster("dgx-h100", nodes=4)
    behaviour = Behaviour(given={"cp_comm": "allgather"})
    req = plan_request(model, cluster, behaviour, gbs=16, seq=32768, fix="cp=2")
    assert req.framework == "megatron"  # the one framework that runs it
    plan = search(
        req.model, cluster, 16, 32768, top=1, fix=req.fixes, flags=req.flags,
        framework=req.framework, headroom_gib=req.headroom_gib,
    ).plans[0]  # fmt: skip
    lay = Layout(**plan["layout"])
    args = megatron_args(req.model, lay, req.flags)
    config = judge.megatron_config(args)
    assert config.context_parallel_size == lay.cp == 2 and config.cp_comm_type == "allgather"
    assert not judge.megatron_validate_args(args, environment(lay), lay.world)


@pytest.mark.parametrize(("method", "layers"), [("block", 2), ("uniform", 4)])
def test_megatron_runs_the_partial_recompute_of_the_layout(method: str, layers: int) -> None:
    model = load_model("llama3-70b")
    lay = Layout(
        tp=8, pp=4, dp=2, seq=4096, recompute="full", recompute_method=method,
        recompute_num_layers=layers,
    )  # fmt: skip
    args = megatron_args(model, lay)
    config = judge.megatron_config(args)
    assert (config.recompute_granularity, config.recompute_method) == ("full", method)
    assert config.recompute_num_layers == layers
    assert not judge.megatron_validate_args(args, environment(lay), lay.world)


def test_megatron_catches_what_it_should() -> None:
    """The judge is not a rubber stamp: megatron-core refuses moe_act without grouped GEMM;
    the recorded rules miss neither the environment nor the position embeddings."""
    model = load_model("mixtral-8x7b")
    lay = Layout(tp=2, ep=4, dp=4, seq=4096, recompute="selective", recompute_modules=["moe_act"])
    args = [a for a in megatron_args(model, lay) if a != "--moe-grouped-gemm"]
    with pytest.raises(ValueError, match="moe_grouped_gemm"):
        judge.megatron_config(args)
    short = [a if not a.startswith("--max-position") else "--max-position-embeddings 1024"
             for a in args]  # fmt: skip
    broken = judge.megatron_validate_args(short, {}, lay.world)
    assert any("max_position" in b for b in broken) and any("CUDA_DEVICE" in b for b in broken)


@pytest.mark.parametrize("case", MATRIX, ids=[f"{m}-{c}-{n}" for m, c, n, *_ in MATRIX])
def test_torchtitan_parses_the_launch_of_the_plan(case: tuple[Any, ...]) -> None:
    req, lay = best(*case, "torchtitan")
    if lay is None:
        pytest.skip("torchtitan runs no layout of it here")
    if (req.model.name, lay.dtype) not in REGISTERED:  # refused in one line
        with pytest.raises(SpecError, match=r"torchtitan 0\.3\.0 registers"):
            torchtitan_args(req.model, lay, req.flags)
        return
    args = torchtitan_args(req.model, lay, req.flags)
    config = judge.torchtitan_config(args)  # its own parser (tyro)
    dims = judge.torchtitan_dims(config, lay.world)
    assert (dims.tp, dims.cp, dims.pp, dims.ep) == (lay.tp, lay.cp, lay.pp, lay.ep)
    assert dims.dp_replicate * dims.dp_shard == lay.dp
    assert config.training.seq_len == lay.seq
    assert config.training.global_batch_size == lay.global_batch
    if lay.pp > 1:
        assert judge.torchtitan_stage_layers(config, lay.pp) == list(lay.stage_layers(req.model))
    ac = config.activation_checkpoint
    owner = "none" if ac is None else type(ac).__qualname__.split(".")[0]
    assert owner == {"none": "none", "selective": "SelectiveAC", "full": "FullAC"}[lay.recompute]


@pytest.mark.parametrize("case", MATRIX[:4], ids=[f"{m}-{c}-{n}" for m, c, n, *_ in MATRIX[:4]])
def test_deepspeed_reads_the_config_of_the_plan(
    case: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    req, lay = best(*case, "deepspeed")
    if lay is None:
        pytest.skip("DeepSpeed runs no layout of it here")
    dp = lay.world // (lay.tp * lay.pp)
    config = judge.deepspeed_config(deepspeed_config(lay), dp, monkeypatch)
    assert config.train_batch_size == lay.global_batch
    assert config.train_micro_batch_size_per_gpu == lay.mbs
    assert config.gradient_accumulation_steps == lay.num_microbatches
    assert config.zero_optimization_stage == max(lay.zero, int(lay.distributed_optimizer))
    launch = launch_of("deepspeed", req.model, lay)
    assert launch.program[-2:] == ["--deepspeed", "--deepspeed_config deepspeed.json"]
