"""`tierwise ingest ...` end to end: JSON, a cluster YAML that load_cluster accepts, user errors."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.hardware.cluster import load_cluster
from tierwise.hardware.tiers import tiers

DATA = Path(__file__).parent / "data" / "ingest"


def test_nvidia_smi_writes_a_loadable_spec(tmp_path: Path) -> None:
    out = tmp_path / "h100.yaml"
    res = cli_json(
        "ingest",
        "nvidia-smi",
        str(DATA / "nvidia_smi_dgx_h100.txt"),
        "--nodes",
        "4",
        "--out",
        str(out),
    )
    assert res["found"]["intra"] == "nvlink4" and res["found"]["nics_per_node"] == 8
    assert res["cluster"]["nodes"] == 4 and res["out"] == str(out)
    assert any(a.startswith("inter.nic: ndr400") for a in res["assumed"])
    assert "# assumed inter.nic: ndr400" in out.read_text()
    t = {x.name: x for x in tiers(load_cluster(out))}
    assert (t["intra"].line_GBps, t["leaf"].line_GBps) == (450, 50)


def test_nccl_xml_and_slurm_topology(tmp_path: Path) -> None:
    res = cli_json("ingest", "nccl-xml", str(DATA / "nccl_topo_dgx_h100.xml"))
    assert res["cluster"]["inter"] == {"nic": "ndr400", "nics_per_node": 8}
    assert res["found"]["nics"] == 12 and res["found"]["gpu_list"][5]["nearest_nic"] == "mlx5_9"
    out = tmp_path / "tree.yaml"
    res = cli_json(
        "ingest",
        "slurm-topology",
        str(DATA / "slurm_topology_3level.conf"),
        "--gpu",
        "a100-sxm-80gb",
        "--oversubscription",
        "2",
        "--out",
        str(out),
    )
    assert res["found"]["levels"] == 3
    c = load_cluster(out)
    assert (c.nodes, c.nodes_per_leaf, c.topology.leaves_per_pod) == (128, 16, 4)
    assert (c.intra.key, c.inter.nic.key, c.topology.oversubscription) == ("nvlink3", "hdr200", 2.0)
    assert [x.name for x in tiers(c)] == ["intra", "leaf", "spine", "core"]


def test_table_output_names_the_defaults() -> None:
    out = run_cli("ingest", "nvidia-smi", str(DATA / "nvidia_smi_pcie_l40s.txt")).stdout
    assert "pcie4" in out and "mlx5_1" in out and "assumed" in out and "--out" in out


def test_user_errors_are_one_line(tmp_path: Path) -> None:
    lines = (DATA / "nvidia_smi_dgx_h100.txt").read_text().splitlines()
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(lines[:15]) + "\n")
    assert_user_error(
        run_cli("ingest", "nvidia-smi", str(cut), check=False),
        "cut.txt:16",
        "row GPU4 is missing",
        "truncated",
    )
    bad_xml = tmp_path / "bad.xml"
    bad_xml.write_text('<system version="1">\n  <cpu numaid="0">\n</system>\n')
    assert_user_error(
        run_cli("ingest", "nccl-xml", str(bad_xml), check=False), "bad.xml:3", "malformed XML"
    )
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=s0 Nodes=n[1-2]\nSwitchName=s9 Switches=s[0-1]\n")
    assert_user_error(
        run_cli("ingest", "slurm-topology", str(conf), check=False),
        "topology.conf:2",
        "unknown switch 's1'",
    )
    assert_user_error(
        run_cli("ingest", "nccl-xml", str(tmp_path / "none.xml"), check=False),
        "none.xml",
        "cannot read",
    )
    assert_user_error(
        run_cli(
            "ingest",
            "nvidia-smi",
            str(DATA / "nvidia_smi_dgx_h100.txt"),
            "--gpu",
            "h900",
            check=False,
        ),
        "--gpu",
        "unknown gpu 'h900'",
    )
