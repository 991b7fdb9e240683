"""Load a model spec from a preset name (``data/models.yaml``), a YAML/JSON spec file in the
format of DESIGN.md ("Inputs users write"), or a Hugging Face ``config.json``."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from tierwise.errors import SpecError
from tierwise.specio import data_yaml, read_json, read_yaml
from tierwise.textio import is_file
from tierwise.workload.hf import from_hf_config, is_hf_config, supported_model_types
from tierwise.workload.spec import ModelSpec


@cache
def _presets() -> dict[str, dict[str, Any]]:
    models = data_yaml("tierwise.workload", "data/models.yaml")["models"]
    return {entry["name"]: entry for entry in models}


def preset_names() -> list[str]:
    """Names of the bundled model presets, in catalog order."""
    return list(_presets())


def preset(name: str) -> ModelSpec:
    """A bundled preset by name."""
    entries = _presets()
    if name not in entries:
        raise SpecError(
            f"model {name[:80]!r}: not a preset or a file; presets: {', '.join(entries)}"
        )
    return ModelSpec.parse(entries[name], source=f"preset {name!r}")


def load_model(arg: str) -> ModelSpec:
    """A preset name, a YAML/JSON model spec file, or a Hugging Face ``config.json``."""
    path = Path(arg)
    if not is_file(path):
        if path.suffix.lower() in {".yaml", ".yml", ".json"}:
            raise SpecError(f"model file {arg!r}: no such file")
        return preset(arg)
    data = read_json(path) if path.suffix.lower() == ".json" else read_yaml(path)
    if not isinstance(data, dict):
        raise SpecError(f"model file {arg!r}: expected a mapping of fields")
    if is_hf_config(data):
        directory = str(path.resolve().parent)  # its tokenizer sits beside it
        return from_hf_config(data, _name_from_path(path), source=arg, hf_path=directory)
    return ModelSpec.parse(data, source=f"model file {arg!r}")


def _name_from_path(path: Path) -> str:
    stem = path.stem
    return path.resolve().parent.name if stem == "config" else stem


def model_from_record(record: Mapping[str, Any], **defaults: Any) -> ModelSpec:
    """The model of a calibration / training-run record: its ``hf_config`` when it has one of
    a supported ``model_type`` (the whole architecture: head_dim, windows, sinks, MLA, ...),
    else its tierwise fields (:meth:`ModelSpec.from_fields`, ``defaults`` under them)."""
    hf = record.get("hf_config")
    name = str(record.get("name") or record.get("id") or "model")
    if isinstance(hf, Mapping) and hf.get("model_type") in supported_model_types():
        return from_hf_config({**hf, "_name_or_path": name}, default_name=name, source=name)
    return ModelSpec.from_fields(record, **defaults)
