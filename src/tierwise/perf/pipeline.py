"""Pipeline schedule: the idle time (bubble) the busiest stage adds to a step.

1F1B (PipeDream-Flush, Narayanan et al. 2021) idles pp-1 micro-batch slots per step; the
interleaved schedule with vpp model chunks per rank idles (pp-1)/vpp of them.
"""

from __future__ import annotations

from tierwise.workload.flops import Array


def bubble_seconds(pp: Array, vpp: Array, microbatch_s: Array) -> Array:
    """Idle seconds per step of a pipeline whose stage takes `microbatch_s` per micro-batch."""
    return (pp - 1) / vpp * microbatch_s
