"""`tierwise show cluster|model`: what each tier delivers; a model's shape and parameters."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.cli.model_view import DEFAULT_SEQ, show_model
from tierwise.cli.options import JsonOpt, cluster_argument
from tierwise.cli.output import console, line, plural, print_json, styled, table
from tierwise.collectives.nccl_env import nccl_environment
from tierwise.hardware.cluster import ClusterSpec, dump_cluster
from tierwise.hardware.summary import cluster_summary

DOMAIN_LINK = {"nvlink": "NVLink", "pcie": "PCIe", "xgmi": "xGMI", "loopback": "loopback"}
"""What joins the GPUs of a domain, by the intra link's kind (a PCIe box has no NVLink)."""

show_app = typer.Typer(help="Show a cluster's tiers or a model's shape.", no_args_is_help=True)


@show_app.command("cluster")
@cluster_argument
def show_cluster(cluster_spec: ClusterSpec, as_json: JsonOpt = False) -> None:
    """Tiers of a cluster: per-GPU bandwidth, latency and ratio to the fastest tier."""
    s = cluster_summary(cluster_spec) | {"nccl_env": nccl_environment(cluster_spec)}
    if as_json:
        print_json({**s, "spec": dump_cluster(cluster_spec)})  # loads back as --cluster FILE
        return
    domain = f"{DOMAIN_LINK.get(s['intra_link_kind'], 'NVLink')} domain"
    console.print(
        line(
            styled(str(s["cluster"]), "bold"),
            f": {plural(s['nodes'], 'node')} x {s['gpus_per_node']} {s['gpu']} = "
            f"{plural(s['gpus'], 'GPU')}; {domain} {plural(s['gpus_per_nvlink_domain'], 'GPU')}; "
            f"{s['nics_per_node']} x {s['nic']} ({s['nic_Gbps']:g} Gb/s = {s['nic_GBps']:g} GB/s) "
            "per node",
        )
    )
    leaf_nodes = sorted({s["smallest_leaf_nodes"], s["nodes_per_leaf"]})
    console.print(
        f"{s['topology']}: leaves {s['leaves']} x {'-'.join(map(str, leaf_nodes))} "
        f"node{'s' * (leaf_nodes[-1] != 1)}, pods {s['pods']}; {domain}s "
        f"{s['nvlink_domains']} x {plural(s['nics_per_nvlink_domain'], 'NIC')}"
    )
    default = f" (default for {s['nic_kind']} NICs)" if s["routing_is_default"] else ""
    nccl = " ".join(f"{k}={v}" for k, v in s["nccl_env"].items()) or "NCCL's defaults"
    console.print(
        f"routing {s['routing']}{default}, {plural(s['qps_per_connection'], 'queue pair')} "
        f"per connection; priced for {nccl}"
    )
    share, slow, spread = s["slow_node_share"], s["slow_node_slowdown"], s["gpu_speed_spread"]
    stragglers = (share and slow) or spread
    console.print(
        f"fleet {s['fleet']}: "
        + (f"{share:.2%} of nodes run {slow:.0%} slower" if share and slow else "no slow nodes")
        + (f", GPU speed spread {spread:.1%}" if spread else ", no GPU speed spread")
        + (" (a step waits for its slowest rank: straggler_s)" if stragglers else "")
    )
    for note in s["notes"]:
        console.print(note)
    rows = [
        (
            t["name"],
            t["medium"],
            t["bw_GBps_per_gpu"],
            t["eff_GBps_per_gpu"],
            t["latency_us"],
            f"{t['ratio_to_fastest']:.1f}x",
            t["gpus_in_scope"],
        )
        for t in s["tiers"]
    ]
    console.print(
        table(
            "tiers (bandwidth per GPU per direction, GB/s)",
            [
                "tier",
                "links",
                "line GB/s",
                "effective GB/s",
                "latency us",
                "vs fastest",
                "GPUs in scope",
            ],
            rows,
        )
    )
    if "intra_inter_ratio_per_direction" in s:
        console.print(
            f"intra:inter per GPU per direction = {s['intra_inter_ratio_per_direction']:.1f}x; "
            f"intra bidirectional vs one NIC = {s['intra_bidirectional_vs_one_nic_ratio']:.1f}x"
        )


@show_app.command("model")
def show_model_command(
    model: Annotated[str, typer.Argument(help="Preset, model YAML or Hugging Face config.json.")],
    as_json: JsonOpt = False,
    seq: Annotated[
        int, typer.Option("--seq", help="Sequence length for FLOPs per token, tokens.")
    ] = DEFAULT_SEQ,
) -> None:
    """A model's shape, parameter counts (total, active per token) and model FLOPs per token."""
    show_model(model, as_json, seq)


def register(app: typer.Typer) -> None:
    """Add the `show` command group."""
    app.add_typer(show_app, name="show")
