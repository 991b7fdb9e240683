"""Split pasted lines into NCCL records.

Logs pasted into issues often lose their line breaks, so several records
(``host:pid:tid [dev] NCCL INFO ...``, ``[dev] NCCL INFO ...`` or a bare ``NCCL INFO ...``)
run together on one line. A record starts at NCCL's own prefix, wherever it sits: the
level word ``NCCL INFO|WARN|TRACE`` and what NCCL writes before it (``host:pid:tid``, the
GPU index in brackets, a TRACE time stamp, the ``file.cc:line`` of a WARN).
"""

from __future__ import annotations

import re
from itertools import pairwise

_LEVEL = re.compile(r"\bNCCL (?:INFO|WARN|TRACE|ERROR)\b")
# what NCCL writes before the level, anchored at the level: host:pid:tid, [dev], TRACE time
# stamp, file.cc:line (each optional)
_PREFIX = re.compile(
    r"(?:(?<=\s)|^)(?:[^\s\[\]]+:\d+:\d+\s+)?(?:\[\d+\]\s+)?(?:\d+\.\d+\s+)?(?:[\w./\-]+:\d+\s+)?$"
)
_LOOKBACK = 200
"""Characters before a level word searched for its prefix (a host name, pids, a location)."""


def split_records(line: str) -> list[str]:
    """``line`` cut before each NCCL record after the first (one item when it holds one)."""
    if line.count("NCCL ") < 2:
        return [line]
    levels = list(_LEVEL.finditer(line))
    if len(levels) < 2:
        return [line]
    cuts = [0]
    for prev, level in pairwise(levels):
        lo = max(prev.end(), level.start() - _LOOKBACK)
        head = _PREFIX.search(line, lo, level.start())
        cuts.append(head.start() if head else level.start())
    cuts.append(len(line))
    return [line[a:b].strip() for a, b in pairwise(cuts) if line[a:b].strip()]
