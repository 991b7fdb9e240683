"""What one training run states: values with their source, and what was not found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LAYOUT_KEYS = (
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "etp",
    "dp",
    "mbs",
    "gbs",
    "seq",
    "dtype",
    "recompute",
)
MODEL_KEYS = (
    "name",
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "head_dim",
    "ffn_hidden",
    "vocab",
    "experts",
    "top_k",
    "moe_ffn_hidden",
)
RUN_KEYS = ("gpus", "gpu", "nodes", "gpus_per_node")
MEASURED_KEYS = ("step_time_s", "tflops_per_gpu", "tokens_per_s_per_gpu", "peak_memory_gib")
# Fields every record reports, found or listed in `unknown` (model dims come from a preset or
# HF config named in the log when the log has none).
EXPECTED = (
    *(f"layout.{k}" for k in LAYOUT_KEYS),
    *(f"model.{k}" for k in MODEL_KEYS if k not in ("head_dim", "moe_ffn_hidden")),
    *RUN_KEYS,
    *(f"measured.{k}" for k in MEASURED_KEYS),
)


@dataclass
class Found:
    """Values read so far (key -> value) and where each came from; the first reader to state a
    key wins, so readers run from the most to the least direct source."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)

    def put(self, key: str, value: Any, source: str) -> None:
        """State ``key`` unless an earlier source did (None states nothing)."""
        if value is None or key in self.values:
            return
        self.values[key] = value
        self.sources[key] = source

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def setting(self, name: str, value: Any) -> None:
        """A framework setting the log states (Megatron's argument name), first one wins."""
        if value is not None:
            self.settings.setdefault(name, value)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def format(self, name: str) -> None:
        if name not in self.formats:
            self.formats.append(name)


@dataclass(frozen=True)
class RunRecord:
    """A training run as its log (and configs) state it; JSON via :meth:`as_dict`."""

    source: str
    configs: tuple[str, ...]
    framework: str | None
    formats: tuple[str, ...]
    model: dict[str, Any]
    layout: dict[str, Any]
    run: dict[str, Any]
    measured: dict[str, Any]
    settings: dict[str, Any]
    sources: dict[str, str]
    unknown: tuple[str, ...]
    notes: tuple[str, ...]
    # The ModelSpec of a preset or HF config the log names (None: only the dims above).
    model_spec: Any = field(default=None, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The `tierwise ingest training-log --json` object (stable keys)."""
        return {
            "log": self.source,
            "configs": list(self.configs),
            "framework": self.framework,
            "formats": list(self.formats),
            "model": self.model,
            "layout": self.layout,
            **self.run,
            "measured": self.measured,
            "settings": self.settings,
            "sources": self.sources,
            "unknown": list(self.unknown),
            "notes": list(self.notes),
        }

    @property
    def fully_stated(self) -> bool:
        """Model, layout and step time all known: the run can be priced as it ran."""
        missing = set(self.unknown)
        need = {f"layout.{k}" for k in LAYOUT_KEYS if k not in ("etp",)}
        need |= {"model.layers", "model.hidden", "model.heads", "measured.step_time_s"}
        return not (need & missing)
