"""Shared CLI output helpers: JSON to stdout, rich tables, one-line errors.

Data prints literally: the consoles parse no markup and highlight nothing, so a model or check
name such as ``[/]`` prints as written and a 20,000-digit value prints at once; styled words are
built as `Text`. Piped output is not cut: a terminal's width (or ``COLUMNS``) applies, a pipe
gets `PIPED_WIDTH`. JSON output carries no inf or NaN: a non-finite number prints as ``null``.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierwise.errors import SpecError

if TYPE_CHECKING:  # rich loads on first human output: --json never imports it
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

PIPED_WIDTH = 10_000
"""Columns of piped output without ``COLUMNS``: wide enough that no table is cut."""
RULE_WIDTH = 100
"""Widest separator line (a rule over `PIPED_WIDTH` columns would be one huge line)."""


def _width() -> int | None:
    """None (rich reads ``COLUMNS`` or the terminal) on a terminal or with ``COLUMNS`` set."""
    return None if sys.stdout.isatty() or "COLUMNS" in os.environ else PIPED_WIDTH


class LazyConsole:
    """A rich `Console` (no markup, no highlighting) made on first use."""

    def __init__(self, stderr: bool = False) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            width = None if self._stderr else _width()
            self._console = Console(stderr=self._stderr, width=width, markup=False, highlight=False)
        return getattr(self._console, name)


console = LazyConsole()
err_console = LazyConsole(stderr=True)


json_printed = False
"""Whether this process printed its JSON result (an error after it adds no second object)."""


_said: ContextVar[list[str] | None] = ContextVar("tierwise_said_notes", default=None)
"""The notes `say_notes` gave in the current `notes_scope` (None outside one)."""


@contextmanager
def notes_scope() -> Iterator[None]:
    """The run of one command: the notes said in it (`say_notes`) join its JSON object's
    ``notes``; they end with it, so a second run in one process starts with none."""
    token = _said.set([])
    try:
        yield
    finally:
        _said.reset(token)


def say_notes(notes: Iterable[str]) -> None:
    """Say each note as a ``note: ...`` line on stderr and keep it for this command's JSON
    object (`print_json`: its top-level ``notes``, before the command's own)."""
    kept = _said.get()
    for note in notes:
        sys.stderr.write(f"note: {note}\n")
        if kept is not None and note not in kept:
            kept.append(note)


def with_said_notes(obj: Any) -> Any:
    """`obj` with the notes said in this scope first in its ``notes``, a key every object a
    command with cluster options prints has (empty when nothing was said). A dict only: a
    top-level list has no place for them (they are on stderr)."""
    said = _said.get()
    if said is None or not isinstance(obj, dict):
        return obj
    own = obj.get("notes") or []
    return {**obj, "notes": list(dict.fromkeys([*said, *own]))}


def print_json(obj: Any) -> None:
    """Print one JSON object to stdout (key order as built; inf and NaN as null), with the
    notes said while the command ran (`say_notes`)."""
    global json_printed
    text = json.dumps(finite(with_said_notes(obj)), indent=2, allow_nan=False)
    sys.stdout.write(text + "\n")
    json_printed = True


def finite(value: Any) -> Any:
    """`value` as plain JSON data: pydantic models dumped, arrays listed, inf/NaN -> None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    if hasattr(value, "model_dump"):
        return finite(value.model_dump(mode="json"))
    if hasattr(value, "tolist"):
        return finite(value.tolist())
    if value is None or isinstance(value, str | int | bool):
        return value
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def styled(text: str, style: str) -> Text:
    """`text` printed literally in a rich style (e.g. "bold", "red")."""
    from rich.text import Text

    return Text(text, style=style)


def line(*parts: str | Text) -> Text:
    """One printed line from plain strings and `styled` pieces (no markup is parsed)."""
    from rich.text import Text

    return Text.assemble(*parts)


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A rich table; cells are `fmt`-ed and printed literally (a `Text` keeps its style)."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=Text(title), title_justify="left")
    for col in columns:
        t.add_column(Text(col))
    for row in rows:
        t.add_row(*(v if isinstance(v, Text) else Text(fmt(v)) for v in row))
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
        if not math.isfinite(value):
            return str(value)
        if abs(value) >= 100:
            return f"{value:,.1f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)


def writable(path: Path | None, flag: str) -> None:
    """Fail early, in one line, when `path` (an output file of `flag`) cannot be written: its
    folder is missing or read-only, it is a folder, a FIFO or socket (writing one blocks), or
    its name is one the OS refuses (too long, a NUL)."""
    if path is None:
        return
    shown = repr(str(path)) if len(str(path)) <= 80 else repr(str(path)[:77] + "...")
    try:
        info = path.stat()
    except FileNotFoundError:
        info = None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise SpecError(f"{flag}: {shown} cannot be written ({reason})") from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise SpecError(f"{flag}: {shown} is a folder; give a file name")
    if info is not None and (stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode)):
        raise SpecError(f"{flag}: {shown} is a FIFO or socket; give a file name")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise SpecError(f"{flag}: folder {str(folder)[:80]!r} of {shown} does not exist")
    if not os.access(folder, os.W_OK) or (info is not None and not os.access(path, os.W_OK)):
        raise SpecError(f"{flag}: {shown} is not writable")


def write_files(folder: Path, files: dict[str, str], flag: str) -> list[str]:
    """Write name -> text into `folder` (made if missing); the paths written. A folder that
    cannot be written is one line naming `flag`."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (folder / name).write_text(text)
    except OSError as exc:
        raise SpecError(f"{flag}: cannot write into {str(folder)!r} ({exc.strerror})") from None
    return [str(folder / name) for name in files]


def recompute_label(layout: dict[str, Any]) -> str:
    """A layout's recompute as the tables print it: ``full (block 2)``, ``full (uniform 4)``,
    ``selective (core_attn,mlp)`` (`layout`: a plan row or estimate's JSON layout)."""
    text = str(layout["recompute"])
    if layout["recompute_modules"]:  # Megatron's modules instead of its default (core_attn)
        text += f" ({','.join(layout['recompute_modules'])})"
    method, layers = layout.get("recompute_method"), layout.get("recompute_num_layers")
    if method == "block" or (layers or 1) > 1:  # uniform 1 is every layer, the default
        text += f" ({method or 'uniform'} {layers or 1})"
    return text


def plural(count: int, noun: str) -> str:
    """``1 node``, ``2 nodes``: a count with its noun in the right number."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def percent(fraction: float) -> str:
    """A signed relative error as users read it: ``+12.3%`` (lab, calibrate, validation)."""
    return f"{fraction * 100:+.1f}%"
