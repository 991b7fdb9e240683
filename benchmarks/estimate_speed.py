"""Speed of the step-time model: one estimate in Python, and a vectorised batch (JSON out).

Targets (issue 5): one estimate <= 100 us; a batch >= 50,000 layouts/s on one core.
`estimate_us` repeats one layout; `estimate_distinct_layouts_us` cycles through distinct
layouts of the planner's search space, as a search calls it (no per-layout cache helps it);
each also in CPU time (`*_cpu_us`: a shared machine's wall clock includes waiting).
"""

from __future__ import annotations

import itertools
import json
import time
import timeit
from collections.abc import Callable
from functools import partial

import numpy as np

from tierwise.hardware.cluster import ClusterSpec, load_cluster
from tierwise.perf import comm as C
from tierwise.perf.estimate import degrees, estimate, estimate_batch
from tierwise.perf.step import step_terms
from tierwise.plan.search import layout_at
from tierwise.plan.space import build_space
from tierwise.workload.layout import Layout, layout_fields, layouts_to_arrays
from tierwise.workload.load import load_model
from tierwise.workload.spec import ModelSpec

DISTINCT = 200  # layouts cycled through by estimate_distinct_layouts_us


def random_layouts(n: int, world: int, model: ModelSpec, seed: int = 0) -> dict[str, np.ndarray]:
    """`n` random llama3-70b layouts on `world` GPUs, as the batch functions' arrays."""
    rng = np.random.default_rng(seed)
    choices = [
        Layout(
            tp=tp,
            pp=pp,
            dp=world // (tp * pp),
            mbs=mbs,
            gbs=4096,
            seq=4096,
            recompute=rc,
            distributed_optimizer=True,
        )
        for tp, pp, mbs, rc in itertools.product(
            (1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4), ("none", "selective", "full")
        )
    ]
    pick = rng.integers(len(choices), size=n)
    table = layouts_to_arrays(choices, model)
    return {key: column[pick] for key, column in table.items()}


def distinct_layouts(model: ModelSpec, cluster: ClusterSpec, n: int, seed: int = 0) -> list[Layout]:
    """`n` distinct layouts drawn from the planner's search space (gbs 1024, seq 4096)."""
    space = build_space(model, cluster, cluster.world, 1024, 4096)
    picks = np.random.default_rng(seed).choice(space.size, size=n, replace=False)
    return [layout_at(space.arrays, int(i), model.layers) for i in picks]


def per_call_s(fn: Callable[[], object], calls: int, timer: Callable[[], float]) -> float:
    """Seconds per call of the calls `fn` makes (`calls` of them): the least of 25 short runs,
    so that a quiet moment of a shared machine counts."""
    number = max(1, 100 // calls)
    return min(timeit.repeat(fn, number=number, repeat=25, timer=timer)) / (number * calls)


def main() -> None:
    model = load_model("llama3-70b")
    cluster = load_cluster("dgx-h100", nodes=128)
    layout = Layout(tp=8, pp=4, dp=32, gbs=1024, seq=4096, distributed_optimizer=True)
    layouts = distinct_layouts(model, cluster, DISTINCT)
    for each in [layout, *layouts]:
        estimate(model, cluster, each)
    one = partial(estimate, model, cluster, layout)

    def cycled() -> None:
        for each in layouts:
            estimate(model, cluster, each)

    fields = layout_fields(layout, model)
    comm = C.scalar_comm(cluster, degrees(layout))
    core = partial(step_terms, model, cluster, fields, comm)
    arrays = random_layouts(50_000, cluster.world, model)
    estimate_batch(model, cluster, arrays)
    batch = min(timeit.repeat(lambda: estimate_batch(model, cluster, arrays), number=1, repeat=3))
    wall, cpu = time.perf_counter, time.process_time
    print(
        json.dumps(
            {
                "estimate_us": round(per_call_s(one, 1, wall) * 1e6, 1),
                "estimate_distinct_layouts_us": round(per_call_s(cycled, DISTINCT, wall) * 1e6, 1),
                "step_model_us": round(per_call_s(core, 1, wall) * 1e6, 1),
                # CPU time: what the calls cost where other work shares the cores
                "estimate_cpu_us": round(per_call_s(one, 1, cpu) * 1e6, 1),
                "estimate_distinct_layouts_cpu_us": round(
                    per_call_s(cycled, DISTINCT, cpu) * 1e6, 1
                ),
                "batch_layouts_per_s": round(50_000 / batch),
                "targets": {"estimate_us": 100, "batch_layouts_per_s": 50_000},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
