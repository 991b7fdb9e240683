"""Monte Carlo of a run's failure timeline (`--simulate`), vectorised over trials and events.

The job's interruptions form a Poisson process in wall-clock time (single-node failures of
its nodes plus whole-rack failures of its racks), whatever the job is doing: a failure may
strike during a restart, which then starts over. Between two interruptions the job restarts
(``restart_s``, plus the wait for a replacement node when no spare is left), then trains in
cycles of ``interval_s`` of work and a ``write_s`` stall; a checkpoint counts once durable
(``lag_s`` after its stall). Each segment between interruptions therefore commits
``floor((run - lag) / cycle)`` intervals of work, independently of the others, so a trial is
a cumulative sum over its segments: no per-event Python loop.

Spares: each failure takes its nodes out for ``repair_s``; with S spares, the restart after
failure k must wait until the nodes taken by earlier failures are back, so that at most S
are out: until the first failure m whose cumulative node count reaches ``C_k - S`` has been
repaired (``t_m + repair_s``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tierwise.perf.train_time import DAY_S, HOUR_S

if TYPE_CHECKING:
    from tierwise.perf.train_time import Timeline

DEFAULT_TRIALS = 200
MAX_CELLS = 4_000_000
"""Events x trials held at once (a few arrays of float64: ~100 MB)."""
MAX_EVENTS = 500_000
"""Interruptions one trial may take before it counts as never finishing."""
EVENT_MARGIN_SIGMAS = 6.0
"""Events drawn per trial beyond the expected count, in standard deviations."""


@dataclass(frozen=True)
class _Chunk:
    """Per-trial results of one batch of trials (NaN where a trial did not finish)."""

    wall_s: np.ndarray
    interruptions: np.ndarray
    restart_failures: np.ndarray
    spare_wait_s: np.ndarray


def _waits(t: np.ndarray, sizes: np.ndarray, spares: int, repair_s: float) -> np.ndarray:
    """Seconds each interruption's restart waits for repaired nodes (see the module doc)."""
    rows, cols = t.shape
    taken = np.cumsum(sizes, axis=1)
    need = taken - spares  # nodes that must be back before restart k
    # Row-wise searchsorted on one flat increasing array: offset each row past the last.
    offset = (taken[:, -1:] + 1) * np.arange(rows)[:, None]
    flat = (taken + offset).ravel()
    first = np.searchsorted(flat, (need + offset).ravel(), side="left").reshape(rows, cols)
    first -= cols * np.arange(rows)[:, None]
    first = np.clip(first, 0, cols - 1)
    ready = np.take_along_axis(t, first, axis=1) + repair_s
    return np.where(need > 0, np.maximum(ready - t, 0.0), 0.0)


def _chunk(tl: Timeline, rng: np.random.Generator, trials: int, events: int) -> _Chunk:
    """Simulate `trials` runs with up to `events` interruptions each (NaN: not finished)."""
    rate = tl.rate
    # Gap k ends segment k (segment 0 starts the run; segment k >= 1 follows interruption k).
    gaps = rng.standard_exponential((trials, events + 1), dtype=np.float32)
    gaps *= np.float32(1.0 / rate)
    # Wall-clock end of each segment (numpy's float32 -> float64 cumsum along rows is ~10x
    # slower than a cast, then a sum).
    ends = np.cumsum(gaps.astype(np.float64), axis=1)
    restart = np.full((trials, events + 1), tl.restart_s, dtype=np.float32)
    restart[:, 0] = 0.0
    wait = np.zeros((trials, events))
    if tl.spares is not None:
        t = ends[:, :-1]  # interruption times
        rack = rng.random((trials, events)) < tl.rack_rate / rate
        wait = _waits(t, np.where(rack, tl.rack_nodes, 1), tl.spares, tl.repair_s)
        restart[:, 1:] += wait
    # Work each segment commits: whole checkpoint cycles that became durable.
    work = gaps - restart
    work -= np.float32(tl.lag_s)
    np.maximum(work, 0.0, out=work)
    work *= np.float32(1.0 / (tl.interval_s + tl.write_s))
    np.floor(work, out=work)
    done = np.cumsum(work.astype(np.float64), axis=1)
    done *= tl.interval_s  # work committed up to the end of each segment
    # The run ends in the first segment that can train what is left; that segment lies
    # between the first one whose commits reach `work_s - 2 interval` and the first whose
    # commits reach `work_s` (a segment finishing its work also commits all but <2 intervals).
    rows = np.arange(trials)
    reached = done >= tl.work_s
    ok = reached[:, -1]
    last = np.argmax(reached, axis=1)
    first = np.argmax(done >= tl.work_s - 2.0 * tl.interval_s * (1 + 1e-9), axis=1)
    width = int((last - first).max(initial=0)) + 1
    cols = np.minimum(first[:, None] + np.arange(width)[None, :], last[:, None])
    before = np.where(cols > 0, np.take_along_axis(done, np.maximum(cols - 1, 0), axis=1), 0.0)
    left = tl.work_s - before
    stalls = np.maximum(np.ceil(left / tl.interval_s) - 1.0, 0.0) * tl.write_s
    need = np.take_along_axis(restart, cols, axis=1) + left + stalls
    fits = np.take_along_axis(gaps, cols, axis=1) >= need
    pick = np.argmax(fits, axis=1)
    k = cols[rows, pick]
    start = np.where(k > 0, ends[rows, np.maximum(k - 1, 0)], 0.0)
    wall = start + need[rows, pick]
    earlier = np.arange(events)[None, :] < k[:, None]
    failed = (earlier & (gaps[:, 1:] < restart[:, 1:])).sum(axis=1)
    # Time spent waiting: a failure during the wait cuts it short (the next restart waits anew).
    waited = np.zeros(trials)
    if tl.spares is not None:
        waited = np.where(earlier, np.minimum(wait, gaps[:, 1:]), 0.0).sum(axis=1)
    nan = np.where(ok, 1.0, np.nan)
    return _Chunk(wall * nan, k * nan, failed * nan, waited * nan)


def simulate(tl: Timeline, trials: int = DEFAULT_TRIALS, seed: int = 0) -> dict[str, Any]:
    """Monte Carlo of `trials` runs of the timeline: mean and spread of the wall-clock days,
    ETTR (work / wall time), interruptions, failed restarts and hours spent waiting for spares;
    deterministic for a seed. A trial interrupted more than MAX_EVENTS times counts as never
    finishing (``unfinished_trials``)."""
    rng = np.random.default_rng(seed)
    if tl.rate <= 0:
        walls = np.full(trials, tl.work_s + _stall_total(tl))
        zeros = np.zeros(trials)
        return _summary(tl, trials, seed, _Chunk(walls, zeros, zeros, zeros))
    closed = tl.ettr
    expected = tl.rate * tl.work_s / max(closed, 0.05)
    events = int(expected + EVENT_MARGIN_SIGMAS * expected**0.5 + 16)
    parts: list[_Chunk] = []
    todo = trials
    while todo > 0:
        batch = max(1, min(todo, MAX_CELLS // (events + 1)))
        part = _chunk(tl, rng, batch, events)
        if np.isnan(part.wall_s).any() and events < MAX_EVENTS:
            events = min(2 * events, MAX_EVENTS)  # rare: redraw the whole batch, unbiased
            continue
        parts.append(part)
        todo -= batch
    fields = _Chunk.__dataclass_fields__
    joined = _Chunk(*(np.concatenate([getattr(p, f) for p in parts]) for f in fields))
    return _summary(tl, trials, seed, joined)


def _stall_total(tl: Timeline) -> float:
    return max(np.ceil(tl.work_s / tl.interval_s) - 1.0, 0.0) * tl.write_s


def _summary(tl: Timeline, trials: int, seed: int, c: _Chunk) -> dict[str, Any]:
    done = ~np.isnan(c.wall_s)
    wall = c.wall_s[done]
    if not wall.size:
        return {"trials": trials, "seed": seed, "unfinished_trials": trials}
    days = wall / DAY_S
    p10, p50, p90 = np.percentile(days, [10, 50, 90])
    return {
        "trials": trials,
        "seed": seed,
        "time_to_train_days": float(days.mean()),
        "time_to_train_days_p10": float(p10),
        "time_to_train_days_p50": float(p50),
        "time_to_train_days_p90": float(p90),
        "ettr": float(tl.work_s / wall.mean()),
        "interruptions": float(c.interruptions[done].mean()),
        "failed_restarts": float(c.restart_failures[done].mean()),
        "spare_wait_h": float(c.spare_wait_s[done].mean() / HOUR_S),
        "closed_form_ettr": tl.ettr,
        "unfinished_trials": int(trials - done.sum()),
    }
