"""busbw figure data vs `tierwise collective --json`; PNG/SVG export; the topology subset."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.hardware.cluster import load_cluster
from tierwise.report.figures import busbw_figure, busbw_figure_data
from tierwise.report.render import save, to_svg
from tierwise.report.topology import subset, topology_graph
from tierwise.units import size_sweep

SIZES = ("-b", "1K", "-e", "256M", "-f", "4")


def _data(nodes: int, op: str = "all_reduce", ranks_per_node: int = 8):
    cluster = load_cluster("dgx-h100", nodes=nodes)
    sizes = size_sweep(1 << 10, 256 << 20, 4)
    return busbw_figure_data(
        cluster, op, sizes, ranks_per_node=ranks_per_node, world=nodes * ranks_per_node
    )


@pytest.mark.parametrize(("nodes", "op"), [(4, "all_reduce"), (2, "all_gather")])
def test_auto_and_algo_curves_equal_collective_json(nodes: int, op: str) -> None:
    data = _data(nodes, op)
    rows = cli_json("collective", "-c", "dgx-h100", "--nodes", str(nodes), "--op", op, *SIZES)
    auto = data.curve("auto")
    assert list(auto.size_bytes) == [r["size_bytes"] for r in rows["rows"]]
    assert list(auto.busbw_GBps) == pytest.approx([r["busbw_GBps"] for r in rows["rows"]])
    assert list(auto.chosen) == [r["algo"] for r in rows["rows"]]
    ring = data.curve("algo")
    assert ring.algo == "ring"
    forced = cli_json(
        "collective", "-c", "dgx-h100", "--nodes", str(nodes), "--op", op, "--algo", "ring", *SIZES
    )
    assert list(ring.busbw_GBps) == pytest.approx([r["busbw_GBps"] for r in forced["rows"]])


def test_tier_curves_reach_each_tier_and_intra_is_fastest() -> None:
    data = _data(64)  # two leaves of 32 nodes: intra, leaf and spine tiers
    tiers = {c.tier: c for c in data.curves if c.role == "tier"}
    assert set(tiers) == {"intra", "leaf", "spine"}
    assert (tiers["intra"].nodes, tiers["leaf"].nodes, tiers["spine"].nodes) == (1, 2, 4)
    one_node = cli_json("collective", "-c", "dgx-h100", "--nodes", "1", *SIZES)
    assert list(tiers["intra"].busbw_GBps) == pytest.approx(
        [r["busbw_GBps"] for r in one_node["rows"]]
    )
    assert data.curve("auto").busbw_GBps[-1] < tiers["intra"].busbw_GBps[-1]


def test_single_node_group_has_no_duplicate_tier_curve() -> None:
    data = _data(1)
    assert [c.role for c in data.curves].count("tier") == 0
    assert data.curve("auto").tier == "intra"


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_export_is_1200_px_wide(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"busbw{suffix}"
    save(busbw_figure(_data(2)), out)
    if suffix == ".png":
        assert Image.open(out).size[0] == 1200
    else:
        text = out.read_text()
        assert 'width="864pt"' in text and "<text" in text  # 12 in; labels stay text


def test_plot_flag_writes_svg_and_rejects_other_suffixes(tmp_path: Path) -> None:
    svg = tmp_path / "b.svg"
    run_cli("collective", "-c", "dgx-h100", "--nodes", "2", *SIZES, "--plot", str(svg))
    assert "ring" in svg.read_text()
    bad = run_cli("collective", "-c", "dgx-h100", "--plot", str(tmp_path / "b.pdf"), check=False)
    assert_user_error(bad, "--plot", ".png or .svg")


def test_inline_svg_is_deterministic_and_ids_differ_per_salt() -> None:
    data = _data(2)
    a, again, b = (to_svg(busbw_figure(data), salt) for salt in ("a", "a", "b"))
    assert a.startswith("<svg") and a == again and a != b


@pytest.mark.parametrize(
    ("preset", "nodes", "drawn", "gpus", "leaves", "spines"),
    [
        ("dgx-h100", 64, 4, 32, 16, 2),
        ("pcie-h100", 16, 4, 32, 1, 0),
        ("gb200-nvl72", 18, 4, 16, 0, 0),
    ],
)
def test_topology_subset(
    preset: str, nodes: int, drawn: int, gpus: int, leaves: int, spines: int
) -> None:
    cluster = load_cluster(preset, nodes=nodes)
    g = topology_graph(cluster)
    kinds = [a["kind"] for _, a in g.nodes(data=True)]
    assert subset(cluster).nodes == drawn
    assert kinds.count("gpu") == gpus
    assert kinds.count("leaf") == leaves and kinds.count("spine") == spines
    nics = [n for n, a in g.nodes(data=True) if a["kind"] == "nic"]
    assert all(g.degree(n) == (2 if leaves else 1) for n in nics)
