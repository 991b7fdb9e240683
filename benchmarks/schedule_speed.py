"""Simulator speed: 10,000 synthetic jobs on a 2,048-node 2:1 cluster, per policy (JSON).

Target: each policy <= 10 s on one laptop core, with either step-time model (`--slowdown`).
Run: .venv/bin/python benchmarks/schedule_speed.py [--slowdown perf|dp-allreduce]
"""

from __future__ import annotations

import argparse
import json
import time

from tierwise.hardware.cluster import load_cluster
from tierwise.schedule.jobs import synthetic
from tierwise.schedule.policies import POLICIES
from tierwise.schedule.simulate import simulate
from tierwise.schedule.slowdown import SlowdownModel
from tierwise.schedule.state import ClusterState
from tierwise.schedule.step_time import STEP_TIMES, step_time_fn

TARGET_S = 10.0


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
