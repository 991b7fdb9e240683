"""The behaviour options as given (`Behaviour`) and the HBM a plan leaves free: what
`estimate`, `plan`, `sweep` and `report` resolve alike. No numpy here: a small `estimate`
starts without it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tierwise.errors import SpecError
from tierwise.perf.flags import Flags
from tierwise.plan.routing import resolve_routing
from tierwise.workload.spec import ModelSpec

DEFAULT_HEADROOM = "5%"
"""HBM a plan leaves free by default (allocator fragmentation, NCCL buffers, CUDA graphs)."""


def headroom_gib(text: str, hbm_gib: float) -> float:
    """``--mem-headroom``: GiB (``4``, ``4GiB``) or a share of HBM (``5%``); one-line error
    otherwise."""
    value = text.strip().removesuffix("GiB").strip()
    share = value.endswith("%")
    try:
        number = float(value.removesuffix("%"))
    except ValueError:
        number = -1.0
    gib = hbm_gib * number / 100 if share else number
    if not 0 <= gib < hbm_gib:
        raise SpecError(
            f"--mem-headroom: {text!r}; allowed: GiB (e.g. 4) or a share of HBM (e.g. 5%) "
            f"below the GPU's {hbm_gib:g} GiB"
        )
    return gib


@dataclass(frozen=True)
class Behaviour:
    """The behaviour options as given: `given` maps `Flags` fields to a value (None: not
    given), plus ``--framework`` and the MoE routing options that reshape the model."""

    given: Mapping[str, Any] = field(default_factory=dict)
    framework: str | None = None
    moe_routing: str | None = None
    moe_expert_capacity_factor: float | None = None

    def resolve(self, model: ModelSpec, framework: str | None) -> tuple[ModelSpec, Flags]:
        """(`model` with the capacity factor its routing uses, the flags a layout runs with
        under `framework`: None for the generic model); one-line errors for contradictions."""
        given = dict(self.given)
        force = given.pop("moe_router_force_load_balancing", None)
        routed = self.moe_routing is not None or force or self.moe_expert_capacity_factor
        spec, balanced = resolve_routing(
            model, self.moe_routing, bool(force), self.moe_expert_capacity_factor
        )
        given["moe_router_force_load_balancing"] = balanced if routed else None
        return spec, Flags.resolve(framework, given)
