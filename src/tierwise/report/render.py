"""Turning a matplotlib Figure into inline SVG or a PNG/SVG file, with one shared style.

Figures are built on `matplotlib.figure.Figure` directly (no pyplot, no global state). The
default size is 12 x N inches at 100 dpi, so a PNG is 1200 px wide with labels that stay
readable at that width.
"""

from __future__ import annotations

import io
from contextlib import AbstractContextManager
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

from tierwise.errors import SpecError

WIDTH_IN = 12.0
"""Figure width, inches (x DPI = 1200 px)."""
DPI = 100
STYLE = {
    "font.size": 13,
    "axes.titlesize": 15,
    "axes.labelsize": 13,
    "legend.fontsize": 11,
    "xtick.labelsize": 12,
    "ytick.labelsize": 12,
    "svg.fonttype": "none",  # text stays text: smaller files, selectable labels
}
SUFFIXES = (".png", ".svg")


def style() -> AbstractContextManager[None]:
    """Context to build a figure in: artists read font sizes from rc when created."""
    return matplotlib.rc_context(STYLE)


def new_figure(height_in: float, width_in: float = WIDTH_IN) -> Figure:
    """An empty figure (constrained layout); call inside `style()`."""
    return Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")


def to_svg(fig: Figure, salt: str) -> str:
    """The figure as an `<svg>` element for inlining in HTML (no XML prolog).

    `salt` makes the clip-path ids unique per figure and the output deterministic.
    """
    buf = io.StringIO()
    with matplotlib.rc_context({**STYLE, "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg") :]


def check_path(path: str | Path, option: str = "--plot") -> Path:
    """`path` as a Path if it ends in .png/.svg and its folder exists, else a SpecError."""
    out = Path(path)
    if out.suffix.lower() not in SUFFIXES:
        raise SpecError(f"{option}: {str(path)!r} must end in .png or .svg")
    if not out.parent.exists():
        raise SpecError(f"{option}: folder {str(out.parent)!r} does not exist")
    return out


def save(fig: Figure, path: str | Path, salt: str = "tierwise") -> None:
    """Write `fig` to `path` (checked by `check_path`); the suffix picks PNG or SVG."""
    out = check_path(path)
    fmt = out.suffix.lower()[1:]
    meta = {"Date": None} if fmt == "svg" else {"Software": None}
    with matplotlib.rc_context({**STYLE, "svg.hashsalt": salt}):
        fig.savefig(out, format=fmt, dpi=DPI, metadata=meta)
