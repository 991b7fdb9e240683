"""`--moe-routing` and Megatron's routing flags resolved into one model spec and one flag."""

from __future__ import annotations

from tierwise.errors import SpecError
from tierwise.workload.spec import ModelSpec

ROUTINGS = ("balanced", "dropless", "capacity")


def resolve_routing(
    spec: ModelSpec,
    routing: str | None,
    force_balance: bool,
    capacity_factor: float | None,
) -> tuple[ModelSpec, bool]:
    """(spec with the capacity factor routing uses, force-balance flag) for `--moe-routing`,
    `--moe-router-force-load-balancing` and `--moe-expert-capacity-factor` together.

    Contradictory combinations and routing flags on a dense model are one-line errors."""
    if routing is not None and routing not in ROUTINGS:
        raise SpecError(f"--moe-routing: {routing!r}; allowed: {', '.join(ROUTINGS)}")
    if routing is None and not force_balance and capacity_factor is None:
        return spec, False
    if spec.moe is None:
        raise SpecError(f"MoE routing flags: {spec.name} is dense (no experts)")
    if capacity_factor is not None and capacity_factor <= 0:
        raise SpecError(f"--moe-expert-capacity-factor: {capacity_factor}; must be > 0")
    if force_balance and routing not in (None, "balanced"):
        raise SpecError(
            f"--moe-routing {routing} contradicts --moe-router-force-load-balancing (balanced)"
        )
    if capacity_factor is not None and routing not in (None, "capacity"):
        raise SpecError(
            f"--moe-routing {routing or 'balanced'} contradicts --moe-expert-capacity-factor "
            f"{capacity_factor} (capacity routing)"
        )
    if force_balance and capacity_factor is not None:
        raise SpecError(
            "--moe-router-force-load-balancing contradicts --moe-expert-capacity-factor: "
            "choose balanced or capacity routing"
        )
    if routing == "capacity" or capacity_factor is not None:
        factor = capacity_factor or spec.moe.capacity_factor
        if not factor:
            raise SpecError(
                f"--moe-routing capacity: {spec.name} states no capacity factor; "
                "give --moe-expert-capacity-factor"
            )
        return _with_factor(spec, factor), False
    # balanced or dropless: no token dropping, so no capacity factor.
    return _with_factor(spec, None), routing == "balanced" or force_balance


def _with_factor(spec: ModelSpec, factor: float | None) -> ModelSpec:
    """`spec` (a MoE model) with its capacity factor set to `factor` (None: dropless)."""
    moe = spec.moe
    if moe is None or moe.capacity_factor == factor:
        return spec
    return spec.model_copy(update={"moe": moe.model_copy(update={"capacity_factor": factor})})
