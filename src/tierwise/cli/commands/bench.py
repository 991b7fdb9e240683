"""`tierwise bench`: time real collectives (torch.distributed) and print nccl-tests' table.

Runs as one rank under torchrun or Slurm ``srun`` (their env is detected), or launches
``--nproc`` local ranks itself. torch is imported only where a rank runs (`_run_rank`, the
launched workers), never at CLI import.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import typer

from tierwise.cli.output import print_json, writable
from tierwise.errors import TierwiseError
from tierwise.formats.nccl_writer import format_test
from tierwise.runtime.faults import CheckFailure, Interrupted, quiet_torch_logs
from tierwise.runtime.launch import RankEnv, detect_env
from tierwise.runtime.options import BenchConfig
from tierwise.runtime.results import BenchResult, series_lines, to_nccl_test
from tierwise.runtime.worker import spawn_bench
from tierwise.units import parse_duration, parse_size

RUNTIME_MISSING = "tierwise bench needs the runtime extra: pip install 'tierwise[runtime]'"


def register(app: typer.Typer) -> None:
    """Add the ``bench`` command."""
    app.command("bench")(bench)


def bench(
    op: str = typer.Option(
        "all_reduce",
        "--op",
        help="all_reduce | all_gather | reduce_scatter | alltoall | broadcast | sendrecv",
    ),
    min_bytes: str = typer.Option("8", "-b", "--min-bytes", help="Smallest size (8, 1K, 64M)."),
    max_bytes: str = typer.Option("64M", "-e", "--max-bytes", help="Largest size."),
    factor: int = typer.Option(2, "-f", "--factor", help="Size multiplication factor."),
    warmup: int = typer.Option(5, "-w", "--warmup", help="Untimed iterations per size."),
    iters: int = typer.Option(20, "-n", "--iters", help="Timed iterations per size."),
    algo: str = typer.Option("flat", "--algo", help="flat | hierarchical"),
    backend: str = typer.Option("auto", "--backend", help="gloo | nccl | auto"),
    dtype: str = typer.Option("float", "-d", "--dtype", help="nccl-tests type name."),
    redop: str = typer.Option("sum", "-o", "--redop", help="sum | avg | max | min"),
    root: int = typer.Option(0, "-r", "--root", help="Root rank of broadcast."),
    check: bool = typer.Option(True, "--check/--no-check", help="Count wrong elements."),
    duration: str | None = typer.Option(
        None,
        "--duration",
        help="After the sweep, sustained load at the largest size for this long (60s).",
    ),
    window: str | None = typer.Option(
        None, "--window", help="Window of the sustained p99 drift (default: a tenth)."
    ),
    timeout: str = typer.Option("120s", "--timeout", help="Rank failure detection time."),
    nproc: int | None = typer.Option(
        None, "--nproc", help="Launch this many local ranks (when not under torchrun/srun)."
    ),
    ranks_per_node: int | None = typer.Option(
        None, "--ranks-per-node", help="Emulated ranks per node (default: LOCAL_WORLD_SIZE)."
    ),
    master_addr: str = typer.Option(
        "127.0.0.1", "--master-addr", help="Rendezvous address of a --nproc launch."
    ),
    master_port: int | None = typer.Option(
        None, "--master-port", help="Rendezvous port of a --nproc launch (default: free)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    out: Path | None = typer.Option(None, "--out", help="Also write the nccl-tests log here."),
) -> None:
    """Benchmark a collective (flat or hierarchical) in nccl-tests' output format."""
    if not _torch_available():
        raise TierwiseError(RUNTIME_MISSING)
    if nproc is not None and nproc < 1:
        raise TierwiseError(f"--nproc: {nproc}; allowed: 1 or more local ranks")
    writable(out, "--out")
    env = detect_env()
    if env is not None and nproc is not None:
        raise TierwiseError(
            f"--nproc launches ranks itself; this process already is rank {env.rank} "
            f"({env.launcher}): drop --nproc"
        )
    self_launch = env is None
    config = BenchConfig(
        op=op,
        min_bytes=parse_size(min_bytes, "min-bytes"),
        max_bytes=parse_size(max_bytes, "max-bytes"),
        factor=factor,
        warmup=warmup,
        iters=iters,
        algo=algo,
        backend=backend,
        dtype=dtype,
        redop=redop,
        root=root,
        check=check,
        duration_s=parse_duration(duration, "duration") if duration else None,
        window_s=parse_duration(window, "window") if window else None,
        timeout_s=parse_duration(timeout, "timeout"),
        ranks_per_node=None if self_launch else ranks_per_node,
    )
    progress = sys.stderr.isatty()
    if self_launch:
        try:
            result = spawn_bench(
                config,
                nproc or 1,
                ranks_per_node=ranks_per_node,
                master_addr=master_addr,
                master_port=master_port,
                progress=progress,
            )
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted: stopped and reaped all {nproc or 1} rank(s)") from None
    else:
        assert env is not None
        result = _run_rank(config, env, progress)
        if env.rank != 0:
            return
    _emit(result, config, json_out, out)


def _torch_available() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a broken or blocked torch
        return False


def _run_rank(config: BenchConfig, env: RankEnv, progress: bool) -> BenchResult:
    """This process as one rank; a failure exits at once (torch teardown can hang or abort)."""
    quiet_torch_logs()
    from tierwise.runtime.bench import run_bench  # imports torch

    try:
        return run_bench(config, env, progress=progress)
    except TierwiseError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exc.exit_code)


def _emit(result: BenchResult, config: BenchConfig, json_out: bool, out: Path | None) -> None:
    """nccl-tests text on stdout (or JSON with ``--json``), and to ``out``."""
    text = format_test(to_nccl_test(result, config))
    if result.series is not None:
        text += "\n".join(series_lines(result.series)) + "\n"
    if out is not None:
        try:
            out.write_text(text)
        except OSError as exc:
            raise TierwiseError(f"--out: cannot write {out}: {exc.strerror}") from None
    if json_out:
        print_json(result.as_dict())
    else:
        sys.stdout.write(text)
    wrong = sum(h.wrong or 0 for r in result.rows for h in (r.out_of_place, r.in_place))
    if wrong:
        raise CheckFailure(f"{wrong} wrong result element(s) summed over ranks (see #wrong)")
