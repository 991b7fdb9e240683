"""Loading YAML specs into pydantic models with one-line errors naming the field.

The YAML files shipped with tierwise (catalog, cluster and model presets) are parsed once and
kept as JSON in the ``__pycache__`` folder beside them, as Python keeps bytecode: a start-up
then reads JSON and never imports PyYAML. The copy is keyed by the YAML file's size and
modification time and is not written where Python writes no bytecode (read-only installs,
``PYTHONDONTWRITEBYTECODE``).
"""

from __future__ import annotations

import json
import os
import sys
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tierwise.errors import SpecError

M = TypeVar("M", bound=BaseModel)


def data_yaml(package: str, name: str) -> Any:
    """A YAML file shipped inside `package` (e.g. ``data/gpus.yaml``), parsed (from its cached
    JSON copy when that is current)."""
    source = resources.files(package).joinpath(name)
    if not isinstance(source, Path):  # inside a zip: no folder to cache in
        return _parse_shipped(source.read_text(encoding="utf-8"))
    stat = source.stat()
    key = [stat.st_size, stat.st_mtime_ns]
    cache = source.parent / "__pycache__" / f"{source.name}.json"
    try:
        cached = json.loads(cache.read_text(encoding="utf-8"))
        if cached["source"] == key:
            return cached["data"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    data = _parse_shipped(source.read_text(encoding="utf-8"))
    if not sys.dont_write_bytecode:
        _write_cache(cache, key, data)
    return data


def _parse_shipped(text: str) -> Any:
    """Parse a shipped YAML file with libyaml's C loader when PyYAML has it (~10x faster)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _write_cache(cache: Path, key: list[int], data: Any) -> None:
    """Write the JSON copy (atomically) when JSON gives `data` back unchanged; skip it where
    the folder is not writable."""
    text = json.dumps({"source": key, "data": data})
    if json.loads(text)["data"] != data:
        return
    tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
    try:
        cache.parent.mkdir(exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, cache)
    except OSError:
        tmp.unlink(missing_ok=True)


def read_yaml(path: Path) -> Any:
    """Parse a YAML file; malformed YAML is a SpecError with the file and line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read ({exc.strerror})") from None
    import yaml

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
