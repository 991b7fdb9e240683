"""Speed of the collective cost model: one cost query and a 30-size sweep (JSON out).

Targets (issue 4): one query <= 20 us, a 30-size sweep <= 200 us, on a group whose shape is
built once (as NCCL builds its tables once per communicator).
"""

from __future__ import annotations

import json
import timeit

import numpy as np

from tierwise.collectives.predict import group_shape, predict, time_us
from tierwise.hardware.cluster import load_cluster


def main() -> None:
    cluster = load_cluster("dgx-h100", nodes=16)
    shape = group_shape(cluster)
    sizes = 2 ** np.arange(4, 34)
    time_us("all_reduce", shape, 1 << 20)  # warm the per-shape tables
    n = 20000
    query = (
        min(timeit.repeat(lambda: time_us("all_reduce", shape, 1 << 20), number=n, repeat=5)) / n
    )
    sweep = (
        min(timeit.repeat(lambda: predict("all_reduce", shape, sizes), number=2000, repeat=5))
        / 2000
    )
    build = min(timeit.repeat(lambda: group_shape(cluster), number=200, repeat=3)) / 200
    print(
        json.dumps(
            {
                "query_us": round(query * 1e6, 2),
                "sweep_30_sizes_us": round(sweep * 1e6, 2),
                "group_shape_build_us": round(build * 1e6, 2),
                "targets": {"query_us": 20, "sweep_30_sizes_us": 200},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
