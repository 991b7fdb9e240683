"""Speed of the step-time model: one estimate in Python, and a vectorised batch (JSON out).

Targets (issue 5): one estimate <= 100 us; a batch >= 50,000 layouts/s on one core.
"""

from __future__ import annotations

import json
import timeit

import numpy as np

from tierwise.hardware.cluster import load_cluster
from tierwise.perf import comm as C
from tierwise.perf.estimate import degrees, estimate, estimate_batch
from tierwise.perf.step import step_terms
from tierwise.workload.layout import Layout, layout_fields
from tierwise.workload.load import load_model


def random_layouts(n: int, world: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    tp = rng.choice([1, 2, 4, 8], n)
    pp = rng.choice([1, 2, 4, 8], n)
    ones = np.ones(n, dtype=int)
    return {
        "tp": tp,
        "cp": ones,
        "ep": ones,
        "etp": tp,
        "pp": pp,
        "vpp": ones,
        "dp": world // (tp * pp),
        "mbs": rng.choice([1, 2, 4], n),
        "gbs": np.full(n, 4096),
        "seq": np.full(n, 4096),
        "sp": tp > 1,
        "recompute": rng.choice([0, 1, 2], n),
        "zero": ones * 0,
        "distributed_optimizer": ones.astype(bool),
        "fp8": ones * 0 > 0,
        "first_stage_layers": 80 // pp,
        "last_stage_layers": 80 // pp,
    }


def main() -> None:
    model = load_model("llama3-70b")
    cluster = load_cluster("dgx-h100", nodes=128)
    layout = Layout(tp=8, pp=4, dp=32, gbs=1024, seq=4096, distributed_optimizer=True)
    estimate(model, cluster, layout)
    full = min(timeit.repeat(lambda: estimate(model, cluster, layout), number=300, repeat=3)) / 300
    fields = layout_fields(layout, model)
    comm = C.scalar_comm(cluster, degrees(layout))
    core = (
        min(timeit.repeat(lambda: step_terms(model, cluster, fields, comm), number=300, repeat=3))
        / 300
    )
    arrays = random_layouts(50_000, cluster.world)
    estimate_batch(model, cluster, arrays)
    batch = min(timeit.repeat(lambda: estimate_batch(model, cluster, arrays), number=1, repeat=3))
    print(
        json.dumps(
            {
                "estimate_us": round(full * 1e6, 1),
                "step_model_us": round(core * 1e6, 1),
                "batch_layouts_per_s": round(50_000 / batch),
                "targets": {"estimate_us": 100, "batch_layouts_per_s": 50_000},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
