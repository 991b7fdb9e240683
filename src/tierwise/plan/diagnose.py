"""Why a search space came out empty, and the closest request that has layouts."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from tierwise.hardware.cluster import ClusterSpec
from tierwise.plan.space import MBS_OPTIONS, Space, build_space
from tierwise.workload.spec import ModelSpec


def why_no_layout(
    model: ModelSpec,
    cluster: ClusterSpec,
    gpus: int,
    gbs: int,
    seq: int,
    fix: Mapping[str, str],
    framework: str,
) -> str:
    """One line: what rules out every layout (a fixed value, the batch, or the fixed values
    and the batch together) and the closest change that leaves some."""

    def space(batch: int, pins: Mapping[str, str]) -> Space:
        return build_space(model, cluster, gpus, batch, seq, pins, framework)

    head = f"no layout of {model.name} divides {gpus} GPUs with gbs {gbs} and seq {seq}"
    for key, value in fix.items():
        rest = space(gbs, {k: v for k, v in fix.items() if k != key})
        if rest.size:
            values = rest.arrays.get(key)
            allowed = (
                f"; values with layouts: {', '.join(map(str, np.unique(values)))}"
                if values is not None
                else ""
            )
            others = " with the other --fix values" if len(fix) > 1 else ""
            return f"{head}: --fix {key}={value} rules out every layout{others}{allowed}"
    batch = _batch_reason(space, gpus, gbs, fix)
    if batch:
        return f"{head}: {batch}"
    # tp = cp = pp = 1, dp = GPUs divides every probe batch: without the fixes only the
    # batch can be at fault.
    pins = ",".join(f"{k}={v}" for k, v in fix.items())
    return f"{head}: --fix {pins} leaves no layout at any gbs; without it, " + _batch_reason(
        space, gpus, gbs, {}
    )


def _batch_reason(
    space: Callable[[int, Mapping[str, str]], Space], gpus: int, gbs: int, fix: Mapping[str, str]
) -> str:
    """Why `gbs` divides no layout of those (`space(batch, fix)`) that a batch every mbs*dp
    divides has, and the closest gbs that does; empty when there is no such layout either."""
    mbs = [int(fix["mbs"])] if "mbs" in fix else []
    probe = space(gpus * math.lcm(*MBS_OPTIONS, *mbs), fix)
    if not probe.size:
        return ""
    steps = np.unique(probe.arrays["dp"] * probe.arrays["mbs"])
    near = np.maximum(np.rint(gbs / steps), 1) * steps
    closest = int(near[np.argmin(np.abs(near - gbs))])
    return (
        f"gbs must be a multiple of mbs*dp for some layout (smallest mbs*dp: "
        f"{int(steps.min())}); closest gbs: {closest}"
    )
