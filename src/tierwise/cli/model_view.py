"""Model views for `tierwise show model` and `tierwise catalog models`."""

from __future__ import annotations

from typing import Any

from tierwise.cli.output import console, line, print_json, styled, table
from tierwise.errors import SpecError
from tierwise.workload.flops import model_flops_per_token
from tierwise.workload.load import load_model, preset, preset_names
from tierwise.workload.params import ParamCounts, param_counts
from tierwise.workload.spec import ModelSpec

BILLION = 1e9
DEFAULT_SEQ = 4096
"""Sequence length `show model` counts FLOPs at when --seq is not given, tokens."""
PARTS = (
    "embedding",
    "output",
    "attention",
    "mlp",
    "router",
    "shared_experts",
    "experts",
    "norms",
    "mtp_proj",
)


def model_summary(m: ModelSpec, seq: int = DEFAULT_SEQ) -> dict[str, Any]:
    """JSON-ready shape, parameter counts and model FLOPs per token at ``seq`` of ``m``.

    ``params_total`` / ``params_active`` leave out MTP modules, as model cards do
    (``params_mtp`` has them; ``params_stored`` is everything trained); ``*_B`` are in 1e9.
    """
    p = param_counts(m)
    return {
        "name": m.name,
        "spec": m.model_dump(mode="json"),
        "params_total": p.main_total,
        "params_active": p.main_active,
        "params_active_no_embedding": p.main_active_no_embedding,
        "params_mtp": p.mtp,
        "params_stored": p.total,
        "params_total_B": p.main_total / BILLION,
        "params_active_B": p.main_active / BILLION,
        "params_by_part": {part: getattr(p, part) for part in PARTS},
        "seq": seq,
        "model_flops_per_token": float(model_flops_per_token(m, seq)),
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
                "attention": "mla" if m.mla else "gqa" if m.kv < m.heads else "mha",
                "params_total_B": p.main_total / BILLION,
                "params_active_B": p.main_active / BILLION,
            }
        )
    return rows


def _print_human(m: ModelSpec, p: ParamCounts, seq: int) -> None:
    nested = {"name", "moe", "mla", "local_attention"}
    spec = {k: v for k, v in m.model_dump().items() if k not in nested}
    for part in ("moe", "mla", "local_attention"):
        sub = getattr(m, part)
        if sub is not None:
            spec |= {f"{part}.{k}": v for k, v in sub.model_dump().items()}
    mtp = f" (+ {p.mtp / BILLION:.2f} B in MTP modules)" if p.mtp else ""
    console.print(
        line(
            styled(str(m.name), "bold"),
            f": {p.main_total / BILLION:.2f} B parameters{mtp}, "
            f"{p.main_active / BILLION:.2f} B active per token; "
            f"{model_flops_per_token(m, seq) / 1e9:.1f} GFLOP per token trained at seq {seq}",
        )
    )
    console.print(table("shape", ["field", "value"], spec.items()))
    rows = [(part, f"{getattr(p, part):,}", f"{getattr(p, part) / p.total:.2%}") for part in PARTS]
    console.print(table("parameters", ["part", "count", "share"], rows))


def show_model(spec_arg: str, as_json: bool, seq: int = DEFAULT_SEQ) -> None:
    """`tierwise show model NAME|FILE`: a preset, a YAML spec or a Hugging Face config.json."""
    if seq < 1:
        raise SpecError(f"--seq {seq}: the sequence length must be at least 1 token")
    m = load_model(spec_arg)
    if as_json:
        print_json(model_summary(m, seq))
    else:
        _print_human(m, param_counts(m), seq)
