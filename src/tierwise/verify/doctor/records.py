"""Split pasted lines into NCCL records.

Logs pasted into issues often lose their line breaks, so several records
(``host:pid:tid [dev] NCCL INFO ...``, ``[dev] NCCL INFO ...`` or a bare ``NCCL INFO ...``)
run together on one line. A record starts at NCCL's own prefix, wherever it sits: the
level word ``NCCL INFO|WARN|TRACE`` and what NCCL writes before it, read right to left:
the ``file.cc:line`` of a WARN (``function:line`` of a TRACE), a TRACE time stamp, the GPU
index in brackets, ``host:pid:tid`` (each optional).
"""

from __future__ import annotations

import re
from itertools import pairwise

_LEVEL = re.compile(r"\bNCCL (?:INFO|WARN|TRACE|ERROR)\b")
_WHERE = re.compile(r"^[\w./\-]+:\d+$")
_TIME = re.compile(r"^\d+\.\d+$")
_DEV = re.compile(r"^\[\d+\]$")
_HOST = re.compile(r"^[^\s\[\]]+:\d+:\d+$")
_PARTS = (_HOST, _DEV, _TIME, _WHERE)
"""What NCCL writes before the level, in order (each part optional)."""


def split_records(line: str) -> list[str]:
    """``line`` cut before each NCCL record after the first (one item when it holds one)."""
    if line.count("NCCL ") < 2:
        return [line]
    levels = list(_LEVEL.finditer(line))
    if len(levels) < 2:
        return [line]
    cuts = [0]
    for prev, level in pairwise(levels):
        cuts.append(prev.end() + _prefix_start(line[prev.end() : level.start()]))
    cuts.append(len(line))
    return [line[a:b].strip() for a, b in pairwise(cuts) if line[a:b].strip()]


def _prefix_start(text: str) -> int:
    """Where NCCL's prefix at the end of ``text`` (the text before a level word) begins."""
    tokens = text.rsplit(None, len(_PARTS))
    parts = list(_PARTS)
    start = len(text.rstrip())
    for token in reversed(tokens[-len(_PARTS) :]):
        while parts and not parts[-1].match(token):
            parts.pop()  # that part is absent: try the ones written before it
        if not parts:
            break
        parts.pop()
        start = text.rfind(token, 0, start)
    return start
