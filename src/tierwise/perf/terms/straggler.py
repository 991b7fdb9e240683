"""Stragglers: a synchronous step runs at the pace of its slowest rank.

The fleet's slow-node statistics (`hardware.fleet`) give the expected slowdown of a step over
the job's nodes and GPUs; the slowest rank's compute stretches by it, and every rank waits at
the next collective (the gradient reduce, the pipeline's sends). Communication is not slowed.
Pipeline-stage imbalance (the embedding and loss stages) is the pipeline model's
(`perf.pipeline`), not this term's.

With a pipeline the slow node sits on one stage: its every forward and backward stretches,
but the warm-up and cool-down pass it once per micro-batch like any stage, so in 1F1B and
interleaved 1F1B the step grows by at most the slowdown times that stage's compute (exactly
that on the last stage, less on an early one; the pipeline model's own
T = m t_max + (sum t - t_max) / v gives the same, its fill unchanged). The bubble does not
grow with it: tests/test_straggler_pipeline.py checks both schedules by simulation. The term
takes the busiest stage's compute, the bound.
"""

from __future__ import annotations

from tierwise.hardware.fleet import FleetSpec
from tierwise.workload.flops import Array


def straggler_s(fleet: FleetSpec, gpus: Array, gpus_per_node: int, compute_s: Array) -> Array:
    """Seconds a step loses to its slowest rank: the expected slowdown of `gpus` GPUs
    (ceil(gpus / gpus_per_node) nodes) times the step's compute seconds (scalars or arrays)."""
    if not (fleet.slow_node_share and fleet.slow_node_slowdown) and not fleet.gpu_speed_spread:
        return 0.0 * compute_s
    if isinstance(gpus, int):
        return fleet.step_slowdown(-(-gpus // gpus_per_node), gpus) * compute_s
    import numpy as np

    world = np.asarray(gpus, dtype=np.int64)
    values, index = np.unique(world, return_inverse=True)
    slow = np.array([fleet.step_slowdown(-(-int(g) // gpus_per_node), int(g)) for g in values])
    return slow[index].reshape(world.shape) * compute_s
