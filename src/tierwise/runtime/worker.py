"""Run a benchmark on ``nproc`` local ranks (`spawn_bench`), and the rank entry point itself.

``python -m tierwise.runtime.worker`` is one rank: it reads its `BenchConfig` from
`CONFIG_ENV`, its identity from the torchrun-style env `launch` sets, runs `run_bench` and,
on rank 0, writes the `BenchResult` JSON to the file named by `RESULT_ENV`. Importing this
module does not import torch (the launcher side needs none).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from tierwise.errors import TierwiseError
from tierwise.runtime.faults import quiet_torch_logs, write_error_file
from tierwise.runtime.launch import RankSpec, detect_env, launch
from tierwise.runtime.options import BenchConfig
from tierwise.runtime.results import BenchResult

CONFIG_ENV = "TIERWISE_BENCH_CONFIG"
RESULT_ENV = "TIERWISE_BENCH_RESULT"
PROGRESS_ENV = "TIERWISE_BENCH_PROGRESS"
#: Seconds a rank may go without a heartbeat beyond the collective timeout before the
#: launcher declares it hung.
HEARTBEAT_SLACK_S = 10.0


def spawn_bench(
    config: BenchConfig,
    nproc: int,
    *,
    ranks_per_node: int | None = None,
    master_addr: str = "127.0.0.1",
    master_port: int | None = None,
    env: Mapping[str, str] | None = None,
    env_for: Callable[[RankSpec], Mapping[str, str]] | None = None,
    prefix: Callable[[RankSpec], Sequence[str]] | None = None,
    progress: bool = False,
    python: str = sys.executable,
) -> BenchResult:
    """Launch ``nproc`` ranks (``ranks_per_node`` per node) running ``config``; rank 0's result.

    ``prefix(spec)`` wraps each rank's command (e.g. ``["ip", "netns", "exec", ns]``) and
    ``env_for(spec)`` adds per-rank env (e.g. ``GLOO_SOCKET_IFNAME``); ranks rendezvous at
    ``master_addr:master_port`` (a free local port by default). Raises `RankFailure` with one
    line when a rank fails, hangs or cannot join (all ranks are stopped and reaped first).
    """
    config.check_world(nproc)
    with tempfile.TemporaryDirectory(prefix="tierwise-bench-") as tmp:
        result_path = Path(tmp) / "result.json"
        outcome = launch(
            [python, "-m", "tierwise.runtime.worker"],
            nproc,
            ranks_per_node=ranks_per_node,
            master_addr=master_addr,
            master_port=master_port,
            env={
                **(env or {}),
                CONFIG_ENV: config.to_json(),
                RESULT_ENV: str(result_path),
                PROGRESS_ENV: "1" if progress else "0",
            },
            env_for=env_for,
            prefix=prefix,
            heartbeat_timeout_s=config.timeout_s + HEARTBEAT_SLACK_S,
            log_dir=Path(tmp) / "logs",
            stream_rank0_stderr=progress,
        )
        outcome.raise_for_failure()
        return BenchResult.from_dict(json.loads(result_path.read_text()))


def main() -> NoReturn:
    """One rank: run the config from the env; errors as one line (error file or stderr)."""
    import os

    try:
        rank_env = detect_env()
        if rank_env is None:
            raise TierwiseError("no RANK/WORLD_SIZE or SLURM_PROCID in the environment")
        config = BenchConfig.from_json(os.environ[CONFIG_ENV])
        quiet_torch_logs()
        from tierwise.runtime.bench import run_bench

        result = run_bench(config, rank_env, progress=os.environ.get(PROGRESS_ENV) == "1")
        if rank_env.rank == 0 and RESULT_ENV in os.environ:
            Path(os.environ[RESULT_ENV]).write_text(json.dumps(result.as_dict()))
        code = 0
    except TierwiseError as exc:
        if not write_error_file(str(exc)):
            print(f"error: {exc}", file=sys.stderr)
        code = exc.exit_code
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # all is written: skip torch's teardown, which can abort beside a dead peer


if __name__ == "__main__":
    main()
