"""tierwise doctor: rules on real excerpts from public threads, healthy logs, readers, ranking."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tierwise.errors import ParseError
from tierwise.hardware.cluster import load_cluster
from tierwise.verify.doctor import CATEGORIES, RULES, diagnose, read_facts
from tierwise.verify.doctor.model import Evidence, Finding, Gap
from tierwise.verify.doctor.ranking import rank

DATA = Path(__file__).parent / "data" / "doctor"
REPO = Path(__file__).resolve().parents[1]
CLUSTER = load_cluster("dgx-h100")

# file -> (category, rule id) of the cause the thread confirmed (source URL in each file's header)
REAL = {
    name: (entry["category"], entry["rule"])
    for name, entry in yaml.safe_load((DATA / "corpus.yaml").read_text()).items()
    if "/" not in name
}


def test_real_excerpts_cover_the_must_show() -> None:
    assert len(REAL) >= 12
    assert len({c for c, _ in REAL.values()}) >= 6
    for name in REAL:
        head = (DATA / name).read_text().splitlines()[0]
        assert head.startswith("# source: https://github.com/"), name


def test_calibration_logs_give_no_finding(calibration_dir: Path) -> None:
    logs = sorted((calibration_dir / "nccl").glob("*.txt"))
    for log in logs:
        diagnosis = diagnose([log], CLUSTER)
        assert diagnosis.findings == (), log.name
        assert diagnosis.gap is not None


def test_slow_node_names_the_host_of_the_slow_pairs() -> None:
    top = diagnose([DATA / "nccl-tests-106-slow-node.txt"], CLUSTER).findings[0]
    assert "se02gn644 (2 of 3 slow runs)" in top.title  # the node the maintainer named
    assert [e.line for e in top.evidence] == [3, 5, 6]


def test_slow_node_from_nccl_tests_tables(tmp_path: Path) -> None:
    """Three 2-node runs of one op; the two that include node c are at half the busbw."""
    header = "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
    paths = []
    for hosts, busbw in ((("a", "b"), 95.0), (("a", "c"), 47.5), (("b", "c"), 47.5)):
        ranks = "".join(
            f"#  Rank {i} Group 0 Pid {i} on {h} device 0 [0x1b] NVIDIA H100 80GB HBM3\n"
            for i, h in enumerate(hosts)
        )
        algbw = busbw  # all_reduce on 2 ranks: busbw = algbw x 2(n-1)/n = algbw
        time_us = (1 << 30) / (algbw * 1e3)
        row = f"1073741824 268435456 float sum -1 {time_us:.1f} {algbw:.2f} {busbw:.2f} 0"
        rows = header + f"{row} {time_us:.1f} {algbw:.2f} {busbw:.2f} 0\n"
        path = tmp_path / f"all_reduce_{'_'.join(hosts)}.log"
        path.write_text(ranks + rows)
        paths.append(path)
    findings = diagnose(paths, CLUSTER).findings
    slow = next(f for f in findings if f.id == "slow-node")
    assert "c (2 of 2 slow runs)" in slow.title
    assert {Path(e.file).name for e in slow.evidence} == {
        "all_reduce_a_c.log",
        "all_reduce_b_c.log",
    }
    assert all(e.line == 1 for e in slow.evidence)


def test_sockets_on_a_tcp_only_cluster_are_by_design() -> None:
    log = DATA / "nccl-398-aws-socket.log"
    assert diagnose([log], load_cluster("dgx-h100", nic="eth100")).findings == ()


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.log"
    path.write_text(text)
    return path


def test_gdr_off_only_where_nic_traffic_runs(tmp_path: Path) -> None:
    # NVIDIA/nccl issue 1537's lines: NCCL prints them at init, whether or not the run is
    # multi-node; they matter only for traffic that leaves the node.
    lines = (
        "hostname1:25668:27396 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE\n"
        "hostname1:25668:27396 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n"
    )
    single = "hostname1:25668:27396 [0] NCCL INFO comm 0x5 rank 0 nranks 8 cudaDev 0 nvmlDev 0\n"
    multi = "hostname1:25668:27396 [0] NCCL INFO comm 0x5 rank 0 nranks 16 cudaDev 0 nvmlDev 0\n"
    for dev in range(1, 8):
        single += f"hostname1:25668:27396 [{dev}] NCCL INFO Setting affinity for GPU {dev}\n"
        multi += f"hostname1:25668:27396 [{dev}] NCCL INFO Setting affinity for GPU {dev}\n"
    assert diagnose([_write(tmp_path, lines + single)], CLUSTER).findings == ()
    ids = [f.id for f in diagnose([_write(tmp_path, lines + multi)], CLUSTER).findings]
    assert ids == ["gdr-off"]


def test_gdr_left_off_by_nccl_for_a_distant_nic_is_no_finding(tmp_path: Path) -> None:
    text = (
        "a:1:2 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 1c000 / HCA 0 (distance 5 > 4)\n"
        "a:1:2 [0] NCCL INFO Channel 00/0 : 0[1c000] -> 1[1c000] [send] via NET/IB/0\n"
        "b:1:2 [0] NCCL INFO Channel 00/0 : 0[1c000] -> 1[1c000] [receive] via NET/IB/0\n"
    )
    assert diagnose([_write(tmp_path, text)], CLUSTER).findings == ()


def test_nvls_expected_only_on_nvswitch_baseboards(tmp_path: Path) -> None:
    for name, expected in (("NVIDIA H100 80GB HBM3", ["nvls-off"]), ("NVIDIA H100 NVL", [])):
        text = (
            f"#  Rank  0 Group  0 Pid  1 on a device  0 [0x1b] {name}\n"
            "a:1:2 [0] NCCL INFO NVLS multicast support is not available on dev 0\n"
        )
        assert [f.id for f in diagnose([_write(tmp_path, text)], CLUSTER).findings] == expected


@pytest.mark.parametrize(
    ("setting", "rule_id"),
    [
        ("NCCL_P2P_LEVEL=LOC", "p2p-off"),
        ("NCCL_NET_GDR_LEVEL=LOC", "gdr-off"),
        ("NCCL_ALGO=Ring,Tree", "nvls-off"),
        ("NCCL_ALGO=^NVLS", "nvls-off"),
        ("NCCL_ALGO=Ring,NVLS", None),
        ("NCCL_NET_GDR_LEVEL=SYS", None),
    ],
)
def test_settings_that_switch_a_path_off(setting: str, rule_id: str | None, tmp_path: Path) -> None:
    """An 8x H100 SXM node pair on IB (rank lines, NET/IB NICs) with one NCCL_* setting."""
    text = (
        "".join(
            f"#  Rank {r} Group 0 Pid {r} on {'a' if r < 8 else 'b'} device {r % 8} [0x1b]"
            " NVIDIA H100 80GB HBM3\n"
            for r in range(16)
        )
        + "a:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB\n"
        + f"export {setting}\n"
    )
    ids = [f.id for f in diagnose([_write(tmp_path, text)], CLUSTER).findings]
    assert ids == ([rule_id] if rule_id else [])


def test_printouts_concatenated_in_one_file(tmp_path: Path) -> None:
    """ibstat straight into lspci: the ACSCtl line is not read as a port field."""
    text = (
        "CA 'mlx5_0'\n\tCA type: MT4129\n\tPort 1:\n\t\tState: Active\n\t\tRate: 400\n"
        "\t\tLink layer: InfiniBand\n"
        "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl-\n"
    )
    facts, _ = read_facts([_write(tmp_path, text)])
    assert [(p.device, p.state, p.rate_Gbps, p.model) for p in facts.ports] == [
        ("mlx5_0", "active", 400.0, "MT4129")
    ]
    assert [f.id for f in diagnose([_write(tmp_path, text)], CLUSTER).findings] == ["p2p-off"]


def test_ethernet_ports_count_only_when_nccl_uses_them(tmp_path: Path) -> None:
    ethtool = "".join(
        f"Settings for {name}:\n\tSpeed: {mbps}Mb/s\n\tLink detected: yes\n\n"
        for name, mbps in (("eno1", 1000), ("ens5", 100000), ("ens6", 25000))
    )
    assert diagnose([_write(tmp_path, ethtool)], CLUSTER).findings == ()  # a 1G management port
    used = "a:1:2 [0] NCCL INFO NET/Socket : Using [0]ens5:10.0.0.1<0> [1]ens6:10.0.1.1<0>\n"
    (finding,) = diagnose([_write(tmp_path, ethtool + used)], CLUSTER).findings
    assert finding.id == "link-degraded" and "ens6 at 25 Gb/s (peers 100)" in finding.title


def test_peer_access_errors_mean_p2p_is_blocked(tmp_path: Path) -> None:
    # the line NVIDIA/nccl issue 258 showed when P2P was not used (and bandwidth was low)
    text = "Cuda API error detected: cudaDeviceEnablePeerAccess returned (0x2c0)\n"
    assert [f.id for f in diagnose([_write(tmp_path, text)], CLUSTER).findings] == ["p2p-off"]


def test_every_rule_is_documented_with_a_known_category() -> None:
    doc = (REPO / "docs" / "doctor-rules.md").read_text()
    for rule in RULES:
        assert rule.category in CATEGORIES
        assert f"`{rule.id}`" in doc, rule.id
    assert {r.category for r in RULES} == set(CATEGORIES)


# --- readers -----------------------------------------------------------------------------------

PREFIXES = ("[1,0]<stdout>:", "0: ", "[rank0]:", "[default0]:", "[2025-07-21 19:05:29] ")


@pytest.mark.parametrize("prefix", PREFIXES)
def test_launcher_prefixes_do_not_change_the_facts(prefix: str, tmp_path: Path) -> None:
    source = DATA / "nccl-1412-no-gdrdma.log"
    plain, _ = read_facts([source])
    tagged = tmp_path / "tagged.log"
    tagged.write_text("".join(prefix + line + "\n" for line in source.read_text().splitlines()))
    facts, _ = read_facts([tagged])
    assert facts.transports == plain.transports
    assert facts.hosts == plain.hosts == {"swat1-04"}
    assert facts.nranks == 16
    assert facts.node_count == 2  # 16 ranks, GPUs 0..7 on the host shown


def test_collective_trace_lines_behind_a_ray_prefix(tmp_path: Path) -> None:
    # NVIDIA/nccl issue 1193 (NCCL_DEBUG_SUBSYS=COLL under Ray): one line per call
    log = tmp_path / "ray.log"
    log.write_text(
        "(RayTrainWorker pid=615, ip=10.72.7.6) r24-02-22-23-29-0066-raycluster-lv52c-worker-"
        "l4-8-fqztx:615:18953 [2] NCCL INFO AllReduce: opCount 139d sendbuff 0x78d056200000"
        " recvbuff 0x78d056200000 count 7382228 datatype 7 op 0 root 0 comm 0x78cfda045840"
        " [nranks=128] stream 0x78d07125e5e0\n"
        "(RayTrainWorker pid=22754, ip=10.72.12.6) r24-02-22-23-29-0066-raycluster-lv52c-"
        "worker-l4-8-srrss:22754:41192 [5] NCCL INFO AllReduce: opCount 139d sendbuff"
        " 0x7fb52c200000 recvbuff 0x7fb52c200000 count 7382228 datatype 7 op 0 root 0 comm"
        " 0x7fb4b3e6ee80 [nranks=128] stream 0x7fb54524a0f0\n"
        "h:1:2 [1] 12.345678 ncclProxyProgress:790 NCCL TRACE Received data from rank 2\n"
    )
    facts, _ = read_facts([log])
    assert facts.collectives == {"AllReduce": 2}
    assert len(facts.hosts) == 3 and facts.devices == {1, 2, 5}
    assert facts.env == {}
    assert diagnose([log], CLUSTER).findings == ()


def test_tuning_lines_give_the_algorithm_chosen(tmp_path: Path) -> None:
    log = tmp_path / "tuning.log"
    log.write_text(
        "2: node-0:309:309 [0] NCCL INFO AllGather: 37756928 Bytes -> Algo 1 proto 2 time 2860.2\n"
        "h:1:2 [0] NCCL INFO AllReduce: 4096 Bytes -> Algo Tree proto LL channel{Lo..Hi}={0..1}\n"
        "h:1:2 [0] NCCL INFO AllReduce: 268435456 Bytes -> Algo NVLS proto Simple channel{Lo..Hi}\n"
    )
    facts, _ = read_facts([log])
    assert facts.tuned == {
        "AllGather": {"Ring/Simple": 37756928},  # ids 1 and 2: NCCL_ALGO_RING, NCCL_PROTO_SIMPLE
        "AllReduce": {"Tree/LL": 4096, "NVLS/Simple": 268435456},
    }


def test_connection_lines_give_transport_and_gdr() -> None:
    facts, _ = read_facts([DATA / "healthy" / "nccl-tests-133-nvlink-ib.log"])
    assert facts.transport_count("NET/IB", gdr=True) == 2
    assert facts.transport_count("NET/IB", gdr=False) == 0
    assert facts.transport_count("P2P/direct pointer") == 10
    assert facts.hosts == {"nodea", "nodeb"}
    assert facts.gpu_nets == {("nodeb", 5): {"0"}, ("nodeb", 4): {"0"}}  # NET/IB/0 per GPU


def test_settings_and_tool_printouts(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text(
        "export NCCL_IB_HCA=mlx5_0\n"
        "h1:1:2 [0] NCCL INFO cudaDriverVersion 12040\n"
        "NCCL version 2.21.5+cuda12.4\n"
        "h1:1:3 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE\n"
        "h1:1:3 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n"
        "h1:1:3 [0] NCCL INFO 24 coll channels, 0 collnet channels, 16 nvls channels, 2 p2p\n"
        "h1:1:3 [0] NCCL INFO Connected all rings, use ring PXN 1 GDR 1\n"
        "Infiniband device 'mlx5_2' port 1 status:\n"
        "        state:           4: ACTIVE\n"
        "        rate:            200 Gb/sec (4X HDR)\n"
        "        link_layer:      InfiniBand\n"
        "hca_id:\tmlx5_3\n"
        "\t\tport:\t1\n"
        "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
        "\t\t\tactive_width:\t\t4X (2)\n"
        "\t\t\tactive_speed:\t\t25.0 Gbps (32)\n"
        "\t\t\tlink_layer:\t\tEthernet\n"
        "Settings for eth0:\n"
        "\tSpeed: 100000Mb/s\n"
        "\tLink detected: yes\n"
        "2: eth1: <BROADCAST,MULTICAST> mtu 1500 qdisc noop state DOWN mode DEFAULT group default\n"
    )
    facts, _ = read_facts([log])
    assert (facts.version, facts.cuda_driver) == ("2.21.5+cuda12.4", "12040")
    assert facts.ib_nics == {"mlx5_0": "IB", "mlx5_1": "RoCE"}
    assert (facts.nranks, facts.nnodes, facts.local_ranks) == (16, 2, 8)
    assert (facts.collnet_channels, facts.nvls_channels, facts.pxn) == (0, 16, 1)
    assert facts.env["NCCL_IB_HCA"][0] == "mlx5_0"
    ports = {p.device: (p.state, p.rate_Gbps, p.link_layer) for p in facts.ports}
    assert ports == {
        "mlx5_2": ("active", 200.0, "InfiniBand"),
        "mlx5_3": ("active", 100.0, "Ethernet"),  # 4X x 25 Gb/s
        "eth0": ("active", 100.0, "Ethernet"),
        "eth1": ("down", None, "Ethernet"),
    }


def test_topology_dump(tmp_path: Path) -> None:
    xml = REPO / "tests" / "data" / "ingest" / "nccl_topo_dgx_h100.xml"
    assert diagnose([xml], CLUSTER).findings == ()  # a healthy DGX H100 dump
    text = xml.read_text()
    slow = text.replace('speed="400000" port="1"', 'speed="200000" port="1"', 1)
    gpu = 'class="0x030200" vendor="0x10de" device="0x2330" subsystem_vendor="0x10de"'
    slow = slow.replace(f'{gpu} subsystem_device="0x16c1" link_speed="32.0', "X", 0)
    head, tail = slow.split(gpu, 1)
    tail = tail.replace('link_speed="32.0 GT/s PCIe"', 'link_speed="2.5 GT/s PCIe"', 1)
    dump = tmp_path / "topo.xml"
    dump.write_text(head + gpu + tail)
    (finding,) = diagnose([dump], CLUSTER).findings
    assert finding.id == "link-degraded"
    assert "mlx5_0 at 200 Gb/s (peers 400)" in finding.title
    assert "a GPU PCIe link at 2.5 GT/s (others 32)" in finding.title


def test_several_files_of_one_run_read_together(tmp_path: Path) -> None:
    ibstat = tmp_path / "ibstat.txt"
    ibstat.write_text(
        "".join(
            f"CA 'mlx5_{i}'\n\tPort 1:\n\t\tState: Active\n\t\tRate: {rate}\n"
            "\t\tLink layer: InfiniBand\n"
            for i, rate in enumerate((400, 400, 200, 400))
        )
    )
    diagnosis = diagnose([DATA / "healthy" / "nccl-tests-133-nvlink-ib.log", ibstat], CLUSTER)
    assert [f.id for f in diagnosis.findings] == ["link-degraded"]
    assert "mlx5_2 at 200 Gb/s" in diagnosis.findings[0].title
    assert {e.file for e in diagnosis.findings[0].evidence} == {str(ibstat)}


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "empty"),
        (b"  \n\n", "empty"),
        (b"\x7fELF\x00\x01\x02", "binary"),
        (b"hello\n", "nothing"),
    ],
)
def test_unreadable_files_are_one_parse_error(content: bytes, needle: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.log"
    bad.write_bytes(content)
    with pytest.raises(ParseError, match=needle) as info:
        read_facts([bad])
    assert str(bad) in str(info.value) and "\n" not in str(info.value)


_NOISY_LINES = st.lists(
    st.sampled_from(
        [
            "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via ",
            "h:1:2 [0] NCCL INFO NET/IB : Using [0]",
            "CA 'mlx5_0'",
            "Port 1:",
            "Rate: x",
            "<net name=",
            "NCCL_IB_HCA=",
            "#  size count type",
            "   8  2  float sum -1 1.0",
        ]
    )
    | st.text(max_size=60),
    max_size=12,
).map(lambda lines: "\n".join(lines).encode())


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.one_of(st.binary(max_size=300), _NOISY_LINES))
def test_fuzz_reader_raises_only_parse_errors(data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "fuzz.log"
    path.write_bytes(data)
    try:
        diagnose([path], CLUSTER)
    except ParseError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=25, deadline=None)
@given(st.randoms(use_true_random=False))
def test_interleaved_ranks_give_the_same_findings(rnd: random.Random) -> None:
    """Ranks write in any order: shuffling the lines of a log keeps its findings."""
    for name in ("nccl-398-aws-socket.log", "nccl-1412-no-gdrdma.log", "nccl-1050-sharp.log"):
        lines = (DATA / name).read_text().splitlines()
        body = [ln for ln in lines if not ln.startswith("#")]
        rnd.shuffle(body)
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_text("\n".join(body) + "\n")
            ids = [f.id for f in diagnose([path], CLUSTER).findings]
        assert ids == [REAL[name][1]]


# --- ranking -----------------------------------------------------------------------------------


def _finding(fid: str, tier: str, weight: float, severity: str = "warning") -> Finding:
    return Finding(fid, "channels", severity, fid, (Evidence("x", 1, "x"),), "fix", tier, weight)  # type: ignore[arg-type]


def test_findings_share_the_gap_by_weight_on_the_tiers_used() -> None:
    gap = Gap(
        "log", "all_reduce", 16, 2, 1 << 30, measured_busbw_GBps=100.0, expected_busbw_GBps=380.0
    )
    ranked = rank(
        [_finding("a", "inter", 0.5), _finding("b", "intra", 0.2), _finding("c", "any", 0.3)], gap
    )
    # gap 280 GB/s split 0.5 : 0.2 : 0.3 of a total weight of 1.0
    assert [(f.id, f.explains_GBps) for f in ranked] == [("a", 140.0), ("c", 84.0), ("b", 56.0)]
    one_node = Gap(
        "log", "all_reduce", 8, 1, 1 << 30, measured_busbw_GBps=300.0, expected_busbw_GBps=400.0
    )
    ranked = rank([_finding("a", "inter", 0.9), _finding("b", "intra", 0.25)], one_node)
    assert [(f.id, f.explains_GBps) for f in ranked] == [("b", 100.0), ("a", 0.0)]


def test_without_a_table_severity_then_weight_orders() -> None:
    ranked = rank([_finding("w", "inter", 0.9), _finding("e", "intra", 0.1, "error")], None)
    assert [f.id for f in ranked] == ["e", "w"]
    assert all(f.explains_GBps is None for f in ranked)


def test_gap_compares_the_table_with_the_collective_model(calibration_dir: Path) -> None:
    from tierwise.collectives.predict import group_shape, predict
    from tierwise.hardware.placement import Placement

    log = calibration_dir / "nccl" / "h100_2x8_ib_all_reduce.txt"
    two = load_cluster("dgx-h100", nodes=2)
    diagnosis = diagnose([log], two)
    gap = diagnosis.gap
    assert gap is not None and (gap.nranks, gap.nodes) == (16, 2)
    assert gap.size_bytes == 8589934592
    assert gap.measured_busbw_GBps == 468.46  # the in-place half of the last row is the faster
    shape = group_shape(two, placement=Placement.contiguous(two, 16, ranks_per_node=8))
    assert gap.expected_busbw_GBps == pytest.approx(
        float(predict("all_reduce", shape, [gap.size_bytes]).busbw_GBps[0])
    )


# --- records, printouts, comparisons -------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(st.randoms(use_true_random=False))
def test_records_run_together_read_as_lines(rnd: random.Random) -> None:
    """A paste that lost its line breaks (records joined by a space, launcher prefixes and
    bare `[dev] NCCL INFO` forms) gives the facts the original lines give."""
    import tempfile

    lines = [
        ln
        for name in ("nccl-1412-no-gdrdma.log", "nccl-398-aws-socket.log")
        for ln in (DATA / name).read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    cut = sorted(rnd.sample(range(1, len(lines)), 5))
    chunks = [lines[a:b] for a, b in zip([0, *cut], [*cut, len(lines)], strict=True)]
    with tempfile.TemporaryDirectory() as tmp:
        plain, joined = Path(tmp) / "plain.log", Path(tmp) / "joined.log"
        plain.write_text("\n".join(lines) + "\n")
        joined.write_text("\n".join(" ".join(chunk) for chunk in chunks) + "\n")
        want, _ = read_facts([plain])
        got, _ = read_facts([joined])
    assert got.transports == want.transports and got.hosts == want.hosts
    assert got.messages.keys() == want.messages.keys()
    assert got.socket_ifaces == want.socket_ifaces == {"ens5"}


def test_records_without_host_or_prefix(tmp_path: Path) -> None:
    text = (
        "[0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>"
        " [1] NCCL INFO Channel 00/0 : 9[1] -> 1[1] [receive] via NET/IB/1"
        " NCCL INFO NCCL version 2.18.5+cuda12.2\n"
        "include/socket.h:344 WARN Socket creation failed : Address family not supported\n"
        "INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n"
    )
    facts, _ = read_facts([_write(tmp_path, text)])
    assert facts.ib_nics == {"mlx5_0": "IB", "mlx5_1": "IB"}
    assert facts.transport_count("NET/IB", gdr=False) == 1
    assert facts.version == "2.18.5+cuda12.2"
    assert facts.seen("no_interface") and facts.gdr_disabled
    assert facts.net_paths == {
        "rank 1 [receive]": {False: [facts.transport_lines[("NET/IB", False)][0]]}
    }


def test_package_library_and_driver_versions(tmp_path: Path) -> None:
    text = (
        "nvidia-nccl-cu12==2.20.5\n"
        "nvidia-nccl-cu12          2.19.3\n"
        "ii  libnccl2   2.18.3-1+cuda12.2   amd64   NVIDIA Collective Communication Library\n"
        "torch    2.3.0    py3.11_cuda12.1_cudnn8.9.2_0    pytorch\n"
        "\tlibnccl.so.2 => /usr/lib/x86_64-linux-gnu/libnccl.so.2.17.1 (0x00007f)\n"
        "\tlibnccl-net.so => not found\n"
        "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |\n"
        "CUDA 12.2 and NCCL 2.18 were installed from the runfile\n"
    )
    facts, _ = read_facts([_write(tmp_path, text)])
    assert facts.versions["package nvidia-nccl-cu12"].keys() == {"2.20.5", "2.19.3"}
    assert facts.versions["package libnccl2"].keys() == {"2.18.3-1+cuda12.2"}
    assert facts.versions["package torch"].keys() == {"2.3.0"}
    assert facts.versions["libnccl.so"].keys() == {"2.17.1"}
    assert facts.versions["NVIDIA driver"].keys() == {"535.104.05"}
    assert "package cuda" not in facts.versions  # prose is not a package list
    (finding,) = diagnose([_write(tmp_path, text)], CLUSTER).findings
    assert finding.category == "version_mismatch" and "2.20.5" in finding.title


def test_same_nccl_number_is_no_mismatch(tmp_path: Path) -> None:
    text = (
        "a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, NCCL version 2.21.5\n"
        "b:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
    )
    assert diagnose([_write(tmp_path, text)], CLUSTER).findings == ()


def test_nic_model_rate_needs_infiniband_single_port(tmp_path: Path) -> None:
    port = (
        "CA 'mlx5_{i}'\n\tCA type: MT4129\n\tPort {p}:\n\t\tState: Active\n\t\tRate: 200\n"
        "\t\tLink layer: {layer}\n"
    )
    one = port.format(i=0, p=1, layer="InfiniBand")
    (finding,) = diagnose([_write(tmp_path, one)], CLUSTER).findings
    assert "mlx5_0 at 200 Gb/s, a ConnectX-7 runs 400" in finding.title
    assert finding.confirm and 0.5 <= finding.confidence < 0.7
    assert (
        diagnose([_write(tmp_path, port.format(i=0, p=1, layer="Ethernet"))], CLUSTER).findings
        == ()
    )
    dual = one + port.format(i=0, p=2, layer="InfiniBand")
    assert diagnose([_write(tmp_path, dual)], CLUSTER).findings == ()


def test_fewer_nics_on_one_host(tmp_path: Path) -> None:
    text = (
        "a:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB\n"
        "b:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB\n"
        "b:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [receive] via NET/IB/0/GDRDMA\n"
    )
    (finding,) = diagnose([_write(tmp_path, text)], CLUSTER).findings
    assert finding.id == "link-degraded" and "fewer NICs on b (2)" in finding.title


def test_gdr_read_off_on_sends_is_no_split(tmp_path: Path) -> None:
    """Sends without GDRDMA beside receives with it: GDR reads are off, GDR works."""
    text = (
        "a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0\n"
        "b:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [receive] via NET/IB/0/GDRDMA\n"
    )
    assert diagnose([_write(tmp_path, text)], CLUSTER).findings == ()


@pytest.mark.parametrize(
    ("line", "category", "likely"),
    [
        (
            "h:1:2 [0] transport/p2p.cc:200 NCCL WARN Cuda failure 'peer access is not"
            " supported between these two devices'",
            "p2p_disabled_or_acs",
            False,
        ),
        (
            "h:1:2 [0] include/socket.h:423 NCCL WARN NET/Socket : message truncated :"
            " receiving 1048576 bytes instead of 65536",
            "version_mismatch",
            True,
        ),
        (
            "h:1:2 [0] transport/net_ib.cc:90 NCCL WARN NET/IB : Got async event : port error",
            "link_degraded",
            True,
        ),
        (
            "h:1:2 [0] transport/net_ib.cc:1000 NCCL WARN NET/IB : Got completion from peer"
            " 10.0.0.2<1234> with error 5, opcode 0, len 0, vendor err 249",
            "roce_config",
            True,
        ),
    ],
)
def test_single_warnings_name_a_category(
    line: str, category: str, likely: bool, tmp_path: Path
) -> None:
    (finding,) = diagnose([_write(tmp_path, line + "\n")], CLUSTER).findings
    assert finding.category == category
    assert (
        finding.title.startswith("likely: ") == likely and (finding.confirm is not None) == likely
    )
