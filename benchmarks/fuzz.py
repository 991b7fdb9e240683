"""Fuzz every reader of a user's file with mutated real inputs; print counts as JSON.

Each case takes a seed file of one format (``tests/fuzz_targets.py``: cluster/model/contract
YAML, HF config.json, nccl-tests logs, nvidia-smi, NCCL XML, topology.conf, NIC counters, job
traces, bench JSON), mutates it (nasty tokens, cut, spliced or repeated lines, flipped bytes,
or, for YAML/JSON, one value replaced by a wrong type or out-of-range number) and reads it
with the reader function. Every ``--cli-every``-th case also goes through the real CLI entry
point in-process (``tierwise.cli.main.main``), recording its exit code.

A reader may return or raise ``TierwiseError`` (a user error); anything else is a traceback.
Through the CLI, exit 0 and 2 are expected (1 only from ``verify``, whose check can fail);
3 or an escaping exception counts as a traceback. ``--save DIR`` writes each input that
caused a traceback or took over 2 s there (for tests/data/fuzz/).

    python benchmarks/fuzz.py --cases 100000 --seed 0
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fuzz_targets import TARGETS, Target, mutate, read_case

SLOW_S = 10.0
SAVE_SLOW_S = 2.0  # --save also keeps inputs slower than this, to look at


def cli_case(target: Target, path: Path) -> tuple[int, str]:
    """(exit code, stderr) of the target's CLI command on ``path``, in-process."""
    from tierwise.cli.main import main

    args = [a.replace("{}", str(path)) for a in target.cli]
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["tierwise", *args]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception:
        err.write(traceback.format_exc())
        code = -1
    finally:
        sys.argv = argv
    return code, err.getvalue()


def cli_bad(code: int, stderr: str, target: Target) -> bool:
    """True when the CLI crashed: a traceback, exit 3, or an error of more than one line."""
    allowed = {0, 2} | ({1} if target.cli[0] == "verify" else set())
    lines = [line for line in stderr.splitlines() if line.strip()]
    return code not in allowed or "Traceback" in stderr or (code == 2 and len(lines) != 1)


def run(cases: int, seed: int, cli_every: int, save: Path | None) -> dict[str, Any]:
    rng = random.Random(seed)
    targets = [t for t in TARGETS.values() if t.seeds]
    seeds = {t.name: [p.read_bytes() for p in t.seeds] for t in targets}
    counts: Counter[str] = Counter()
    per_format: dict[str, Counter[str]] = {t.name: Counter() for t in targets}
    exits: Counter[int] = Counter()
    slowest = (0.0, "")
    tmp = Path(tempfile.mkdtemp(prefix="tierwise-fuzz-"))
    start = time.perf_counter()
    for case in range(cases):
        target = targets[case % len(targets)]
        data = mutate(rng.choice(seeds[target.name]), target.suffix, rng)
        path = tmp / f"case{target.suffix}"
        path.write_bytes(data)
        t0 = time.perf_counter()
        outcome = read_case(target, path)
        bad_cli = False
        if cli_every and case % cli_every == 0:
            code, stderr = cli_case(target, path)
            exits[code] += 1
            bad_cli = cli_bad(code, stderr, target)
            counts["cli_cases"] += 1
            counts["cli_tracebacks"] += bad_cli
        elapsed = time.perf_counter() - t0
        if elapsed > slowest[0]:
            slowest = (elapsed, target.name)
        slow = elapsed > SLOW_S
        counts["cases"] += 1
        counts[outcome] += 1
        counts["over_10s"] += slow
        per_format[target.name][outcome] += 1
        if save is not None and (outcome == "traceback" or bad_cli or elapsed > SAVE_SLOW_S):
            save.mkdir(parents=True, exist_ok=True)
            kind = "crash" if outcome == "traceback" or bad_cli else f"slow{elapsed:.0f}s"
            (save / f"{target.name}-{kind}-{case}{target.suffix}").write_bytes(data)
    for p in tmp.iterdir():
        p.unlink()
    tmp.rmdir()
    return {
        "cases": counts["cases"],
        "seed": seed,
        "tracebacks": counts["traceback"],
        "over_10s": counts["over_10s"],
        "ok": counts["ok"],
        "user_errors": counts["user_error"],
        "cli_cases": counts["cli_cases"],
        "cli_tracebacks": counts["cli_tracebacks"],
        "cli_exit_codes": {str(k): v for k, v in sorted(exits.items())},
        "slowest_case_s": round(slowest[0], 3),
        "slowest_format": slowest[1],
        "wall_s": round(time.perf_counter() - start, 1),
        "per_format": {name: dict(c) for name, c in per_format.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cli-every", type=int, default=100, help="0: no CLI cases")
    parser.add_argument("--save", type=Path, default=None, help="folder for crashing inputs")
    args = parser.parse_args()
    print(json.dumps(run(args.cases, args.seed, args.cli_every, args.save), indent=2))


if __name__ == "__main__":
    main()
