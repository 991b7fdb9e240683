"""`nvidia-smi topo -m` ingestion: intra tier, rails, affinity, and one-line errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tierwise.errors import ParseError
from tierwise.hardware import catalog
from tierwise.hardware.ingest import parse_topo_matrix

DATA = Path(__file__).parent / "data" / "ingest"


def _sample(name: str) -> str:
    return (DATA / name).read_text()


def _matrix(cells: list[list[str]], extras: bool = True) -> str:
    """A GPU-only topo -m printout from an n x n cell matrix (diagonal X)."""
    n = len(cells)
    head = (
        "\t"
        + "\t".join(f"GPU{i}" for i in range(n))
        + ("\tCPU Affinity\tNUMA Affinity" if extras else "")
    )
    rows = [
        f"GPU{i}\t"
        + "\t".join(" X " if i == j else cells[i][j] for j in range(n))
        + ("\t0-15\t0" if extras else "")
        for i in range(n)
    ]
    return "\n".join([head, *rows, ""])


def test_dgx_h100_is_nvlink4_with_eight_rails() -> None:
    t = parse_topo_matrix(_sample("nvidia_smi_dgx_h100.txt"), "h100.txt")
    assert t.gpu_key == "h100-sxm"
    assert (t.gpus_per_node, t.nvlinks_per_gpu, t.nvlink_switched) == (8, 18, True)
    assert t.cluster_fields() == {
        "gpu": "h100-sxm",
        "gpus_per_node": 8,
        "intra": "nvlink4",
        "inter": {"nics_per_node": 8},
    }
    assert catalog.link("nvlink4").bw_GBps == 18 * 25
    assert [g.nearest_nic for g in t.gpus] == [
        "mlx5_0",
        "mlx5_3",
        "mlx5_4",
        "mlx5_5",
        "mlx5_6",
        "mlx5_9",
        "mlx5_10",
        "mlx5_11",
    ]
    assert {g.nic_distance for g in t.gpus} == {"PIX"}
    assert (t.gpus[4].numa_node, t.gpus[4].cpu_affinity) == (1, "56-111,168-223")
    storage = [n.name for n in t.nics if not n.gpus]
    assert storage == ["mlx5_bond_0", "mlx5_bond_1"]
    assert t.assumptions() == []


def test_nv18_on_blackwell_is_nvlink5() -> None:
    t = parse_topo_matrix(_sample("nvidia_smi_dgx_h100.txt"))
    intra, notes = t.intra("b200")
    assert (intra, notes) == ("nvlink5", [])
    assert catalog.link(intra).bw_GBps == 18 * 50


def test_dgx_a100_unnamed_gpus_assume_nvlink3_and_split_tied_nics() -> None:
    t = parse_topo_matrix(_sample("nvidia_smi_dgx_a100.txt"))
    assert t.gpu_key is None
    intra, notes = t.intra()
    assert intra == "nvlink3" and catalog.link(intra).bw_GBps == 12 * 25
    assert any("NV12" in n for n in notes)
    assert t.intra("a100-sxm-40gb") == ("nvlink3", [])
    # GPU0 and GPU1 are both PXB to mlx5_0 and mlx5_1: one each, not both on mlx5_0
    assert [(g.nearest_nic, g.nic_distance) for g in t.gpus[:2]] == [
        ("mlx5_0", "PXB"),
        ("mlx5_1", "PXB"),
    ]
    assert len(t.rails) == 8 and {"mlx5_4", "mlx5_5"} == {n.name for n in t.nics if not n.gpus}
    assert [g.numa_node for g in t.gpus] == [3, 3, 1, 1, 7, 7, 5, 5]


def test_pcie_box_uses_the_gpus_pcie_generation_and_nearest_nic_per_socket() -> None:
    t = parse_topo_matrix(_sample("nvidia_smi_pcie_l40s.txt"))
    assert t.gpu_key == "l40s" and t.nvlinks_per_gpu == 0
    assert t.intra() == ("pcie4", [])
    assert [g.nic_distance for g in t.gpus] == [
        "PXB",
        "PXB",
        "PIX",
        "PHB",
        "PXB",
        "PXB",
        "PIX",
        "NODE",
    ]
    assert [(n.name, n.gpus) for n in t.rails] == [
        ("mlx5_0", (0, 1, 2, 3)),
        ("mlx5_1", (4, 5, 6, 7)),
    ]
    assert t.cluster_fields()["inter"] == {"nics_per_node": 2}


def test_nvlink_pairs_only_fall_back_to_pcie() -> None:
    nv = [
        ["X", "NV6", "SYS", "SYS"],
        ["NV6", "X", "SYS", "SYS"],
        ["SYS", "SYS", "X", "NV6"],
        ["SYS", "SYS", "NV6", "X"],
    ]
    t = parse_topo_matrix(_matrix(nv))
    assert not t.nvlink_connected
    intra, notes = t.intra("h100-pcie")
    assert intra == "pcie5"
    assert any("only some GPU pairs" in n for n in notes)


def test_nvlink_mesh_without_switch_is_written_inline() -> None:
    nv = [
        ["X", "NV2", "NV1", "NV1"],
        ["NV2", "X", "NV1", "NV2"],
        ["NV1", "NV1", "X", "NV2"],
        ["NV1", "NV2", "NV2", "X"],
    ]
    t = parse_topo_matrix(_matrix(nv, extras=False))
    assert t.nvlink_connected and not t.nvlink_switched
    assert [g.nvlinks for g in t.gpus] == [4, 5, 4, 5]
    intra, _ = t.intra()
    assert isinstance(intra, dict)
    assert (intra["bw_GBps"], intra["switched"], intra["nvls"]) == (4 * 25, False, False)


def test_old_driver_soc_means_sys() -> None:
    t = parse_topo_matrix(_matrix([["X", "SOC"], ["SOC", "X"]]))
    assert t.nvlinks_per_gpu == 0 and t.gpus[0].cpu_affinity == "0-15"


def _drop_lines(text: str, predicate: Callable[[str], bool]) -> str:
    return "\n".join(ln for ln in text.splitlines() if not predicate(ln))


@pytest.mark.parametrize(
    ("mangle", "needles"),
    [
        (
            lambda s: _drop_lines(s, lambda ln: ln.startswith(("GPU7", "NIC"))),
            ["row GPU7 is missing", "truncated", "t.txt:19"],
        ),
        (
            lambda s: s.replace("NV18\tPIX\tNODE", "NV18", 1),
            ["row GPU0 has 16 of 18 device columns", "NIC8 is missing", "t.txt:12"],
        ),
        (
            lambda s: s.replace("NV18\t X ", "NV19x\t X ", 1),
            ["row GPU1, column GPU0", "'NV19x'", "allowed: X, NV#, PIX"],
        ),
        (
            lambda s: s.replace("\t0-55,112-167\t0\tN/A", "", 1),
            ["row GPU0", "'CPU Affinity' is missing", "t.txt:12"],
        ),
        (
            lambda s: _drop_lines(s, lambda ln: ln.startswith("\tGPU0")),
            ["header line (GPU0 GPU1 ...) is missing"],
        ),
        (lambda s: "just some text\n", ["no `nvidia-smi topo -m` matrix"]),
    ],
)
def test_bad_printouts_name_the_line_and_field(
    mangle: Callable[[str], str], needles: list[str]
) -> None:
    with pytest.raises(ParseError) as err:
        parse_topo_matrix(mangle(_sample("nvidia_smi_dgx_h100.txt")), "t.txt")
    message = str(err.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message
