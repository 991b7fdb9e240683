"""Loading YAML specs into pydantic models with one-line errors naming the field."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from tierwise.errors import SpecError

M = TypeVar("M", bound=BaseModel)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's C loader when PyYAML has it: ~10x faster on the shipped data files."""


def data_yaml(package: str, name: str) -> Any:
    """A YAML file shipped inside `package` (e.g. ``data/gpus.yaml``), parsed."""
    return yaml.load(resources.files(package).joinpath(name).read_text(), Loader=_LOADER)


def read_yaml(path: Path) -> Any:
    """Parse a YAML file; malformed YAML is a SpecError with the file and line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise SpecError(f"{path}{where}: malformed YAML ({problem})") from None


def build(model: type[M], data: Any, source: str) -> M:
    """Validate `data` as `model`; the first problem becomes one SpecError line."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        if not err["loc"]:
            raise SpecError(f"{source}: {msg}") from None
        field = ".".join(str(p) for p in err["loc"])
        value = err.get("input")
        shown = "" if isinstance(value, dict) else f" (got {value!r})"
        raise SpecError(f"{source}: field {field}: {msg}{shown}") from None
