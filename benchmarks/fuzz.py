"""Fuzz every reader of a user's file and every command's arguments; print counts as JSON.

Reader cases: each takes a seed file of one format (``tests/fuzz_targets.py``: cluster/model/
contract YAML, HF config.json, nccl-tests logs, nvidia-smi, NCCL XML, topology.conf, NIC
counters, job traces, bench JSON), mutates it (nasty tokens, cut, spliced or repeated lines,
flipped bytes, one YAML/JSON value replaced by a wrong type or out-of-range number, alias bombs,
deep nesting, run-on lines, huge integers, unicode digits) or, 1 case in 100, hands the reader
a device, FIFO or folder instead, and reads it with the reader function. Every
``--cli-every``-th reader case also runs the target's CLI command on the file.

Command cases (every ``--command-every``-th case): a valid command line of any command (lab
and bench aside) with one to three mutations (``tests/fuzz_cli.py``: nasty values per option
type, unknown flags, dropped tokens, devices and FIFOs for paths, a group without its
subcommand), mostly with ``--json``.

A reader may return or raise a one-line ``TierwiseError``; anything else is a traceback. A
CLI run is bad when it prints a traceback, exits 3 (or other than 0/2, and 1 for verify),
gives an exit-2 message of more than one line, or under ``--json`` prints anything but one
JSON object (``{"error", "exit_code"}`` when it fails); every case is timed (a case is stopped
after ``--limit`` s and counted as a hang). ``--save DIR`` keeps the bad inputs.

    nice python benchmarks/fuzz.py --cases 100000 --seed 0
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import fuzz_cli
from tests.fuzz_targets import REPO, TARGETS, mutate, read_case

SLOW_S = 10.0
SAVE_SLOW_S = 2.0  # --save also keeps inputs slower than this, to look at
SPECIAL_EVERY = 100  # reader cases given a device, FIFO or folder instead of a file


def _read_timed(target: Any, path: Path, limit_s: float) -> str:
    """``read_case`` stopped after ``limit_s`` ('hang')."""
    old = signal.signal(signal.SIGALRM, fuzz_cli._alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        return read_case(target, path)
    except fuzz_cli.CaseTimeout:
        return "hang"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run(
    cases: int, seed: int, cli_every: int, command_every: int, limit_s: float, save: Path | None
) -> dict[str, Any]:
    rng = random.Random(seed)
    targets = [t for t in TARGETS.values() if t.seeds]
    seeds = {t.name: [p.read_bytes() for p in t.seeds] for t in targets}
    tmp = fuzz_cli.scratch()
    specials = fuzz_cli.special_paths(tmp)
    counts: Counter[str] = Counter()
    per_format: dict[str, Counter[str]] = {t.name: Counter() for t in targets}
    per_command: dict[str, Counter[str]] = {}
    exits: Counter[int] = Counter()
    slowest = (0.0, "")
    start = time.perf_counter()

    def judge(cli: fuzz_cli.CliRun, data: bytes | None, name: str) -> None:
        nonlocal slowest
        exits[cli.code] += 1
        found = fuzz_cli.problems(cli, SLOW_S)
        for problem in found:
            counts[f"cli_{problem.replace(' ', '_')}"] += 1
        counts["cli_cases"] += 1
        counts["cli_bad"] += bool(found)
        if cli.seconds > slowest[0]:
            slowest = (cli.seconds, " ".join(cli.args)[:200])
        if save is not None and (found or cli.seconds > SAVE_SLOW_S):
            save.mkdir(parents=True, exist_ok=True)
            record = {"args": cli.args, "code": cli.code, "problems": found,
                      "seconds": round(cli.seconds, 2), "cpu_s": round(cli.cpu_s, 2),
                      "stderr": cli.stderr[-2000:]}  # fmt: skip
            (save / f"{name}-{counts['cases']}.json").write_text(json.dumps(record))
            if data is not None:
                (save / f"{name}-{counts['cases']}.input").write_bytes(data)

    for case in range(cases):
        counts["cases"] += 1
        if command_every and case % command_every == command_every - 1:
            cli = fuzz_cli.case(rng, tmp)
            name = "-".join(a for a in cli.args[:2] if not a.startswith("-")) or "root"
            per_command.setdefault(name.split("-")[0], Counter())["cases"] += 1
            counts["command_cases"] += 1
            judge(cli, None, name.replace("/", "_")[:40])
            continue
        target = targets[case % len(targets)]
        data = mutate(rng.choice(seeds[target.name]), target.suffix, rng)
        path = tmp / f"case{target.suffix}"
        if case % SPECIAL_EVERY == SPECIAL_EVERY - 1:
            path, data = Path(rng.choice(specials)), None
        else:
            path.write_bytes(data)
        t0, c0 = time.perf_counter(), time.process_time()
        outcome = _read_timed(target, path, limit_s)
        elapsed = time.perf_counter() - t0
        counts["reader_cases"] += 1
        counts[f"reader_{outcome}"] += 1
        counts["reader_over_10s"] += elapsed > SLOW_S
        counts["reader_over_10s_cpu"] += time.process_time() - c0 > SLOW_S
        per_format[target.name][outcome] += 1
        if elapsed > slowest[0]:
            slowest = (elapsed, target.name)
        if save is not None and (outcome in ("traceback", "hang") or elapsed > SAVE_SLOW_S):
            save.mkdir(parents=True, exist_ok=True)
            kind = outcome if outcome != "ok" else f"slow{elapsed:.0f}s"
            (save / f"{target.name}-{kind}-{case}{target.suffix}").write_bytes(data or b"")
        if cli_every and case % cli_every == 0:
            args = [str(REPO / a) if (REPO / a).is_file() else a for a in target.cli]
            args = [a.replace("{}", str(path)) for a in args]
            judge(fuzz_cli.run_in_process(args, limit_s, cwd=tmp), data, target.name)
    for p in sorted(tmp.rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
    tmp.rmdir()
    problems = ("exit_3", "traceback", "multi-line_error", "json_not_one_object",
                "json_error_object", "hang", "slow", "slow_cpu")  # fmt: skip
    return {
        "cases": counts["cases"],
        "seed": seed,
        "reader_cases": counts["reader_cases"],
        "reader_tracebacks": counts["reader_traceback"],
        "reader_hangs": counts["reader_hang"],
        "reader_over_10s": counts["reader_over_10s"],
        "reader_over_10s_cpu": counts["reader_over_10s_cpu"],
        "reader_ok": counts["reader_ok"],
        "reader_user_errors": counts["reader_user_error"],
        "cli_cases": counts["cli_cases"],
        "command_cases": counts["command_cases"],
        "cli_bad": counts["cli_bad"],
        **{f"cli_{p.replace('-', '_')}": counts[f"cli_{p}"] for p in problems},
        "cli_exit_codes": {str(k): v for k, v in sorted(exits.items())},
        "slowest_case_s": round(slowest[0], 3),
        "slowest_case": slowest[1],
        "wall_s": round(time.perf_counter() - start, 1),
        "per_format": {name: dict(c) for name, c in per_format.items()},
        "per_command": {name: c["cases"] for name, c in sorted(per_command.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cli-every", type=int, default=100, help="0: no reader CLI cases")
    parser.add_argument("--command-every", type=int, default=20, help="0: no command cases")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds before a hang")
    parser.add_argument("--save", type=Path, default=None, help="folder for bad inputs")
    args = parser.parse_args()
    result = run(args.cases, args.seed, args.cli_every, args.command_every, args.limit, args.save)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
