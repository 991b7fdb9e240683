"""Cluster size: wall time and peak memory of `show cluster`, `collective`, `estimate` and
`plan` from 10^3 nodes up to tierwise's limit (MAX_NODES = 10^5), one CLI process each (JSON out).

Target (issue 18): every command at 10^5 nodes within seconds and a few hundred MB; more nodes
are a one-line user error. Node counts are not multiples of the leaf or domain size, so the last
leaf and NVLink domain are partly filled.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from tierwise.hardware.cluster import MAX_NODES

COMMANDS = {
    "show_cluster": ["show", "cluster"],
    "collective": ["collective", "--op", "all_reduce"],
    "estimate": ["estimate", "-m", "llama3-8b"],
    "plan": ["plan", "-m", "llama3-8b"],
}
PRESETS = ("dgx-h100", "gb200-nvl72")
NODE_COUNTS = (1_001, 10_007, MAX_NODES - 1)


# The child reports its own peak resident memory (KiB on Linux) as its last stderr line.
CHILD = (
    "import atexit, resource, sys\n"
    "atexit.register(lambda: print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,"
    " file=sys.stderr))\n"
    "from tierwise.cli.main import main\n"
    "main()\n"
)


def _run(args: list[str]) -> dict[str, float | int]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *args, "--json"], capture_output=True, text=True, check=False
    )
    return {
        "exit": proc.returncode,
        "wall_s": round(time.perf_counter() - start, 2),
        "peak_rss_MB": round(int(proc.stderr.split()[-1]) / 1024),
    }


def main() -> None:
    rows = []
    for preset in PRESETS:
        for nodes in NODE_COUNTS:
            for name, args in COMMANDS.items():
                result = _run([*args, "-c", preset, "--nodes", str(nodes)])
                rows.append({"cluster": preset, "nodes": nodes, "command": name, **result})
    over = _run(["show", "cluster", "-c", "dgx-h100", "--nodes", str(MAX_NODES + 1)])
    print(
        json.dumps(
            {
                "max_nodes": MAX_NODES,
                "rows": rows,
                "over_limit_exit": over["exit"],
                "slowest_wall_s": max(r["wall_s"] for r in rows),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
