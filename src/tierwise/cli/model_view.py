"""Model views for `tierwise show model` and `tierwise catalog models`."""

from __future__ import annotations

from typing import Any

from tierwise.cli.output import console, line, print_json, styled, table
from tierwise.workload.load import load_model, preset, preset_names
from tierwise.workload.params import ParamCounts, param_counts
from tierwise.workload.spec import ModelSpec

BILLION = 1e9
PARTS = (
    "embedding",
    "output",
    "attention",
    "mlp",
    "router",
    "shared_experts",
    "experts",
    "norms",
)


def model_summary(m: ModelSpec) -> dict[str, Any]:
    """JSON-ready shape and parameter counts of ``m`` (counts in parameters, ``*_B`` in 1e9)."""
    p = param_counts(m)
    return {
        "name": m.name,
        "spec": m.model_dump(mode="json"),
        "params_total": p.total,
        "params_active": p.active,
        "params_total_B": p.total / BILLION,
        "params_active_B": p.active / BILLION,
        "params_by_part": {part: getattr(p, part) for part in PARTS},
    }


def catalog_models_rows() -> list[dict[str, Any]]:
    """One row per preset: shape and parameter counts (the `catalog models` table/JSON)."""
    rows = []
    for name in preset_names():
        m = preset(name)
        p = param_counts(m)
        rows.append(
            {
                "name": name,
                "layers": m.layers,
                "hidden": m.hidden,
                "heads": m.heads,
                "kv_heads": m.kv,
                "ffn_hidden": m.ffn,
                "vocab": m.vocab,
                "activation": m.activation,
                "experts": m.moe.experts if m.moe else None,
                "top_k": m.moe.top_k if m.moe else None,
                "params_total_B": p.total / BILLION,
                "params_active_B": p.active / BILLION,
            }
        )
    return rows


def _print_human(m: ModelSpec, p: ParamCounts) -> None:
    spec = {k: v for k, v in m.model_dump().items() if k not in {"name", "moe"}}
    if m.moe:
        spec |= {f"moe.{k}": v for k, v in m.moe.model_dump().items()}
    console.print(
        line(
            styled(str(m.name), "bold"),
            f": {p.total / BILLION:.2f} B parameters, {p.active / BILLION:.2f} B active per token",
        )
    )
    console.print(table("shape", ["field", "value"], spec.items()))
    rows = [(part, f"{getattr(p, part):,}", f"{getattr(p, part) / p.total:.2%}") for part in PARTS]
    console.print(table("parameters", ["part", "count", "share"], rows))


def show_model(spec_arg: str, as_json: bool) -> None:
    """`tierwise show model NAME|FILE`: a preset, a YAML spec or a Hugging Face config.json."""
    m = load_model(spec_arg)
    if as_json:
        print_json(model_summary(m))
    else:
        _print_human(m, param_counts(m))
