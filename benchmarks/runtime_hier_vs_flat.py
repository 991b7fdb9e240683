"""Flat vs hierarchical collectives on local gloo ranks; prints one JSON object.

    python benchmarks/runtime_hier_vs_flat.py --nproc 4 --ranks-per-node 2 --op all_reduce \
        --min-bytes 1K --max-bytes 4M

On one box both "tiers" are loopback, so this measures the algorithms' overhead (extra
steps, copies), not a fabric; run it in `tierwise lab` namespaces for shaped tiers.
"""

from __future__ import annotations

import argparse
import json

from tierwise.runtime.options import BenchConfig, parse_size
from tierwise.runtime.worker import spawn_bench


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--ranks-per-node", type=int, default=2)
    parser.add_argument("--op", default="all_reduce")
    parser.add_argument("--min-bytes", default="1K")
    parser.add_argument("--max-bytes", default="4M")
    parser.add_argument("--factor", type=int, default=4)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args()
    times = {}
    for algo in ("flat", "hierarchical"):
        config = BenchConfig(
            op=args.op,
            min_bytes=parse_size(args.min_bytes),
            max_bytes=parse_size(args.max_bytes),
            factor=args.factor,
            iters=args.iters,
            algo=algo,
            backend="gloo",
        )
        result = spawn_bench(config, args.nproc, ranks_per_node=args.ranks_per_node)
        times[algo] = result.times_us()
    print(
        json.dumps(
            {
                "op": args.op,
                "nproc": args.nproc,
                "ranks_per_node": args.ranks_per_node,
                "rows": [
                    {
                        "size_bytes": size,
                        "flat_us": flat,
                        "hierarchical_us": times["hierarchical"][size],
                        "hierarchical_over_flat": times["hierarchical"][size] / flat,
                    }
                    for size, flat in times["flat"].items()
                ],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
