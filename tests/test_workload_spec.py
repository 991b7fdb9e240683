"""Model specs: presets, YAML, Hugging Face config.json import, parameter counts, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tierwise.errors import SpecError
from tierwise.workload import ModelSpec, load_model, param_counts, preset_names
from tierwise.workload.spec import Dims, model_dims

HF = Path(__file__).parent / "data" / "hf"


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        ("llama3-70b", 70.6, 70.6),
        ("llama3-8b", 8.03, 8.03),
        ("llama2-7b", 6.74, 6.74),
        ("llama2-13b", 13.0, 13.0),
        ("llama2-70b", 69.0, 69.0),
        ("llama3-405b", 405.9, 405.9),
        ("gpt3-175b", 175.0, 175.0),
        ("mixtral-8x7b", 46.7, 12.9),
        ("deepseek-moe-16b", 16.4, 2.8),  # DeepSeekMoE paper: 16.4B total, 2.8B active
        ("qwen1.5-moe-a2.7b", 14.3, 2.7),
        ("mpt-7b", 6.7, 6.7),
    ],
)
def test_preset_parameter_counts(name: str, total_b: float, active_b: float) -> None:
    p = param_counts(load_model(name))
    assert p.total / 1e9 == pytest.approx(total_b, rel=0.01)
    assert p.active / 1e9 == pytest.approx(active_b, rel=0.015)


@pytest.mark.parametrize(
    ("file", "total", "active"),
    [
        # exact counts of the published checkpoints (sum of tensor sizes)
        ("gpt2.json", 124_439_808, 124_439_808),
        ("gpt-neox-20b.json", 20_554_567_680, 20_554_567_680),
        ("mistral-7b.json", 7_241_732_096, 7_241_732_096),
        ("mixtral-8x7b.json", 46_702_792_704, 12_879_925_248),
        ("llama3-70b.json", 70_553_706_496, 70_553_706_496),
    ],
)
def test_hf_import_exact_counts(file: str, total: int, active: int) -> None:
    p = param_counts(load_model(str(HF / file)))
    assert (p.total, p.active) == (total, active)


def test_hf_mixtral_must_show() -> None:
    m = load_model(str(HF / "mixtral-8x7b.json"))
    p = param_counts(m)
    assert m.moe is not None and (m.moe.experts, m.moe.top_k) == (8, 2)
    assert p.total / 1e9 == pytest.approx(46.7, rel=0.01)
    assert p.active / 1e9 == pytest.approx(12.9, rel=0.01)


def test_hf_qwen2_moe_and_deepseek_fields() -> None:
    qwen = load_model(str(HF / "qwen1.5-moe-a2.7b.json"))
    assert qwen.bias == "qkv" and qwen.moe is not None
    assert (qwen.moe.shared_experts, qwen.moe.shared_ffn) == (1, 5632)
    # published 14,315,784,192 includes the 24 x 2048 shared-expert gates we do not model
    assert param_counts(qwen).total == 14_315_784_192 - 24 * 2048
    ds = load_model(str(HF / "deepseek-moe-16b.json"))
    assert ds.moe is not None and (ds.moe.dense_layers, ds.moe.shared_experts) == (1, 2)
    assert param_counts(ds) == param_counts(load_model("deepseek-moe-16b"))


def test_hf_gpt2_defaults() -> None:
    m = load_model(str(HF / "gpt2.json"))
    assert (m.hidden, m.ffn, m.activation, m.position, m.tied_embeddings) == (
        768,
        3072,
        "gelu",
        "learned",
        True,
    )
    assert m.name == "gpt2"


def test_hf_config_named_config_json_takes_folder_name(tmp_path: Path) -> None:
    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text((HF / "llama3-70b.json").read_text())
    assert load_model(str(folder / "config.json")).name == "my-llama"


def test_yaml_spec_round_trip(tmp_path: Path) -> None:
    spec = load_model("llama3-70b").model_dump(mode="json")
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert load_model(str(path)) == load_model("llama3-70b")


def test_defaults_kv_head_dim_ffn() -> None:
    m = ModelSpec.parse({"name": "x", "layers": 2, "hidden": 256, "heads": 4, "vocab": 100})
    assert (m.kv_heads, m.head_dim, m.ffn_hidden, m.activation) == (4, 64, 1024, "gelu")


def test_from_fields_builds_every_calibration_run(calibration_dir: Path) -> None:
    runs = yaml.safe_load((calibration_dir / "training_runs.yaml").read_text())["runs"]
    for run in runs:
        m = ModelSpec.from_fields(run, vocab=51200, activation="gelu")
        assert m.name == run["id"] and m.layers == run["layers"] and m.hidden == run["hidden"]
    nemotron = next(r for r in runs if r["id"].startswith("dgxc-nemotron"))
    m = ModelSpec.from_fields(nemotron, vocab=51200)
    assert (m.activation, m.matmuls_per_mlp, m.vocab, m.kv) == ("squared-relu", 2, 256000, 8)


def test_model_dims_are_the_properties() -> None:
    """`model_dims` (what the per-layout paths read) holds each property's value."""
    for name in preset_names():
        m = load_model(name)
        dims = model_dims(m)
        assert dims == tuple(getattr(m, field) for field in Dims._fields), name
        assert model_dims(m) is dims  # computed once per spec object


def test_presets_listed_and_valid() -> None:
    names = preset_names()
    assert {"gpt3-175b", "llama3-405b", "mixtral-8x7b", "deepseek-moe-16b", "mpt-7b"} <= set(names)
    assert all(load_model(n).name == n for n in names)


def _one_line(exc: pytest.ExceptionInfo[SpecError]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(
    ("fields", "needles"),
    [
        ({"layers": 0}, ["layers", "0", "greater than or equal to 1"]),
        ({"activation": "relu"}, ["activation", "relu", "swiglu"]),
        ({"kv_heads": 3}, ["kv_heads 3", "multiple"]),
        ({"hidden": 100, "heads": 3}, ["head_dim is required"]),
        ({"typo_field": 1}, ["typo_field"]),
        ({"moe": {"experts": 4, "top_k": 8, "expert_ffn_hidden": 64}}, ["top_k 8", "experts (4)"]),
        (
            {"moe": {"experts": 4, "top_k": 2, "expert_ffn_hidden": 64, "dense_layers": 2}},
            ["dense_layers 2", "layers (2)"],
        ),
        ({"position": "learned"}, ["max_seq"]),
    ],
)
def test_spec_errors_name_field(fields: dict, needles: list[str]) -> None:
    base = {"name": "x", "layers": 2, "hidden": 256, "heads": 4, "vocab": 100}
    with pytest.raises(SpecError) as exc:
        ModelSpec.parse({**base, **fields})
    line = _one_line(exc)
    for needle in needles:
        assert needle in line


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as exc:
        load_model("llama9-1t")
    assert "presets:" in _one_line(exc) and "llama3-70b" in str(exc.value)
    with pytest.raises(SpecError, match="no such file"):
        load_model(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="malformed YAML"):
        load_model(str(bad))
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"model_type": "llama",')
    with pytest.raises(SpecError, match="malformed JSON"):
        load_model(str(bad_json))
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"model_type": "t5", "d_model": 512}))
    with pytest.raises(SpecError, match="model_type 't5' is not supported; allowed: llama"):
        load_model(str(odd))
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    with pytest.raises(SpecError, match="'num_hidden_layers' is required"):
        load_model(str(partial))


@given(
    layers=st.integers(2, 96),
    dense=st.integers(0, 5),
    every=st.integers(1, 4),
    global_every=st.one_of(st.none(), st.integers(1, 8)),
)
def test_layer_patterns_count_what_they_mark(
    layers: int, dense: int, every: int, global_every: int | None
) -> None:
    if layers - dense < every:
        return
    m = ModelSpec(
        name="p",
        layers=layers,
        hidden=64,
        heads=4,
        vocab=128,
        moe={
            "experts": 4,
            "top_k": 2,
            "expert_ffn_hidden": 32,
            "dense_layers": dense,
            "every": every,
        },
        local_attention={"window": 16, "global_every": global_every},
    )
    assert m.moe is not None and m.local_attention is not None
    assert sum(m.moe.is_moe(i) for i in range(layers)) == m.moe_layers
    assert m.dense_layers_in(0, layers) == m.dense_layers
    half = layers // 2
    dense_first = sum(not m.moe.is_moe(i) for i in range(half))
    assert m.dense_layers_in(0, half) == dense_first
    assert m.dense_layers_in(half, layers - half) == m.dense_layers - dense_first
    assert sum(not m.local_attention.is_global(i) for i in range(layers)) == m.local_layers
