"""Memoisation of functions of one frozen spec, keyed by the spec's identity.

`functools.cache` hashes its argument on every call; a frozen pydantic spec hashes all its
fields (nested specs too), about a microsecond each time. A spec is frozen, so a value derived
from it holds for as long as the object lives: a dict lookup on its `id` replaces the hash
(an entry holds its spec, so no other object can have that id while the entry is there).
Equal specs built separately each compute their value once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

S = TypeVar("S")
R = TypeVar("R")


def by_identity(kept: int = 256) -> Callable[[Callable[[S], R]], Callable[[S], R]]:
    """Decorator: memoise a function of one frozen spec by the spec's identity, for at most
    `kept` specs at once (all forgotten when full; `cache_clear()` forgets them too). An
    entry holds its spec, so the spec's id is not reused while it is cached."""

    def decorate(fn: Callable[[S], R]) -> Callable[[S], R]:
        memo: dict[int, tuple[S, R]] = {}

        @functools.wraps(fn)
        def cached(spec: S) -> R:
            try:  # an entry's spec is alive (the entry holds it): no other object has its id
                return memo[id(spec)][1]
            except KeyError:
                pass
            if len(memo) >= kept:
                memo.clear()
            value = fn(spec)
            memo[id(spec)] = (spec, value)
            return value

        cached.cache_clear = memo.clear  # type: ignore[attr-defined]
        return cached

    return decorate


K = TypeVar("K")


class Filled(dict[K, R]):
    """A dict that computes a missing key's value as `fill(key)` and keeps it: a memo of one
    layout's values by a few of its sizes (the hit is a plain dict read). At most `kept` keys
    at once (all forgotten when full)."""

    def __init__(self, fill: Callable[[K], R], kept: int = 4096) -> None:
        super().__init__()
        self.fill, self.kept = fill, kept

    def __missing__(self, key: K) -> R:
        if len(self) >= self.kept:
            self.clear()
        value = self[key] = self.fill(key)
        return value
