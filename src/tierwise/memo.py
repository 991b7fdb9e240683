"""Memoisation of functions of a frozen spec, keyed by the spec's identity.

`functools.cache` hashes its arguments on every call; a frozen pydantic spec hashes all its
fields (nested specs too), about a microsecond each time. A spec is frozen, so a value derived
from it holds for as long as the object lives: a dict lookup on its `id` and an identity check
replace the hash. Equal specs built separately each compute their value once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

R = TypeVar("R")


def by_identity(kept: int = 256) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Decorator: memoise `fn(spec, *args)` by the spec's identity and the (hashable) other
    arguments, for at most `kept` entries at once (all forgotten when full). An entry holds
    its spec, so the spec's id is not reused while it is cached."""

    def decorate(fn: Callable[..., R]) -> Callable[..., R]:
        memo: dict[tuple[Hashable, ...], tuple[Any, R]] = {}

        @functools.wraps(fn)
        def cached(spec: Any, *args: Hashable) -> R:
            key = (id(spec), *args)
            hit = memo.get(key)
            if hit is None or hit[0] is not spec:
                if len(memo) >= kept:
                    memo.clear()
                hit = memo[key] = (spec, fn(spec, *args))
            return hit[1]

        return cached

    return decorate
