"""Fault handling: one-line errors for dead, hung or misconfigured ranks, and rank heartbeats.

Pure Python (no torch): errors from torch.distributed are recognised by their text, so the
launcher and the CLI can use this module without the runtime extra.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tierwise.errors import TierwiseError

#: Env var naming a file where a rank writes its one-line error before exiting.
ERROR_FILE_ENV = "TIERWISE_ERROR_FILE"
#: Env var naming a folder where each rank touches ``rank<N>`` while it makes progress.
HEARTBEAT_DIR_ENV = "TIERWISE_HEARTBEAT_DIR"
#: Seconds between two heartbeat writes of one rank.
HEARTBEAT_PERIOD_S = 0.5

_PEER_GONE = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "connection refused",
    "socket closed",
    "end of file",
    "read error",
)
_TIMED_OUT = ("timed out", "timeout", "deadline exceeded")


class RankFailure(TierwiseError):
    """A rank died, hung or could not join: a run-time fault, not bad input (exit code 1)."""

    exit_code = 1


def quiet_torch_logs(environ: dict[str, str] | None = None) -> None:
    """Before torch is imported: keep c10d's C++ retry/stack-trace logs off stderr (we print
    one line per failure instead); an explicit ``TORCH_CPP_LOG_LEVEL`` wins."""
    (os.environ if environ is None else environ).setdefault("TORCH_CPP_LOG_LEVEL", "FATAL")


class Interrupted(TierwiseError):
    """Ctrl-C or SIGTERM stopped a launch (exit code 130, as a shell reports SIGINT)."""

    exit_code = 130


class CheckFailure(TierwiseError):
    """A run finished but its results were wrong (``#wrong`` > 0): exit code 1."""

    exit_code = 1


def first_line(text: str, limit: int = 300) -> str:
    """The first non-empty line of ``text``, cut to ``limit`` characters."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def describe_collective_error(exc: BaseException, during: str, timeout_s: float) -> str:
    """One line for an exception raised by a collective (``during`` says which one)."""
    text = str(exc).lower()
    if any(s in text for s in _TIMED_OUT):
        return (
            f"{during}: no answer from a peer rank within the {timeout_s:g} s timeout "
            "(a rank hung or died)"
        )
    if any(s in text for s in _PEER_GONE):
        return f"{during}: a peer rank died or closed its connection ({first_line(str(exc), 120)})"
    return f"{during}: {type(exc).__name__}: {first_line(str(exc))}"


def describe_rendezvous_error(
    exc: BaseException, master: str, world_size: int, timeout_s: float
) -> str:
    """One line for a failed ``init_process_group`` (unreachable master, missing ranks)."""
    text = str(exc).lower()
    if "refused" in text or ("connect" in text and "timed out" in text):
        return (
            f"cannot reach master {master} within {timeout_s:g} s "
            "(check MASTER_ADDR/MASTER_PORT and that rank 0 is running)"
        )
    if any(s in text for s in _TIMED_OUT):
        return (
            f"rendezvous at {master} timed out after {timeout_s:g} s: not all of the "
            f"{world_size} ranks joined (check WORLD_SIZE / --nproc)"
        )
    return f"rendezvous at {master} failed: {type(exc).__name__}: {first_line(str(exc))}"


def write_error_file(message: str, environ: dict[str, str] | None = None) -> bool:
    """Write ``message`` to the file named by `ERROR_FILE_ENV`; False when it is unset."""
    path = (environ if environ is not None else os.environ).get(ERROR_FILE_ENV)
    if not path:
        return False
    Path(path).write_text(message + "\n")
    return True


class Heartbeat:
    """Touches ``<dir>/rank<N>`` at most every `HEARTBEAT_PERIOD_S` while a rank works."""

    def __init__(self, rank: int, directory: str | None) -> None:
        self._path = Path(directory) / f"rank{rank}" if directory else None
        self._last = 0.0

    def beat(self) -> None:
        """Record progress (cheap when called often)."""
        if self._path is None:
            return
        now = time.monotonic()
        if now - self._last >= HEARTBEAT_PERIOD_S:
            self._path.touch()
            self._last = now

    @contextmanager
    def during(self) -> Iterator[None]:
        """Beat every `HEARTBEAT_PERIOD_S` from a thread while a block of collectives runs:
        a long healthy block is not taken for a hang. A stopped or killed rank stops beating
        (its threads stop with it); a collective stuck on a dead peer fails by its own timeout."""
        if self._path is None:
            yield
            return
        done = threading.Event()
        path = self._path

        def loop() -> None:
            while not done.wait(HEARTBEAT_PERIOD_S):
                path.touch()

        thread = threading.Thread(target=loop, name="tierwise-heartbeat", daemon=True)
        self.beat()
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
            self.beat()
