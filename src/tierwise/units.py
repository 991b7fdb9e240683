"""Parsing of sizes, counts and durations as users type them (8, 1K, 64M, 8G; 15T tokens;
500ms, 60s, 5m)."""

from __future__ import annotations

import re

from tierwise.errors import TierwiseError

_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "": 1.0}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h|)\s*$", re.IGNORECASE)


def parse_size(text: str, field: str = "size") -> int:
    """Bytes from ``8``, ``1K``, ``64M``, ``8G`` (binary units, as nccl-tests' ``-b/-e``)."""
    match = _SIZE_RE.match(str(text))
    if not match:
        raise TierwiseError(f"{field}: cannot read size {text!r}; use e.g. 8, 1K, 64M, 8G")
    value = float(match.group(1)) * _SIZE_UNITS[match.group(2).upper()]
    if value != int(value) or value < 1:
        raise TierwiseError(f"{field}: size {text!r} is not a whole number of bytes >= 1")
    return int(value)


_COUNT_UNITS = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
_COUNT_RE = re.compile(r"^\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([KMBGTP]?)\s*$", re.IGNORECASE)


def parse_count(text: str, field: str = "count") -> float:
    """A positive count from ``15T``, ``2.5e12``, ``300B`` or ``1000`` (decimal units, as
    token counts are quoted: K, M, B or G, T, P)."""
    match = _COUNT_RE.match(str(text))
    if not match or float(match.group(1)) <= 0:
        raise TierwiseError(f"{field}: cannot read count {text!r}; use e.g. 15T, 2.5e12, 300B")
    return float(match.group(1)) * _COUNT_UNITS[match.group(2).upper()]


def parse_duration(text: str, field: str = "duration") -> float:
    """Seconds from ``60s``, ``500ms``, ``2m``, ``1h`` or a bare number of seconds."""
    match = _DURATION_RE.match(str(text))
    if not match or float(match.group(1)) <= 0:
        raise TierwiseError(f"{field}: cannot read duration {text!r}; use e.g. 500ms, 60s, 5m")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2).lower()]


def size_sweep(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """nccl-tests' sizes: min, min*factor, ... while <= max."""
    if min_bytes > max_bytes:
        raise TierwiseError(f"--min-bytes {min_bytes} is larger than --max-bytes {max_bytes}")
    if factor < 2:
        raise TierwiseError(f"--factor: must be an integer >= 2, got {factor}")
    sizes = [min_bytes]
    while sizes[-1] * factor <= max_bytes:
        sizes.append(sizes[-1] * factor)
    return sizes
