"""Fleet behaviour: how often a node runs slow, and how much GPUs' speeds spread.

A synchronous training step waits for its slowest rank. With a share `p` of the fleet's nodes
running `s` slower (thermal throttling, a degraded NIC or PCIe link, a noisy host), a job on
n nodes meets at least one of them with probability 1 - (1 - p)^n and then runs at its speed:
the expected step slowdown is s * (1 - (1 - p)^n). A per-GPU speed spread (standard deviation
`sigma` of each GPU's relative speed) adds the expected slowest of N GPUs, sigma * E[max of N
standard normals].

Named fleets (`fleet: NAME` in a cluster spec):
- `well-run` (the default): burn-in and straggler eviction keep slow nodes out, and the
  remaining per-GPU spread is inside the compute efficiency fitted on measured runs of such
  fleets (../shared/calibration), so nothing is added.
- `megascale-nsdi24`: MegaScale (Jiang et al., NSDI'24, section 5.1) found about 0.5% of
  machines about 10% slower, and the job running at their speed.

Not expressible as node statistics, so not named here: ByteDance's straggler study (Lin et
al., OSDI'25) traces most slow large jobs to pipeline-stage imbalance (modelled by the
pipeline: the loss and embedding stages), sequence-length imbalance and Python garbage
collection; Llama 3 (Dubey et al. 2024, section 3.3.4) reports a 1-2% diurnal throughput swing
from temperature, which moves every GPU together rather than making one slowest.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class FleetSpec(BaseModel):
    """Slow-node statistics of the fleet a cluster's jobs run on (fractions, 0.1 = 10%)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "custom"
    slow_node_share: float = Field(
        default=0.0, ge=0.0, lt=1.0, description="Share of nodes that run slow (0-1)."
    )
    slow_node_slowdown: float = Field(
        default=0.0, ge=0.0, le=10.0, description="How much slower a slow node runs (0.1 = 10%)."
    )
    gpu_speed_spread: float = Field(
        default=0.0,
        ge=0.0,
        le=0.5,
        description="Standard deviation of each GPU's relative speed (0.01 = 1%).",
    )

    @model_validator(mode="before")
    @classmethod
    def _named(cls, value: Any) -> Any:
        """A fleet's name stands for its fields; a mapping naming a fleet takes the fields it
        leaves out from it and may not contradict it (the name would describe another fleet)."""
        if isinstance(value, str) and value not in FLEETS:
            raise ValueError(f"unknown fleet {value!r}; allowed: {', '.join(FLEETS)}")
        named = _named_fleet(value)
        for key, given in value.items() if named and isinstance(value, dict) else ():
            if key in named and given != named[key]:
                raise ValueError(
                    f"fleet {value['name']!r} has {key} {named[key]:g}, not {given!r}; allowed: "
                    f"leave {key} out, or name the fleet yourself (e.g. custom)"
                )
        return fleet_fields(value)

    def idle_note(self) -> str | None:
        """Why a slow-node field given changes nothing (a share while the slowdown is 0, or
        the reverse: a slow node needs both), else None."""
        share, slow = self.slow_node_share, self.slow_node_slowdown
        if bool(share) == bool(slow):
            return None
        given, zero = ("slow_node_share", "slow_node_slowdown")[:: 1 if share else -1]
        return (
            f"fleet.{given} {share or slow:g} changes nothing: fleet.{zero} is 0 (a slow node "
            "needs both)"
        )

    def step_slowdown(self, nodes: int, gpus: int) -> float:
        """Expected relative slowdown of a synchronous step over `nodes` nodes holding `gpus`
        GPUs: the slow node's s * (1 - (1 - p)^n) plus the spread's expected slowest GPU."""
        share, slow = self.slow_node_share, self.slow_node_slowdown
        node_term = slow * (1.0 - (1.0 - share) ** max(nodes, 0)) if share and slow else 0.0
        spread = self.gpu_speed_spread * expected_max_normal(gpus) if self.gpu_speed_spread else 0
        return node_term + spread


# Named fleets (fractions, every field); sources in the module docstring.
FLEETS: dict[str, dict[str, float]] = {
    "well-run": {"slow_node_share": 0.0, "slow_node_slowdown": 0.0, "gpu_speed_spread": 0.0},
    "megascale-nsdi24": {
        "slow_node_share": 0.005,
        "slow_node_slowdown": 0.10,
        "gpu_speed_spread": 0.0,
    },
}


def _named_fleet(value: Any) -> dict[str, float] | None:
    """The fields of the named fleet `value` is (a name) or names (a mapping's `name`)."""
    name = value.get("name") if isinstance(value, dict) else value
    return FLEETS.get(name) if isinstance(name, str) else None


def fleet_fields(value: Any) -> Any:
    """A fleet as its fields, unvalidated: a named fleet's (`megascale-nsdi24`), a mapping
    naming one over the named fleet's fields; anything else as given (the validator judges)."""
    named = _named_fleet(value)
    if named is None:
        return value
    return {**named, **value} if isinstance(value, dict) else {"name": value, **named}


_GRID = 1601  # points of the integral over [-8, 8 + sqrt(2 ln n)] (error < 1e-6)


@lru_cache(maxsize=1024)
def expected_max_normal(n: int) -> float:
    """Expected maximum of n independent standard normals: the integral of x times the
    density of the maximum, n phi(x) Phi(x)^(n-1), by the trapezoid rule."""
    if n < 2:
        return 0.0
    import math
    from statistics import NormalDist

    unit = NormalDist()
    lo, hi = -8.0, 8.0 + math.sqrt(2.0 * math.log(n))
    step = (hi - lo) / (_GRID - 1)
    total = 0.0
    for i in range(_GRID):
        x = lo + i * step
        weight = 0.5 if i in (0, _GRID - 1) else 1.0
        total += weight * x * n * unit.pdf(x) * unit.cdf(x) ** (n - 1)
    return total * step
