"""`tierwise schedule` end to end: JSON keys, fabric sensitivity, Slurm files, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.hardware.cluster import load_cluster
from tierwise.schedule.slurm import (
    check_matches,
    compress_hostlist,
    expand_hostlist,
    parse_topology,
    topology_conf,
)

SIM = (
    "schedule",
    "simulate",
    "--cluster",
    "pcie-h100",
    "--nodes",
    "64",
    "--synthetic",
    "150",
    "--seed",
    "2",
    "--policy",
    "naive",
)
HEADER = "id,arrival_s,duration_s,model,tp,pp,dp,compute_s\n"


def test_simulate_json_keys_and_comparison(tmp_path: Path) -> None:
    out = cli_json(
        "schedule",
        "simulate",
        "--cluster",
        "pcie-h100",
        "--nodes",
        "64",
        "--synthetic",
        "120",
        "--plot",
        str(tmp_path / "jct.png"),
    )
    assert [r["policy"] for r in out["results"]] == ["naive", "topo", "topo-frag"]
    for key in (
        "mean_jct_s",
        "p95_jct_s",
        "makespan_s",
        "utilization",
        "mean_slowdown",
        "mean_leaves_per_job",
        "fragmentation",
        "jct_vs_naive_pct",
    ):
        assert all(key in r for r in out["results"]), key
    assert (tmp_path / "jct.png").stat().st_size > 1000


def test_printed_slowdowns_follow_the_fabric() -> None:
    """Same trace, same policy: a 4:1 spine slows naive placements more than 1:1; a fabric
    with 8 NICs of 400G hides the DP all-reduce entirely."""
    flat = cli_json(*SIM, "--oversubscription", "1")
    over = cli_json(*SIM, "--oversubscription", "4")
    fat = cli_json(*SIM, "--oversubscription", "4", "--nic", "roce400", "--nics-per-node", "8")
    assert over["mean_slowdown"] > flat["mean_slowdown"] + 0.01, (flat, over)
    assert over["mean_jct_s"] > flat["mean_jct_s"]
    assert fat["mean_slowdown"] < over["mean_slowdown"]
    table = run_cli(*SIM, "--oversubscription", "4").stdout
    assert "slowdown" in table and f"{over['mean_slowdown']:.2f}" in table


def test_trace_roundtrip_and_place(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    run_cli("schedule", "synth", "20", "--cluster", "pcie-h100", "--nodes", "64", "-o", str(trace))
    a = cli_json(
        "schedule",
        "simulate",
        "--cluster",
        "pcie-h100",
        "--nodes",
        "64",
        "--trace",
        str(trace),
        "--policy",
        "topo",
    )
    assert a["jobs"] == 20 and a["policy"] == "topo"
    burst = tmp_path / "b.csv"
    burst.write_text(HEADER + "x,0,60,llama3-8b,1,1,16,0.5\ny,0,60,7B,8,1,2,0.5\n")
    alloc = tmp_path / "alloc.txt"
    alloc.write_text("x gpu[016-017]\ny gpu[001-002]\n")
    out = cli_json(
        "schedule",
        "place",
        "--cluster",
        "pcie-h100",
        "--nodes",
        "64",
        "--trace",
        str(burst),
        "--allocations",
        str(alloc),
    )
    x, y = out["jobs"]
    assert x["nodelist"] == "gpu[001-002]" and y["nodelist"] == "gpu[003-004]"
    assert x["given_leaves"] == 2 and x["given_slowdown"] > x["slowdown"] == pytest.approx(1.0)
    assert out["matches"] == 0


def test_topology_conf_roundtrip_two_and_three_levels(tmp_path: Path) -> None:
    c = load_cluster("pcie-h100", nodes=64)
    text = topology_conf(c)
    assert "SwitchName=leaf1 Nodes=gpu[001-016]" in text
    assert "SwitchName=spine Switches=leaf[1-4]" in text
    topo = parse_topology(text)
    assert topo.levels == 2 and topo.nodes_per_leaf() == [16] * 4
    check_matches(topo, c)
    cfg = tmp_path / "pod.yaml"
    cfg.write_text(
        "gpu: h100-sxm\ngpus_per_node: 8\nnodes: 16\nintra: nvlink4\n"
        "inter: {nic: ndr400, nics_per_node: 8}\n"
        "topology: {nodes_per_leaf: 2, leaves_per_pod: 4}\n"
    )
    out = run_cli("schedule", "slurm", "topology", "--cluster", str(cfg)).stdout
    assert "SwitchName=pod1 Switches=leaf[1-4]" in out
    assert "SwitchName=spine Switches=pod[1-2]" in out
    (tmp_path / "topology.conf").write_text(out.split("\n# slurm.conf")[0])
    parsed = cli_json("schedule", "slurm", "parse", str(tmp_path / "topology.conf"))
    assert parsed["levels"] == 3 and parsed["leaves"] == 8 and parsed["nodes"] == 16


def test_hostlists_and_hostfile() -> None:
    names = expand_hostlist("gpu[001-003,007],cpu1")
    assert names == ["gpu001", "gpu002", "gpu003", "gpu007", "cpu1"]
    assert compress_hostlist(names) == "cpu1,gpu[001-003,007]"
    out = run_cli(
        "schedule",
        "slurm",
        "hostfile",
        "--cluster",
        "pcie-h100",
        "--nodelist",
        "gpu[005,002]",
        "--gpus",
        "16",
        "--format",
        "rankfile",
    ).stdout.splitlines()
    assert out[0] == "rank 0=gpu002 slot=0" and out[15] == "rank 15=gpu005 slot=7"


def test_bad_input_is_one_line_with_line_number(tmp_path: Path) -> None:
    big = tmp_path / "big.csv"
    big.write_text(HEADER + "huge,0,10,llama3-8b,8,1,200,1\n")
    assert_user_error(
        run_cli("schedule", "simulate", "--cluster", "pcie-h100", "--trace", str(big), check=False),
        "huge",
        "needs 200 nodes",
        "16 usable",
    )
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "a,0,10,llama3-8b,8,1,1,1\n# comment\nb,zero,10,llama3-8b,8,1,1,1\n")
    assert_user_error(
        run_cli("schedule", "simulate", "--trace", str(bad), check=False),
        "bad.csv:4",
        "arrival_s='zero'",
    )
    short = tmp_path / "short.csv"
    short.write_text(HEADER + "a,0,10\n")
    assert_user_error(
        run_cli("schedule", "simulate", "--trace", str(short), check=False),
        "short.csv:2",
        "expected 8 fields",
    )
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=s1 Nodes=gpu[001-004]\n\nSwitchName=top Switches=s1,s9\n")
    assert_user_error(
        run_cli("schedule", "slurm", "parse", str(conf), check=False),
        "topology.conf:3",
        "unknown switch 's9'",
    )
    assert_user_error(
        run_cli("schedule", "simulate", "--synthetic", "5", "--policy", "best", check=False),
        "--policy",
        "naive, topo, topo-frag",
    )
    assert_user_error(
        run_cli("schedule", "simulate", "--synthetic", "5", "--down", "gpu999", check=False),
        "--down",
        "gpu999",
    )
