"""Every command of the typer app (sub-apps too) prints exactly one JSON object with --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tierwise.cli.main import click_app

DATA = REPO / "tests" / "data"
TRACE = "id,arrival_s,duration_s,model,tp,pp,dp,compute_s\nj1,0,3600,llama3-8b,8,1,2,1.0\n"
# Small valid inputs per command; {tmp} is the test's tmp_path. Commands that need root (lab)
# get an input that fails fast: they must then print a JSON error object.
ARGS: dict[str, list[str]] = {
    "bench": ["--nproc", "1", "-b", "8", "-e", "64", "-w", "0", "-n", "1"],
    "calibrate": [str(DATA / "verify" / "h100_2x8_ndr_all_reduce.txt"), "--nodes", "2"],
    "catalog": ["gpus"],
    "collective": ["-e", "1K", "--explain"],
    "demo": ["--out", "{tmp}/demo.html"],
    "doctor": [str(DATA / "doctor" / "nccl-1412-no-gdrdma.log")],
    "estimate": ["--tp", "8", "--pp", "4", "--gbs", "256"],
    "ingest nvidia-smi": [str(DATA / "ingest" / "nvidia_smi_dgx_h100.txt")],
    "ingest nccl-xml": [str(DATA / "ingest" / "nccl_topo_dgx_h100.xml")],
    "ingest slurm-topology": [str(DATA / "ingest" / "slurm_topology_2level.conf")],
    "ingest training-log": [str(DATA / "trainlog" / "megatron_2024_llama8b.log")],
    "lab up": ["--nodes", "0"],
    "lab status": [],
    "lab run": ["--nodes", "0"],
    "lab ecmp": ["--nodes", "3"],
    "parse": [str(DATA / "nccl" / "h100_2x8_all_reduce_mpi.txt")],
    "plan": ["--model", "llama3-8b", "--nodes", "2", "--top", "1"],
    "report": ["--model", "llama3-8b", "--nodes", "2", "--gbs", "32", "--out", "{tmp}/r.html"],
    "schedule simulate": ["--synthetic", "10", "--nodes", "16"],
    "schema": ["cluster"],
    "schedule synth": ["10", "--out", "{tmp}/synth.csv"],
    "schedule place": ["--trace", "{tmp}/trace.csv", "--nodes", "4"],
    "schedule slurm topology": ["--nodes", "4"],
    "schedule slurm parse": [str(DATA / "ingest" / "slurm_topology_2level.conf")],
    "schedule slurm hostfile": ["--nodelist", "gpu[001-002]", "--gpus", "16"],
    "show cluster": ["--cluster", "dgx-h100"],
    "show model": ["llama3-8b"],
    "sweep": ["--model", "llama3-8b", "--nodes", "2", "--vary", "nics_per_node=4,8"],
    "verify": [
        str(DATA / "verify" / "h100_2x8_ndr_all_reduce.txt"),
        "--contract",
        str(REPO / "examples" / "contract-ib-multinode.yaml"),
        "--nodes",
        "2",
    ],
}
SKIPPED = {
    "lab down": "removes every lab on the host, other runs' too; its JSON is in test_lab_fabric",
}
ERRORS = {"lab up", "lab run", "lab ecmp"}  # fail fast by design (above)


def leaf_commands(group: object = None, path: tuple[str, ...] = ()) -> list[str]:
    """Every runnable command as 'group sub name', walking sub-apps recursively."""
    group = click_app() if group is None else group
    if not hasattr(group, "commands"):
        return [" ".join(path)]
    return [
        leaf
        for name in group.list_commands(None)  # type: ignore[attr-defined]
        for leaf in leaf_commands(group.get_command(None, name), (*path, name))  # type: ignore[attr-defined]
    ]


def test_every_command_is_walked() -> None:
    assert sorted(leaf_commands()) == sorted([*ARGS, *SKIPPED])


@pytest.mark.parametrize("command", sorted(ARGS))
def test_json_is_one_object(command: str, tmp_path: Path) -> None:
    (tmp_path / "trace.csv").write_text(TRACE)
    args = [a.format(tmp=tmp_path) for a in ARGS[command]]
    proc = run_cli(*command.split(), *args, "--json", check=False)
    out = json.loads(proc.stdout)  # exactly one JSON document: extra output fails here
    assert isinstance(out, dict), proc.stdout[:200]
    if command in ERRORS:
        assert proc.returncode == 2 and out["exit_code"] == 2 and out["error"], proc.stdout
        assert len(proc.stderr.strip().splitlines()) == 1
    else:
        assert proc.returncode in (0, 1), (proc.returncode, proc.stderr)
        assert "error" not in out, out
