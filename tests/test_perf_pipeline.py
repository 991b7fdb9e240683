"""Pipeline schedules and splits: bubble formulas against hand-computed values, the stage
weights of the embedding and the loss, Megatron's layout strings, and the estimate CLI."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import assert_user_error, cli_json, run_cli
from tests.emit_views import torchtitan_view
from tierwise.errors import SpecError
from tierwise.perf.flags import Flags
from tierwise.perf.pipeline import bubble_seconds, bubble_share, ranks, schedule_for
from tierwise.plan.emit.megatron import megatron_args
from tierwise.plan.emit.torchtitan import torchtitan_args
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model
from tierwise.workload.pipeline import (
    balanced_split,
    expand_layout,
    megatron_split,
    parse_layout,
    standard_split,
)

LLAMA405 = ["-m", "llama3-405b", "-c", "dgx-h100", "--seq", "8192", "--gbs", "512"]


@given(
    pp=st.integers(2, 32),
    vpp=st.integers(1, 8),
    m=st.integers(1, 512),
    t=st.floats(1e-4, 1.0),
)
def test_equal_stages_idle_pp_minus_one_over_vpp_m(pp: int, vpp: int, m: int, t: float) -> None:
    # Megatron's interleaved schedule: (pp-1)/(v*m) whenever m >= pp, a multiple of pp or
    # not (m < pp*v included); with fewer micro-batches than pp each of the v-1 chunk
    # changes also idles pp-m chunk times.
    r = ranks(pp, pp * 4, 4, 4, 4, t / 4, 0.0, 0.0, 0.0)
    assert r.busiest_s == pytest.approx(t)
    bubble = bubble_seconds(r, pp, vpp, m, "Interleaved1F1B", False)
    extra = (vpp - 1) * max(pp - m, 0)
    assert bubble / (m * r.busiest_s) == pytest.approx((pp - 1 + extra) / (vpp * m))
    if m >= pp:
        assert bubble / (m * r.busiest_s) == pytest.approx((pp - 1) / (vpp * m))


def test_interleaved_bubble_by_hand_and_group_size() -> None:
    # pp 4, v 2, t = 1 s: m = 2 idles (3 + 1 * 2) / 2 = 2.5 s; m = 6 (not a multiple of 4)
    # 3 / 2 = 1.5 s; a group of 2 with m = 8 waits as m = 2 does.
    r = ranks(4, 16, 4, 4, 4, 0.25, 0.0, 0.0, 0.0)
    assert bubble_seconds(r, 4, 2, 2, "Interleaved1F1B", False) == pytest.approx(2.5)
    assert bubble_seconds(r, 4, 2, 6, "Interleaved1F1B", False) == pytest.approx(1.5)
    assert bubble_seconds(r, 4, 2, 8, "Interleaved1F1B", False, group=2) == pytest.approx(2.5)
    # 1F1B with m < pp: (m + pp - 1) t in all, the textbook fill and drain.
    assert bubble_seconds(r, 4, 1, 2, "1F1B", False) == pytest.approx(3.0)


def test_dualpipe_bubble_share() -> None:
    # DualPipe README: (S/2 - 1)(F&B + B - 3W) over S stages against 1F1B's (pp-1)(F + B + W),
    # F = W = 1, B = 2 (input + weight gradient), F&B = F + B: DualPipe's S = pp = 16 stages
    # of one rank's time: 7 * 2 / (15 * 3); DualPipeV's S = 32 stages of half a rank's time:
    # 15 * 2 / 2 / (15 * 3) = 1/3.
    assert bubble_share("DualPipe", False, 16) == pytest.approx(14 / 45)
    assert bubble_share("DualPipeV", False, 16) == pytest.approx(1 / 3)
    assert bubble_share("DualPipe", False, 2) == 0.0
    # Full recompute: B = 3, (pp/2-1) * 4 / ((pp-1) * 4).
    assert bubble_share("DualPipe", True, 8) == pytest.approx(3 / 7)
    with pytest.raises(SpecError, match="even pp"):
        schedule_for("DualPipe", 7, 1)
    with pytest.raises(SpecError, match="DualPipeV runs 2"):
        schedule_for("DualPipeV", 8, 1)


def test_dualpipev_bubble_counts_its_stages_not_its_ranks() -> None:
    # 8 ranks, 32 layers, 0.25 s each: a rank's micro-batch 1 s, a stage (half a rank) 0.5 s.
    # DualPipeV runs 16 stages: (16/2 - 1) * 2/3 * 0.5 = 7/3 s (the old pp = 8 reading gave
    # (8/2 - 1) * 2/3 * 0.5 = 1 s); DualPipe on 8 ranks of 1 s stages: 3 * 2/3 * 1 = 2 s.
    r = ranks(8, 32, 4, 4, 4, 0.25, 0.0, 0.0, 0.0, "DualPipeV")
    assert bubble_seconds(r, 8, 2, 16, "DualPipeV", False) == pytest.approx(7 / 3)
    p = ranks(8, 32, 4, 4, 4, 0.25, 0.0, 0.0, 0.0, "DualPipe")
    assert bubble_seconds(p, 8, 1, 16, "DualPipe", False) == pytest.approx(2.0)


def test_dualpipe_prices_each_rank_as_the_pair_it_holds() -> None:
    # 4 ranks, 6 + 8 + 8 + 8 layers of 1 s, embedding 0.5 s, loss 3.5 s, sends 0.1 s. 1F1B: the
    # last rank, 8 + 3.5 + 0.1. DualPipe: ranks 0 and 3 hold stages 0 and 3, half the
    # micro-batches through each: (6 + 8)/2 + (0.5 + 3.5)/2 + 0.1 = 9.1 s a micro-batch, half
    # an embedding and half a loss; ranks 1 and 2 hold 8 + 8: 8.1. Bubble: 4 stages of
    # 34.4 / 4 s, (4/2 - 1) * 2/3 * 8.6 s.
    plain = ranks(4, 30, 6, 8, 8, 1.0, 0.5, 3.5, 0.1)
    assert plain.busiest_s == pytest.approx(11.6)
    r = ranks(4, 30, 6, 8, 8, 1.0, 0.5, 3.5, 0.1, "DualPipe")
    assert r.busiest_s == pytest.approx(9.1)
    assert (r.layers, r.embedding, r.loss) == (7, 0.5, 0.5)
    assert r.total_s == pytest.approx(34.4)
    assert bubble_seconds(r, 4, 1, 8, "DualPipe", False) == pytest.approx(8.6 * 2 / 3)
    # Middle ranks heavier: 4 + 8 + 8 + 4 layers, the middle pair at 8.1 s sets the pace.
    mid = ranks(4, 24, 4, 8, 4, 1.0, 0.5, 3.5, 0.1, "DualPipe")
    assert mid.busiest_s == pytest.approx(8.1) and (mid.layers, mid.embedding) == (8, 0)
    # DualPipeV (and ZB-V): a V of 2*pp stages, rank 0 runs the first and the last: 4 layers,
    # the embedding and the loss.
    for schedule in ("DualPipeV", "ZBVZeroBubble"):
        v = ranks(4, 16, 4, 4, 4, 1.0, 0.5, 2.0, 0.0, schedule)
        assert v.busiest_s == pytest.approx(6.5) and (v.embedding, v.loss) == (1, 1)


def test_torchtitan_runs_dualpipev_pairs_one_after_the_other() -> None:
    # torchtitan 0.3.0 registers no OVERLAP_F_B function: torch's _PipelineScheduleRuntime
    # runs a pair's forward and backward in turn, so nothing hides the expert all-to-all
    # (as under ZB-V); DeepSeek's DualPipeV overlaps them (the generic model).
    from tierwise.hardware.cluster import load_cluster
    from tierwise.perf.estimate import estimate
    from tierwise.perf.flags import Flags

    m = load_model("deepseek-v3")
    cluster = load_cluster("dgx-h100", nodes=128)
    layout = Layout(tp=1, pp=8, vpp=2, ep=64, dp=128, mbs=1, gbs=2048, seq=4096, zero=3,
                    recompute="full", pp_layers=(7, 8, 8, 8, 8, 8, 8, 6))  # fmt: skip

    def ep_s(schedule: str, framework: str | None) -> float:
        flags = Flags(pipeline_schedule=schedule, framework=framework)
        return estimate(m, cluster, layout, flags)["breakdown"]["ep_comm_s"]

    titan = ep_s("DualPipeV", "torchtitan")
    assert titan == pytest.approx(ep_s("ZBVZeroBubble", "torchtitan"))
    assert ep_s("DualPipeV", None) < 0.1 * titan


def test_dualpipe_micro_batch_counts() -> None:
    # dualpipe.py asserts num_chunks % 2 == 0 and num_chunks >= 2 * num_ranks; dualpipev.py
    # num_chunks >= 2 * num_ranks.
    assert schedule_for("DualPipe", 16, 1, micro=32) == "DualPipe"
    assert schedule_for("DualPipeV", 16, 2, micro=33) == "DualPipeV"
    for schedule, vpp, micro, needle in [
        ("DualPipe", 1, 8, "even count of at least 2*pp = 32"),
        ("DualPipe", 1, 33, "the layout has 33"),
        ("DualPipeV", 2, 31, "at least 2*pp = 32"),
    ]:
        with pytest.raises(SpecError, match=re.escape(needle)):
            schedule_for(schedule, 16, vpp, micro=micro)
    ds3 = ["estimate", "-m", "deepseek-v3", "--nodes", "256", "--tp", "1", "--pp", "16",
           "--ep", "64", "--dp", "128", "--mbs", "1", "--gbs", "1024",
           "--pipeline-schedule", "DualPipe"]  # fmt: skip
    assert_user_error(run_cli(*ds3, check=False), "DualPipe needs an even count", "has 8")


def test_dualpipe_memory_holds_both_stages() -> None:
    # pp 2: each rank holds stage 0 and stage 1, the whole model, its states sharded over both
    # copies' dp ranks: 1F1B's pp 1 over 2*dp exactly. Activations (Table 2, pp + 1 stages):
    # rank 0 holds pp = 2 micro-batches of stage 0 and 1 of stage 1, 1.5 x the whole model's.
    from tierwise.workload.memory import memory_batch

    m = load_model("llama3-8b")
    common = {"seq": 4096, "mbs": 1, "zero": 1}
    one = memory_batch(m, pp=1, dp=8, gbs=64, **common)
    dual = memory_batch(m, pp=2, dp=4, gbs=128, schedule="DualPipe", **common)
    for term in ("weights", "grads", "optimizer", "logits"):
        assert getattr(dual, term) == pytest.approx(getattr(one, term))
    assert dual.activations == pytest.approx(1.5 * one.activations)
    # pp 4, 8 layers a stage: rank 0 holds 4 micro-batches of stage 0 and 1 of stage 3 (ranks
    # 1 and 2: 3 of stage 1, 2 of stage 2), 40 layers' worth: 40/32 of the whole model's one.
    four = memory_batch(m, pp=4, dp=2, gbs=128, schedule="DualPipe", **common)
    assert four.stage == 0 and four.activations == pytest.approx(40 / 32 * one.activations)
    # 4 + 12 + 12 + 4 layers: rank 1 is the busiest and holds stages 1 and 2 (3 micro-batches
    # of 12 layers, 2 of 12: 60 layers' worth), twice the weights and gradients of 1F1B's
    # rank 1 (12 layers, 3 in flight), its optimizer states sharded over both copies.
    ends = {"first_stage_layers": 4, "last_stage_layers": 4}
    mid = memory_batch(m, pp=4, dp=2, gbs=128, schedule="DualPipe", **ends, **common)
    plain = memory_batch(m, pp=4, dp=2, gbs=128, **ends, **common)
    assert mid.stage == plain.stage == 1
    assert mid.activations == pytest.approx(60 / 32 * one.activations)
    assert plain.activations == pytest.approx(36 / 32 * one.activations)
    for term, copies in (("weights", 2), ("grads", 2), ("optimizer", 1)):
        assert getattr(mid, term) == pytest.approx(copies * getattr(plain, term))
    # DualPipeV on pp 2 (4 stages): rank 0 holds its two chunks, the embedding and the head,
    # one copy; 2*pp + 1 chunks of half its 16 layers: 2.5 x a micro-batch of its layers.
    v = memory_batch(m, pp=2, dp=4, vpp=2, gbs=128, schedule="DualPipeV", **common)
    half = memory_batch(m, pp=1, dp=4, gbs=128, **common)
    assert v.logits == pytest.approx(half.logits)
    assert v.activations == pytest.approx(2.5 * half.activations / 2)


def test_uneven_ranks_hand_computed() -> None:
    # 4 ranks, 30 layers as 7 + 8 + 8 + 7, 1 s per layer, embedding 0.5 s, loss 2 s, sends 0.1.
    r = ranks(4, 30, 7, 8, 7, 1.0, 0.5, 2.0, 0.1)
    assert r.busiest_s == pytest.approx(9.1)  # the last rank: 7 + 2 + 0.1
    assert (r.layers, r.embedding, r.loss) == (7, 0, 1)
    assert r.total_s == pytest.approx(30 + 0.5 + 2 + 0.4)
    assert bubble_seconds(r, 4, 1, 8, "1F1B", False) == pytest.approx(32.9 - 9.1)
    # 8 + 7 + 7 + 8: the first rank (8.6 s) outweighs the middle ones (7.1) but the last
    # (8 + 2 + 0.1) is the busiest; 6 + 9 + 9 + 6: a middle rank (9 + its sends 0.1) is.
    heavy_ends = ranks(4, 30, 8, 7, 8, 1.0, 0.5, 2.0, 0.1)
    assert heavy_ends.busiest_s == pytest.approx(10.1)
    assert (heavy_ends.layers, heavy_ends.embedding, heavy_ends.loss) == (8, 0, 1)
    heavy_middle = ranks(4, 30, 6, 9, 6, 1.0, 0.5, 2.0, 0.1)
    assert heavy_middle.busiest_s == pytest.approx(9.1)
    assert (heavy_middle.layers, heavy_middle.embedding, heavy_middle.loss) == (9, 0, 0)
    assert bubble_seconds(heavy_middle, 4, 2, 8, "Interleaved1F1B", False) == pytest.approx(
        (32.9 - 9.1) / 2
    )
    # One rank runs everything, embedding and loss included, and never idles.
    one = ranks(1, 30, 30, 0, 30, 1.0, 0.5, 2.0, 0.0)
    assert one.busiest_s == pytest.approx(32.5) and (one.embedding, one.loss) == (1, 1)
    assert bubble_seconds(one, 1, 1, 8, "1F1B", False) == pytest.approx(0.0)


def test_zero_bubble_shares() -> None:
    # T_F = T_B = T_W: ZB-H1 idles (F + B - W) / (F + B + W) = 1/3 of 1F1B, ZB-V nothing;
    # full recompute makes B = 2: 2/4 and 1/4.
    assert bubble_share("Interleaved1F1B", False) == 1.0
    assert bubble_share("InterleavedZeroBubble", False) == pytest.approx(1 / 3)
    assert bubble_share("ZBVZeroBubble", False) == pytest.approx(0.0)
    assert bubble_share("InterleavedZeroBubble", True) == pytest.approx(0.5)
    assert bubble_share("ZBVZeroBubble", True) == pytest.approx(0.25)


def test_schedule_defaults_and_vpp_rules() -> None:
    assert schedule_for(None, 8, 1) == "1F1B"
    assert schedule_for(None, 8, 4) == "Interleaved1F1B"
    with pytest.raises(SpecError, match="ZBVZeroBubble runs 2"):
        schedule_for("ZBVZeroBubble", 8, 4)
    with pytest.raises(SpecError, match="megatron runs 1F1B"):
        schedule_for("DualPipe", 8, 1, "megatron")
    assert schedule_for("DualPipe", 8, 1) == "DualPipe"  # DeepSeek's own framework


def test_megatron_layout_strings() -> None:
    assert expand_layout("Et*3|(tt|)*2,m|L") == ["Ettt", "tt", "tt", "m", "L"]
    # Llama 3.1 405B as NVIDIA runs it: pp 8, vpp 8, 2 layers per chunk, E and L counted.
    nvidia = parse_layout("Et|(tt|)*62tL", 8, 126)
    assert nvidia.vpp == 8 and nvidia.stage_layers == (15, 16, 16, 16, 16, 16, 16, 15)
    assert nvidia.stage_layers == megatron_split(126, 8, 8, embedding=True, loss=True)[0]
    for text, pp, needle in [
        ("Et|(tt|)*62tL", 6, "64 virtual stages are not a multiple of pp (6)"),
        ("tE|(tt|)*62tL", 8, "embedding E must come once, first"),
        ("Et|(tt|)*62L", 8, "holds 125 decoder layers"),
        ("Et|(tt|)*62tLm", 8, "the loss L must come once, last"),
        ("Ex|tL", 2, "has 'x'"),
        ("Et*63|t*63L", 1, "2 virtual stages on one pipeline rank; give --pp"),
    ]:
        with pytest.raises(SpecError, match=re.escape(needle)):
            parse_layout(text, pp, 126)


def test_layout_strings_with_mtp_layers() -> None:
    # DeepSeek-V3 (61 layers, 1 MTP layer): the MTP layer in the last virtual stage.
    split = parse_layout("Et*3|(t*4|)*14ttmL", 16, 61, mtp_layers=1)
    assert split.stage_layers == (3, *[4] * 14, 2) and split.vpp == 1
    assert split.mtp_rank is None  # with the loss
    # Megatron's own (pp 16, vpp 2): the MTP layer alone in rank 14's last virtual stage.
    own = parse_layout("Ettt|(tt|)*29m|L", 16, 61, mtp_layers=1)
    assert own.stage_layers == (5, *[4] * 13, 2, 2) and own.vpp == 2 and own.mtp_rank == 14
    # megatron-core 0.16.1 validate_layer_layout's rules, each refused in one line.
    for text, pp, mtp, needle in [
        ("Et*3|(t*4|)*14ttmL", 16, 0, "this one has none"),
        ("Et*3|(t*4|)*14ttmmL", 16, 1, "holds 2 MTP layers"),
        ("Et*3|(t*4|)*14tmtL", 16, 1, "decoder layers (t) must all come before"),
        ("Emt*3|(t*4|)*14ttL", 16, 1, "decoder layers (t) must all come before"),
        ("Et*61m|||L", 2, 1, "last virtual stage of their rank"),
        ("Et*30|t*31m|m|L", 2, 2, "all sit in one virtual stage"),
    ]:
        with pytest.raises(SpecError, match=re.escape(needle)):
            parse_layout(text, pp, 61, mtp_layers=mtp)
    with pytest.raises(SpecError, match="DualPipeV runs the MTP layers"):
        parse_layout("Ettt|(tt|)*29m|L", 16, 61, mtp_layers=1, schedule="DualPipeV")
    # A V schedule runs virtual stage s on rank s, then 2pp-1-s: rank 0 the first and last.
    assert parse_layout("Ettt|t|tt|tL", 2, 7, schedule="DualPipeV").stage_layers == (4, 3)
    assert parse_layout("Ettt|t|tt|tL", 2, 7).stage_layers == (5, 2)
    # A V of other than 2*pp virtual stages is refused in one line (it indexed past the ranks).
    for text in ("Ett|t|t|t|t|tL", "Et|t|t|t|t|t|t|L"):
        with pytest.raises(SpecError, match=re.escape("--pipeline-schedule DualPipeV runs a V")):
            parse_layout(text, 2, 7, schedule="DualPipeV")


def test_mtp_rank_keeps_the_mtp_weights_and_an_embedding_copy() -> None:
    # DeepSeek-V3, tp 1, ep 64, BF16, ZeRO-1 (weights whole): a rank of 20 MoE layers holding
    # the MTP layer (a MoE layer, its norms and 2h x h projection) and, as Megatron-core's
    # GPTModel builds it where mtp_process, the word embeddings: 2 bytes a parameter.
    from tierwise.workload.memory import WEIGHT_BYTES, _shape, memory_batch

    m = load_model("tests/data/hf/deepseek-v3.json")
    sh = _shape(m)
    moe_layer = sh.attn_split + sh.layer_whole + sh.router + sh.moe_layer_split
    experts = m.moe.experts / 64 * sh.expert
    expected = WEIGHT_BYTES * ((20 + 1) * (moe_layer + experts) + sh.mtp_extra + sh.embedding)
    mem = memory_batch(m, tp=1, pp=16, vpp=2, ep=64, dp=128, gbs=15360, seq=4096, zero=1,
                       first_stage_layers=1, last_stage_layers=1, mtp_rank=14,
                       mtp_rank_layers=20)  # fmt: skip
    assert mem.stage == 14 and mem.weights == pytest.approx(expected)


def test_mtp_layers_priced_where_the_layout_puts_them() -> None:
    # Ranks: 5 layers + embedding on rank 0 (5.5 s), the loss rank 2 layers + 3 s of head;
    # the MTP layers on rank 14 with 2 layers: 2 + 1.5 s; at 4 s of MTP rank 14 is the busiest.
    r = ranks(16, 61, 5, 4, 2, 1.0, 0.5, 3.0, 0.0, mtp=(14, 2, 1.5))
    assert r.busiest_s == pytest.approx(5.5) and (r.layers, r.embedding, r.mtp) == (5, 1, 0)
    assert r.total_s == pytest.approx(61 + 0.5 + 3.0 + 1.5)
    heavy = ranks(16, 61, 5, 4, 2, 1.0, 0.5, 3.0, 0.0, mtp=(14, 2, 4.0))
    assert heavy.busiest_s == pytest.approx(6.0) and (heavy.layers, heavy.mtp, heavy.loss) == (
        2, 1, 0)  # fmt: skip
    # Estimates: the MTP layer moves its layer and projection off the loss rank; its rank
    # keeps the MTP weights and a copy of the embedding (GPTModel builds it where
    # mtp_process), the loss rank keeps the head and both logits.
    from tierwise.hardware.cluster import load_cluster
    from tierwise.perf.estimate import estimate
    from tierwise.perf.flags import Flags
    from tierwise.workload.pipeline import with_split

    m = load_model("tests/data/hf/deepseek-v3.json")
    cluster = load_cluster("dgx-h100", nodes=256)
    layout = Layout(tp=1, pp=16, ep=64, dp=128, mbs=1, gbs=15360, seq=4096, dtype="fp8",
                    fp8_recipe="blockwise", recompute="selective", distributed_optimizer=True,
                    recompute_modules=("layernorm", "mla_up_proj"))  # fmt: skip
    own, rule = with_split(m, layout, "Ettt|(tt|)*29m|L")
    assert own.mtp_rank == 14
    flags = Flags(cache_expert_inputs=True)
    r = estimate(m, cluster, own, flags, rule)
    assert r["pipeline"]["stage_layers"] == [5, *[4] * 13, 2, 2]
    with_loss = own.model_copy(update={"mtp_rank": None})
    base = estimate(m, cluster, with_loss, flags, rule)
    assert r["memory_gib_per_gpu"] == pytest.approx(base["memory_gib_per_gpu"])  # rank 0's
    # Rank 14 with 4 layers and the MTP layer outruns the other 4-layer ranks; with the loss
    # instead, the MTP layer adds to the 2-layer loss rank and a 4-layer rank leads.
    busy, rule = with_split(m, layout, "Et|(tt|)*29,ttm|L")
    assert busy.pp_layers == (3, *[4] * 13, 4, 2) and busy.mtp_rank == 14
    on_14 = estimate(m, cluster, busy, flags, rule)
    on_loss = estimate(m, cluster, busy.model_copy(update={"mtp_rank": None}), flags, rule)
    assert on_14["compute_parts_s"]["gemm"] > on_loss["compute_parts_s"]["gemm"]
    assert on_14["step_time_s"] > on_loss["step_time_s"]


def test_standard_splits() -> None:
    assert standard_split(80, 4).stage_layers == (20,) * 4
    split = standard_split(126, 16)  # what `plan` picks: 7 + 14 x 8 + 7
    assert split.stage_layers == (7,) + (8,) * 14 + (7,) and "embedding and loss" in split.rule
    assert standard_split(80, 4, 3) == ((20,) * 4, 3, "even, chunks uneven", None)
    # Layers that divide neither way: the ends short and the middle stages equal, as `plan`
    # splits (Megatron's --decoder-first/last-pipeline-num-layers can state it).
    assert standard_split(80, 3).stage_layers == (26, 27, 27)
    assert standard_split(125, 8).stage_layers == (14,) + (16,) * 6 + (15,)
    assert standard_split(61, 8, 2) == ((6,) + (8,) * 6 + (7,), 2, "first and last stages "
                                        "short, chunks uneven", None)  # fmt: skip
    assert standard_split(5, 4).rule.startswith("balanced")  # the ends' share would be 0 + 1
    assert balanced_split(31, 4) == (8, 8, 8, 7)  # the loss rank keeps the fewest
    assert balanced_split(125, 8) == (15, 16, 16, 16, 16, 16, 15, 15)
    with pytest.raises(SpecError, match="127 must be divisible by pp\\*vpp = 16\\*1"):
        megatron_split(126, 16, embedding=True)


def test_estimate_picks_the_uneven_split_and_says_which() -> None:
    out = cli_json("estimate", *LLAMA405, "--nodes", "64", "--tp", "8", "--pp", "16")
    assert out["pipeline"]["stage_layers"] == [7] + [8] * 14 + [7]
    assert out["pipeline"]["split"] == "embedding and loss counted as layers"
    human = run_cli("estimate", *LLAMA405, "--nodes", "64", "--tp", "8", "--pp", "16").stdout
    assert "7+8x14+7" in human and "embedding and loss counted as layers" in human


def test_llama405b_as_nvidia_runs_it() -> None:
    base = ["estimate", *LLAMA405, "--nodes", "128", "--tp", "8", "--pp", "8", "--cp", "2"]
    flags = cli_json(
        *base,
        "--vpp",
        "8",
        "--account-for-embedding-in-pipeline-split",
        "--account-for-loss-in-pipeline-split",
    )
    layout = cli_json(*base, "--pp-layout", "Et|(tt|)*62tL")
    assert flags["pipeline"]["stage_layers"] == layout["pipeline"]["stage_layers"]
    assert flags["step_time_s"] == pytest.approx(layout["step_time_s"], rel=1e-12)
    assert layout["layout"]["vpp"] == 8 and layout["pipeline"]["schedule"] == "Interleaved1F1B"
    plain = cli_json(*base, "--vpp", "3")  # 128 divides by 8, not by 24: chunks uneven
    assert plain["pipeline"]["split"] == "embedding and loss counted as layers, chunks uneven"
    assert plain["pipeline"]["stage_layers"] == layout["pipeline"]["stage_layers"]
    assert plain["pipeline"]["bubble_fraction"] > layout["pipeline"]["bubble_fraction"]


def test_zero_bubble_schedule_end_to_end() -> None:
    base = ["estimate", *LLAMA405, "--nodes", "64", "--tp", "8", "--pp", "8", "--vpp", "2"]
    inter = cli_json(*base)
    zbv = cli_json(*base, "--pipeline-schedule", "ZBVZeroBubble")
    zb1 = cli_json(*base, "--pipeline-schedule", "InterleavedZeroBubble")
    assert zbv["pipeline"]["schedule"] == "ZBVZeroBubble"
    assert zbv["breakdown"]["pipeline_bubble_s"] == pytest.approx(0.0, abs=1e-12)
    assert zb1["breakdown"]["pipeline_bubble_s"] == pytest.approx(
        inter["breakdown"]["pipeline_bubble_s"] / 3
    )
    assert_user_error(
        run_cli(*base, "--pipeline-schedule", "1F1B", check=False), "1F1B runs 1", "vpp 2"
    )


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--pp-layout", "Et|(tt|)*62tX"], ["--pp-layout", "'X'"]),
        (["--pp-layout", "Et|(tt|)*62tL", "--pp-layers", "63,63"], ["--pp-layout", "--pp-layers"]),
        (
            ["--pp-layout", "Et|(tt|)*62tL", "--vpp", "2"],
            ["--vpp 2", "64 virtual stages, 8 per rank"],
        ),
        (["--account-for-loss-in-pipeline-split"], ["layers + loss = 127", "pp*vpp = 8*1"]),
    ],
)
def test_pipeline_flag_errors(args: list[str], needles: list[str]) -> None:
    base = ["estimate", *LLAMA405, "--nodes", "64", "--tp", "8", "--pp", "8"]
    assert_user_error(run_cli(*base, *args, check=False), *needles)


def test_emitters_state_uneven_chunks() -> None:
    model = load_model("llama3-405b")
    nvidia = Layout(
        tp=8,
        pp=8,
        vpp=8,
        dp=16,
        seq=8192,
        gbs=512,
        pp_layers=megatron_split(126, 8, 8, embedding=True, loss=True).stage_layers,
    )
    args = megatron_args(model, nvidia)
    assert '--pipeline-model-parallel-layout "Et|(tt|)*62tL"' in args
    assert not any(a.startswith("--num-layers-per-virtual") for a in args)
    # torchtitan: 64 virtual stages, rank 0's first and rank 7's last hold one layer.
    fsdp = nvidia.model_copy(update={"zero": 3, "dtype": "fp8", "fp8_recipe": "tensorwise"})
    parts = torchtitan_view(torchtitan_args(model, fsdp))["parallelism"][
        "module_fqns_per_model_part"
    ]
    parts = [part.split(",") for part in parts.split()]
    assert len(parts) == 64 and parts[0] == ["tok_embeddings", "layers.0"]
    assert parts[1] == ["layers.1", "layers.2"] and parts[-1] == ["layers.125", "norm", "lm_head"]
    zbv = fsdp.model_copy(update={"vpp": 2, "pp_layers": None, "pp": 9, "dp": 14})
    flags = Flags(pipeline_schedule="ZBVZeroBubble")
    view = torchtitan_view(torchtitan_args(model, zbv, flags))
    assert view["parallelism"]["pipeline_parallel_schedule"] == "ZBVZeroBubble"


def test_plan_with_a_pipeline_schedule() -> None:
    base = ["plan", "-m", "llama3-8b", "-c", "dgx-h100", "--nodes", "2", "--gbs", "64"]
    base += ["--seq", "4096", "--top", "1", "--fix", "pp=4"]
    zbv = cli_json(*base, "--pipeline-schedule", "ZBVZeroBubble")["plans"][0]
    plain = cli_json(*base, "--framework", "torchtitan")["plans"][0]
    assert zbv["vpp"] == 2 and zbv["frameworks"] == ["torchtitan"]
    assert zbv["step_time_s"] < plain["step_time_s"]
    assert_user_error(
        run_cli(*base, "--pipeline-schedule", "ZBVZeroBubble", "--framework", "megatron",
                check=False),
        "--framework megatron runs 1F1B, Interleaved1F1B",
    )  # fmt: skip
    clash = [*base[:-2], "--fix", "pp=4,vpp=4", "--pipeline-schedule", "ZBVZeroBubble"]
    assert_user_error(run_cli(*clash, check=False), "runs vpp 2", "vpp=4")


def test_plan_keeps_the_layouts_dualpipe_runs() -> None:
    base = ["plan", "-m", "llama3-8b", "-c", "dgx-h100", "--nodes", "2", "--seq", "4096",
            "--top", "20", "--pipeline-schedule", "DualPipe"]  # fmt: skip
    plans = cli_json(*base, "--gbs", "64")["plans"]
    assert plans
    for p in plans:
        micro = p["gbs"] // (p["mbs"] * p["dp"])
        assert p["pp"] % 2 == 0 and micro % 2 == 0 and micro >= 2 * p["pp"]
    refused = run_cli(*base, "--gbs", "8", "--fix", "pp=8", check=False)
    assert_user_error(refused, "DualPipe needs an even pp and an even count")


def test_deepseek_v3_layout_fits_on_80gb_with_dualpipe() -> None:
    # DeepSeek-V3 technical report, section 3: 2,048 H800 (80 GB), tp 1, pp 16, ep 64, dp 128,
    # mbs 1, 15,360 x 4,096 tokens, FP8 (1x128 block scaling), the norms and MLA
    # up-projections recomputed, the experts' inputs cached in FP8, DualPipe (two stages a
    # rank, a second parameter copy), the MTP layer on the last stage.
    from tierwise.hardware.cluster import load_cluster
    from tierwise.perf.estimate import estimate
    from tierwise.perf.flags import Flags
    from tierwise.workload.pipeline import with_split

    m = load_model("tests/data/hf/deepseek-v3.json")
    assert m.mtp_layers == 1
    cluster = load_cluster("dgx-h100", nodes=256)
    layout = Layout(tp=1, pp=16, ep=64, dp=128, mbs=1, gbs=15360, seq=4096, dtype="fp8",
                    fp8_recipe="blockwise", recompute="selective", distributed_optimizer=True,
                    recompute_modules=("layernorm", "mla_up_proj"))  # fmt: skip
    layout, rule = with_split(m, layout, "Et*3|(t*4|)*14ttmL")
    dual = Flags(pipeline_schedule="DualPipe", cache_expert_inputs=True)
    r = estimate(m, cluster, layout, dual, rule)
    assert r["fits"] and r["memory_gib_per_gpu"] < 0.95 * cluster.gpu.hbm_gib  # 5% headroom
    assert r["pipeline"]["schedule"] == "DualPipe"
    # Each recomputed module frees memory: the norms' inputs (MLA's input norm, the MoE
    # layers' pre-MLP norm) about 3 GiB on the busiest rank, the MLA up-projections' more.
    for kept in (("mla_up_proj",), ("layernorm",)):
        fewer = layout.model_copy(update={"recompute_modules": kept})
        more = estimate(m, cluster, fewer, dual, rule)["memory_gib_per_gpu"]
        assert more > r["memory_gib_per_gpu"] + 1.0
    # Without the expert caching the activations alone overflow 80 GB; DualPipe doubles the
    # weights and gradients of 1F1B and hides the expert all-to-all.
    plain = estimate(m, cluster, layout, Flags(), rule)
    assert not plain["fits"]
    one = estimate(m, cluster, layout, Flags(cache_expert_inputs=True), rule)
    assert r["breakdown"]["ep_comm_s"] < 0.1 * one["breakdown"]["ep_comm_s"]
    assert r["breakdown"]["pipeline_bubble_s"] < one["breakdown"]["pipeline_bubble_s"]
    with pytest.raises(SpecError, match="--cache-expert-inputs"):
        Flags(cache_expert_inputs=True, framework="megatron")
