"""MoE as Megatron runs it: dispatchers, routing, expert tensor parallelism, all-to-all
overlap (hand-computed with a fake collective model), and EP placement end to end."""

from __future__ import annotations

import pytest

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.hardware.cluster import load_cluster
from tierwise.perf.efficiency import elementwise_seconds
from tierwise.perf.estimate import estimate
from tierwise.perf.step import Flags
from tierwise.perf.terms.compute import compute, permute_bytes
from tierwise.perf.terms.ep import (
    EP_OVERLAP_EFFICIENCY,
    MOE_DROPLESS_IMBALANCE,
    domain_share,
    ep_comm,
    permute_scale,
)
from tierwise.perf.terms.stage import Stage, stage_of
from tierwise.plan.emit import megatron_args
from tierwise.workload.layout import Layout, layout_fields
from tierwise.workload.load import load_model

H100 = load_cluster("dgx-h100", nodes=8).gpu
MIXTRAL = load_model("mixtral-8x7b")  # 32 MoE layers, 8 experts, top 2, hidden 4096
RATE = {"alltoall": 4e-12, "all_gather": 1e-12, "reduce_scatter": 1e-12}


def fake_comm(kind: str, op: str, nbytes: float) -> float:
    return RATE[op] * nbytes


def stage(model=MIXTRAL, **layout: object) -> Stage:
    lay = Layout(**{"seq": 4096, "gbs": 64, "pp": 4, "ep": 8, "dp": 8, **layout})
    return stage_of(model, H100, layout_fields(lay, model))


def test_alltoall_routing_loads() -> None:
    s = stage()  # 8 layers, tp 1: 4096 local tokens, 2 copies each
    buffer = 4096 * 2 * 4096 * 2
    passes = 8 * 2 * 2  # layers x (dispatch + combine) x (forward + backward)
    balanced = ep_comm(s, fake_comm, force_balance=True)
    assert balanced.total_s == pytest.approx(passes * 4e-12 * buffer)
    assert balanced.bytes == pytest.approx(passes * buffer * 7 / 8)
    dropless = ep_comm(s, fake_comm)
    assert dropless.total_s == pytest.approx(MOE_DROPLESS_IMBALANCE * balanced.total_s)
    capped = MIXTRAL.model_copy(
        update={"moe": MIXTRAL.moe.model_copy(update={"capacity_factor": 1.5})}
    )
    capacity = ep_comm(stage(capped), fake_comm, force_balance=True)
    assert capacity.total_s == pytest.approx(1.5 * balanced.total_s)


def test_allgather_moves_every_token_once_whatever_top_k() -> None:
    s = stage()
    gathered = 4096 * 8 * 4096 * 2  # 8 ranks' tokens, bf16
    ag = ep_comm(s, fake_comm, dispatcher="allgather")
    assert ag.total_s == pytest.approx(8 * 2 * (1e-12 + 1e-12) * gathered)
    assert ag.bytes == pytest.approx(8 * 2 * 2 * gathered * 7 / 8)


def test_flex_sends_a_token_once_per_domain() -> None:
    assert domain_share(1, 8) == 1.0
    assert domain_share(2, 2) == pytest.approx(0.75)  # 2 x (1 - 1/4) / 2
    assert domain_share(8, 8) == pytest.approx(1 - (7 / 8) ** 8)
    s = stage(dp=16, ep=16)  # 16 ranks over 2 nodes of 8 GPUs
    flex = ep_comm(s, fake_comm, dispatcher="flex", domain_gpus=8)
    a2a = ep_comm(s, fake_comm, dispatcher="alltoall", domain_gpus=8)
    assert flex.total_s == pytest.approx(0.75 * a2a.total_s)


def test_expert_tensor_parallel_gathers_over_tp() -> None:
    s = stage(tp=2, dp=8, ep=4)  # etp = tp = 2: tokens all-gathered over the expert's TP ranks
    one = ep_comm(stage(tp=2, dp=8, ep=4, etp=1), fake_comm, force_balance=True)
    two = ep_comm(s, fake_comm, force_balance=True)
    local = 4096 / 2  # SP: each TP rank routes half the tokens
    gathered = local * 2 * 2 * 4096 * 2  # top 2, over etp 2, bf16
    assert two.total_s - one.total_s == pytest.approx(8 * 2 * 2e-12 * gathered)


def test_a2a_overlap_hides_steady_state_micro_batches() -> None:
    s = stage()  # 64 / 8 = 8 micro-batches
    plain = ep_comm(s, fake_comm)
    per_layer = plain.total_s / (8 * 2)  # 8 layers x 2 passes
    lapped = ep_comm(s, fake_comm, overlap=True, layer_compute_s=per_layer / 2, delay_wgrad=True)
    steady = 16 * (per_layer - EP_OVERLAP_EFFICIENCY * per_layer / 2)
    assert lapped.exposed_s == pytest.approx(7 / 8 * steady + 1 / 8 * plain.total_s)
    assert lapped.total_s == plain.total_s
    # Without --delay-wgrad-compute the weight-gradient GEMMs (1/3 of the layer) run before
    # the backward all-to-all: 2/3 of the layer's compute to hide behind.
    early = ep_comm(s, fake_comm, overlap=True, layer_compute_s=per_layer / 2)
    steady = 16 * (per_layer - EP_OVERLAP_EFFICIENCY * per_layer / 3)
    assert early.exposed_s == pytest.approx(7 / 8 * steady + 1 / 8 * plain.total_s)


def test_ep64_inside_an_nvl72_rack_beats_ep64_across_racks() -> None:
    model = load_model("deepseek-moe-16b")  # 64 routed experts
    # two NVL72 racks running 64 GPUs each (on full 72-GPU racks the second stage's EP group,
    # ranks 64..127, would straddle them and the step would wait for it)
    racks = load_cluster("gb200-nvl72", nodes=32, nvlink_domain_gpus=64)
    layout = Layout(tp=1, pp=2, ep=64, dp=64, seq=4096, gbs=512)
    inside = estimate(model, racks, layout)  # EP ranks 0..63, 64..127: one rack each
    across = estimate(model, racks, layout, Flags(order=("tp", "pp", "cp", "dp")))  # 0, 2, ..
    assert inside["comm_tiers"]["ep"] == "intra" and across["comm_tiers"]["ep"] != "intra"
    # Across: half of each GPU's all-to-all leaves the rack on its 50 GB/s NIC instead of
    # 900 GB/s NVLink 5, ~7x the time; the step (exposed all-to-all) nearly twice as long.
    assert across["breakdown"]["ep_comm_s"] > 5 * inside["breakdown"]["ep_comm_s"]
    assert across["step_time_s"] > 1.8 * inside["step_time_s"]


def test_moe_flags_end_to_end() -> None:
    base = ["estimate", "-m", "mixtral-8x7b", "-c", "dgx-h100", "--nodes", "8", "--seq", "4096"]
    base += ["--gbs", "256", "--tp", "2", "--ep", "8", "--pp", "2"]
    plain = cli_json(*base)
    assert plain["moe"] == {
        "dispatcher": "alltoall",
        "routing": "dropless",
        "load_imbalance": MOE_DROPLESS_IMBALANCE,
        "a2a_overlap": False,
        "etp": 2,
    }
    balanced = cli_json(*base, "--moe-router-force-load-balancing")
    assert balanced["step_time_s"] < plain["step_time_s"]
    etp1 = cli_json(*base, "--etp", "1")  # EP ranks consecutive: inside the node
    assert plain["comm_tiers"]["ep"] == "leaf" and etp1["comm_tiers"]["ep"] == "intra"
    lapped = cli_json(*base, "--overlap-moe-expert-parallel-comm")
    assert lapped["breakdown"]["ep_comm_s"] < 0.2 * plain["breakdown"]["ep_comm_s"]
    capacity = cli_json(*base, "--moe-expert-capacity-factor", "1.25")
    assert capacity["moe"]["routing"] == "capacity"
    assert capacity["moe"]["load_imbalance"] == 1.25
    gather = cli_json(*base, "--moe-token-dispatcher-type", "allgather")
    assert gather["moe"]["dispatcher"] == "allgather"
    assert_user_error(
        run_cli(*base, "--moe-token-dispatcher-type", "deepep", check=False),
        "--moe-token-dispatcher-type",
        "alltoall, allgather, flex",
    )
    dense = ["estimate", "-m", "llama3-8b", "-c", "dgx-h100", "--nodes", "1", "--gbs", "8"]
    assert_user_error(
        run_cli(*dense, "--moe-expert-capacity-factor", "1.0", check=False), "is dense"
    )
    assert cli_json(*dense)["moe"] is None


def test_megatron_emitter_states_the_moe_choices() -> None:
    layout = Layout(
        tp=2, etp=1, ep=8, pp=2, vpp=2, dp=8, seq=4096, gbs=256, distributed_optimizer=True
    )
    flags = Flags(
        moe_token_dispatcher_type="flex",
        moe_router_force_load_balancing=True,
        overlap_moe_expert_parallel_comm=True,
    )
    args = megatron_args(MIXTRAL, layout, flags)
    for arg in (
        "--moe-token-dispatcher-type flex",
        "--expert-tensor-parallel-size 1",
        "--moe-router-force-load-balancing",
        "--overlap-moe-expert-parallel-comm",
    ):
        assert arg in args
    assert "--moe-token-dispatcher-type alltoall" in megatron_args(MIXTRAL, layout)


def test_plan_takes_the_moe_flags() -> None:
    base = ["plan", "-m", "mixtral-8x7b", "-c", "dgx-h100", "--nodes", "2", "--gbs", "64"]
    base += ["--seq", "4096", "--top", "1"]
    dropless = cli_json(*base)["plans"][0]
    balanced = cli_json(*base, "--moe-router-force-load-balancing")["plans"][0]
    assert balanced["step_time_s"] < dropless["step_time_s"]


def test_permute_traffic_per_dispatcher() -> None:
    s = stage(pp=1, dp=8)  # all 32 layers, 4096 tokens, top 2
    # 2 copies (permute, unpermute) x read + write x 8192 routed tokens x 4096 x bf16, forward
    # plus twice that backward.
    assert permute_bytes(s) == pytest.approx(32 * 2 * 2 * 8192 * 4096 * 2 * 3)
    base = compute(s)
    flex = compute(s, permute_scale=permute_scale("flex", 8, 2))
    gather = compute(s, permute_scale=permute_scale("allgather", 8, 2))
    # flex: a token lands on D = 8 (1 - (7/8)^2) = 1.875 of 8 ranks for its 2 experts;
    # (2 + 1.875) / (2 x 2) of the alltoall traffic.
    assert base.elementwise_s - flex.elementwise_s == pytest.approx(
        (1 - 3.875 / 4) * elementwise_seconds(H100, permute_bytes(s))
    )
    assert gather.elementwise_s - base.elementwise_s == pytest.approx(
        3 * elementwise_seconds(H100, permute_bytes(s))  # ep / top_k = 4 x the traffic
    )


def test_permute_scale_by_hand() -> None:
    # HybridEP / DeepEP, Qwen3-30B-A3B on EP 8: top 8 of 128 experts land on
    # 8 (1 - (7/8)^8) = 5.25 ranks; (8 + 5.25) / 16 of alltoall's permute traffic.
    assert permute_scale("flex", 8, 8) == pytest.approx((8 + 8 * (1 - (7 / 8) ** 8)) / 16)
    assert permute_scale("flex", 1, 8) == 1.0  # one rank: every copy is permuted locally
    # alltoall: one local expert needs no sort by expert; 16 local experts sort and unsort.
    assert permute_scale("alltoall", 8, 2, 1) == 1.0
    assert permute_scale("alltoall", 8, 4, 16) == 2.0
    assert permute_scale("allgather", 8, 2) == 4.0


def test_issue_routing_names_match_megatron_flags() -> None:
    """`--moe-routing`, `--moe-dispatcher` and `--moe-a2a-overlap` (the issue's names) give the
    same estimate as Megatron's flags; contradictions and a missing capacity factor are errors."""
    base = ["estimate", "-m", "mixtral-8x7b", "-c", "dgx-h100", "--nodes", "8", "--seq", "4096"]
    base += ["--gbs", "256", "--tp", "2", "--ep", "8", "--pp", "2"]
    pairs = [
        (["--moe-routing", "balanced"], ["--moe-router-force-load-balancing"]),
        (["--moe-routing", "dropless"], []),
        (
            ["--moe-routing", "capacity", "--moe-expert-capacity-factor", "1.5"],
            ["--moe-expert-capacity-factor", "1.5"],
        ),
        (["--moe-dispatcher", "flex"], ["--moe-token-dispatcher-type", "flex"]),
        (["--moe-a2a-overlap"], ["--overlap-moe-expert-parallel-comm"]),
    ]
    for ours, megatron in pairs:
        assert cli_json(*base, *ours) == cli_json(*base, *megatron), ours
    assert cli_json(*base, "--moe-routing", "balanced")["moe"]["routing"] == "balanced"
    for bad, needle in (
        (["--moe-routing", "capacity"], "give --moe-expert-capacity-factor"),
        (["--moe-routing", "dropless", "--moe-router-force-load-balancing"], "contradicts"),
        (["--moe-routing", "balanced", "--moe-expert-capacity-factor", "1.2"], "contradicts"),
        (["--moe-routing", "greedy"], "balanced, dropless, capacity"),
    ):
        assert_user_error(run_cli(*base, *bad, check=False), needle)
    plan = ["plan", "-m", "mixtral-8x7b", "-c", "dgx-h100", "--nodes", "2", "--gbs", "64"]
    plan += ["--seq", "4096", "--top", "1"]
    assert (
        cli_json(*plan, "--moe-routing", "balanced")["plans"][0]
        == cli_json(*plan, "--moe-router-force-load-balancing")["plans"][0]
    )
