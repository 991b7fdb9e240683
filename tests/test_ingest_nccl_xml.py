"""NCCL topology XML ingestion: NVLink from sm + link counts, NIC speeds, PCI-tree distances."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierwise.errors import ParseError
from tierwise.hardware.ingest import parse_nccl_topo
from tierwise.hardware.ingest.nccl_xml import cpulist

DATA = Path(__file__).parent / "data" / "ingest"


def _gpu(dev: int, bus: str, sm: int = 80, nvlinks: str = "") -> str:
    return (
        f'<pci busid="0000:{bus}:00.0" class="0x030200" vendor="0x10de" device="0x20b2" '
        f'link_speed="16.0 GT/s PCIe" link_width="16"><gpu dev="{dev}" sm="{sm}" rank="{dev}">'
        f"{nvlinks}</gpu></pci>"
    )


NIC = (
    '<pci busid="0000:0c:00.0" class="0x020700" link_speed="16.0 GT/s PCIe" link_width="16">'
    '<nic><net name="mlx5_0" dev="0" speed="{speed}" port="1"/></nic></pci>'
)


def _small(nvlinks: str = "", speed: int = 200000) -> str:
    """GPU0 and NIC under switch B (PIX), GPU1 under A above B (PXB), GPU2 on CPU0 (PHB),
    GPU3 on CPU1 (SYS)."""
    return (
        '<system version="1">'
        '<cpu numaid="0" affinity="0000ffff,0000ffff">'
        '<pci busid="0000:01:00.0" class="0x060400">'
        f'<pci busid="0000:02:00.0" class="0x060400">{_gpu(0, "03", nvlinks=nvlinks)}'
        f"{NIC.format(speed=speed)}</pci>"
        f"{_gpu(1, '04', nvlinks=nvlinks)}</pci>"
        f"{_gpu(2, '05', nvlinks=nvlinks)}</cpu>"
        f'<cpu numaid="1" affinity="ffff0000,ffff0000">{_gpu(3, "06", nvlinks=nvlinks)}</cpu>'
        "</system>"
    )


def test_dgx_h100_dump() -> None:
    t = parse_nccl_topo((DATA / "nccl_topo_dgx_h100.xml").read_text(), "topo.xml")
    assert (t.gpu_key, t.nvlink_gen, t.pcie_gen, t.pcie_lanes) == ("h100-sxm", 4, 5, 16)
    assert (t.nvlinks_per_gpu, t.nvlink_switched, t.nvlink_connected) == (18, True, True)
    assert t.cluster_fields() == {
        "gpu": "h100-sxm",
        "gpus_per_node": 8,
        "intra": "nvlink4",
        "inter": {"nics_per_node": 8, "nic": "ndr400"},
    }
    assert t.assumptions() == []
    assert {(g.nic_distance, g.numa_node) for g in t.gpus[:4]} == {("PIX", 0)}
    assert t.gpus[7].cpu_affinity == "56-111,168-223" and t.gpus[7].nearest_nic == "mlx5_11"
    storage = [(n.name, n.kind, n.rate_Gbps) for n in t.nics if not n.gpus]
    assert storage == [
        ("mlx5_1", "roce", 200),
        ("mlx5_2", "roce", 200),
        ("mlx5_7", "roce", 200),
        ("mlx5_8", "roce", 200),
    ]


def test_pci_tree_distances_and_pcie_generation() -> None:
    t = parse_nccl_topo(_small())
    assert [g.nic_distance for g in t.gpus] == ["PIX", "PXB", "PHB", "SYS"]
    assert [g.numa_node for g in t.gpus] == [0, 0, 0, 1]
    assert t.gpus[0].cpu_affinity == "0-15,32-47"
    assert t.intra() == ("pcie4", [])  # 16 GT/s x16, no NVLink
    assert t.cluster_fields()["inter"] == {"nics_per_node": 1, "nic": "hdr200"}


def test_sm80_with_six_nvswitches_is_nvlink3() -> None:
    links = "".join(
        f'<nvlink target="0000:c{i}:00.0" count="2" tclass="0x068000"/>' for i in range(6)
    )
    t = parse_nccl_topo(_small(links))
    assert (t.nvlinks_per_gpu, t.nvlink_gen) == (12, 3)
    assert t.intra() == ("nvlink3", [])


def test_nic_speed_without_catalog_entry_is_inline() -> None:
    t = parse_nccl_topo(_small(speed=300000))
    nic, notes = t.nic()
    assert isinstance(nic, dict) and (nic["kind"], nic["rate_Gbps"]) == ("ib", 300)
    assert any("no catalog ib NIC at 300 Gb/s" in n for n in notes)


def test_cpulist() -> None:
    assert cpulist("00000000,00000001") == "0"
    assert cpulist("ff000000,0000000f") == "0-3,56-63"


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (
            '<system version="1">\n<cpu numaid="0">\n<pci busid="0000:01:00.0">\n</cpu>\n',
            ["malformed XML", "mismatched tag", "x.xml:4"],
        ),
        ("", ["malformed XML", "no element found"]),
        ("<topology>\n</topology>\n", ["root element is <topology>", "x.xml:1"]),
        ('<system version="1"><cpu numaid="0"/></system>', ["no <gpu> element"]),
        (
            _small('<nvlink target="0000:c0:00.0" count="two" tclass="0x068000"/>'),
            ["<nvlink> count='two' is not an integer"],
        ),
        (
            '<system>\n<cpu numaid="0" affinity="zz">\n'
            '<pci busid="0000:01:00.0"><gpu dev="0"/></pci>'
            "</cpu></system>",
            ["affinity='zz' is not a hex CPU mask", "x.xml:2"],
        ),
    ],
)
def test_bad_dumps_are_one_line_errors(text: str, needles: list[str]) -> None:
    with pytest.raises(ParseError) as err:
        parse_nccl_topo(text, "x.xml")
    assert "\n" not in str(err.value)
    for needle in needles:
        assert needle in str(err.value)
