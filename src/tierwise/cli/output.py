"""Shared CLI output helpers: JSON to stdout, rich tables, one-line errors."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console(width=None if sys.stdout.isatty() else 140)
err_console = Console(stderr=True)


def print_json(obj: Any) -> None:
    """Print one JSON object to stdout (stable key order as built, no NaN)."""
    sys.stdout.write(json.dumps(obj, indent=2, default=_jsonable, allow_nan=False) + "\n")


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A rich table with right-aligned numeric-looking columns."""
    t = Table(title=title, title_justify="left")
    for col in columns:
        t.add_column(col)
    for row in rows:
        t.add_row(*(fmt(v) for v in row))
    return t


def fmt(value: Any) -> str:
    """Human formatting: floats with 3 significant decimals, None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:,.1f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)
