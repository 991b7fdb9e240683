"""Parsing of sizes, counts and durations as users type them (8, 1K, 64M, 8G; 8k tokens of a
sequence; 15T tokens of a run; 500ms, 60s, 5m). Digits are ASCII only in sizes, integer counts
and durations; each has an upper bound (``tierwise.bounds``)."""

from __future__ import annotations

import math
import re

from tierwise.bounds import MAX_BYTES
from tierwise.errors import TierwiseError

_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_SIZE_RE = re.compile(r"^\s*([0-9]{1,20}(?:\.[0-9]{1,20})?)\s*([KMGTP]?)(I?B?)\s*$", re.IGNORECASE)
_INT_COUNT_RE = re.compile(r"^\s*(-?[0-9]{1,20})\s*([KM]?)\s*$", re.IGNORECASE)
_DURATION_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "": 1.0}
_DURATION_RE = re.compile(
    r"^\s*([0-9]{1,20}(?:\.[0-9]{1,20})?)\s*(ms|s|min|m|h|)\s*$", re.IGNORECASE
)
#: Shortest and longest duration typed (s): a millisecond, ~31 years.
MIN_DURATION_S, MAX_DURATION_S = 1e-3, 1e9


def parse_size(text: str, field: str = "size", limit: int = MAX_BYTES) -> int:
    """Bytes from ``8``, ``1K``, ``64M``, ``8G``, ``8GB``, ``8GiB`` (binary units, as nccl-tests'
    ``-b/-e``), at most ``limit``. A lowercase ``b`` means bits and is refused, not guessed."""
    match = _SIZE_RE.match(str(text))
    if not match:
        raise TierwiseError(f"{field}: cannot read size {text!r}; use e.g. 8, 1K, 64M, 8G")
    number, unit, suffix = match.groups()
    if suffix.endswith("b"):
        raise TierwiseError(
            f"{field}: {text!r} is in bits (lowercase b); sizes are bytes: write "
            f"{number}{unit.upper()} or {number}{unit.upper()}B"
        )
    value = float(number) * _SIZE_UNITS[unit.upper()]
    if value != int(value) or value < 1:
        raise TierwiseError(f"{field}: size {text!r} is not a whole number of bytes >= 1")
    if value > limit:
        what = "" if limit == MAX_BYTES else ", one GPU's memory"
        raise TierwiseError(
            f"{field}: size {text!r} is {int(value)} bytes; allowed: <= {limit} "
            f"({limit / (1 << 30):g} GiB{what})"
        )
    return int(value)


def parse_int_count(text: str | int, field: str, limit: int, low: int = 1) -> int:
    """A count from ``8192``, ``8k`` or ``8K`` (x1024, as a "8k" sequence is 8192 tokens and
    ``-e 8K`` 8192 bytes) or ``1M`` (x1024**2); from 1 to ``limit``."""
    if isinstance(text, int):  # a default value
        return text
    match = _INT_COUNT_RE.match(text)
    if not match:
        raise TierwiseError(f"{field}: {text[:40]!r}; allowed: an integer such as 8192 or 8k")
    value = int(match.group(1)) * _SIZE_UNITS[match.group(2).upper()]
    if not low <= value <= limit:
        raise TierwiseError(f"{field}: {text!r} is {value}; allowed: {low} to {limit}")
    return value


_COUNT_UNITS = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
_COUNT_RE = re.compile(
    r"^\s*([0-9]{1,20}(?:\.[0-9]{1,20})?(?:e[0-9]{1,3})?)\s*([KMBGTP]?)\s*$", re.I
)


def parse_count(text: str, field: str = "count") -> float:
    """A positive count from ``15T``, ``2.5e12``, ``300B`` or ``1000`` (decimal units, as
    token counts are quoted: K, M, B or G, T, P)."""
    match = _COUNT_RE.match(str(text))
    if not match or not 0 < float(match.group(1)) < math.inf:
        raise TierwiseError(f"{field}: cannot read count {text!r}; use e.g. 15T, 2.5e12, 300B")
    value = float(match.group(1)) * _COUNT_UNITS[match.group(2).upper()]
    if not math.isfinite(value):
        raise TierwiseError(f"{field}: count {text[:40]!r} is not finite; use e.g. 15T, 2.5e12")
    return value


def parse_duration(text: str, field: str = "duration") -> float:
    """Seconds from ``60s``, ``500ms``, ``2m``, ``1h`` or a bare number of seconds, from
    ``MIN_DURATION_S`` (a rate over a shorter interval is noise, or inf) to ``MAX_DURATION_S``."""
    match = _DURATION_RE.match(str(text))
    if not match:
        raise TierwiseError(f"{field}: cannot read duration {text!r}; use e.g. 500ms, 60s, 5m")
    seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2).lower()]
    if not MIN_DURATION_S <= seconds <= MAX_DURATION_S:
        raise TierwiseError(
            f"{field}: {text!r} is {seconds:g} s; allowed: {MIN_DURATION_S * 1e3:g} ms to "
            f"{MAX_DURATION_S:g} s"
        )
    return seconds


def size_sweep(
    min_bytes: int,
    max_bytes: int,
    factor: int,
    flags: tuple[str, str, str] = ("--min-bytes", "--max-bytes", "--factor"),
) -> list[int]:
    """nccl-tests' sizes: min, min*factor, ... while <= max; an error names the three by
    `flags` (as the user gave them)."""
    low, high, step = flags
    if min_bytes > max_bytes:
        raise TierwiseError(f"{low} {min_bytes} is larger than {high} {max_bytes}")
    if factor < 2:
        raise TierwiseError(f"{step}: must be an integer >= 2, got {factor}")
    sizes = [min_bytes]
    while sizes[-1] * factor <= max_bytes:
        sizes.append(sizes[-1] * factor)
    return sizes
