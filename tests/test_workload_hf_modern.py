"""Hugging Face configs of the 2025-26 architectures: import, presets, published totals, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.errors import SpecError
from tierwise.workload import load_model, model_from_record, param_counts
from tierwise.workload.hf import from_hf_config

HF = Path(__file__).parent / "data" / "hf"

# config file -> (model_type, preset it must equal or None)
CONFIGS = {
    "llama3-70b.json": ("llama", "llama3-70b"),
    "mistral-7b.json": ("mistral", None),
    "mixtral-8x7b.json": ("mixtral", "mixtral-8x7b"),
    "qwen2.5-7b.json": ("qwen2", None),
    "qwen1.5-moe-a2.7b.json": ("qwen2_moe", "qwen1.5-moe-a2.7b"),
    "qwen3-8b.json": ("qwen3", "qwen3-8b"),
    "qwen3-32b.json": ("qwen3", "qwen3-32b"),
    "qwen3-30b-a3b.json": ("qwen3_moe", "qwen3-30b-a3b"),
    "qwen3-235b-a22b.json": ("qwen3_moe", "qwen3-235b-a22b"),
    "deepseek-v2-lite.json": ("deepseek_v2", None),
    "deepseek-v3.json": ("deepseek_v3", "deepseek-v3"),
    "kimi-k2.json": ("kimi_k2", "kimi-k2"),
    "gpt-oss-120b.json": ("gpt_oss", "gpt-oss-120b"),
    "llama4-scout.json": ("llama4", "llama4-scout"),
    "llama4-maverick-text.json": ("llama4_text", "llama4-maverick"),
    "gemma-2-9b.json": ("gemma2", None),
    "gemma-3-27b.json": ("gemma3", "gemma3-27b"),
    "phi-4.json": ("phi3", None),
}


@pytest.mark.parametrize("file", sorted(CONFIGS))
def test_config_imports_and_matches_preset(file: str) -> None:
    kind, name = CONFIGS[file]
    assert json.loads((HF / file).read_text())["model_type"] == kind
    m = load_model(str(HF / file))
    if name is not None:
        skip = {"name", "hf_path"}  # where its files are is no part of the architecture
        assert m.model_dump(exclude=skip) == load_model(name).model_dump(exclude=skip)


# Published totals (billions): model cards / technical reports.
#   DeepSeek-V3 report: 671B total (MTP excluded), 37B activated (no embedding table).
#   Qwen3 blog/model cards: 235B/22B, 30.5B/3.3B activated.
#   gpt-oss model card: 116.83B total, 5.13B active (active excludes the embedding table).
#   Llama 4 model card: Maverick 400B total, 17B active.
PUBLISHED = [
    ("deepseek-v3.json", 671.0, 37.0, "main_active_no_embedding", 0.011),
    ("qwen3-235b-a22b.json", 235.0, 22.0, "main_active", 0.01),
    ("qwen3-30b-a3b.json", 30.5, 3.3, "main_active", 0.02),  # "3.3B": rounded to 0.1B
    ("gpt-oss-120b.json", 116.83, 5.13, "main_active_no_embedding", 0.01),
    ("llama4-maverick-text.json", 400.0, 17.0, "main_active", 0.011),
]


@pytest.mark.parametrize(("file", "total_b", "active_b", "active", "rel"), PUBLISHED)
def test_published_parameter_totals(
    file: str, total_b: float, active_b: float, active: str, rel: float
) -> None:
    p = param_counts(load_model(str(HF / file)))
    assert p.main_total / 1e9 == pytest.approx(total_b, rel=0.01)
    assert getattr(p, active) / 1e9 == pytest.approx(active_b, rel=rel)


@pytest.mark.parametrize(
    ("name", "total_b", "active_b", "active"),
    [
        ("gpt-oss-20b", 20.91, 3.61, "main_active_no_embedding"),  # gpt-oss model card
        ("qwen3-8b", 8.2, 8.2, "main_active"),  # Qwen3 model cards: 8.2B, 32.8B
        ("qwen3-32b", 32.8, 32.8, "main_active"),
        ("mixtral-8x22b", 141.0, 39.0, "main_active"),  # Mistral: 141B total, 39B active
        ("gemma3-27b", 27.0, 27.0, "main_active"),  # text model (the 0.4B vision tower aside)
    ],
)
def test_preset_published_totals(name: str, total_b: float, active_b: float, active: str) -> None:
    p = param_counts(load_model(name))
    assert p.main_total / 1e9 == pytest.approx(total_b, rel=0.01)
    assert getattr(p, active) / 1e9 == pytest.approx(active_b, rel=0.01)


def test_architecture_fields() -> None:
    ds = load_model(str(HF / "deepseek-v3.json"))
    assert ds.mla is not None and ds.mla.q_lora_rank == 1536 and ds.mtp_layers == 1
    assert ds.moe is not None and (ds.moe.dense_layers, ds.moe.router) == (3, "sigmoid")
    lite = load_model(str(HF / "deepseek-v2-lite.json"))
    assert lite.mla is not None and lite.mla.q_lora_rank is None
    oss = load_model(str(HF / "gpt-oss-120b.json"))
    assert (oss.head_dim, oss.bias, oss.attention_sinks, oss.local_layers) == (64, "all", True, 18)
    mav = load_model(str(HF / "llama4-maverick-text.json"))
    assert mav.moe is not None and (mav.moe_layers, mav.dense_layers) == (24, 24)
    assert [mav.moe.is_moe(i) for i in range(4)] == [False, True, False, True]
    g2 = load_model(str(HF / "gemma-2-9b.json"))
    assert (g2.activation, g2.tied_embeddings, g2.local_layers, g2.head_dim) == (
        "geglu",
        True,
        21,
        256,
    )
    assert load_model(str(HF / "qwen3-8b.json")).qk_norm


def test_mtp_is_stored_but_not_in_published_total() -> None:
    p = param_counts(load_model("deepseek-v3"))
    # one MoE layer + 3 norms + the 2h x h projection: ~11.6B (DeepSeek's 14B adds the
    # shared embedding and head)
    assert p.mtp / 1e9 == pytest.approx(11.6, rel=0.01)
    assert p.total == p.main_total + p.mtp


def test_unsupported_and_missing_fields() -> None:
    with pytest.raises(SpecError, match=r"model_type 'bert' is not supported; allowed: .*gpt_oss"):
        from_hf_config({"model_type": "bert"}, "x")
    cfg = json.loads((HF / "deepseek-v3.json").read_text())
    del cfg["kv_lora_rank"]
    with pytest.raises(SpecError, match="'kv_lora_rank' is required"):
        from_hf_config(cfg, "x")
    cfg = json.loads((HF / "qwen3-8b.json").read_text()) | {"some_new_field": [1, 2]}
    assert from_hf_config(cfg, "x").layers == 36  # unknown fields ignored


def test_irregular_layer_types_rejected() -> None:
    cfg = json.loads((HF / "gpt-oss-120b.json").read_text())
    cfg["layer_types"][0] = "full_attention"
    with pytest.raises(SpecError, match="layer_types"):
        from_hf_config(cfg, "x")


@pytest.mark.parametrize("file", sorted(CONFIGS))
def test_show_model_cli_every_config(file: str) -> None:
    out = cli_json("show", "model", str(HF / file), "--seq", "4096", "--json")
    p = param_counts(load_model(str(HF / file)))
    assert (out["params_total"], out["params_active"]) == (p.main_total, p.main_active)
    assert out["model_flops_per_token"] > 6 * out["params_active_no_embedding"]


def test_show_model_cli_errors(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "t5"}))
    assert_user_error(run_cli("show", "model", str(bad), check=False), "model_type 't5'")
    assert_user_error(run_cli("show", "model", "qwen3-8b", "--seq", "0", check=False), "--seq 0")


def test_catalog_models_shows_total_and_active() -> None:
    rows = {row["name"]: row for row in cli_json("catalog", "models", "--json")["models"]}
    ds = rows["deepseek-v3"]
    assert ds["attention"] == "mla" and round(ds["params_total_B"]) == 671
    assert round(rows["gpt-oss-120b"]["params_total_B"], 1) == 116.8
    assert rows["llama4-maverick"]["params_active_B"] == pytest.approx(17.2, abs=0.05)


def test_modern_calibration_records_build_their_architecture(calibration_dir: Path) -> None:
    runs = yaml.safe_load((calibration_dir / "training_runs_modern.yaml").read_text())["runs"]
    models = {run["model"]["name"]: model_from_record(run["model"]) for run in runs}
    oss = models["gpt-oss-120b"]
    assert (oss.head_dim, oss.attention_sinks, oss.local_layers, oss.bias) == (64, True, 18, "all")
    assert models["qwen3-30b-a3b"].model_dump(exclude={"name"}) == load_model(
        "qwen3-30b-a3b"
    ).model_dump(exclude={"name"})
    nemotron = models["nemotron4-15b"]  # model_type nemotron: from the record's own fields
    assert (nemotron.activation, nemotron.ffn) == ("squared-relu", 24576)
    assert models["mixtral-8x22b"].vocab == 32000  # the record's (ModelZoo) vocabulary


def test_rope_theta_in_rope_parameters() -> None:
    cfg = json.loads((HF / "qwen3-8b.json").read_text())
    cfg["rope_parameters"] = {"rope_theta": cfg.pop("rope_theta"), "rope_type": "default"}
    assert from_hf_config(cfg, "x").rope_theta == 1_000_000


MUTATIONS = [None, 0, -3, 1.5, "x", "", [], [1, "a"], {}, {"a": 1}, True, 10**12]


@settings(max_examples=300, deadline=None)
@given(
    file=st.sampled_from(sorted(CONFIGS)),
    data=st.data(),
)
def test_mutated_configs_fail_as_one_line_user_errors(file: str, data: st.DataObject) -> None:
    """Any field of a real config set to a value of another type: a SpecError or a model."""
    cfg = json.loads((HF / file).read_text())
    target = cfg["text_config"] if "text_config" in cfg and data.draw(st.booleans()) else cfg
    target[data.draw(st.sampled_from(sorted(target)))] = data.draw(st.sampled_from(MUTATIONS))
    try:
        from_hf_config(cfg, "x")
    except SpecError as exc:
        assert "\n" not in str(exc)
