"""`tierwise schedule` end to end: JSON keys, fabric sensitivity, Slurm files, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.hardware.cluster import load_cluster
from tierwise.hardware.ingest.slurm_topology import emit_topology_conf, parse_topology_conf
from tierwise.schedule.slurm import node_indices, node_names

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


def test_jct_vs_naive_is_positive_when_faster() -> None:
    """The JCT comparison's sign is what the table header says: > 0 is faster than naive."""
    args = ["schedule", "simulate", "--cluster", "pcie-h100", "--nodes", "128"]
    args += ["--oversubscription", "2", "--synthetic", "300", "--seed", "3"]
    rows = {r["policy"]: r for r in cli_json(*args, "--policy", "naive,topo")["results"]}
    assert rows["topo"]["mean_jct_s"] < rows["naive"]["mean_jct_s"]
    assert rows["topo"]["jct_vs_naive_pct"] > 0 and rows["naive"]["jct_vs_naive_pct"] == 0
    assert "(>0 faster)" in run_cli(*args, "--policy", "naive,topo").stdout.replace("\n", "")


def test_printed_slowdowns_follow_the_fabric() -> None:
    """Same trace, same policy: a 4:1 spine slows naive placements more than 1:1; a fabric
    with 8 NICs of 400G hides the DP all-reduce entirely."""
    flat = cli_json(*SIM, "--oversubscription", "1")
    over = cli_json(*SIM, "--oversubscription", "4")
    fat = cli_json(*SIM, "--oversubscription", "4", "--nic", "roce400", "--nics-per-node", "8")
    assert over["mean_slowdown"] > flat["mean_slowdown"] + 0.01, (flat, over)
    assert over["mean_jct_s"] > flat["mean_jct_s"]
    assert fat["mean_slowdown"] < over["mean_slowdown"]
    dp_only = cli_json(*SIM, "--oversubscription", "4", "--slowdown", "dp-allreduce")
    assert (over["slowdown_model"], dp_only["slowdown_model"]) == ("perf", "dp-allreduce")
    assert dp_only["mean_slowdown"] != over["mean_slowdown"]
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
    text = emit_topology_conf(c, node_names(c, range(64)))
    assert "SwitchName=leaf1 Nodes=gpu[001-016]" in text
    assert "SwitchName=spine Switches=leaf[1-4]" in text
    tree = parse_topology_conf(text)
    assert tree.levels == 2 and tree.leaf_sizes == (16,) * 4
    cfg = tmp_path / "pod.yaml"
    cfg.write_text(
        "gpu: h100-sxm\ngpus_per_node: 8\nnodes: 16\nintra: nvlink4\n"
        "inter: {nic: ndr400, nics_per_node: 8}\n"
        "topology: {nodes_per_leaf: 2, leaves_per_pod: 4}\n"
    )
    out = run_cli("schedule", "slurm", "topology", "--cluster", str(cfg)).stdout
    conf, nodes = out.split("# slurm.conf node section\n")
    assert "SwitchName=pod1 Switches=leaf[1-4]" in conf
    assert "SwitchName=core Switches=pod[1-2]" in conf
    assert "NodeName=gpu[001-016] Gres=gpu:h100_sxm:8 State=UNKNOWN" in nodes
    assert "PartitionName=gpus Nodes=ALL" in nodes
    (tmp_path / "topology.conf").write_text(conf)
    parsed = cli_json("schedule", "slurm", "parse", str(tmp_path / "topology.conf"))
    assert parsed["levels"] == 3 and parsed["leaves"] == 8 and parsed["nodes"] == 16
    emulated = run_cli(
        "schedule",
        "slurm",
        "topology",
        "--cluster",
        str(cfg),
        "--no-gres",
        "--cpus",
        "2",
        "--node-addr-base",
        "127.0.1.",
        "--port-base",
        "17000",
    ).stdout
    assert "NodeName=gpu003 NodeAddr=127.0.1.3 Port=17003 CPUs=2 State=UNKNOWN" in emulated
    assert "Gres" not in emulated


def test_hostlists_and_hostfile() -> None:
    c = load_cluster("pcie-h100")
    assert node_indices(c, "gpu[001-003,007]") == [0, 1, 2, 6]
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
    bad_traces = {
        "bad.csv": (
            "a,0,10,llama3-8b,8,1,1,1\n# comment\nb,zero,10,llama3-8b,8,1,1,1\n",
            ["bad.csv:4", "arrival_s='zero'"],
        ),
        "layout.csv": ("a,0,10,llama3-8b,3,1,1,1\n", ["layout.csv:2", "tp 3 must divide heads"]),
        "short.csv": ("a,0,10\n", ["short.csv:2", "expected 8 fields"]),
    }
    for name, (body, needles) in bad_traces.items():
        (tmp_path / name).write_text(HEADER + body)
        proc = run_cli("schedule", "simulate", "--trace", str(tmp_path / name), check=False)
        assert_user_error(proc, *needles)
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=s1 Nodes=gpu[001-004]\n\nSwitchName=top Switches=s1,s9\n")
    assert_user_error(
        run_cli("schedule", "slurm", "parse", str(conf), check=False),
        "topology.conf:3",
        "unknown switch 's9'",
    )
    assert_user_error(
        run_cli("schedule", "simulate", "--synthetic", "5", "--slowdown", "ai", check=False),
        "--slowdown",
        "perf, dp-allreduce",
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
    assert_user_error(
        run_cli("schedule", "simulate", "--synthetic", "5", "--down", "gpu[001-", check=False),
        "--down",
        "hostlist 'gpu[001-'",
    )


def test_loading_the_command_again_does_not_grow_it() -> None:
    """Each in-process main() loads the command: registering the sub-commands each time made
    every later schedule run slower (2 s to 4 s of CPU over a fuzz campaign)."""
    from tierwise.cli.commands import schedule
    from tierwise.cli.main import load_command

    for _ in range(3):
        group = load_command("schedule", "tierwise.cli.commands.schedule")
    assert sorted(group.commands) == ["place", "simulate", "slurm", "synth"]
    assert len(schedule.app.registered_commands) == 3
    assert len(schedule.slurm_app.registered_commands) == 3


def test_schedule_files_say_the_fabric_options_they_do_not_read(tmp_path: Path) -> None:
    """A synthetic trace depends on the node count and size only, a hostfile likewise,
    topology.conf on the switch tree too: the others are said to change nothing (they were
    taken and ignored), each once; the idle ones on the cluster keep their own reason."""
    fabric = ["--nic", "roce400", "--routing", "ecmp", "--nodes-per-leaf", "4"]
    synth = cli_json("schedule", "synth", "8", "-o", str(tmp_path / "t.csv"), "--nodes", "32",
                     *fabric)  # fmt: skip
    assert [n.split(" changes")[0] for n in synth["notes"]] == [
        "--nic roce400",
        "--nodes-per-leaf 4",
        "--routing ecmp",
    ]
    assert all(n.endswith("a synthetic trace reads only --nodes, --gpus-per-node")
               for n in synth["notes"])  # fmt: skip
    topo = cli_json("schedule", "slurm", "topology", "--nodes", "8", "--pod-oversubscription",
                    "2", *fabric)  # fmt: skip
    assert [n.split(" changes")[0] for n in topo["notes"]] == [
        "--pod-oversubscription 2",
        "--nic roce400",
        "--routing ecmp",
    ]
    assert topo["notes"][0].endswith("dgx-h100 has one pod")
    hosts = cli_json("schedule", "slurm", "hostfile", "--nodes", "8", "--nodelist",
                     "gpu[001-002]", "--gpus", "16", *fabric)  # fmt: skip
    assert len(hosts["notes"]) == 3 and "a hostfile reads only" in hosts["notes"][1]
    quiet = cli_json("schedule", "synth", "8", "-o", str(tmp_path / "u.csv"), "--nodes", "32")
    assert quiet["notes"] == []
