"""Step time from logged values: the median past warm-up, and how it was taken."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

# A logged value whose window reaches back into the first WARMUP_STEPS steps carries the
# warm-up (CUDA/NCCL init, allocator growth, compilation) and is left out when later values
# exist: Megatron prints the average since the last log line, so iteration 5 of a 5-step
# interval holds the first step.
WARMUP_STEPS = 2
# Per-step values with no window (MLPerf's tracked_stats): the first few are warm-up.
WARMUP_VALUES = 3


@dataclass(frozen=True)
class Window:
    """One logged value: the mean step time (s) over steps first..last."""

    first: int
    last: int
    seconds: float


@dataclass(frozen=True)
class StepTime:
    seconds: float
    method: str
    values_used: int


def from_windows(windows: Sequence[Window], what: str) -> StepTime | None:
    """Median of the windows past warm-up (all of them when every one holds warm-up)."""
    if not windows:
        return None
    late = [w for w in windows if w.first > WARMUP_STEPS]
    used = late or list(windows)
    dropped = len(windows) - len(used)
    steps = f"steps {used[0].last}..{used[-1].last}" if len(used) > 1 else f"step {used[0].last}"
    method = f"median of {len(used)} {what} ({steps}"
    if dropped:
        method += f"; {dropped} warm-up value(s) within the first {WARMUP_STEPS} steps left out"
    elif used[0].first <= WARMUP_STEPS:
        method += "; includes warm-up: no later value logged"
    return StepTime(median(w.seconds for w in used), method + ")", len(used))


def from_values(values: Sequence[float], what: str) -> StepTime | None:
    """Median of per-step values past the first WARMUP_VALUES (all when there are no more)."""
    if not values:
        return None
    used = list(values[WARMUP_VALUES:]) or list(values)
    dropped = len(values) - len(used)
    method = f"median of {len(used)} {what}" + (
        f" (first {dropped} left out as warm-up)" if dropped else " (includes warm-up)"
    )
    return StepTime(median(used), method, len(used))
