"""Where a rank learns who it is (torchrun, Slurm ``srun``) and a local launcher with a watchdog.

Pure Python (no torch). `launch` starts ``nproc`` rank processes the way torchrun does (the
``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``LOCAL_WORLD_SIZE``/``GROUP_RANK``/``MASTER_*`` env),
optionally through a per-rank command prefix (e.g. ``ip netns exec ns0``); when one rank fails,
hangs (stale heartbeat) or the launcher is interrupted, it kills every rank's process group and
reaps them all.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tierwise.errors import TierwiseError
from tierwise.runtime.faults import ERROR_FILE_ENV, HEARTBEAT_DIR_ENV, RankFailure, first_line

#: Seconds a rank gets to exit after SIGTERM before SIGKILL.
TERM_GRACE_S = 2.0
#: Seconds between two checks of the rank processes.
POLL_S = 0.05
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class RankEnv:
    """Identity of this process in the job and where the rendezvous is."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    master_addr: str
    master_port: int
    launcher: str

    def __post_init__(self) -> None:
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise TierwiseError(
                f"RANK {self.rank} must be in [0, WORLD_SIZE={self.world_size}) ({self.launcher})"
            )
        if not 0 <= self.local_rank < self.local_world_size:
            raise TierwiseError(
                f"LOCAL_RANK {self.local_rank} must be in [0, LOCAL_WORLD_SIZE="
                f"{self.local_world_size}) ({self.launcher})"
            )
        if not 0 < self.master_port < 65536:
            raise TierwiseError(f"MASTER_PORT must be in 1..65535, got {self.master_port}")

    @property
    def master(self) -> str:
        """``host:port`` of the rendezvous store."""
        return f"{self.master_addr}:{self.master_port}"


def detect_env(environ: Mapping[str, str] | None = None) -> RankEnv | None:
    """The rank identity from torchrun-style or Slurm env vars; None when neither is set."""
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return _torchrun_env(env)
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        return _slurm_env(env)
    return None


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    raw = env.get(name)
    if raw is None:
        if default is None:
            raise TierwiseError(f"{name} is not set")
        return default
    try:
        return int(raw)
    except ValueError:
        raise TierwiseError(f"{name} must be an integer, got {raw!r}") from None


def _torchrun_env(env: Mapping[str, str]) -> RankEnv:
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if name not in env:
            raise TierwiseError(f"{name} is not set (RANK and WORLD_SIZE are; set all four)")
    rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    local_world = _int(env, "LOCAL_WORLD_SIZE", world)
    local_rank = _int(env, "LOCAL_RANK", rank % local_world if local_world > 0 else 0)
    return RankEnv(
        rank=rank,
        world_size=world,
        local_rank=local_rank,
        local_world_size=local_world,
        node_rank=_int(env, "GROUP_RANK", rank // local_world if local_world > 0 else 0),
        master_addr=env["MASTER_ADDR"],
        master_port=_int(env, "MASTER_PORT"),
        launcher="torchrun",
    )


def _slurm_env(env: Mapping[str, str]) -> RankEnv:
    node_rank = _int(env, "SLURM_NODEID", 0)
    if "SLURM_NTASKS_PER_NODE" in env:
        local_world = _int(env, "SLURM_NTASKS_PER_NODE")
    elif "SLURM_TASKS_PER_NODE" in env:
        per_node = slurm_tasks_per_node(env["SLURM_TASKS_PER_NODE"])
        if node_rank >= len(per_node):
            raise TierwiseError(
                f"SLURM_NODEID {node_rank} is beyond SLURM_TASKS_PER_NODE "
                f"{env['SLURM_TASKS_PER_NODE']!r}"
            )
        local_world = per_node[node_rank]
    else:
        local_world = _int(env, "SLURM_NTASKS")
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    master_addr = env.get("MASTER_ADDR") or (slurm_first_host(nodelist) if nodelist else None)
    if master_addr is None:
        raise TierwiseError("Slurm: neither MASTER_ADDR nor SLURM_JOB_NODELIST is set")
    default_port = 20000 + _int(env, "SLURM_JOB_ID", 0) % 20000
    return RankEnv(
        rank=_int(env, "SLURM_PROCID"),
        world_size=_int(env, "SLURM_NTASKS"),
        local_rank=_int(env, "SLURM_LOCALID", 0),
        local_world_size=local_world,
        node_rank=node_rank,
        master_addr=master_addr,
        master_port=_int(env, "MASTER_PORT", default_port),
        launcher="slurm",
    )


def slurm_tasks_per_node(text: str) -> list[int]:
    """Expand ``SLURM_TASKS_PER_NODE`` (``"4(x2),3"`` -> ``[4, 4, 3]``)."""
    out: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not match:
            raise TierwiseError(f"SLURM_TASKS_PER_NODE: cannot read {text!r}")
        out += [int(match.group(1))] * int(match.group(2) or 1)
    return out


def slurm_first_host(nodelist: str) -> str:
    """First host of a Slurm hostlist (``"gpu[07-09,12],cpu1"`` -> ``"gpu07"``)."""
    depth, end = 0, len(nodelist)
    for i, ch in enumerate(nodelist):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            end = i
            break
    first = re.sub(r"\[([^\]]*)\]", lambda m: re.split(r"[-,]", m.group(1))[0], nodelist[:end])
    if not first.strip() or "[" in first or "]" in first:
        raise TierwiseError(f"SLURM_JOB_NODELIST: cannot read {nodelist!r}")
    return first.strip()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class RankSpec:
    """What `launch` tells one rank (exported as torchrun's env vars)."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    master_addr: str
    master_port: int

    def env(self) -> dict[str, str]:
        """The torchrun-style env vars of this rank."""
        return {
            "RANK": str(self.rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_RANK": str(self.local_rank),
            "LOCAL_WORLD_SIZE": str(self.local_world_size),
            "GROUP_RANK": str(self.node_rank),
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
        }


@dataclass(frozen=True)
class RankExit:
    """How one rank ended: ``returncode`` < 0 is ``-signal``; ``error`` is its one-line error."""

    rank: int
    pid: int
    returncode: int
    error: str | None


@dataclass
class LaunchResult:
    """Every rank's exit, the wall time (s) and the folder of per-rank logs."""

    exits: list[RankExit]
    elapsed_s: float
    log_dir: Path
    failure: str | None = None
    pids: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every rank exited with status 0."""
        return self.failure is None

    def raise_for_failure(self) -> None:
        """Raise `RankFailure` with the one-line reason when a rank failed."""
        if self.failure is not None:
            raise RankFailure(self.failure)


def launch(
    argv: Sequence[str],
    nproc: int,
    *,
    ranks_per_node: int | None = None,
    master_addr: str = "127.0.0.1",
    master_port: int | None = None,
    env: Mapping[str, str] | None = None,
    env_for: Callable[[RankSpec], Mapping[str, str]] | None = None,
    prefix: Callable[[RankSpec], Sequence[str]] | None = None,
    heartbeat_timeout_s: float | None = None,
    deadline_s: float | None = None,
    log_dir: Path | None = None,
    stream_rank0_stderr: bool = False,
) -> LaunchResult:
    """Run ``argv`` as ``nproc`` ranks, ``ranks_per_node`` per emulated node, and wait for all.

    Each rank gets ``os.environ | env | env_for(spec) | spec.env()`` plus `ERROR_FILE_ENV`,
    `HEARTBEAT_DIR_ENV` and ``OMP_NUM_THREADS=1`` unless set (as torchrun does);
    ``prefix(spec)`` is put before ``argv`` (e.g. a network namespace).
    The first failing rank (non-zero exit, signal, heartbeat older than
    ``heartbeat_timeout_s``, or the whole run past ``deadline_s``) stops all the others
    (SIGTERM, then SIGKILL after `TERM_GRACE_S`); Ctrl-C and SIGTERM do the same and re-raise.
    Per-rank stdout/stderr go to ``log_dir/rank<N>.out|.err`` (a temporary folder by default).
    """
    per_node = ranks_per_node or nproc
    if nproc < 1 or per_node < 1 or nproc % per_node:
        raise TierwiseError(
            f"nproc {nproc} must be >= 1 and a multiple of ranks-per-node {per_node}"
        )
    port = master_port or free_port(master_addr if master_addr.startswith("127.") else "")
    logs = log_dir or Path(tempfile.mkdtemp(prefix="tierwise-launch-"))
    beats = logs / "heartbeat"
    beats.mkdir(parents=True, exist_ok=True)
    specs = [
        RankSpec(r, nproc, r % per_node, per_node, r // per_node, master_addr, port)
        for r in range(nproc)
    ]
    procs: list[subprocess.Popen[bytes]] = []
    start = time.monotonic()
    with _terminate_on_signal(), contextlib.ExitStack() as files:
        try:
            for spec in specs:
                rank_env = {**os.environ, **(env or {}), **(env_for(spec) if env_for else {})}
                rank_env.setdefault("OMP_NUM_THREADS", "1")  # as torchrun: no spinning pools
                rank_env |= spec.env() | {
                    ERROR_FILE_ENV: str(logs / f"rank{spec.rank}.error"),
                    HEARTBEAT_DIR_ENV: str(beats),
                }
                out = files.enter_context(open(logs / f"rank{spec.rank}.out", "wb"))
                err = files.enter_context(open(logs / f"rank{spec.rank}.err", "wb"))
                procs.append(
                    subprocess.Popen(
                        [*(prefix(spec) if prefix else ()), *argv],
                        env=rank_env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=None if stream_rank0_stderr and spec.rank == 0 else err,
                        start_new_session=True,
                        preexec_fn=_die_with_parent,
                    )
                )
            failure = _watch(procs, beats, start, heartbeat_timeout_s, deadline_s, logs)
        finally:
            _stop(procs)
    exits = [RankExit(r, p.pid, p.returncode, _rank_error(logs, r)) for r, p in enumerate(procs)]
    return LaunchResult(exits, time.monotonic() - start, logs, failure, [p.pid for p in procs])


def _watch(
    procs: list[subprocess.Popen[bytes]],
    beats: Path,
    start: float,
    heartbeat_timeout_s: float | None,
    deadline_s: float | None,
    logs: Path,
) -> str | None:
    """Wait until all ranks end; return the reason of the first failure (None when all pass)."""
    while True:
        codes = [p.poll() for p in procs]
        failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            # A rank killed by a signal is the cause; peers then fail with connection errors.
            rank = min(failed, key=lambda r: (codes[r] >= 0, r))  # type: ignore[operator]
            return _failure_text(rank, codes[rank], logs, len(procs))  # type: ignore[arg-type]
        if all(c == 0 for c in codes):
            return None
        now = time.monotonic()
        if deadline_s is not None and now - start > deadline_s:
            return f"the ranks did not finish within the {deadline_s:g} s deadline; stopped all"
        if heartbeat_timeout_s is not None:
            for rank, code in enumerate(codes):
                beat = beats / f"rank{rank}"
                if code is None and beat.exists():
                    idle = time.time() - beat.stat().st_mtime
                    if idle > heartbeat_timeout_s:
                        return (
                            f"rank {rank} (pid {procs[rank].pid}) made no progress for "
                            f"{idle:.0f} s (> {heartbeat_timeout_s:g} s timeout): hung; "
                            "stopped all ranks"
                        )
        time.sleep(POLL_S)


def _failure_text(rank: int, code: int, logs: Path, nproc: int) -> str:
    others = f"stopped the other {nproc - 1} rank(s)" if nproc > 1 else "no other ranks"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"rank {rank} was killed by {name}; {others}"
    reason = _rank_error(logs, rank) or f"exit status {code}"
    if not reason.startswith(f"rank {rank}:"):
        reason = f"rank {rank} failed: {reason}"
    return f"{reason}; {others}"


def _rank_error(logs: Path, rank: int) -> str | None:
    """The rank's one-line error file, else the last line of its stderr, else None."""
    error = logs / f"rank{rank}.error"
    if error.exists():
        return first_line(error.read_text()) or None
    err = logs / f"rank{rank}.err"
    if err.exists():
        lines = [ln for ln in err.read_text(errors="replace").splitlines() if ln.strip()]
        return lines[-1].strip()[:300] if lines else None
    return None


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every live rank's process group, SIGKILL after `TERM_GRACE_S`, reap all."""
    live = [p for p in procs if p.poll() is None]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, sig)
        deadline = time.monotonic() + TERM_GRACE_S
        while time.monotonic() < deadline and any(p.poll() is None for p in live):
            time.sleep(POLL_S)
        live = [p for p in live if p.poll() is None]
    for p in procs:
        p.wait()


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the launcher dies (Linux), so no rank outlives it."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@contextlib.contextmanager
def _terminate_on_signal() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt while ranks run, so cleanup happens."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
