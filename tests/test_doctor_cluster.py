"""`tierwise doctor` without --cluster: the expected-bandwidth model comes from the logs' GPU,
node count and NIC rate (issue 22), and the JSON says which preset it chose and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tierwise.collectives.predict import predicted_busbw
from tierwise.hardware.cluster import load_cluster
from tierwise.verify.doctor import diagnose, read_facts
from tierwise.verify.doctor.expect import choose_cluster, gpu_key

DATA = Path(__file__).parent / "data" / "doctor"

# "# Using devices" lines as nccl-tests prints them, from public threads:
# NVIDIA/nccl-tests issue 293 (two A100 PCIe nodes) and NVIDIA/nccl issue 398 (AWS p3dn, V100).
A100_PCIE_RANKS = (
    "#  Rank  0 Group  0 Pid   3521 on      test1 device  0 [0x81] NVIDIA A100-PCIE-40GB\n"
    "#  Rank  1 Group  0 Pid   3985 on      test2 device  0 [0x81] NVIDIA A100-PCIE-40GB\n"
)
V100_RANKS = "".join(
    f"#   Rank {r:2d} Pid   {8159 + r} on ip-172-31-{'0-112' if r < 8 else '13-129'} device"
    f"  {r % 8} [0x00] Tesla V100-SXM2-32GB\n"
    for r in range(16)
)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", "h100-pcie"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
        ("NVIDIA A100-PCIE-40GB", "a100-pcie"),
        ("NVIDIA A100-PCI...", "a100-pcie"),  # nvidia-smi's table truncates the name
        ("NVIDIA B200", "b200"),
        ("NVIDIA GB200", "gb200"),
        ("Tesla V100-SXM2-32GB", None),
        ("NVIDIA H800", None),
    ],
)
def test_gpu_names_map_to_catalog_gpus(name: str, key: str | None) -> None:
    assert gpu_key({name}) == key


def test_mixed_gpus_name_no_single_gpu() -> None:
    assert gpu_key({"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"}) is None


@pytest.mark.parametrize(
    ("name", "nodes"),
    [
        ("nccl-1412-no-gdrdma.log", 2),
        ("nccl-1050-sharp.log", 4),
        ("nccl-398-aws-socket.log", 2),
        ("nccl-1053-loopback.log", 1),
        ("healthy/nccl-tests-350-gdr-setup.log", 2),
    ],
)
def test_excerpts_without_a_gpu_name_keep_the_default_at_their_node_count(
    name: str, nodes: int
) -> None:
    facts, _ = read_facts([DATA / name])
    choice = choose_cluster(facts)
    assert (choice.cluster.name, choice.by, choice.cluster.nodes) == ("dgx-h100", "default", nodes)
    assert choice.reason.startswith("the logs name no GPU")


def test_rank_lines_of_an_unlisted_gpu_keep_the_default_and_say_so(tmp_path: Path) -> None:
    log = tmp_path / "v100.log"
    log.write_text(V100_RANKS + (DATA / "nccl-398-aws-socket.log").read_text())
    choice = choose_cluster(read_facts([log])[0])
    assert (choice.cluster.name, choice.by, choice.cluster.nodes) == ("dgx-h100", "default", 2)
    assert "Tesla V100-SXM2-32GB; no preset has it" in choice.reason
    pcie = tmp_path / "a100-pcie.log"
    pcie.write_text(A100_PCIE_RANKS)
    assert choose_cluster(read_facts([pcie])[0]).by == "default"


def test_the_gap_is_measured_against_the_logs_gpu(tmp_path: Path) -> None:
    """Issue 1412's NCCL lines (A100 nodes, 33 GB/s) with its table's rank lines: the expected
    busbw is the DGX A100 preset's on 2 nodes, not DGX H100's."""
    ranks = "".join(
        f"#  Rank {r:2d} Group  0 Pid {r} on {'swat1-04' if r < 8 else 'swat1-05'} device"
        f"  {r % 8} [0x1b] NVIDIA A100-SXM4-80GB\n"
        for r in range(16)
    )
    header = "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
    time_us = (1 << 30) / (33.32 / 1.875 * 1e3)
    half = f"{time_us:.1f} 17.77 33.32 0"
    row = f"1073741824 268435456 float sum -1 {half} {half}\n"
    table = tmp_path / "all_reduce_perf.log"
    table.write_text(ranks + header + row)
    d = diagnose([DATA / "nccl-1412-no-gdrdma.log", table])
    assert d.cluster_source["cluster"] == "dgx-a100" and d.cluster_source["chosen_by"] == "logs"
    assert d.gap is not None
    a100 = predicted_busbw(load_cluster("dgx-a100", nodes=2), "all_reduce", 1 << 30, nodes=2)
    assert d.gap.expected_busbw_GBps == pytest.approx(a100, rel=1e-6)
    h100 = diagnose([DATA / "nccl-1412-no-gdrdma.log", table], load_cluster("dgx-h100", nodes=2))
    assert h100.gap is not None and h100.gap.expected_busbw_GBps > 1.5 * a100


def test_a100_40gb_uses_the_a100_preset_with_its_own_gpu(tmp_path: Path) -> None:
    log = tmp_path / "a100-40.log"
    log.write_text(
        "#  Rank  0 Group  0 Pid 1 on n1 device  0 [0x07] NVIDIA A100-SXM4-40GB\n"
        "#  Rank  1 Group  0 Pid 2 on n2 device  0 [0x07] NVIDIA A100-SXM4-40GB\n"
    )
    choice = choose_cluster(read_facts([log])[0])
    assert (choice.cluster.name, choice.cluster.gpu.key) == ("dgx-a100", "a100-sxm-40gb")


# NCCL_DEBUG_SUBSYS=NET prints each IB device with its speed in Mb/s; the format is NCCL
# 2.30.7's src/transport/net_ib/init.cc ("NET/IB: [%d] %s:%s:%d/%s provider=%s speed=%d ...").
NET_IB_SPEED = (
    "node1:100:100 [0] NCCL INFO NET/IB: [{i}] mlx5_{i}:uverbs{i}:1/{kind} provider=Mlx5"
    " speed={mbps} context=0x55d0 pciPath=/sys/devices/pci0000:00 ar=0 oooRqSize=0\n"
)


@pytest.mark.parametrize(
    ("kind", "mbps", "nic"),
    [("IB", 200000, "hdr200"), ("RoCE", 400000, "roce400"), ("IB", 400000, "ndr400")],
)
def test_nic_rate_from_nccl_net_lines(kind: str, mbps: int, nic: str, tmp_path: Path) -> None:
    log = tmp_path / "net.log"
    lines = "".join(NET_IB_SPEED.format(i=i, kind=kind, mbps=mbps) for i in range(8))
    log.write_text(
        "#  Rank  0 Group  0 Pid 1 on node1 device  0 [0x18] NVIDIA H100 80GB HBM3\n" + lines
    )
    facts = read_facts([log])[0]
    assert facts.nic_speeds["mlx5_3"] == (mbps / 1000, kind)
    choice = choose_cluster(facts)
    assert (choice.cluster.name, choice.cluster.inter.nic.key) == ("dgx-h100", nic)


def test_down_ports_do_not_set_the_rate() -> None:
    """gpud PR 482: the one port is Down/Polling at 'Rate: 10': no 10 Gb/s NIC is assumed."""
    facts, _ = read_facts([DATA / "gpud-482-ib-polling.txt"])
    assert choose_cluster(facts).cluster.inter.nic.key == "ndr400"


def test_nvidia_smi_names_the_gpu(tmp_path: Path) -> None:
    smi = tmp_path / "smi.txt"
    smi.write_text(
        "GPU 0: NVIDIA H200 (UUID: GPU-5b0c2a5e-1f1e-4c4a-9d7b-0c1f1e2d3c4b)\n"
        "|   1  NVIDIA H200                    On  |   00000000:2A:00.0 Off |          0 |\n"
    )
    facts = read_facts([smi])[0]
    assert facts.gpu_names == {"NVIDIA H200"}
    assert choose_cluster(facts).cluster.name == "hgx-h200"


def test_cli_reports_the_cluster_source() -> None:
    log = str(DATA / "nccl-1412-no-gdrdma.log")
    auto = json.loads(run_cli("doctor", log, "--json", check=False).stdout)["cluster_source"]
    assert (auto["cluster"], auto["chosen_by"], auto["nodes"]) == ("dgx-h100", "default", 2)
    given = json.loads(
        run_cli("doctor", log, "--cluster", "dgx-a100", "--json", check=False).stdout
    )["cluster_source"]
    assert (given["cluster"], given["chosen_by"], given["nodes"]) == ("dgx-a100", "--cluster", 20)
    human = run_cli("doctor", log, check=False).stdout
    assert "compared with: dgx-h100 (2 nodes, 8x ndr400), by default" in human
