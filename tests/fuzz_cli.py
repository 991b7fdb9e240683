"""Fuzzing every command's arguments: valid command lines, mutated (nasty flag values by type,
unknown flags, dropped tokens, device files and FIFOs for paths, a group without its
subcommand), run through the real CLI entry point in-process and judged.

Shared by tests/test_fuzz_cli.py (a few dozen cases) and ``benchmarks/fuzz.py`` (10^4 and
more). A case is bad when it exits 3 or with a code other than 0/1/2, prints a traceback,
gives an exit-2 message of more than one line, or under ``--json`` does not print exactly one
JSON object (``{"error", "exit_code"}`` on failure); ``lab`` and ``bench`` (root, torch ranks)
are left out.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import random
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tests.fuzz_targets import DATA, REPO

LOG = str(DATA / "verify" / "h100_2x8_ndr_all_reduce.txt")
CONTRACT = str(REPO / "examples" / "contract-ib-multinode.yaml")
BEFORE, AFTER = str(DATA / "verify" / "ib_before.txt"), str(DATA / "verify" / "ib_after_drops.txt")
SMI = str(sorted((DATA / "ingest").glob("nvidia_smi_*.txt"))[0])
XML = str(sorted((DATA / "ingest").glob("*.xml"))[0])
CONF = str(sorted((DATA / "ingest").glob("*.conf"))[0])
TRACE = str(sorted((DATA / "specs").glob("trace*.csv"))[0])
LEFT_OUT = ("lab", "bench")

#: (weight, command line); ``{tmp}`` is a scratch folder. Slow commands (report, demo) weigh less.
COMMANDS: tuple[tuple[float, tuple[str, ...]], ...] = (
    (1, ("estimate", "-m", "llama3-8b", "--nodes", "2", "--tp", "8", "--gbs", "16")),
    (1, ("estimate", "-m", "mixtral-8x7b", "--nodes", "2", "--ep", "8", "--gbs", "32")),
    (1, ("estimate", "-m", "llama3-70b", "--nodes", "4", "--tp", "8", "--pp", "4", "--gbs", "32")),
    (1, ("plan", "-m", "llama3-8b", "--nodes", "2", "--top", "2")),
    (0.5, ("sweep", "-m", "llama3-8b", "--nodes", "2", "--vary", "nodes=1,2")),
    (1, ("collective", "--nodes", "2", "-b", "1K", "-e", "1M")),
    (1, ("collective", "--op", "all_gather", "--nodes", "2", "-e", "64K", "--explain")),
    (1, ("show", "cluster", "dgx-h100", "--nodes", "2")),
    (1, ("show", "model", "llama3-8b")),
    (0.5, ("catalog", "gpus")),
    (0.5, ("schema", "cluster")),
    (1, ("parse", LOG)),
    (1, ("doctor", LOG)),
    (1, ("calibrate", LOG)),
    (1, ("verify", LOG, "--contract", CONTRACT)),
    (1, ("verify", LOG, "--contract", CONTRACT, "--counters-before", BEFORE, "--counters-after",
         AFTER, "--interval", "60s")),
    (1, ("ingest", "nvidia-smi", SMI)),
    (1, ("ingest", "nccl-xml", XML)),
    (1, ("ingest", "slurm-topology", CONF)),
    (1, ("schedule", "simulate", "--synthetic", "40", "--seed", "1", "--load", "0.9")),
    (1, ("schedule", "simulate", "--trace", TRACE, "--policy", "naive,topo")),
    (1, ("schedule", "synth", "10", "--out", "{tmp}/jobs.csv")),
    (1, ("schedule", "place", "--trace", TRACE)),
    (1, ("schedule", "slurm", "topology", "--nodes", "4", "--out", "{tmp}/slurm")),
    (1, ("schedule", "slurm", "hostfile", "--nodelist", "gpu[001-002]", "--gpus", "16")),
    (1, ("schedule", "slurm", "parse", CONF)),
    (0.1, ("report", "-m", "llama3-8b", "--nodes", "2", "--gbs", "16", "--out", "{tmp}/r.html")),
    (0.05, ("demo", "--out", "{tmp}/d.html")),
)  # fmt: skip

NASTY_INTS = (
    "0", "-1", "-0", "1", "3", "7", "2147483648", "9223372036854775807", "9223372036854775808",
    "9" * 30, "9" * 5000, "٣", "１２", "²", "1_000", "1e3", "0x10", "", " ", "abc", "1.5",
    "99999999999", "100000", "65536", "16777216",
)  # fmt: skip
NASTY_FLOATS = (
    "5e-324", "1e-320", "1e-300", "0", "-0", "-1", "inf", "-inf", "nan", "1e308", "1e999",
    "0.0000000001", "1.5", "2", "٣.٥", "", "x", "9" * 400,
)  # fmt: skip
NASTY_TEXT = (
    "t*99999999999", "Et|(tt|)*99999999L", "((t*9999)*9999)*9999", "[", "]", "gpu[",
    "gpu[1-99999999]",
    "8Gb", "8T", "8k", "8K", "1P", "99999999999999999999999G", "0.5K", "-1", "", " ", "x" * 300,
    "a,b,,", "nodes=1,99999999999", "tp=abc", "zero=9", "nodes=0", "all", "none", "auto",
    "[bold]x", "\u202e", "../../etc/passwd", "-", "--json", "1e-320", "0.0000000001", "60s",
    "0ms", "99999999999999h", "all_reduce", "alltoall", "sendrecv", "nvls", "pat", "ring",
)  # fmt: skip


def special_paths(tmp: Path) -> tuple[str, ...]:
    """Files no reader should read: devices, a FIFO, a folder, a missing and a huge name."""
    fifo = tmp / "fifo"
    if not fifo.exists() and hasattr(os, "mkfifo"):
        os.mkfifo(fifo)
    return (
        "/dev/zero", "/dev/urandom", "/dev/null", str(fifo), str(tmp), str(tmp / "missing.txt"),
        str(tmp / ("x" * 300)), "/proc/self/mem", str(tmp / "no" / "such" / "out.html"),
    )  # fmt: skip


@dataclass(frozen=True)
class Option:
    """One option of a command: its names, value type ('int', 'float', 'str', 'Path', 'bool')
    and whether it is a flag (takes no value)."""

    names: tuple[str, ...]
    kind: str
    flag: bool


@cache
def _root() -> Any:
    from tierwise.cli.main import click_app

    return click_app()


def options_of(args: tuple[str, ...]) -> tuple[Option, ...]:
    """The options of the (sub)command ``args`` names (``("schedule", "place", ...)``)."""
    command = _root()
    for token in args:
        sub = getattr(command, "commands", {}).get(token)
        if sub is None:
            break
        command = sub
    out = []
    for param in getattr(command, "params", ()):
        if getattr(param, "param_type_name", "") != "option" or "--help" in param.opts:
            continue
        kind = param.bare_type() if callable(param.bare_type) else param.bare_type
        out.append(Option((*param.opts, *param.secondary_opts), str(kind), bool(param.is_flag)))
    return tuple(out)


def _nasty(kind: str, rng: random.Random, paths: tuple[str, ...]) -> str:
    pools = {"int": NASTY_INTS, "float": NASTY_FLOATS, "Path": paths}
    pool = pools.get(kind, NASTY_TEXT)
    if rng.random() < 0.2:  # a value of another type
        pool = rng.choice((NASTY_INTS, NASTY_FLOATS, NASTY_TEXT, paths))
    return rng.choice(pool)


def mutate_args(args: tuple[str, ...], rng: random.Random, tmp: Path) -> list[str]:
    """One to three mutations of a command line (see the module docstring)."""
    paths = special_paths(tmp)
    out = [a.replace("{tmp}", str(tmp)) for a in args]
    options = options_of(args)
    for _ in range(rng.choice((1, 1, 2, 3))):
        kind = rng.randrange(10)
        if kind <= 4 and options:  # an option of the command with a nasty value
            option = rng.choice(options)
            name = rng.choice(option.names)
            out += [name] if option.flag else [name, _nasty(option.kind, rng, paths)]
        elif kind == 5 and len(out) > 1:  # a value (positional or option) replaced
            i = rng.randrange(1, len(out))
            out[i] = _nasty("str" if rng.random() < 0.5 else "int", rng, paths)
        elif kind == 6 and len(out) > 1:  # a token dropped
            del out[rng.randrange(len(out))]
        elif kind == 7:
            out.insert(rng.randrange(len(out) + 1), rng.choice(("--bogus", "-z", "--json=1")))
        elif kind == 8:  # a file argument replaced by a device, FIFO or folder
            files = [i for i, a in enumerate(out) if "/" in a]
            if files:
                out[rng.choice(files)] = rng.choice(paths)
        else:  # the command cut to its group (no subcommand) or to nothing
            out = out[: rng.randrange(0, 2)]
    if rng.random() < 0.8 and (not out or out[-1] != "--json"):
        out.append("--json")
    return out


class CaseTimeout(BaseException):
    """A case ran past its time limit (BaseException: no `except Exception` swallows it)."""


def _alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout


@dataclass(frozen=True)
class CliRun:
    """What one in-process CLI run did."""

    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str
    seconds: float
    cpu_s: float = 0.0
    """CPU time of the run (on a loaded machine `seconds`, wall time, is mostly waiting)."""


def run_in_process(args: list[str], limit_s: float = 60.0, cwd: Path | None = None) -> CliRun:
    """``tierwise ARGS`` through ``tierwise.cli.main.main`` in this process (stdin empty), in
    folder ``cwd`` (a scratch folder: a fuzzed ``--out -0`` writes there), stopped after
    ``limit_s`` (code -2)."""
    from tierwise.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    argv, stdin, here = sys.argv, sys.stdin, os.getcwd()
    sys.argv, sys.stdin = ["tierwise", *args], io.TextIOWrapper(io.BytesIO(b""))
    if cwd is not None:
        os.chdir(cwd)
    code = 0
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    start, cpu = time.perf_counter(), time.process_time()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except CaseTimeout:
        code = -2
    except BaseException:
        err.write(traceback.format_exc())
        code = -1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        sys.argv, sys.stdin = argv, stdin
        os.chdir(here)
        gc.unfreeze()  # main() freezes what it made; a long fuzz run must collect it
    return CliRun(
        tuple(args),
        code,
        out.getvalue(),
        err.getvalue(),
        time.perf_counter() - start,
        time.process_time() - cpu,
    )


def _json_asked(args: tuple[str, ...]) -> bool:
    """True when ``--json`` is a flag of the command line, not the value of the option before
    it (``--out --json``) or past a ``--`` ."""
    return any(
        a == "--json" and (i == 0 or not args[i - 1].startswith("-") or args[i - 1] == "--json")
        for i, a in enumerate(args)
    )


def problems(run: CliRun, slow_s: float = 10.0) -> list[str]:
    """What is wrong with a run (empty when nothing): see the module docstring."""
    found = []
    allowed = {0, 2} | ({1} if run.args[:1] == ("verify",) else set())
    if run.code not in allowed:
        found.append("hang" if run.code == -2 else f"exit {run.code}")
    if "Traceback" in run.stderr:
        found.append("traceback")
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    if run.code == 2 and len(lines) != 1:
        found.append("multi-line error")
    if run.seconds > slow_s:
        found.append("slow")
    if run.cpu_s > slow_s:
        found.append("slow cpu")
    if _json_asked(run.args) and run.code not in (-1, -2):
        try:
            data = json.loads(run.stdout)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            found.append("json not one object")
        elif run.code not in (0, 1) and set(data) != {"error", "exit_code"}:
            found.append("json error object")
    return found


def case(rng: random.Random, tmp: Path) -> CliRun:
    """One fuzzed command line, run."""
    weights = [w for w, _ in COMMANDS]
    _, args = rng.choices(COMMANDS, weights)[0]
    return run_in_process(mutate_args(args, rng, tmp), cwd=tmp)


def scratch() -> Path:
    """A scratch folder for a fuzz run's outputs (and its FIFO)."""
    return Path(tempfile.mkdtemp(prefix="tierwise-fuzz-cli-"))
