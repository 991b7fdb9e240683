"""Simulator speed: 10,000 synthetic jobs on a 2,048-node 2:1 cluster, per policy (JSON).

Target: each policy <= 10 s on one laptop core, with either step-time model (`--slowdown`).
`records_sha256` digests every job's start, end and nodes: equal digests before and after a
change to the simulator mean it gives the same results.
Run: .venv/bin/python benchmarks/schedule_speed.py [--slowdown perf|dp-allreduce]
     .venv/bin/python benchmarks/schedule_speed.py --nodes 32 --jobs 50000 --oversubscription 1
     (what `tierwise schedule simulate --synthetic 50000` runs)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

from tierwise.hardware.cluster import load_cluster
from tierwise.schedule.jobs import synthetic
from tierwise.schedule.policies import POLICIES
from tierwise.schedule.simulate import JobRecord, simulate
from tierwise.schedule.slowdown import SlowdownModel
from tierwise.schedule.state import ClusterState
from tierwise.schedule.step_time import STEP_TIMES, step_time_fn

TARGET_S = 10.0


def _digest(records: list[JobRecord]) -> str:
    """sha256 of each job's id, start, end and nodes (floats as their exact repr)."""
    text = "\n".join(f"{r.id} {r.start_s!r} {r.end_s!r} {r.nodes}" for r in records)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cluster", default="dgx-h100")
    ap.add_argument("--nodes", type=int, default=2048)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--oversubscription", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slowdown", choices=list(STEP_TIMES), default=next(iter(STEP_TIMES)))
    args = ap.parse_args()
    cluster = load_cluster(args.cluster, nodes=args.nodes, oversubscription=args.oversubscription)
    jobs = synthetic(cluster, args.jobs, args.seed)
    runs = []
    for p in POLICIES.values():
        model = SlowdownModel(cluster, step_time_fn(args.slowdown))
        t0 = time.perf_counter()
        result = simulate(ClusterState(cluster), jobs, p, model)
        wall = time.perf_counter() - t0
        m = result.metrics()
        runs.append(
            {
                "policy": p.name,
                "wall_s": round(wall, 3),
                "within_target": wall <= TARGET_S,
                "mean_jct_s": m["mean_jct_s"],
                "mean_slowdown": m["mean_slowdown"],
                "slowdown_cache_entries": model.cache_size,
                "records_sha256": _digest(result.records),
            }
        )
    print(
        json.dumps(
            {
                "cluster": args.cluster,
                "nodes": args.nodes,
                "jobs": args.jobs,
                "oversubscription": args.oversubscription,
                "slowdown": args.slowdown,
                "target_s": TARGET_S,
                "runs": runs,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
