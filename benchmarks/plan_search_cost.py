"""What a full `plan` search costs (JSON out): seconds and peak memory of `search` for preset
models on H100 and GB200 NVL72 clusters up to 131,072 GPUs, each case in its own process
(peak RSS of that process, MB) on one core with single-threaded BLAS. The issue's target:
<= 1 s and <= 400 MB for every preset model; judged on the search's CPU seconds (wall seconds
beside them: on a shared machine the wall clock is mostly waiting).

    python benchmarks/plan_search_cost.py            # every preset, 1,024 / 16,384 / 131,072 GPUs
    python benchmarks/plan_search_cost.py --quick    # the largest cases the issue names
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

TARGET_S, TARGET_MB = 1.0, 400.0
QUICK = [("deepseek-v3", "gb200-nvl72", 1152), ("llama3-405b", "dgx-h100", 16384)]
SIZES = {"dgx-h100": (128, 2048, 16384), "gb200-nvl72": (256, 4096, 32768)}  # nodes


def one(model: str, cluster_name: str, nodes: int) -> dict[str, object]:
    """Time one search in this process (the child)."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    import time

    from tierwise.hardware.cluster import load_cluster
    from tierwise.plan.search import search
    from tierwise.workload.load import load_model

    spec, cluster = load_model(model), load_cluster(cluster_name, nodes=nodes)
    started, cpu_started = time.perf_counter(), time.process_time()
    try:
        result = search(spec, cluster, cluster.world, 4096, top=5)
        found: object = result.candidates_evaluated
    except Exception as exc:  # a model that fits nowhere still costs its search
        found = f"error: {str(exc)[:80]}"
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {
        "cpu_s": round(time.process_time() - cpu_started, 3),
        "wall_s": round(time.perf_counter() - started, 3),
        "candidates": found,
        "peak_rss_MB": round(peak_mb, 1),
    }


def main() -> None:
    if len(sys.argv) == 4:  # child
        print(json.dumps(one(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
        return
    from tierwise.workload.load import preset_names

    cases = QUICK if "--quick" in sys.argv else [
        (m, c, n) for m in preset_names() for c, sizes in SIZES.items() for n in sizes
    ]  # fmt: skip
    rows = []
    for model, cluster, nodes in cases:
        proc = subprocess.run(
            [sys.executable, __file__, model, cluster, str(nodes)],
            capture_output=True,
            text=True,
            check=True,
        )
        row = {"model": model, "cluster": cluster, "nodes": nodes, **json.loads(proc.stdout)}
        row["meets_target"] = row["cpu_s"] <= TARGET_S and row["peak_rss_MB"] <= TARGET_MB
        rows.append(row)
    worst = {key: max(r[key] for r in rows) for key in ("cpu_s", "peak_rss_MB")}
    summary = {"cases": len(rows), "met": sum(r["meets_target"] for r in rows), **worst}
    print(json.dumps({"target_s": TARGET_S, "target_MB": TARGET_MB, "summary": summary,
                      "cases": rows}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
