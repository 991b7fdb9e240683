"""Loading YAML/JSON specs into pydantic models with one-line errors naming the field.

``parse_yaml``/``parse_json`` (and ``build``, for data from anywhere) accept only plain data a
spec can hold: nesting at most ``MAX_DEPTH`` deep, at most ``MAX_NODES`` values (YAML aliases
counted each time they are used, so an alias bomb is refused), finite floats (also as text:
pydantic reads ``"Infinity"`` into a float field) and integers inside int64.

The YAML files shipped with tierwise (catalog, cluster and model presets) are parsed once and
kept as JSON in the ``__pycache__`` folder beside them, as Python keeps bytecode: a start-up
then reads JSON and never imports PyYAML. The copy is keyed by the YAML file's size and
modification time and is not written where Python writes no bytecode (read-only installs,
``PYTHONDONTWRITEBYTECODE``).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tierwise.errors import SpecError, TierwiseError
from tierwise.textio import MAX_SPEC_BYTES, read_text, user_error

M = TypeVar("M", bound=BaseModel)
#: Deepest nesting of lists/mappings accepted in a spec (real specs nest 2-4 deep).
MAX_DEPTH = 32
#: Most values (scalars, lists, mappings) in one spec, aliases expanded.
MAX_NODES = 1_000_000
#: Bracket nesting refused before parsing (above MAX_DEPTH: brackets inside strings count).
MAX_FLOW_DEPTH = 4 * MAX_DEPTH
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
#: Longest string checked for a non-finite number (pydantic turns numeric strings into floats).
MAX_NUMBER_TEXT = 512
#: Integers in a spec must fit int64 (numpy, and every count or size tierwise models).
MAX_INT = 2**63 - 1


def _where(path: list[str]) -> str:
    return f"field {'.'.join(path)}: " if path else ""


def _non_finite_text(text: str) -> bool:
    """True for text a float field would read as inf or nan (``Infinity``, ``-inf``, ``1e999``)."""
    if len(text) > MAX_NUMBER_TEXT:
        return False
    try:
        return not math.isfinite(float(text))
    except ValueError:
        return False


def check_data(data: Any, source: str) -> Any:
    """``data`` unchanged if it is plain, bounded and finite (see the module docstring)."""
    budget = MAX_NODES
    stack: list[tuple[Any, list[str]]] = [(data, [])]
    while stack:
        value, path = stack.pop()
        budget -= 1
        if budget < 0:
            raise SpecError(f"{source}: more than {MAX_NODES} values (a YAML alias bomb?)")
        if len(path) > MAX_DEPTH:
            raise SpecError(f"{source}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, str):
            if _non_finite_text(value):  # pydantic reads "Infinity" into a float field
                raise SpecError(
                    f"{source}: {_where(path)}{value[:40]!r} is not a finite number; allowed: "
                    "finite numbers"
                )
            continue
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int):
            if abs(value) > MAX_INT:
                shown = f"{str(value)[:12]}... ({len(str(abs(value)))} digits)"
                raise SpecError(
                    f"{source}: {_where(path)}integer {shown} is out of range; allowed: "
                    f"|n| <= 2**63-1"
                )
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise SpecError(
                    f"{source}: {_where(path)}{value!r} is not a finite number; allowed: finite "
                    "numbers"
                )
        elif isinstance(value, dict):
            stack += [(v, [*path, str(k)]) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, [*path, str(i)]) for i, v in enumerate(value)]
    return data


def _bad_value(exc: Exception) -> str:
    if "digits" in str(exc):  # Python refuses int() of more than 4300 digits
        return "an integer of more than 4300 digits; allowed: |n| <= 2**63-1"
    return f"malformed value ({str(exc)[:80]})"


def _flow_depth(text: str) -> int:
    """Deepest ``[``/``{`` nesting in ``text`` (brackets in strings and comments counted too)."""
    depth = deepest = 0
    for ch in _NOT_BRACKETS.sub("", text):
        depth = depth + 1 if ch in "[{" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    return deepest


def parse_yaml(text: str, source: str) -> Any:
    """YAML text as plain data; malformed or unbounded YAML is a SpecError naming the line."""
    if _flow_depth(text) > MAX_FLOW_DEPTH:  # PyYAML recurses per level: refuse before it
        raise SpecError(f"{source}: nested deeper than {MAX_DEPTH} levels")
    import yaml

    try:  # libyaml's parser when PyYAML has it: ~10x faster on a large file
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise SpecError(f"{source}{where}: malformed YAML ({problem})") from None
    except RecursionError:
        raise SpecError(f"{source}: nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, OverflowError) as exc:  # int('9'*5000), timestamp 2024-13-45
        raise SpecError(f"{source}: {_bad_value(exc)}") from None
    return check_data(data, source)


def parse_json(text: str, source: str, error: type[TierwiseError] = SpecError) -> Any:
    """JSON text as plain data; malformed or unbounded JSON is ``error`` naming the line."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise user_error(error, source, f"malformed JSON ({exc.msg})", exc.lineno) from None
    except RecursionError:
        raise user_error(error, source, f"nested deeper than {MAX_DEPTH} levels") from None
    except (ValueError, OverflowError) as exc:  # integers over 4300 digits
        raise user_error(error, source, _bad_value(exc)) from None
    try:
        return check_data(data, source)
    except SpecError as exc:
        raise error(str(exc)) from None


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
    """Parse a YAML (or JSON) spec file; see ``parse_yaml``."""
    return parse_yaml(read_text(path, limit=MAX_SPEC_BYTES, error=SpecError), str(path))


def read_json(path: Path) -> Any:
    """Parse a JSON spec file (a Hugging Face config.json); see ``parse_json``."""
    return parse_json(read_text(path, limit=MAX_SPEC_BYTES, error=SpecError), str(path))


def build(model: type[M], data: Any, source: str, flags: Mapping[str, str] | None = None) -> M:
    """Validate `data` as `model`; the first problem becomes one SpecError line. A field in
    `flags` (field -> the option the user typed, e.g. ``--recompute``) is named by its flag,
    with the value and what the field allows."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a mapping of fields, got {type(data).__name__}")
    check_data(data, source)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = err["msg"].removeprefix("Value error, ")
        if not err["loc"]:
            raise SpecError(f"{source}: {msg}") from None
        field = ".".join(str(p) for p in err["loc"])
        value = err.get("input")
        flag = (flags or {}).get(str(err["loc"][0]))
        if flag is not None:
            raise SpecError(f"{flag}: {_short(value)}; allowed: {_allowed(model, err)}") from None
        shown = "" if isinstance(value, dict | list) else f" (got {_short(value)})"
        raise SpecError(f"{source}: field {field}: {msg}{shown}") from None


def _allowed(model: type[BaseModel], err: Any) -> str:
    """What a field allows, from a pydantic error: the literal choices, the bounds of a
    number (both, from the field's constraints), else pydantic's message."""
    if err["type"] == "literal_error":
        return str(err["ctx"]["expected"])
    if err["type"] in BOUND_ERRORS:
        info = model.model_fields[str(err["loc"][0])]
        low = next((m.ge for m in info.metadata if hasattr(m, "ge")), None)
        high = next((m.le for m in info.metadata if hasattr(m, "le")), None)
        if low is not None and high is not None:
            return f"{low} to {high}"
        return f">= {low}" if low is not None else f"<= {high}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    return msg[:1].lower() + msg[1:]


BOUND_ERRORS = ("greater_than_equal", "less_than_equal")
"""Pydantic error types of a number outside a field's ge/le bounds."""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
