"""How each framework runs data parallelism (Megatron buckets, torchtitan FSDP2, DeepSpeed
ZeRO-3) against hand-computed values with a fake collective model, the attention backends,
and `estimate --framework` end to end."""

from __future__ import annotations

import pytest

from tests.conftest import assert_user_error, cli_json, run_cli
from tests.emit_views import torchtitan_view
from tierwise.errors import SpecError
from tierwise.frameworks import DEEPSPEED, MEGATRON
from tierwise.hardware.cluster import load_cluster
from tierwise.perf.efficiency import hbm_bytes_per_s
from tierwise.perf.estimate import estimate
from tierwise.perf.flags import Flags
from tierwise.perf.terms import dp as dp_term
from tierwise.perf.terms.dp import (
    DP_OVERLAP_EFFICIENCY,
    deepspeed_zero3,
    dp_comm,
    fsdp2,
    layer_modules,
    stage_params,
)
from tierwise.perf.terms.stage import Stage, stage_of
from tierwise.plan.emit.torchtitan import torchtitan_args
from tierwise.workload.layout import Layout, layout_fields
from tierwise.workload.load import load_model
from tierwise.workload.spec import ModelSpec

H100 = load_cluster("dgx-h100", nodes=8).gpu
LAT = 1e-3  # every fake collective: 1 ms latency + 1 ns per byte


def fake_comm(kind: str, op: str, nbytes: float) -> float:
    return LAT + 1e-9 * nbytes


def stage(**layout: object) -> Stage:
    m = load_model("llama3-8b")
    lay = Layout(**{"seq": 4096, "gbs": 16, "dp": 8, **layout})
    return stage_of(m, H100, layout_fields(lay, m))


def test_megatron_buckets_pay_latency_and_expose_the_last_one() -> None:
    s = stage(distributed_optimizer=True)
    params = stage_params(s)  # 8.03e9 parameters: 201 buckets of max(40M, 8M)
    buckets = -(-params // 40e6)
    generic = dp_comm(s, fake_comm, compute_s=1.0)
    megatron = dp_comm(s, fake_comm, compute_s=1.0, runner=MEGATRON)
    rs, ag = fake_comm("", "", params * 4), fake_comm("", "", params * 2)
    assert generic.comm.total_s == pytest.approx(rs + ag)
    assert megatron.comm.total_s == pytest.approx(rs + ag + 2 * (buckets - 1) * LAT)
    # Hidden windows: backward 2/3 s, forward 1/3 s (x 0.9); each side keeps its tail bucket
    # or what overflows the window, whichever is more.
    bwd, fwd = 2 / 3 * DP_OVERLAP_EFFICIENCY, 1 / 3 * DP_OVERLAP_EFFICIENCY
    rs_m, ag_m = rs + (buckets - 1) * LAT, ag + (buckets - 1) * LAT
    expected = max(rs_m - bwd, rs_m / buckets) + max(ag_m - fwd, ag_m / buckets)
    assert megatron.comm.exposed_s == pytest.approx(expected)


def test_fsdp2_per_block_prefetch_hand_computed() -> None:
    s = stage(zero=3)  # 32 blocks, 2 micro-batches, no PP: every micro-batch runs the cycle
    params = stage_params(s)
    block = params / 32
    ag, rs = fake_comm("", "", block * 2), fake_comm("", "", block * 4)  # bf16 / fp32 reduce
    c = 3.2  # s of compute per micro-batch: 0.1 s per block, 1/3 forward
    fwd, bwd = c / 3 / 32 * 0.9, c * 2 / 3 / 32 * 0.9
    per_micro = ag + 31 * max(ag - fwd, 0) + ag + 31 * max(ag + rs - bwd, 0) + rs
    r = fsdp2(s, fake_comm, c, params)
    assert r.exposed_s == pytest.approx(2 * per_micro)
    assert r.total_s == pytest.approx(2 * 32 * (2 * ag + rs))
    assert r.applies
    # zero 2 keeps the weights after forward: no second gather.
    kept = fsdp2(stage(zero=2), fake_comm, c, params)
    assert kept.total_s == pytest.approx(2 * 32 * (ag + rs))
    # With PP gradients sync once, kept weights are gathered once.
    pipe = stage(zero=2, pp=2, dp=4)  # 16 blocks a stage, 4 micro-batches
    blk = stage_params(pipe) / 16
    piped = fsdp2(pipe, fake_comm, c, stage_params(pipe))
    assert piped.total_s == pytest.approx(
        16 * (fake_comm("", "", blk * 2) + fake_comm("", "", blk * 4))
    )


def test_deepspeed_zero3_one_collective_per_module() -> None:
    m = load_model("llama3-8b")
    counts = sum(n for n, _ in layer_modules(m))
    assert counts == 9  # q, k, v, o, gate, up, down, two norms
    s = stage(zero=3)
    r = deepspeed_zero3(s, fake_comm, 3.2, stage_params(s))
    # 32 layers x 7 modules (the norms, under stage3_param_persistence_threshold, stay
    # whole), gathered forward and backward, 2 micro-batches: 896 latencies.
    assert r.total_s > 2 * 2 * 32 * 7 * LAT

    # Where latency dominates (fast links, many ranks), 7 collectives a layer cost ~7x one.
    def latency_bound(kind: str, op: str, nbytes: float) -> float:
        return LAT + 1e-15 * nbytes

    deep = deepspeed_zero3(s, latency_bound, 3.2, stage_params(s)).total_s
    titan = fsdp2(s, latency_bound, 3.2, stage_params(s)).total_s
    # DeepSpeed: 2 x 32 x 7 gathers + 17 reduce buckets of 5e8 (8.03e9 parameters); FSDP2:
    # 32 blocks gathered twice and reduced once.
    assert deep / titan == pytest.approx((2 * 32 * 7 + 17) / (3 * 32), rel=0.01)
    # Full recompute: the recompute forward gathers every module again, and the backward that
    # follows finds them all still gathered (a llama3-8b layer is 0.22e9 parameters, within
    # stage3_max_reuse_distance counted twice): no gather of its own.
    full = stage(zero=3, recompute="full")
    again = deepspeed_zero3(full, latency_bound, 3.2, stage_params(full)).total_s
    assert again / titan == pytest.approx((2 * 32 * 7 + 17) / (3 * 32), rel=0.01)


def test_deepspeed_keeps_a_layers_last_modules_from_recompute_to_backward() -> None:
    # Counted from the layer's end, a module stays gathered while twice the parameters after
    # it are under 1e9: llama3-70b (h 8192, ffn 28672: 235M a MLP matrix) keeps down, up and
    # gate (2 x 470M < 1e9), not o (2 x 705M); at tp 8 all seven.
    def kept(model: str, tp: int) -> float:
        m = load_model(model)
        lay = Layout(tp=tp, pp=4, dp=2, seq=4096, gbs=64, zero=3, recompute="full", sp=False)
        s = stage_of(m, load_cluster("dgx-h100", nodes=1).gpu, layout_fields(lay, m))
        return dp_term._kept_for_backward(s, dp_term._module_gathers(s, fake_comm)).count

    assert kept("llama3-70b", 1) == 3 and kept("llama3-70b", 8) == 7
    lay = Layout(pp=4, dp=2, seq=4096, gbs=64, zero=3, recompute="selective")
    m = load_model("llama3-70b")
    selective = stage_of(m, load_cluster("dgx-h100", nodes=1).gpu, layout_fields(lay, m))
    gathers = dp_term._module_gathers(selective, fake_comm)
    assert dp_term._kept_for_backward(selective, gathers).count == 0  # no second forward


def test_deepspeed_zero3_prefetches_while_under_max_live_parameters() -> None:
    """The coordinator prefetches after each fetch while fewer than 1e9 elements are
    gathered: gpt3-175b at tp 1 (largest module 0.6e9) prefetches every gather; a 530B-class
    layer (h 20480, MLP matrices of 1.68e9) cannot prefetch the module after an MLP matrix:
    forward, the second MLP matrix and the next layer's q; backward (reverse order), the
    first MLP matrix and o."""
    gpt3 = load_model("gpt3-175b")
    lay = Layout(tp=1, dp=8, seq=2048, gbs=16, zero=3, recompute="none")
    s = stage_of(gpt3, H100, layout_fields(lay, gpt3))
    modules = dp_term._module_gathers(s, fake_comm)
    kept = dp_term._kept_for_backward(s, modules)
    assert dp_term._unprefetched(s, modules, kept) == (0.0, 0.0, 0.0)
    big = ModelSpec.parse(
        {
            "name": "big",
            "layers": 8,
            "hidden": 20480,
            "heads": 160,
            "ffn_hidden": 81920,
            "vocab": 51200,
            "activation": "gelu",
        },
        "big",
    )
    s = stage_of(big, H100, layout_fields(Layout(tp=1, dp=8, seq=2048, gbs=16, zero=3), big))
    g_attn = fake_comm("", "", 20480 * 20480 * 2)  # q, k, v, o: 0.42e9 each
    g_mlp = fake_comm("", "", 20480 * 81920 * 2)  # fc1, fc2: 1.68e9 each
    modules = dp_term._module_gathers(s, fake_comm)
    kept = dp_term._kept_for_backward(s, modules)
    fwd, _, bwd = dp_term._unprefetched(s, modules, kept)
    assert fwd == pytest.approx(g_mlp + g_attn) and bwd == pytest.approx(g_mlp + g_attn)
    # Full recompute: the backward skips fc2 (still gathered from the recompute forward) and
    # waits for fc1 and o, as before; the recompute forward's q follows the backward of the
    # layer above, which ends with its (small) q: only fc2 waits.
    lay = Layout(tp=1, dp=8, seq=2048, gbs=16, zero=3, recompute="full")
    full = stage_of(big, H100, layout_fields(lay, big))
    modules = dp_term._module_gathers(full, fake_comm)
    kept = dp_term._kept_for_backward(full, modules)
    assert kept.count == 1
    fwd, again, bwd = dp_term._unprefetched(full, modules, kept)
    assert (fwd, again, bwd) == pytest.approx((g_mlp + g_attn, g_mlp, g_mlp + g_attn))
    # The step: 2 micro-batches of 8 layers, each pass's first layer exposed whole, the
    # others' prefetched gathers hidden (ag - waits fits the 0.9 x compute / 3 / 8 window of
    # 33.75 s), the waits not; the last 5e8-element bucket of the gradients' reduce-scatter.
    c = 900.0
    ag = 4 * g_attn + 2 * g_mlp
    params = stage_params(s)
    buckets = -(-params // 5e8)
    rs = buckets * fake_comm("", "", params * 4 / buckets)
    assert ag - fwd < c / 3 / 8 * DP_OVERLAP_EFFICIENCY
    assert ag - bwd + rs / 8 < 2 * c / 3 / 8 * DP_OVERLAP_EFFICIENCY
    per_micro = (ag + 7 * fwd) + (ag + 7 * bwd) + rs / buckets
    r = deepspeed_zero3(s, fake_comm, c, params)
    assert r.exposed_s == pytest.approx(2 * per_micro)


def test_fsdp2_with_pp_gathers_m_plus_one_times_and_reduces_after_the_schedule() -> None:
    """torch.distributed.pipelining keeps the weights gathered after every backward and
    reduces after the last: with 1F1B at pp 2 and 4 micro-batches the first stage runs
    F F B F B F B B and gathers for the first two forwards and the three backwards that follow
    a forward (m + 1 = 5), the last backward finding the weights still gathered; the 16
    blocks' reduce-scatters all wait at the end."""
    pipe = stage(zero=3, pp=2, dp=4)  # 16 blocks a stage, 4 micro-batches
    params = stage_params(pipe)
    blk = params / 16
    ag, rs = fake_comm("", "", blk * 2), fake_comm("", "", blk * 4)
    c = 3.2
    fwd, bwd = c / 3 / 16 * 0.9, c * 2 / 3 / 16 * 0.9
    r = fsdp2(pipe, fake_comm, c, params)
    assert r.total_s == pytest.approx(16 * (5 * ag + rs))
    gather_fwd = ag + 15 * max(ag - fwd, 0)
    gather_bwd = ag + 15 * max(ag - bwd, 0)
    assert r.exposed_s == pytest.approx(2 * gather_fwd + 3 * gather_bwd + 16 * rs)
    assert r.bytes == pytest.approx(params * (5 * 2 + 4))
    # zero 2: one gather a step, the same reduce at the end.
    kept = fsdp2(stage(zero=2, pp=2, dp=4), fake_comm, c, params)
    assert kept.exposed_s == pytest.approx(gather_fwd + 16 * rs)


def test_zero3_traffic_per_gpu_per_step_is_flat_in_dp() -> None:
    # Every GPU receives the whole model's weights each pass, however many share them: at
    # one micro-batch per GPU the bytes per GPU per step stay within (dp-1)/dp of each other
    # from 64 to 4,096 ranks (DeepSpeed ZeRO-3, and FSDP2 fully sharded).
    m = load_model("llama3-70b")
    for framework in ("deepspeed", "torchtitan"):
        sent = []
        for dp in (64, 512, 4096):
            nodes = dp // 8
            lay = Layout(seq=4096, gbs=dp, mbs=1, dp=dp, zero=3, recompute="full")
            c = load_cluster("dgx-h100", nodes=nodes)
            r = estimate(m, c, lay, Flags(framework=framework))
            sent.append(r["bytes_per_tier"] and sum(r["bytes_per_tier"].values()))
        assert max(sent) / min(sent) == pytest.approx(1.0, abs=0.02)
        # Per parameter (Llama 3 70B: 70,553,706,496), (dp-1)/dp of it leaving the GPU:
        # FSDP2 gathers bf16 weights twice (forward; backward, resharded after forward, the
        # recompute inside it) and reduce-scatters fp32 gradients once: 2 x 2 + 4 = 8 B.
        # DeepSpeed gathers three times (forward, recompute forward, backward, which skips
        # what the recompute left gathered) and reduce-scatters fp32 gradients: 8-10 B.
        per_param = [
            b * dp / (dp - 1) / 70_553_706_496 for b, dp in zip(sent, (64, 512, 4096), strict=True)
        ]
        for b in per_param:
            if framework == "torchtitan":
                assert b == pytest.approx(2 * 2 + 4, rel=1e-9)
            else:
                assert 2 * 2 + 4 < b < 3 * 2 + 4


def op_comm(kind: str, op: str, nbytes: float) -> float:
    """`fake_comm`, with an all-reduce moving twice the bytes."""
    return LAT + (2e-9 if op == "all_reduce" else 1e-9) * nbytes


def test_deepspeed_zero1_2_reduce_in_buckets_and_gather_the_weights_after_the_step() -> None:
    """DeepSpeed ZeRO-1/2 (stage_1_and_2.py): each 5e8-element gradient bucket all-reduced
    behind backward, the last (flushed as backward ends) exposed; ZeRO-2 every micro-step,
    ZeRO-1 at the accumulation boundary only; the updated weights all-gathered at the end of
    step(), exposed. The generic model: one reduce-scatter, hidden."""
    s2, s1 = stage(zero=2), stage(zero=1)  # llama3-8b, 2 micro-batches, fp32 gradients
    params = stage_params(s2)  # 8.03e9 parameters: 17 buckets
    buckets = 17
    assert -(-params // 5e8) == buckets
    ar = buckets * LAT + 2e-9 * params * 4  # 17 all-reduces, 64.2 s
    ag = LAT + 1e-9 * params * 2  # 16.1 s
    rs = LAT + 1e-9 * params * 4
    c = 150.0  # backward window 0.9 x 100 s > ar: each reduction keeps its last bucket only
    assert ar < 2 / 3 * c * DP_OVERLAP_EFFICIENCY
    zero2 = dp_comm(s2, op_comm, compute_s=c, runner=DEEPSPEED)
    zero1 = dp_comm(s1, op_comm, compute_s=c, runner=DEEPSPEED)
    assert zero2.comm.total_s == pytest.approx(2 * ar + ag)
    assert zero2.comm.exposed_s == pytest.approx(2 * ar / buckets + ag)
    assert zero1.comm.total_s == pytest.approx(ar + ag)
    assert zero1.comm.exposed_s == pytest.approx(ar / buckets + ag)
    # An all-reduce sends its buffer twice; 7 of 8 shares leave the GPU.
    assert zero2.comm.bytes == pytest.approx(7 / 8 * (2 * 2 * params * 4 + params * 2))
    generic = dp_comm(s2, op_comm, compute_s=c)
    assert generic.comm.total_s == pytest.approx(rs + ag)
    assert generic.comm.exposed_s == 0
    # A short backward: what overflows its window, every micro-step.
    short = dp_comm(s2, op_comm, compute_s=30.0, runner=DEEPSPEED)
    assert short.comm.exposed_s == pytest.approx(2 * (ar - 20 * DP_OVERLAP_EFFICIENCY) + ag)


def test_deepspeed_zero2_reduce_traffic_grows_with_accumulation() -> None:
    # 8 then 32 micro-batches a step: ZeRO-2 reduces 24 more times, ZeRO-1 as often.
    m = load_model("llama3-70b")
    c = load_cluster("dgx-h100", nodes=8)
    params = None
    total: dict[tuple[int, int], float] = {}
    for zero in (1, 2):
        for gbs in (64, 256):
            lay = Layout(tp=8, dp=8, mbs=1, seq=4096, gbs=gbs, zero=zero, recompute="full")
            s = stage_of(m, c.gpu, layout_fields(lay, m))
            params = stage_params(s)
            total[zero, gbs] = dp_comm(s, op_comm, 1.0, runner=DEEPSPEED).comm.total_s
    assert params == pytest.approx(70.55e9 / 8, rel=0.01)  # 18 buckets of fp32 gradients
    ar = 18 * LAT + 2e-9 * params * 4
    assert total[2, 256] - total[2, 64] == pytest.approx(24 * ar)
    assert total[1, 256] == pytest.approx(total[1, 64])
    step = {
        gbs: estimate(
            m,
            c,
            Layout(tp=8, dp=8, mbs=1, seq=4096, gbs=gbs, zero=2, recompute="full"),
            Flags(framework="deepspeed"),
        )["comm_total_s"]["dp"]
        for gbs in (64, 256)
    }
    assert step[256] > 3 * step[64]


def test_frameworks_at_scale_end_to_end() -> None:
    base = ["estimate", "-m", "llama3-70b", "-c", "dgx-h100", "--nodes", "64", "--seq", "4096"]
    base += ["--gbs", "512", "--tp", "1", "--recompute", "full", "--zero", "3"]
    titan = cli_json(*base, "--framework", "torchtitan")
    deep = cli_json(*base, "--framework", "deepspeed")
    assert titan["framework"] == "torchtitan" and deep["framework"] == "deepspeed"
    assert deep["comm_total_s"]["dp"] > 1.2 * titan["comm_total_s"]["dp"]
    assert deep["step_time_s"] > titan["step_time_s"]


def test_framework_that_cannot_run_the_layout_is_a_user_error() -> None:
    base = ["estimate", "-m", "llama3-8b", "-c", "dgx-h100", "--nodes", "1", "--gbs", "32"]
    assert_user_error(
        run_cli(*base, "--framework", "torchtitan", "--zero", "1", check=False),
        "--framework torchtitan",
        "frameworks that can: deepspeed",
    )
    assert_user_error(
        run_cli(*base, "--framework", "megatron", "--pp", "2", "--pipeline-schedule",
                "ZBVZeroBubble", "--vpp", "2", "--dp", "4", check=False),
        "--framework megatron runs 1F1B, Interleaved1F1B",
    )  # fmt: skip
    assert_user_error(run_cli(*base, "--framework", "jax", check=False), "--framework", "jax")


def test_attention_backends() -> None:
    base = ["estimate", "-m", "gpt3-175b", "-c", "dgx-a100", "--nodes", "40", "--tp", "8"]
    base += ["--pp", "8", "--gbs", "640", "--seq", "2048", "--recompute", "full"]
    flash = cli_json(*base)
    fused = cli_json(*base, "--attention-backend", "fused")
    unfused = cli_json(*base, "--attention-backend", "unfused")
    assert fused["step_time_s"] == flash["step_time_s"]
    assert unfused["attention_backend"] == "unfused"
    assert unfused["step_time_s"] > 1.05 * flash["step_time_s"]
    with pytest.raises(SpecError, match="allowed: flash, fused, unfused"):
        Flags(attention_backend="sdpa")


def test_hsdp_shards_inside_the_node_and_replicates_across() -> None:
    base = ["estimate", "-m", "llama3-8b", "-c", "dgx-h100", "--nodes", "16", "--seq", "4096"]
    base += ["--gbs", "256", "--tp", "1", "--zero", "3", "--framework", "torchtitan"]
    fsdp = cli_json(*base)
    hsdp = cli_json(*base, "--dp-shard", "8")
    assert fsdp["comm_tiers"]["dp"] == "leaf" and hsdp["comm_tiers"]["dp"] == "intra"
    assert hsdp["layout"]["dp_shard_degree"] == 8
    # States sharded over 8 ranks instead of 128: 8.03e9 x 16 B / 8 = 15 GiB against ~1 GiB.
    assert hsdp["memory"]["optimizer_gib"] > 8 * fsdp["memory"]["optimizer_gib"]
    assert_user_error(
        run_cli(*base[:-2], "--dp-shard", "8", check=False), "--dp-shard 8", "torchtitan"
    )
    assert_user_error(
        run_cli(*base, "--dp-shard", "3", check=False), "dp_shard_degree 3 must divide dp"
    )
    lay = Layout(dp=128, seq=4096, zero=3, dp_shard_degree=8)
    view = torchtitan_view(torchtitan_args(load_model("llama3-8b"), lay))
    assert view["parallelism"]["data_parallel_shard_degree"] == 8
    assert view["parallelism"]["data_parallel_replicate_degree"] == 16


def test_plan_for_one_framework_prices_as_estimate_does() -> None:
    cluster = ["-m", "llama3-8b", "-c", "dgx-h100", "--nodes", "2", "--gbs", "64", "--seq", "4096"]
    best = cli_json("plan", *cluster, "--framework", "torchtitan", "--top", "1")["plans"][0]
    args = [f"--{k}={best[k]}" for k in ("tp", "cp", "pp", "vpp", "dp", "mbs", "zero", "dtype")]
    args += [f"--recompute={best['recompute']}"]
    out = cli_json("estimate", *cluster, *args, "--framework", "torchtitan")
    assert out["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-9)


def test_legacy_zero3_hand_computed() -> None:
    """DeepSpeed before 0.5.5, llama3-8b on dp 8: per micro-batch, forward and backward each
    gather the 7 large modules of all 32 layers (one collective each, plus 8 ranks' host
    time), backward reduce-scatters all 9 modules' gradients one by one (fp32), and the
    buffers' extra HBM passes; nothing hides behind compute."""
    s = stage(zero=3)  # 2 micro-batches, no recompute: 2 passes
    m, params = s.model, stage_params(s)
    h, kv, ffn = 4096, 1024, 14336
    gathered = [h * h, h * kv, h * kv, h * h, h * ffn, h * ffn, h * ffn]
    modules = [*gathered, h, h]  # two RMS norms, under the persistence threshold
    per_rank = 8 * dp_term.LEGACY_ZERO3_PER_RANK_S
    hbm = hbm_bytes_per_s(H100)
    ag_layer = sum(fake_comm("", "", n * 2) for n in gathered)
    rs_layer = sum(fake_comm("", "", n * 4) for n in modules)
    share = sum(gathered) / (sum(gathered) + 2 * h)
    per_micro = (
        2 * 32 * (ag_layer + 7 * per_rank)
        + 2 * share * params * 2 * 3 / hbm  # zeroed buffer, copy out: 3 passes a byte
        + 32 * (rs_layer + 9 * per_rank)
        + params * 4 * 2 / hbm  # per-rank inputs copied in: 2 passes a byte
        # embeddings and the final norm: one more reduce-scatter
        + fake_comm("", "", (params - 32 * sum(modules)) * 4)
        + per_rank
    )
    r = deepspeed_zero3(s, fake_comm, 3.2, params, legacy=True)
    assert r.exposed_s == pytest.approx(2 * per_micro) == pytest.approx(r.total_s)
    assert sum(n for n, _ in layer_modules(m)) == 9


def test_legacy_zero3_host_time_grows_with_dp_while_bytes_stay_flat() -> None:
    """The bytes each GPU moves per step do not depend on dp (one micro-batch per GPU); the
    legacy per-rank host time does, by exactly ranks x collectives x its constant."""
    m = load_model("llama3-70b")
    sent, dp_s = [], []
    for dp in (64, 512):
        lay = Layout(seq=4096, gbs=dp, mbs=1, dp=dp, zero=3, recompute="full")
        c = load_cluster("dgx-a100", nodes=dp // 8)
        r = estimate(m, c, lay, Flags(framework="deepspeed", legacy_zero3=True))
        sent.append(sum(r["bytes_per_tier"].values()))
        dp_s.append(r["breakdown"]["dp_comm_s"])
    assert sent[1] / sent[0] == pytest.approx(1.0, abs=0.02)
    gathers = sum(c for c, n in layer_modules(m) if n >= 1e5)
    collectives = 80 * (3 * gathers + sum(c for c, _ in layer_modules(m)))
    host = (512 - 64) * collectives * dp_term.LEGACY_ZERO3_PER_RANK_S
    # The rest of the difference is the collectives' own latency on more ranks (> 0).
    assert dp_s[1] - dp_s[0] > host
    assert dp_s[1] - dp_s[0] < 1.5 * host


def test_legacy_zero3_only_where_a_release_ran_it() -> None:
    with pytest.raises(SpecError, match="allowed only with --framework deepspeed"):
        Flags(framework="megatron", legacy_zero3=True)
    with pytest.raises(SpecError, match="the generic model"):
        Flags(legacy_zero3=True)
    base = ("estimate", "--model", "llama3-8b", "--cluster", "dgx-a100", "--nodes", "2")
    assert_user_error(run_cli(*base, "--legacy-zero3", check=False), "--legacy-zero3")
    out = cli_json(*base, "--framework", "deepspeed", "--zero", "1", "--legacy-zero3")
    assert any("--legacy-zero3 changes nothing" in a for a in out["assumed"])
    on = cli_json(*base, "--framework", "deepspeed", "--zero", "3", "--legacy-zero3")
    off = cli_json(*base, "--framework", "deepspeed", "--zero", "3")
    assert on["legacy_zero3"] and not off["legacy_zero3"]
    assert on["breakdown"]["dp_comm_s"] > off["breakdown"]["dp_comm_s"]


def test_deepspeed_pipeline_reduces_fp32_gradients_after_the_last_micro_batch() -> None:
    """DeepSpeed's pipeline engine (bf16): each micro-batch's gradients added into fp32 ones
    (18 HBM bytes a parameter), their fp32 all-reduce after the last micro-batch and the
    updated bf16 weights' gather after the step, both exposed however long the compute."""
    s = stage(pp=2, dp=4, zero=1)  # 4 micro-batches
    params = stage_params(s)
    buckets = -(-params // 500_000_000)
    ar = buckets * fake_comm("", "", params * 4 / buckets)
    ag = fake_comm("", "", params * 2)
    r = dp_comm(s, fake_comm, compute_s=100.0, runner=DEEPSPEED)
    assert r.comm.exposed_s == pytest.approx(ar + ag) == pytest.approx(r.comm.total_s)
    adam = params / 4 * dp_term.OPTIMIZER_BYTES_PER_PARAM / hbm_bytes_per_s(H100)
    accumulate = 4 * params * 18 / hbm_bytes_per_s(H100)
    assert r.optimizer_s == pytest.approx(adam + accumulate)
    # The generic model hides the same stage's reduce-scatter and gather behind the compute.
    assert dp_comm(s, fake_comm, compute_s=100.0).comm.exposed_s == 0


def test_a_split_estimate_picks_is_one_the_framework_must_state() -> None:
    # 80 layers on pp 3: estimate splits them 26+27+27 as plan does, and DeepSpeed, whose
    # config cannot state a split, runs neither (plan found no layout; estimate priced it).
    base = ("estimate", "-m", "llama3-70b", "--nodes", "6", "--tp", "8", "--pp", "3")
    assert cli_json(*base, "--framework", "megatron")["layout"]["pp_layers"] == [26, 27, 27]
    refused = run_cli(*base, "--framework", "deepspeed", check=False)
    assert_user_error(refused, "--framework deepspeed: pp_layers=26,27,27", "cannot state")
    plan = run_cli("plan", "-m", "llama3-70b", "--nodes", "6", "--fix", "pp=3",
                   "--framework", "deepspeed", check=False)  # fmt: skip
    assert_user_error(plan, "--fix pp=3 rules out every layout")


def test_the_layouts_own_rules_come_before_a_frameworks() -> None:
    # gbs 8 does not divide over mbs*dp = 2*8: said so, not Megatron's interleaved groups of
    # "0 micro-batches per pipeline" (the framework read gbs // (mbs*dp) as met).
    base = ("estimate", "-m", "llama3-70b", "--nodes", "16", "--tp", "2", "--pp", "8", "--vpp",
            "2", "--mbs", "2", "--gbs", "8")  # fmt: skip
    for framework in ("megatron", "deepspeed"):
        proc = run_cli(*base, "--framework", framework, check=False)
        assert_user_error(proc, "layout: gbs 8 must be divisible by mbs*dp = 2*8")
