"""Layout: derived properties and every validation constraint, each named in one line."""

from __future__ import annotations

import numpy as np
import pytest

from tierwise.errors import SpecError
from tierwise.workload import Layout, ModelSpec, layouts_to_arrays, load_model


def test_derived_properties() -> None:
    lay = Layout(tp=8, cp=2, pp=4, dp=8, ep=4, mbs=2, gbs=512, seq=8192)
    assert lay.world == 512
    assert lay.num_microbatches == 32
    assert lay.sp_enabled and lay.expert_tp == 8
    assert lay.expert_dp == 8 * 2 * 8 // (4 * 8)
    assert lay.dp_shard == 16 and lay.tokens_per_step == 512 * 8192
    assert Layout(seq=128).sp_enabled is False
    assert Layout(tp=2, sp=False, seq=128).sp_enabled is False
    assert Layout(dp=4, mbs=2, seq=128).global_batch == 8


def test_stage_layers_even_and_uneven() -> None:
    m = load_model("llama3-8b")
    assert Layout(pp=4, seq=128).stage_layers(m) == (8, 8, 8, 8)
    lay = Layout(pp=3, pp_layers=(10, 11, 11), seq=128).validate_for(m)
    assert lay.stage_layers(m) == (10, 11, 11)


def test_valid_layouts_pass() -> None:
    Layout(tp=8, pp=8, dp=16, gbs=1024, seq=8192).validate_for(load_model("llama3-70b"), 1024)
    moe = load_model("mixtral-8x7b")
    Layout(tp=2, dp=8, ep=8, gbs=64, seq=4096).validate_for(moe, 16)
    Layout(tp=4, dp=2, ep=8, etp=1, gbs=64, seq=4096).validate_for(moe, 8)
    # tp 16 > kv_heads 8: allowed, KV heads replicated
    Layout(tp=16, dp=1, seq=4096).validate_for(load_model("llama3-70b"), 16)


@pytest.mark.parametrize(
    ("model", "fields", "gpus", "needle"),
    [
        ("gpt3-175b", {"tp": 5}, None, "tp 5 must divide heads (96)"),
        (
            "llama3-70b",
            {"tp": 8, "dp": 2},
            32,
            "tp*cp*pp*dp = 8*1*1*2 = 16 must equal the GPUs (32)",
        ),
        ("llama3-8b", {"dp": 4, "mbs": 2, "gbs": 12}, None, "gbs 12 must be divisible by mbs*dp"),
        ("llama3-8b", {"pp": 64}, None, "pp 64 must be <= layers (32)"),
        ("llama3-8b", {"pp": 3}, None, "layers (32) must be divisible by pp*vpp = 3*1"),
        ("llama3-8b", {"pp": 2, "vpp": 3}, None, "pp*vpp = 2*3"),
        ("llama3-8b", {"vpp": 2}, None, "vpp 2 needs pp > 1"),
        ("llama3-8b", {"pp": 2, "pp_layers": (16, 15)}, None, "pp_layers sum 31"),
        ("llama3-8b", {"pp": 2, "pp_layers": (32,)}, None, "must have pp (2)"),
        ("llama3-8b", {"cp": 3, "seq": 4096}, None, "seq 4096 must be divisible by cp (3)"),
        ("llama3-8b", {"cp": 4, "seq": 4098}, None, "must be divisible by cp (4)"),
        ("llama3-8b", {"cp": 2, "seq": 4098}, None, "2*cp = 4"),
        ("llama3-8b", {"tp": 8, "seq": 4092}, None, "divisible by tp (8) with sequence"),
        ("llama3-8b", {"ep": 2, "dp": 2}, None, "ep 2 needs a MoE model"),
        ("mixtral-8x7b", {"ep": 3, "dp": 3}, None, "ep 3 must divide experts (8)"),
        ("mixtral-8x7b", {"ep": 4, "dp": 2}, None, "ep*etp = 4*1 must divide tp*cp*dp = 2"),
        ("mixtral-8x7b", {"ep": 8, "tp": 2, "dp": 4}, None, "carved out of the data-parallel"),
    ],
)
def test_invalid_layouts_name_the_constraint(
    model: str, fields: dict, gpus: int | None, needle: str
) -> None:
    lay = Layout(**{"seq": 4096, **fields})
    with pytest.raises(SpecError) as exc:
        lay.validate_for(load_model(model), gpus)
    text = str(exc.value)
    assert "\n" not in text and text.startswith("layout: ")
    assert needle in text, text


def test_kv_heads_must_divide_or_be_divided_by_tp() -> None:
    m = ModelSpec.parse(
        {"name": "x", "layers": 4, "hidden": 3072, "heads": 48, "kv_heads": 12, "vocab": 1000}
    )
    Layout(tp=4, seq=1024).validate_for(m)
    Layout(tp=24, seq=1536).validate_for(m)
    with pytest.raises(SpecError, match=r"tp 16 must divide kv_heads \(12\) or be a multiple"):
        Layout(tp=16, seq=1024).validate_for(m)


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"tp": 0, "seq": 128}, "field tp"),
        ({"seq": 128, "zero": 4}, "field zero"),
        ({"seq": 128, "recompute": "some"}, "'none', 'selective' or 'full'"),
        ({"seq": 128, "dtype": "fp16"}, "field dtype"),
        ({"tp": 2}, "field seq"),
    ],
)
def test_parse_errors_are_one_line(fields: dict, needle: str) -> None:
    with pytest.raises(SpecError) as exc:
        Layout.parse(fields)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_parse_drops_unset_flags() -> None:
    assert Layout.parse({"tp": 2, "pp": None, "seq": 256}) == Layout(tp=2, seq=256)


def test_layouts_to_arrays() -> None:
    m = load_model("llama3-8b")
    arrays = layouts_to_arrays(
        [Layout(tp=2, seq=1024, recompute="full"), Layout(pp=2, dp=2, seq=2048, dtype="fp8")], m
    )
    assert list(arrays["tp"]) == [2, 1]
    assert list(arrays["recompute"]) == [2, 0]
    assert list(arrays["sp"]) == [True, False]
    assert list(arrays["precision"]) == [0, 1]  # bf16, fp8 (delayed)
    assert list(arrays["first_stage_layers"]) == [32, 16]
    assert arrays["gbs"].dtype == np.int64


def test_to_json_matches_pydantic_dump() -> None:
    from tierwise.workload.layout import Layout

    for lay in (
        Layout(tp=8, pp=4, vpp=2, dp=2, seq=4096, gbs=64),
        Layout(pp=2, seq=2048, pp_layers=(15, 17), recompute="full", zero=3),
    ):
        assert lay.to_json() == lay.model_dump(mode="json")


def test_interleaving_runs_over_uneven_stages() -> None:
    # Megatron's --pipeline-model-parallel-layout splits a rank's layers unevenly over its
    # virtual stages: 15 and 17 layers on 2 virtual stages per rank are a valid layout.
    m = load_model("llama3-8b")
    lay = Layout(seq=4096, pp=2, vpp=2, pp_layers=(15, 17))
    assert lay.validate_for(m).stage_layers(m) == (15, 17)
