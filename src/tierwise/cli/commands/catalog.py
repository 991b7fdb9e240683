"""`tierwise catalog [gpus|links|nics|switches|clusters|models]`: the built-in catalog as tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, cast

import typer

from tierwise.cli.model_view import catalog_models_rows
from tierwise.cli.options import JsonOpt
from tierwise.cli.output import console, print_json, table
from tierwise.errors import SpecError
from tierwise.hardware import catalog
from tierwise.hardware.catalog import NIC, Link
from tierwise.hardware.cluster import load_cluster, presets
from tierwise.hardware.tiers import tiers


def _gpus() -> list[dict[str, Any]]:
    return [g.model_dump() for g in catalog.entries("gpus").values()]


def _links() -> list[dict[str, Any]]:
    links = cast(dict[str, Link], catalog.entries("links"))
    return [{**x.model_dump(), "effective_GBps": x.effective_GBps} for x in links.values()]


def _nics() -> list[dict[str, Any]]:
    nics = cast(dict[str, NIC], catalog.entries("nics"))
    return [
        {**n.model_dump(), "line_GBps": n.line_GBps, "effective_GBps": n.effective_GBps}
        for n in nics.values()
    ]


def _switches() -> list[dict[str, Any]]:
    return [s.model_dump() for s in catalog.entries("switches").values()]


def _clusters() -> list[dict[str, Any]]:
    rows = []
    for key in presets():
        c = load_cluster(key)
        ts = tiers(c)
        rows.append(
            {
                "key": key,
                "gpu": c.gpu.key,
                "gpus_per_node": c.gpus_per_node,
                "nodes": c.nodes,
                "gpus": c.world,
                "nvlink_domain_gpus": c.domain_gpus,
                "intra": c.intra.key,
                "intra_GBps_per_gpu": c.intra.bw_GBps,
                "nic": c.inter.nic.key,
                "nic_Gbps": c.inter.nic.rate_Gbps,
                "nics_per_node": c.inter.nics_per_node,
                "inter_GBps_per_gpu": ts[1].line_GBps if len(ts) > 1 else None,
                "topology": c.topology.kind,
                "nodes_per_leaf": c.nodes_per_leaf,
                "oversubscription": c.topology.oversubscription,
                "in_network_reduction": c.in_network_reduction,
            }
        )
    return rows


KINDS: dict[str, Callable[[], list[dict[str, Any]]]] = {
    "gpus": _gpus,
    "links": _links,
    "nics": _nics,
    "switches": _switches,
    "clusters": _clusters,
    "models": catalog_models_rows,
}

# Columns of the human tables (JSON carries every field).
COLUMNS = {
    "gpus": (
        "key",
        "name",
        "peak_bf16_tflops",
        "peak_fp8_tflops",
        "peak_mxfp8_tflops",
        "peak_nvfp4_tflops",
        "hbm_gib",
        "hbm_tbps",
        "intra",
        "pcie",
    ),
    "links": (
        "key",
        "name",
        "kind",
        "bw_GBps",
        "efficiency",
        "effective_GBps",
        "latency_us",
        "switched",
        "nvls",
    ),
    "nics": (
        "key",
        "name",
        "kind",
        "rate_Gbps",
        "line_GBps",
        "effective_GBps",
        "latency_us",
        "sharp",
    ),
    "switches": ("key", "name", "radix", "rate_Gbps", "latency_us"),
    "clusters": (
        "key",
        "gpu",
        "gpus_per_node",
        "nvlink_domain_gpus",
        "intra_GBps_per_gpu",
        "nic",
        "nics_per_node",
        "inter_GBps_per_gpu",
        "topology",
    ),
    "models": (
        "name",
        "layers",
        "hidden",
        "heads",
        "kv_heads",
        "ffn_hidden",
        "vocab",
        "attention",
        "experts",
        "top_k",
        "params_total_B",
        "params_active_B",
    ),
}
LABELS = {
    "gpus_per_node": "GPUs/node",
    "nvlink_domain_gpus": "NVLink domain",
    "intra_GBps_per_gpu": "intra GB/s",
    "nics_per_node": "NICs/node",
    "inter_GBps_per_gpu": "inter GB/s",
}
TITLES = {
    "gpus": "GPUs (dense TFLOP/s, HBM GiB and TB/s)",
    "links": "intra-node links (GB/s per GPU per direction)",
    "nics": "NICs (line rate Gb/s; GB/s = 1e9 B/s)",
    "switches": "switches",
    "clusters": "cluster presets (GB/s per GPU per direction)",
    "models": "model presets (parameters in billions)",
}


def catalog_rows(kind: str) -> list[dict[str, Any]]:
    """Rows of one catalog kind; an unknown kind is a SpecError listing the allowed ones."""
    if kind not in KINDS:
        raise SpecError(f"catalog: unknown kind {kind!r}; allowed: {', '.join(KINDS)}")
    return KINDS[kind]()


def show_catalog(
    kind: Annotated[
        str | None, typer.Argument(help=f"One of {', '.join(KINDS)}; all when left out.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """The built-in catalog: GPUs, links, NICs, switches, cluster and model presets."""
    kinds = [kind] if kind is not None else list(KINDS)
    data = {k: catalog_rows(k) for k in kinds}
    if as_json:
        print_json(data)
        return
    for k, rows in data.items():
        cols = COLUMNS[k]
        labels = [LABELS.get(c, c) for c in cols]
        console.print(table(TITLES[k], labels, ([row[c] for c in cols] for row in rows)))


def register(app: typer.Typer) -> None:
    """Add the `catalog` command."""
    app.command("catalog")(show_catalog)
