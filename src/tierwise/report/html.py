"""Render `ReportInputs` into one self-contained HTML file (inline SVG, inline CSS, no JS)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from tierwise import __version__
from tierwise.hardware.cluster import dump_cluster
from tierwise.hardware.tiers import Tier, tiers
from tierwise.perf.train_time import estimate_run
from tierwise.report.figures import (
    TIER_COLORS,
    Breakdown,
    breakdown_figure,
    busbw_figure,
    ettr_data,
    sweep_figure,
)
from tierwise.report.inputs import ReportInputs, ReportPlan
from tierwise.report.mapping import MappingData, mapping_figure
from tierwise.report.render import to_svg
from tierwise.report.topology import topology_figure


def layout_text(p: ReportPlan) -> str:
    """Short layout label: degrees > 1, micro-batch, recompute, ZeRO stage, precision."""
    lay = p.layout
    degrees = [
        f"{k}{getattr(lay, k)}" for k in ("tp", "cp", "ep", "pp", "dp") if getattr(lay, k) > 1
    ]
    if lay.vpp > 1:
        degrees.append(f"vpp{lay.vpp}")
    parts = [*degrees, f"mbs{lay.mbs}", f"rc:{lay.recompute}", f"z{lay.zero}", lay.dtype]
    return " ".join(parts)


def tier_caption(t: Tier) -> str:
    """A tier as one short caption: medium, effective GB/s per GPU, latency."""
    return f"{t.medium}, {t.eff_GBps:.3g} GB/s per GPU, {t.latency_us:g} µs"


def _label(key: str, unit_suffix: str) -> str:
    """A JSON key as a bar label: `tp_comm_s` -> `tp comm`."""
    return key.removesuffix(unit_suffix).replace("_", " ")


def breakdowns(p: ReportPlan, hbm_gib: float) -> list[Breakdown]:
    """Step-time, memory and bytes-per-tier panels of one plan's estimate."""
    est = p.estimate
    tier_of = est["comm_tiers"]
    step = {_label(k, "_s"): v for k, v in est["breakdown"].items()}
    colors = {
        _label(k, "_s"): TIER_COLORS.get(tier_of.get(k.split("_")[0], ""), "#495057")
        for k in est["breakdown"]
    }
    memory = {
        _label(k, "_gib"): v
        for k, v in est["memory"].items()
        if k.endswith("_gib") and k != "total_gib"
    }
    per_tier = {t: b / 1e9 for t, b in est["bytes_per_tier"].items()}
    return [
        Breakdown("Exposed time per step", "s", step, colors=colors),
        Breakdown("Memory per GPU", "GiB", memory, limit=hbm_gib, limit_label="HBM"),
        Breakdown("Bytes sent per GPU per step", "GB", per_tier, colors=TIER_COLORS),
    ]


def figures(inputs: ReportInputs, mapping: MappingData | None) -> dict[str, Any]:
    """Every figure of the report as inline SVG (`mapping`: the best plan's groups)."""
    c = inputs.cluster
    out: dict[str, Any] = {
        "topology": to_svg(topology_figure(c), "topology"),
        "busbw": [to_svg(busbw_figure(d), f"busbw{i}") for i, d in enumerate(inputs.busbw)],
        "mapping": None,
        "breakdown": None,
        "sweep": None,
        "ettr": None,
    }
    best = inputs.best
    if best is not None and mapping is not None:
        labels = {t.name: tier_caption(t) for t in tiers(c)}
        out["mapping"] = to_svg(mapping_figure(mapping, labels), "mapping")
        out["breakdown"] = to_svg(breakdown_figure(breakdowns(best, c.gpu.hbm_gib)), "breakdown")
        saved = estimate_run(best.estimate, 1.0).bytes_per_gpu  # its checkpoint share
        ettr = ettr_data(c, best.estimate["gpus"], saved)
        out["ettr"] = to_svg(sweep_figure(ettr), "ettr")
    if inputs.sweep is not None:
        out["sweep"] = to_svg(sweep_figure(inputs.sweep), "sweep")
    return out


def render(inputs: ReportInputs) -> str:
    """The report as one HTML document."""
    env = Environment(
        loader=PackageLoader("tierwise.report", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    best = inputs.best
    mapping = best.mapping(inputs.cluster) if best else None
    return env.get_template("report.html.j2").render(
        version=__version__,
        model=inputs.model,
        cluster=inputs.cluster,
        tiers=tiers(inputs.cluster),
        best=best,
        plans=inputs.plans,
        naive=inputs.naive,
        mapping=mapping,
        figures=figures(inputs, mapping),
        layout_text=layout_text,
        command=inputs.command,
        logs=inputs.logs,
        doctor=inputs.doctor,
        contract_text=inputs.contract_text,
        cluster_yaml=yaml.safe_dump(dump_cluster(inputs.cluster), sort_keys=False),
        model_yaml=yaml.safe_dump(inputs.model.model_dump(mode="json"), sort_keys=False),
    )


def write_report(inputs: ReportInputs, path: str | Path) -> Path:
    """Render and write the report; returns the path written."""
    out = Path(path)
    out.write_text(render(inputs), encoding="utf-8")
    return out
