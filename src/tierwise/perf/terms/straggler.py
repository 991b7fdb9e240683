"""Stragglers: a synchronous step runs at the pace of its slowest rank.

The fleet's slow-node statistics (`hardware.fleet`) give the expected slowdown of a step over
the job's nodes and GPUs; the slowest rank's compute stretches by it, and every rank waits at
the next collective (the gradient reduce, the pipeline's sends). Pipeline-stage imbalance (the
embedding and loss stages) is the pipeline model's (`perf.pipeline`), not this term's.
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
