"""Cluster options that change nothing are said in every command's --json (its `notes`) as on
stderr, before the command's own notes; a collective's group says the ones idle for it."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from tests.conftest import cli_json, run_cli
from tierwise.cli.main import app

ONE_GB = ["-b", "1G", "-e", "1G"]
POD_NOTE = "--pod-oversubscription 3 changes nothing: dgx-h100 has one pod"
OVER_NOTE = "--oversubscription 2 changes nothing: all 4 node(s) of dgx-h100"


def _in_process(*args: str) -> Any:
    """`tierwise ARGS --json` run in this process (as a test or fuzzer does), stdout parsed."""
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_collective_json_has_the_cluster_note_and_stderr_keeps_it() -> None:
    args = ["collective", "-c", "dgx-h100", "--nodes", "1", "--pod-oversubscription", "3"]
    proc = run_cli(*args, *ONE_GB, "--json")
    assert json.loads(proc.stdout)["notes"] == [POD_NOTE]
    assert f"note: {POD_NOTE}" in proc.stderr
    human = run_cli(*args, *ONE_GB)
    assert f"note: {POD_NOTE}" in human.stderr and "note:" not in human.stdout
    assert cli_json("collective", "-c", "dgx-h100", *ONE_GB)["notes"] == []


def test_own_notes_come_after_the_cluster_notes() -> None:
    """plan's notes of its best plan and estimate's object both get the cluster's."""
    base = ["plan", "-m", "llama3-8b", "--nodes", "4", "--top", "1", "--fix", "vpp=1"]
    notes = cli_json(*base, "--delay-wgrad-compute", "--oversubscription", "2")["notes"]
    assert notes[0].startswith(OVER_NOTE)
    assert any(n.startswith("--delay-wgrad-compute changes nothing") for n in notes[1:])
    assert len(notes) == len(set(notes))
    out = cli_json("estimate", "-m", "llama3-8b", "--nodes", "4", "--oversubscription", "2")
    assert [n[: len(OVER_NOTE)] for n in out["notes"]] == [OVER_NOTE]
    assert isinstance(out["assumed"], list)  # estimate's own assumptions stay where they were


def test_sweep_and_show_merge_without_duplicates() -> None:
    notes = cli_json("sweep", "-m", "llama3-8b", "--pod-oversubscription", "3")["notes"]
    assert notes == [POD_NOTE]
    shown = cli_json("show", "cluster", "dgx-h100", "--pod-oversubscription", "3")["notes"]
    assert shown[0] == POD_NOTE and shown.count(POD_NOTE) == 1


def test_notes_of_one_invocation_do_not_leak_into_the_next() -> None:
    idle = ["collective", "-c", "dgx-h100", "--nodes", "1", "--routing", "ecmp", *ONE_GB]
    first = _in_process(*idle)["notes"]
    assert len(first) == 1 and first[0].startswith("--routing ecmp changes nothing")
    assert _in_process("collective", "-c", "dgx-h100", *ONE_GB)["notes"] == []
    assert _in_process(*idle)["notes"] == first  # said again, once
    assert "notes" not in _in_process("catalog", "gpus")  # no cluster options: untouched


def test_collective_group_inside_one_node_says_the_fabric_options_change_nothing() -> None:
    """The cluster (4 nodes) uses its NICs; an 8-rank group does not."""
    args = ["collective", "-c", "dgx-h100", "--gpus", "8", "--nic", "roce400", *ONE_GB]
    notes = cli_json(*args)["notes"]
    assert notes == [
        "--nic roce400 changes nothing for this group: its 8 ranks sit in one NVLink domain, "
        "so no traffic uses a NIC"
    ]
    assert f"note: {notes[0]}" in run_cli(*args).stderr
    assert cli_json("collective", "-c", "dgx-h100", "--nic", "roce400", *ONE_GB)["notes"] == []
    leafed = cli_json(
        "collective", "-c", "dgx-h100", "--gpus", "8", "--nodes-per-leaf", "2", *ONE_GB
    )
    assert leafed["notes"] == [
        "--nodes-per-leaf 2 changes nothing for this group: its 8 ranks sit in one NVLink "
        "domain, so no traffic uses a NIC"
    ]
    # a group under one leaf is there because of the leaf size: the option is not idle
    under_leaf = ("collective", "-c", "dgx-h100", "--gpus", "16", "--nodes-per-leaf", "2")
    assert cli_json(*under_leaf, *ONE_GB)["notes"] == []


def test_collective_group_notes_follow_the_cluster_notes_and_do_not_repeat_them() -> None:
    args = ["collective", "-c", "dgx-h100", "--gpus", "8", "--nic", "roce400"]
    notes = cli_json(*args, "--routing", "ecmp", *ONE_GB)["notes"]
    assert notes[0].startswith("--routing ecmp changes nothing: no traffic of dgx-h100")
    assert [n.split(" changes")[0] for n in notes] == ["--routing ecmp", "--nic roce400"]


def test_collective_group_under_one_leaf_or_pod() -> None:
    big = ["collective", "-c", "dgx-h100", "--nodes", "64", "--nodes-per-leaf", "8", *ONE_GB]
    fabric = ["--oversubscription", "2", "--routing", "ecmp", "--leaves-per-pod", "2"]
    leaf = cli_json(*big, "--gpus", "64", *fabric)["notes"]
    assert [n.split(" changes")[0] for n in leaf] == [
        "--oversubscription 2",
        "--routing ecmp",
        "--leaves-per-pod 2",
    ]
    assert all("its 64 ranks sit under one leaf switch" in n for n in leaf)
    pod = cli_json(*big, "--gpus", "128", *fabric)["notes"]  # two leaves, one pod
    assert pod == [
        "--leaves-per-pod 2 changes nothing for this group: its 128 ranks sit in one pod, so "
        "no traffic crosses between pods"
    ]
    assert cli_json(*big, "--gpus", "256", *fabric)["notes"] == []  # two pods: all matter


def test_leaf_size_of_a_cluster_inside_one_nvlink_domain_changes_nothing() -> None:
    args = ("estimate", "-c", "dgx-h100", "--nodes", "1", "-m", "llama3-8b")
    assert cli_json(*args, "--nodes-per-leaf", "2")["notes"] == [
        "--nodes-per-leaf 2 changes nothing: all 8 GPUs share one NVLink domain, so no traffic "
        "uses a NIC"
    ]


def test_uplink_options_under_one_leaf_matter_where_rails_meet_at_the_spine() -> None:
    """A rail-optimized fabric without NVLink sends rail-changing bytes up through the spine
    under one leaf too: oversubscription slows an alltoall there (4:1 about 3.5x), so neither
    it nor routing is said to change nothing (they were: 'sit under one leaf switch')."""
    args = ["collective", "--intra", "pcie5", "--nodes", "2", "--op", "alltoall", *ONE_GB]
    fabric = ["--oversubscription", "4", "--routing", "ecmp", "--qps-per-connection", "2"]
    slow = cli_json(*args, *fabric)
    assert slow["notes"] == []
    fast = cli_json(*args)
    assert slow["rows"][0]["time_us"] > 3 * fast["rows"][0]["time_us"]
    nvlink = cli_json("collective", "--nodes", "2", "--op", "alltoall", *ONE_GB, *fabric)
    assert [n.split(" changes")[0] for n in nvlink["notes"]] == [
        "--oversubscription 4",
        "--routing ecmp",
        "--qps-per-connection 2",
    ]
