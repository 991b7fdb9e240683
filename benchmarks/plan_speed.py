"""Full planner search speed (JSON out): llama3-70b on 1,024 H100 and a 405B dense model on
16,384 H100, each from a cold process-level cache (first search) and warm (second), on one
CPU core with single-threaded numpy/BLAS (set before numpy loads)."""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

import json  # noqa: E402
import time  # noqa: E402

from tierwise.hardware.cluster import load_cluster  # noqa: E402
from tierwise.perf.groups import _cache_for  # noqa: E402
from tierwise.plan.search import search  # noqa: E402
from tierwise.workload.load import load_model  # noqa: E402

CASES = [("llama3-70b", 128, 1024, 4096, 0.3), ("llama3-405b", 2048, 8192, 8192, 2.0)]


def main() -> None:
    out = []
    for name, nodes, gbs, seq, target in CASES:
        model, cluster = load_model(name), load_cluster("dgx-h100", nodes=nodes)
        _cache_for.cache_clear()
        t0 = time.perf_counter()
        cold = search(model, cluster, gbs, seq, top=5)
        cold_s = time.perf_counter() - t0
        warm = search(model, cluster, gbs, seq, top=5)
        best = cold.plans[0]["layout"]
        out.append(
            {
                "model": name,
                "gpus": cluster.world,
                "gbs": gbs,
                "seq": seq,
                "candidates_evaluated": cold.candidates_evaluated,
                "candidates_fitting": cold.candidates_fitting,
                "search_time_s": round(cold_s, 3),
                "warm_search_time_s": round(warm.search_time_s, 3),
                "target_s": target,
                "meets_target": cold_s <= target,
                "cpu_cores": len(os.sched_getaffinity(0))
                if hasattr(os, "sched_getaffinity")
                else None,
                "best": {k: best[k] for k in ("tp", "cp", "pp", "vpp", "dp", "mbs")},
            }
        )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
