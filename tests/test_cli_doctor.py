"""`tierwise doctor` end to end: JSON, human view, exit codes, errors; the report's section."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import SHARED, assert_user_error, run_cli

DATA = Path(__file__).parent / "data" / "doctor"


def test_json_findings_ordered_with_evidence_and_fix() -> None:
    proc = run_cli(
        "doctor",
        str(DATA / "nccl-709-roce-mtu.log"),
        str(DATA / "gpud-482-ib-polling.txt"),
        "--json",
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    findings = out["findings"]
    assert [f["rank"] for f in findings] == list(range(1, len(findings) + 1))
    assert findings[0]["id"] == "roce-timeout" and findings[0]["category"] == "roce_config"
    assert {"id", "category", "severity", "evidence", "explains_GBps", "fix"} <= set(findings[0])
    assert findings[0]["evidence"][0]["line"] == 4
    assert {f["id"] for f in findings} == {"roce-timeout", "p2p-off", "link-degraded"}
    assert out["facts"]["env"]["NCCL_IB_GID_INDEX"] == "3"
    assert out["bandwidth"] is None and findings[0]["explains_GBps"] is None


def test_human_view_prints_evidence_lines() -> None:
    proc = run_cli("doctor", str(DATA / "nccl-342-docker-shm.log"), check=False)
    assert proc.returncode == 1
    assert "shm-exhausted" in proc.stdout and "--shm-size" in proc.stdout
    assert "nccl-342-docker-shm.log:4:" in proc.stdout


def test_healthy_log_exits_zero() -> None:
    proc = run_cli("doctor", str(DATA / "healthy" / "nccl-tests-133-nvlink-ib.log"))
    assert "no finding" in proc.stdout


def test_garbage_empty_binary_are_one_line_errors(tmp_path: Path) -> None:
    for name, content, needle in (
        ("empty.log", b"", "empty"),
        ("blob.bin", bytes(range(256)) * 8, "binary"),
        ("notes.txt", b"dear diary\n", "nothing recognisable"),
    ):
        path = tmp_path / name
        path.write_bytes(content)
        assert_user_error(run_cli("doctor", str(path), check=False), str(path), needle)
    assert_user_error(run_cli("doctor", str(tmp_path / "missing.log"), check=False), "missing.log")


def test_report_gets_a_doctor_section(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    run_cli(
        "report",
        "-m",
        "llama3-8b",
        "-c",
        "dgx-h100",
        "--nodes",
        "2",
        "--gbs",
        "32",
        "--seq",
        "2048",
        "--doctor-logs",
        str(DATA / "nccl-1050-sharp.log"),
        "--out",
        str(out),
    )
    html = out.read_text()
    assert 'id="doctor"' in html and "collnet_sharp" in html and "sharp_plugin.c:320" in html


def test_a_table_beside_the_log_gives_the_gap_each_finding_explains(tmp_path: Path) -> None:
    """The nccl-tests table of the run (rows made here at issue 1412's 33 GB/s) next to its
    NCCL lines: the one finding explains the whole gap to the model."""
    ranks = "".join(
        f"#  Rank {r:2d} Group  0 Pid {r} on {'swat1-04' if r < 8 else 'swat1-05'} device"
        f"  {r % 8} [0x1b] NVIDIA A100-SXM4-80GB\n"
        for r in range(16)
    )
    header = "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
    time_us = (1 << 30) / (33.32 / 1.875 * 1e3)  # busbw = algbw x 2(16-1)/16
    row = f"1073741824 268435456 float sum -1 {time_us:.1f} 17.77 33.32 0"
    table = tmp_path / "all_reduce_perf.log"
    table.write_text(ranks + header + f"{row} {time_us:.1f} 17.77 33.32 0\n")
    out = json.loads(
        run_cli(
            "doctor",
            str(DATA / "nccl-1412-no-gdrdma.log"),
            str(table),
            "--nodes",
            "2",
            "--json",
            check=False,
        ).stdout
    )
    bandwidth = out["bandwidth"]
    assert (bandwidth["nranks"], bandwidth["nodes"], bandwidth["measured_busbw_GBps"]) == (
        16,
        2,
        33.32,
    )
    assert bandwidth["gap_GBps"] > 0
    (finding,) = out["findings"]
    assert finding["id"] == "gdr-off"
    # No --cluster: the A100 rank lines pick the A100 preset (the default was DGX H100's)
    src = out["cluster_source"]
    assert (src["cluster"], src["chosen_by"], src["gpu"], src["nodes"]) == (
        "dgx-a100",
        "logs",
        "a100-sxm-80gb",
        2,
    )
    assert not any("pass --cluster" in n for n in out["facts"]["notes"])
    assert finding["explains_GBps"] == round(bandwidth["gap_GBps"], 1)


def test_numbers_no_reader_can_hold_are_skipped_not_a_crash(tmp_path: Path) -> None:
    """Superscript digits pass `str.isdigit` but not `int`, and 5,000 digits pass a `\\d+`
    pattern but not `int`: such lines are skipped with a note, never a traceback."""
    digits = "9" * 5000
    lines = [
        "host:1:2 [²] NCCL INFO Channel 00/02 :    0   1",
        "host:1:2 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to ²",
        "export NCCL_MAX_NCHANNELS=²",
        f"host:1:2 [0] NCCL INFO AllReduce: {digits} Bytes -> Algo 1 proto 2 time 1.0",
        f"host:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks {digits} nNodes 2 localRanks 8",
        '<net name="mlx5_0" dev="0" speed="²" port="1" gdr="1"/>',
        "host:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
    ]
    log = tmp_path / "odd-numbers.log"
    log.write_text("\n".join(lines) + "\n")
    proc = run_cli("doctor", str(log), "--json", check=False)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    assert isinstance(json.loads(proc.stdout)["findings"], list)


def test_harmless_lines_exit_zero_and_say_why(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    log.write_text(
        "libibverbs: Warning: couldn't load driver 'libipathverbs-rdmav25.so':"
        " libipathverbs-rdmav25.so: cannot open shared object file: No such file or directory\n"
    )
    proc = run_cli("doctor", str(log))
    assert "harmless: probe.log:1:" in proc.stdout and "nccl/issues/1044" in proc.stdout
    facts = json.loads(run_cli("doctor", str(log), "--json").stdout)["facts"]
    assert facts["harmless_lines"][0]["source"].startswith("https://github.com/NVIDIA/nccl")


def test_weak_evidence_is_likely_with_a_command_to_confirm() -> None:
    path = DATA / "shapes" / "topo-pcie-through-cpu.txt"
    proc = run_cli("doctor", str(path), check=False)
    assert proc.returncode == 1
    assert "1. likely: GPU peer-to-peer" in proc.stdout
    assert "to confirm: `nvidia-smi topo -p2p r`" in proc.stdout
    (top, *_) = json.loads(run_cli("doctor", str(path), "--json", check=False).stdout)["findings"]
    assert top["confidence"] < 0.5 and "NCCL_P2P_DISABLE=1" in top["confirm"]


def test_a_device_is_not_read() -> None:
    assert_user_error(run_cli("doctor", "/dev/null", check=False), "/dev/null", "regular file")


def test_a_cluster_option_that_changes_nothing_is_said() -> None:
    """One node: no traffic reaches a switch uplink, so --routing changes nothing; said on
    stderr and in the JSON's notes, as every cluster command does."""
    log = str(SHARED / "doctor_cases" / "nccl-1338-nvls-invalid-argument-h800" / "log.txt")
    proc = run_cli("doctor", log, "--routing", "ecmp", "--json", check=False)
    said = "--routing ecmp changes nothing: no traffic of dgx-h100 crosses a switch uplink"
    assert json.loads(proc.stdout)["notes"][0].startswith(said)
    assert f"note: {said}" in proc.stderr
