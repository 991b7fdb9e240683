"""Catalog, cluster specs, tiers and group spans against hand-computed values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.errors import SpecError
from tierwise.hardware import catalog
from tierwise.hardware.cluster import load_cluster, presets
from tierwise.hardware.placement import Placement, nic_sharing
from tierwise.hardware.tiers import tiers

REQUIRED_GPUS = {
    "a100-sxm-40gb",
    "a100-sxm-80gb",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "b200",
    "gb200",
    "mi300x",
    "l40s",
}
REQUIRED_CLUSTERS = {
    "dgx-a100",
    "dgx-h100",
    "hgx-h200",
    "dgx-b200",
    "gb200-nvl72",
    "mi300x-8",
    "pcie-h100",
}


def test_catalog_has_required_entries() -> None:
    assert set(catalog.entries("gpus")) >= REQUIRED_GPUS
    assert {"nvlink3", "nvlink4", "nvlink5", "pcie4", "pcie5", "xgmi"} <= set(
        catalog.entries("links")
    )
    assert {
        "hdr200",
        "ndr400",
        "xdr800",
        "roce200",
        "roce400",
        "eth100",
        "eth200",
        "eth400",
        "efa400",
    } <= set(catalog.entries("nics"))
    assert catalog.gpu("h100-sxm").peak_bf16_tflops == 989
    assert catalog.link("nvlink4").bw_GBps == 450
    assert catalog.nic("ndr400").line_GBps == 50


def test_every_catalog_value_has_a_source_comment() -> None:
    data = Path(catalog.__file__).parent / "data"
    for name in ("gpus", "links", "nics", "switches"):
        lines = (data / f"{name}.yaml").read_text().splitlines()
        numeric = [
            ln
            for ln in lines
            if ln.startswith("  ")
            and ":" in ln
            and ln.split(":", 1)[1].split("#")[0].strip()[:1].isdigit()
        ]
        assert numeric
        sourced = [ln for ln in numeric if "#" in ln]
        assert sourced == numeric, name


@pytest.mark.parametrize("name", sorted(REQUIRED_CLUSTERS))
def test_presets_load_with_nodes(name: str) -> None:
    assert name in presets()
    c = load_cluster(name, nodes=4)
    assert c.nodes == 4 and c.world == 4 * c.gpus_per_node


def test_dgx_h100_tiers_and_ratios() -> None:
    c = load_cluster("dgx-h100", nodes=16)
    t = {x.name: x for x in tiers(c)}
    assert t["intra"].line_GBps == 450
    assert t["leaf"].line_GBps == 50  # 8 NICs x 50 GB/s over 8 GPUs
    assert set(t) == {"intra", "leaf"}
    s = cli_json("show", "cluster", "--cluster", "dgx-h100", "--nodes", "16")
    assert s["intra_inter_ratio_per_direction"] == pytest.approx(9.0)
    assert s["intra_bidirectional_vs_one_nic_ratio"] == pytest.approx(18.0)


def test_oversubscribed_spine_tier() -> None:
    c = load_cluster("dgx-h100", nodes=64, oversubscription=2.0)
    t = {x.name: x for x in tiers(c)}
    assert t["spine"].line_GBps == pytest.approx(25.0)
    assert t["spine"].latency_us > t["leaf"].latency_us


def test_pcie_box_tiers() -> None:
    c = load_cluster("pcie-h100", nodes=2)
    t = {x.name: x for x in tiers(c)}
    assert t["intra"].medium == "pcie5"
    assert t["leaf"].line_GBps == pytest.approx(2 * 25 / 8)  # 2 x 200 Gb/s over 8 GPUs


def test_gb200_domain_spans_nodes() -> None:
    c = load_cluster("gb200-nvl72", nodes=36)
    assert c.domain_gpus == 72 and c.nodes_per_domain == 18
    p = Placement.contiguous(c)
    assert p.span(range(72)).tiers_spanned == ["intra"]
    assert p.span(range(144)).tiers_spanned == ["intra", "leaf"]


def test_group_span_of_tp_and_dp_groups() -> None:
    c = load_cluster("dgx-h100", nodes=64, oversubscription=2.0)  # 2 leaves of 32 nodes
    p = Placement.contiguous(c)
    tp = p.span(range(8))
    assert tp.tiers_spanned == ["intra"] and tp.top.name == "intra"
    dp = p.span(range(0, 512, 8))  # one GPU per node over 64 nodes
    assert dp.tiers_spanned == ["leaf", "spine"]
    assert dp.nodes == 64 and dp.leaves == 2 and dp.ranks_per_domain == 1 and dp.rails == 1
    assert dp.top.line_GBps == pytest.approx(25.0)
    full = p.span(range(16))
    assert full.rails == 8 and full.domain_crossings == 2


def test_nic_sharing_of_concurrent_dp_groups() -> None:
    dgx = Placement.contiguous(load_cluster("dgx-h100", nodes=4))
    groups = [list(range(g, 32, 8)) for g in range(8)]
    assert nic_sharing(dgx, groups) == 1  # one rail per DP group
    pcie = Placement.contiguous(load_cluster("pcie-h100", nodes=4))
    assert nic_sharing(pcie, groups) == 4  # 8 GPUs on 2 NICs
    assert nic_sharing(dgx, [list(range(8))]) == 1


def test_scattered_order_crosses_every_step() -> None:
    c = load_cluster("dgx-h100", nodes=2)
    order = np.arange(16).reshape(2, 8).T.ravel()  # 0, 8, 1, 9, ...
    assert Placement.contiguous(c).span(order).domain_crossings == 16


def test_user_yaml_cluster(tmp_path: Path) -> None:
    spec = tmp_path / "pod.yaml"
    spec.write_text(
        "name: my-pod\ngpu: h100-sxm\ngpus_per_node: 8\nnodes: 64\nintra: nvlink4\n"
        "inter: {nic: roce400, nics_per_node: 8}\n"
        "topology: {kind: spine-leaf, nodes_per_leaf: 16, oversubscription: 2.0}\n"
    )
    c = load_cluster(spec)
    assert c.name == "my-pod" and c.inter.nic.key == "roce400"
    assert [t.name for t in tiers(c)] == ["intra", "leaf", "spine"]
    inline = tmp_path / "inline.yaml"
    inline.write_text(
        "gpu: {peak_bf16_tflops: 500, hbm_gib: 96, hbm_tbps: 4}\ngpus_per_node: 4\nnodes: 2\n"
        "intra: {bw_GBps: 200, latency_us: 0.8}\ninter: {nic: {rate_Gbps: 100}, nics_per_node: 1}\n"
    )
    assert load_cluster(inline).gpu.hbm_gib == 96


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (
            "gpu: h100-sxmx\ngpus_per_node: 8\nnodes: 2\nintra: nvlink4\n"
            "inter: {nic: ndr400, nics_per_node: 8}\n",
            ["gpu", "h100-sxmx", "allowed"],
        ),
        (
            "gpu: h100-sxm\ngpus_per_node: 8\nnodes: -3\nintra: nvlink4\n"
            "inter: {nic: ndr400, nics_per_node: 8}\n",
            ["nodes", "-3"],
        ),
        (
            "gpu: h100-sxm\ngpus_per_node: 8\nnodes: 20\nintra: nvlink4\n"
            "inter: {nic: ndr400, nics_per_node: 8}\ntopology: {leaf_sizes: [8, 8]}\n",
            ["nodes=20", "16 nodes", "leaf_sizes"],
        ),
        (
            "gpu: h100-sxm\ngpus_per_node: 8\nnodes: 2\nintra: nvlink4\n"
            "inter: {nic: ndr400, nics_per_node: 0}\n",
            ["nics_per_node=0", "nodes=2", "allowed"],
        ),
        (
            "gpu: gb200\ngpus_per_node: 4\nnvlink_domain_gpus: 72\nnodes: 36\nintra: nvlink5\n"
            "inter: {nic: ndr400, nics_per_node: 4}\ntopology: {nodes_per_leaf: 10}\n",
            ["node 10", "18-node NVLink domain", "multiples of 18"],
        ),
        ("gpu: h100-sxm\n  nodes: [\n", ["malformed YAML"]),
        (
            "gpu: h100-sxm\ngpus_per_node: 8\nnodes: 2\nintra: nvlink9\n"
            "inter: {nic: ndr400, nics_per_node: 8}\n",
            ["intra", "nvlink9"],
        ),
    ],
)
def test_bad_cluster_yaml_is_one_clear_line(tmp_path: Path, text: str, needles: list[str]) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text(text)
    with pytest.raises(SpecError):
        load_cluster(spec)
    assert_user_error(run_cli("show", "cluster", "--cluster", str(spec), check=False), *needles)


def test_cli_bad_overrides() -> None:
    assert_user_error(
        run_cli("show", "cluster", "-c", "dgx-h100", "--nodes", "-1", check=False), "nodes", "-1"
    )
    assert_user_error(
        run_cli("show", "cluster", "-c", "dgx-h100", "--nodes", "200000", check=False),
        "nodes",
        "100000",
    )
    assert_user_error(run_cli("show", "cluster", "-c", "nope", check=False), "nope", "dgx-h100")


def test_version() -> None:
    assert run_cli("--version").stdout.startswith("tierwise ")
