"""Text helpers shared by the training-log readers: noise, numbers, values, GPU names."""

from __future__ import annotations

import re
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# Rank prefixes launchers put before every line: `0: ` (srun -l), `[default7]:` (torchrun's
# --tee), `[rank0]:` (torch's log prefix), `[trainer5|5]:` (torchx; `\|` in markdown copies).
_PREFIX = r"(?:[ \t]*(?:\d{1,6}: |\[(?:default|rank|trainer)?\d+(?:\\?\|\d+)?\]:))+"
RANK_PREFIX = re.compile(r"\n" + _PREFIX)  # a literal first character: a fast scan
_FIRST_PREFIX = re.compile(_PREFIX)
# Sections read from the start of a log only (arguments, configs, commands, prose): real
# logs print them first; scanning 50 MB for them would cost seconds.
HEAD_CHARS = 4_000_000
# Prose (PR descriptions, READMEs pasted before a log) is read in its first PROSE_CHARS only.
PROSE_CHARS = 200_000
_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def clean(text: str) -> str:
    """The log without ANSI colour codes, carriage-return progress bars and rank prefixes."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _FIRST_PREFIX.sub("", text, count=1) if _FIRST_PREFIX.match(text) else text
    return RANK_PREFIX.sub("\n", text)


def number(token: str) -> float | None:
    """A number as logs print it (`2,793`, `1.249e+03`, `13100.0/13240.9` -> the first)."""
    m = _NUMBER.search(token)
    if m is None:
        return None
    try:
        return float(m.group().replace(",", ""))
    except ValueError:
        return None


def value(token: str) -> Any:
    """A printed argument value: None/True/False, an int, a float, else the stripped text."""
    t = token.strip().strip("'\"")
    low = t.lower()
    if low in ("none", "null", "~", ""):
        return None
    if low == "true":
        return True
    if low == "false":
        return False
    if re.fullmatch(r"[-+]?\d{1,18}", t):
        return int(t)
    if re.fullmatch(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?", t):
        return float(t)
    return t


def positive_int(v: Any) -> int | None:
    """``v`` as a positive integer, or None (booleans, fractions, text and 0 are not)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, float):
        if not v.is_integer():
            return None
        v = int(v)
    if isinstance(v, str):
        if not re.fullmatch(r"\+?\d{1,12}", v.strip()):
            return None
        v = int(v)
    return v if isinstance(v, int) and v > 0 else None


def truthy(v: Any) -> bool | None:
    """A switch as configs write it (True/False, 1/0, yes/no); None when it is neither."""
    if isinstance(v, bool):
        return v
    low = str(v).strip().strip("'\"").lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off", ""):
        return False
    return None


# GPU names as logs, configs and PR texts write them -> (catalog key or None, display name).
# First match wins: the more specific patterns come first.
_GPU_NAMES: tuple[tuple[re.Pattern[str], str | None, str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), key, name)
    for p, key, name in (
        (r"GB300", "gb300", "NVIDIA GB300"),
        (r"GB200", "gb200", "NVIDIA GB200"),
        (r"(?<!G)B300", "b300", "NVIDIA B300"),
        (r"(?<!G)B200", "b200", "NVIDIA B200"),
        (r"H200", "h200", "NVIDIA H200"),
        (r"H100[ -]?(?:PCIe|NVL)", "h100-pcie", "NVIDIA H100 PCIe"),
        (r"H100", "h100-sxm", "NVIDIA H100"),
        (r"A100.{0,12}40\s?GB", "a100-sxm-40gb", "NVIDIA A100 40GB"),
        (r"A100", "a100-sxm-80gb", "NVIDIA A100"),
        (r"L40S", "l40s", "NVIDIA L40S"),
        (r"MI300X", "mi300x", "AMD Instinct MI300X"),
        (r"MI325X", None, "AMD Instinct MI325X"),
        (r"MI355X", None, "AMD Instinct MI355X"),
        (r"MI350X", None, "AMD Instinct MI350X"),
        (r"V100", None, "NVIDIA V100"),
        (r"RTX\s?4090", None, "NVIDIA GeForce RTX 4090"),
    )
)


def gpu_name(text: str) -> tuple[str | None, str] | None:
    """(catalog key or None, display name) of the GPU ``text`` names, or None."""
    for pattern, key, name in _GPU_NAMES:
        if pattern.search(text):
            return key, name
    return None


_GPU_WORD = r"(?:GB300|GB200|B300|B200|H200|H100|A100|L40S|MI300X|MI325X|MI350X|MI355X|V100)"
# "16 x H100", "8xb200", "64*V100", "8 H100 GPUs": a count of GPUs stated in prose.
GPU_COUNT = re.compile(
    rf"\b(\d{{1,6}})\s?[x×*]\s?{_GPU_WORD}\b|\b(\d{{1,6}}) (?:NVIDIA |AMD )?{_GPU_WORD} GPUs\b",
    re.I,
)


def gpu_count_in_prose(text: str) -> tuple[int, str] | None:
    """(count, the matched words) of the first "N x GPU" phrase in ``text``."""
    m = GPU_COUNT.search(text)
    if m is None:
        return None
    return int(m.group(1) or m.group(2)), m.group(0)
