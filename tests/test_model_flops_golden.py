"""Golden: model FLOPs per token against Megatron-Bridge's published counter values.

``../shared/calibration/training_runs_modern.yaml`` lists ``flops_per_token`` medians derived
from NVIDIA's Megatron-Bridge performance tables (model TFLOP/s per GPU / tokens/s per GPU).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tierwise.workload import ModelSpec, load_model
from tierwise.workload.flops import model_flops_per_token

PRESETS = {
    "DeepSeek-V3 with MTP (1 layer)": "deepseek-v3",
    "DeepSeek-V3 without MTP": "deepseek-v3",
    "GPT-OSS-120B": "gpt-oss-120b",
    "Llama3-70B": "llama3-70b",
    "Llama3.1-405B": "llama3-405b",
    "Qwen3-30B-A3B": "qwen3-30b-a3b",
    "Qwen3-235B-A22B": "qwen3-235b-a22b",
}
GPT_OSS_COUNTER_CHANGE = (26, 6)
"""Megatron-Bridge release from which GPT-OSS is counted as what it is (see README.md)."""


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in str(text).split("."))


def gpt_oss_legacy_counter(m: ModelSpec) -> ModelSpec:
    """What Megatron-Bridge's counter saw for GPT-OSS up to 26.04.01: a non-gated expert MLP
    (2 matmuls) and every layer full causal attention."""
    return m.model_copy(update={"activation": "gelu", "local_attention": None})


def _spec_for(entry: dict) -> ModelSpec:
    m = load_model(PRESETS[entry["model"]])
    if entry["model"] == "DeepSeek-V3 without MTP":
        return m.model_copy(update={"mtp_layers": 0})
    if entry["model"] == "GPT-OSS-120B" and _release(entry["release"]) < GPT_OSS_COUNTER_CHANGE:
        return gpt_oss_legacy_counter(m)
    return m


def _entries(calibration: Path) -> list[dict]:
    data = yaml.safe_load((calibration / "training_runs_modern.yaml").read_text())
    return data["flops_per_token"]


def test_every_flops_per_token_entry_within_1_percent(calibration_dir: Path) -> None:
    entries = _entries(calibration_dir)
    assert len(entries) >= 30 and {e["model"] for e in entries} == set(PRESETS)
    for entry in entries:
        ours = model_flops_per_token(_spec_for(entry), entry["seq"]) / 1e9
        published = entry["derived_gflop_per_token_median"]
        assert ours == pytest.approx(published, rel=0.01), (entry["model"], entry["release"])


def test_gpt_oss_counters_differ_by_the_published_step() -> None:
    m = load_model("gpt-oss-120b")
    new, old = (
        model_flops_per_token(m, 4096),
        model_flops_per_token(gpt_oss_legacy_counter(m), 4096),
    )
    assert new / 1e9 == pytest.approx(32.6, rel=0.005)
    assert old / 1e9 == pytest.approx(27.2, rel=0.005)
    assert model_flops_per_token(gpt_oss_legacy_counter(m), 8192) / 1e9 == pytest.approx(
        30.8, rel=0.005
    )
