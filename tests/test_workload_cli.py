"""`show model` / `catalog models` views (wired into the CLI by show.py and catalog.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tierwise.cli.model_view import catalog_models_rows, show_model
from tierwise.errors import SpecError
from tierwise.workload import preset_names

HF = Path(__file__).parent / "data" / "hf"


def test_show_model_json_llama3_70b(capsys: pytest.CaptureFixture[str]) -> None:
    show_model("llama3-70b", as_json=True)
    out = json.loads(capsys.readouterr().out)
    assert out["name"] == "llama3-70b"
    assert out["params_total_B"] == pytest.approx(70.6, rel=0.01)
    assert out["spec"]["kv_heads"] == 8 and out["spec"]["moe"] is None
    assert sum(out["params_by_part"].values()) == out["params_total"]


def test_show_model_json_mixtral_config(capsys: pytest.CaptureFixture[str]) -> None:
    show_model(str(HF / "mixtral-8x7b.json"), as_json=True)
    out = json.loads(capsys.readouterr().out)
    assert out["params_total_B"] == pytest.approx(46.7, rel=0.01)
    assert out["params_active_B"] == pytest.approx(12.9, rel=0.01)
    assert out["spec"]["moe"]["experts"] == 8


def test_show_model_human(capsys: pytest.CaptureFixture[str]) -> None:
    show_model("deepseek-moe-16b", as_json=False)
    text = capsys.readouterr().out
    assert "deepseek-moe-16b" in text and "B active per token" in text
    assert "moe.shared_experts" in text and "experts" in text


def test_show_model_unknown_is_spec_error() -> None:
    with pytest.raises(SpecError, match="presets: "):
        show_model("no-such-model", as_json=True)


def test_catalog_rows() -> None:
    rows = catalog_models_rows()
    assert [r["name"] for r in rows] == preset_names()
    mixtral = next(r for r in rows if r["name"] == "mixtral-8x7b")
    assert (mixtral["experts"], mixtral["top_k"]) == (8, 2)
    assert mixtral["params_active_B"] == pytest.approx(12.9, rel=0.01)
    json.dumps(rows)  # JSON-ready
