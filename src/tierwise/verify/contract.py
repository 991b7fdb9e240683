"""Fabric contract: the checks a cluster must pass, per op and tier (YAML, validated).

```yaml
name: dgx-h100-node
checks:
  - {op: all_reduce, tier: intra, metric: busbw, min_size: 1G, min_pct_of_model: 90}
  - {op: all_reduce, tier: intra, metric: latency, max_size: 8, max_us: 25}
  - {op: all_reduce, metric: p99_p50, max_ratio: 3}
  - {op: all_reduce, metric: p99_drift, max_drift_pct: 20}
counters: {drops: 0, pause_per_s: 1000}
```

Metrics, their limit field (exactly one) and the sizes they cover:

* busbw: `min_GBps` or `min_pct_of_model`, sizes `>= min_size` (required); measured is the
  lowest busbw (GB/s) or its % of `tierwise.collectives.predict` for the same op and group.
* latency: `max_us`, sizes `<= max_size` (required); measured is the highest time (us).
* p99_p50: `max_ratio`, sizes `min_size`..`max_size` (optional); measured is the highest p99/p50
  of per-iteration latency (`tierwise bench` rows and its sustained run).
* p99_drift: `max_drift_pct`, the sustained run (`tierwise bench --duration`); measured is the
  p99 of its last window over its first, minus 1, in %.

`tier` is intra, leaf or spine (the tier a log's group tops out on); left out, a check applies
to every tier. Sizes take 8, 1K, 64M, 1G (binary units, as nccl-tests' `-b/-e`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from tierwise.errors import TierwiseError
from tierwise.formats.ops import OPS, lookup_op
from tierwise.specio import build, read_yaml
from tierwise.units import parse_size
from tierwise.verify.counters import DEFAULT_PAUSE_STORM_PER_S

Metric = Literal["busbw", "latency", "p99_p50", "p99_drift"]
TierName = Literal["intra", "leaf", "spine"]

#: The limit fields each metric takes (exactly one of them).
LIMITS: dict[str, tuple[str, ...]] = {
    "busbw": ("min_GBps", "min_pct_of_model"),
    "latency": ("max_us",),
    "p99_p50": ("max_ratio",),
    "p99_drift": ("max_drift_pct",),
}
#: The size bound each metric requires.
REQUIRED_SIZE: dict[str, str] = {"busbw": "min_size", "latency": "max_size"}
#: Unit of each limit field.
UNITS: dict[str, str] = {
    "min_GBps": "GB/s",
    "min_pct_of_model": "% of model",
    "max_us": "us",
    "max_ratio": "x",
    "max_drift_pct": "%",
}


def _size(value: Any) -> Any:
    """Bytes from an int or ``1G``-style text; a pydantic ValueError otherwise."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if value < 1:
            raise ValueError("a size must be >= 1 byte")
        return value
    try:
        return parse_size(str(value), "size")
    except TierwiseError as exc:
        raise ValueError(str(exc).removeprefix("size: ")) from None


Size = Annotated[int | None, BeforeValidator(_size)]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Check(_Strict):
    """One check: a metric of one op (optionally on one tier) against one limit."""

    name: str | None = None
    op: str
    tier: TierName | None = None
    metric: Metric
    min_size: Size = None
    max_size: Size = None
    min_GBps: float | None = Field(default=None, gt=0)
    min_pct_of_model: float | None = Field(default=None, gt=0, le=200)
    max_us: float | None = Field(default=None, gt=0)
    max_ratio: float | None = Field(default=None, ge=1)
    max_drift_pct: float | None = Field(default=None, ge=0)

    @field_validator("op", mode="before")
    @classmethod
    def _op(cls, value: Any) -> Any:
        op = lookup_op(value) if isinstance(value, str) else None
        if op is None:
            raise ValueError(f"unknown op; allowed: {', '.join(OPS)}")
        return op

    @model_validator(mode="after")
    def _limits(self) -> Check:
        allowed = LIMITS[self.metric]
        given = [f for fields in LIMITS.values() for f in fields if getattr(self, f) is not None]
        foreign = [f for f in given if f not in allowed]
        if foreign:
            raise ValueError(
                f"metric {self.metric} does not take {foreign[0]}; its limit is "
                + " or ".join(allowed)
            )
        if len(given) != 1:
            raise ValueError(
                f"metric {self.metric} needs exactly one limit: {' or '.join(allowed)}"
            )
        bound = REQUIRED_SIZE.get(self.metric)
        if bound is not None and getattr(self, bound) is None:
            raise ValueError(f"metric {self.metric} needs {bound} (the sizes it covers)")
        if self.metric == "p99_drift" and (self.min_size or self.max_size):
            raise ValueError("metric p99_drift covers the sustained run; it takes no sizes")
        if self.min_size and self.max_size and self.min_size > self.max_size:
            raise ValueError(f"min_size {self.min_size} is larger than max_size {self.max_size}")
        return self

    @property
    def limit_field(self) -> str:
        """The limit field this check sets."""
        return next(f for f in LIMITS[self.metric] if getattr(self, f) is not None)

    @property
    def limit(self) -> float:
        """The limit value, in `unit`."""
        return float(getattr(self, self.limit_field))

    @property
    def unit(self) -> str:
        """Unit of the limit and of the measured value."""
        return UNITS[self.limit_field]

    @property
    def is_minimum(self) -> bool:
        """True when the measured value must reach the limit (busbw), False for maxima."""
        return self.limit_field.startswith("min_")

    @property
    def label(self) -> str:
        """`name`, else ``op.tier.metric``."""
        return self.name or f"{self.op}.{self.tier or 'any'}.{self.metric}"

    def covers(self, size_bytes: int) -> bool:
        """Whether a message size falls in the check's range."""
        return (self.min_size is None or size_bytes >= self.min_size) and (
            self.max_size is None or size_bytes <= self.max_size
        )


class CounterLimits(_Strict):
    """Limits on NIC counter deltas between the snapshots (counts over the run).

    drops, errors, retransmits, out_of_sequence and pause_storm_events default to 0 (a lossless
    fabric shows none); pause_per_s is the PFC pause frames per second of one counter above
    which the run had a pause storm; congestion (CNPs, ECN marks, xmit wait) is unlimited unless
    set.
    """

    drops: int = Field(default=0, ge=0)
    errors: int = Field(default=0, ge=0)
    retransmits: int = Field(default=0, ge=0)
    out_of_sequence: int = Field(default=0, ge=0)
    pause_storm_events: int = Field(default=0, ge=0)
    congestion: int | None = Field(default=None, ge=0)
    pause_per_s: float = Field(default=DEFAULT_PAUSE_STORM_PER_S, gt=0)


class Contract(_Strict):
    """A named list of checks and optional counter limits."""

    name: str
    description: str | None = None
    checks: list[Check] = Field(default_factory=list)
    counters: CounterLimits | None = None

    @model_validator(mode="after")
    def _unique(self) -> Contract:
        seen: set[str] = set()
        for check in self.checks:
            if check.label in seen:
                raise ValueError(f"two checks are named {check.label!r}; give each a unique name")
            seen.add(check.label)
        if not self.checks and self.counters is None:
            raise ValueError("the contract has no checks and no counters")
        return self


def load_contract(path: Path) -> Contract:
    """Read and validate a contract YAML; any problem is one SpecError line naming the field."""
    return build(Contract, read_yaml(path), str(path))
