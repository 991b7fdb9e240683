"""CLI start-up time: each case's wall and CPU time as a ratio to a bare `python -c pass` (JSON).

Targets (issue 18): `tierwise --version` within 10x, a small `estimate` within 20x. Each case
runs `--runs` times in a fresh interpreter; the minimum is kept (the least disturbed run: other
processes only ever add time). CPU time (user + sys of the child) is steadier than wall time on
a busy machine. `imports` lists the heavy packages a case loaded. The children may write
bytecode and the JSON copies of the shipped YAML data (`tierwise.specio`) whatever
PYTHONDONTWRITEBYTECODE says, and one unmeasured run per case writes them first: the numbers are
those of an installed tierwise, not of its first run from a fresh checkout.

    python benchmarks/startup.py [--runs 5]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

from tierwise.cli.main import command_modules

HEAVY = ("numpy", "networkx", "pydantic", "yaml", "rich", "matplotlib", "torch")
TARGETS = {"--version": 10.0, "estimate (small)": 20.0}
SMALL_ESTIMATE = [
    "estimate",
    "-m",
    "llama3-8b",
    "--nodes",
    "1",
    "--tp",
    "8",
    "--gbs",
    "8",
    "--json",
]
PROBE = (
    "import sys, runpy\n"
    "sys.argv = ['tierwise', *sys.argv[1:]]\n"
    "try:\n    runpy.run_module('tierwise.cli.main', run_name='__main__')\n"
    "except SystemExit:\n    pass\n"
    f"print(','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + sys) and the last stderr line of one child run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = proc.stderr.strip().splitlines()
    return wall, cpu, lines[-1] if lines else ""


def best(argv: list[str], runs: int) -> dict[str, object]:
    """The fastest of `runs` runs (wall and CPU separately) and the imports of the last, after
    one unmeasured run."""
    timed(argv)
    results = [timed(argv) for _ in range(runs)]
    return {
        "wall_s": min(r[0] for r in results),
        "cpu_s": min(r[1] for r in results),
        "imports": [m for m in results[-1][2].split(",") if m],
    }


def cases() -> dict[str, list[str]]:
    """Name -> tierwise arguments: --version, --help, each command's --help, a small estimate."""
    out = {"--version": ["--version"], "--help": ["--help"]}
    out |= {f"{name} --help": [name, "--help"] for name in command_modules()}
    out["estimate (small)"] = SMALL_ESTIMATE
    return out


def main(runs: int) -> dict[str, object]:
    """Run every case and the bare interpreter; ratios to the bare start."""
    bare = best([sys.executable, "-c", "pass"], runs)
    rows = {}
    for name, args in cases().items():
        row = best([sys.executable, "-c", PROBE, *args], runs)
        row["ratio_wall"] = row["wall_s"] / bare["wall_s"]  # type: ignore[operator]
        row["ratio_cpu"] = row["cpu_s"] / max(bare["cpu_s"], 1e-3)  # type: ignore[operator,type-var]
        rows[name] = row
    met = {
        name: {"target_ratio": limit, "ratio_wall": rows[name]["ratio_wall"]}
        | {"met": rows[name]["ratio_wall"] <= limit}  # type: ignore[operator]
        for name, limit in TARGETS.items()
    }
    return {
        "python": sys.version.split()[0],
        "runs": runs,
        "bare_python_wall_s": bare["wall_s"],
        "bare_python_cpu_s": bare["cpu_s"],
        "targets": met,
        "cases": rows,
    }


if __name__ == "__main__":
    n = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 5
    print(json.dumps(main(n), indent=2))
