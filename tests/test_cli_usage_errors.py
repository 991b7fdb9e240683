"""Usage errors (bad value, unknown flag, missing argument or subcommand) take tierwise's one
error path: one stderr line naming the flag, the value, what is allowed and the command's
--help; with --json one {"error", "exit_code"} object on stdout (issue 31)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import assert_user_error, run_cli


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["estimate", "--tp", "abc"], ["--tp 'abc'", "allowed: a valid integer", "--help"]),
        (["collective", "--bogus"], ["no such option: --bogus", "tierwise collective --help"]),
        (["estimate", "--tp"], ["'--tp' requires an argument", "tierwise estimate --help"]),
        (["show", "model"], ["MODEL is required", "tierwise show model --help"]),
        (["nosuch"], ["no such command 'nosuch'", "allowed: bench,", "tierwise --help"]),
        (["schedule", "place", "--trace"], ["'--trace' requires", "schedule place --help"]),
    ],
)
def test_usage_error_is_one_line_and_json(args: list[str], needles: list[str]) -> None:
    proc = run_cli(*args, check=False)
    assert_user_error(proc, *needles)
    assert "Usage:" not in proc.stderr and "╭" not in proc.stderr
    as_json = run_cli(*args, "--json", check=False)
    assert as_json.returncode == 2
    out = json.loads(as_json.stdout)
    assert out == {"error": as_json.stderr.strip(), "exit_code": 2}


@pytest.mark.parametrize(
    ("group", "commands"),
    [
        (["schedule"], "simulate, synth, place, slurm"),
        (["schedule", "slurm"], "topology, parse, hostfile"),
        (["ingest"], "nvidia-smi, nccl-xml, slurm-topology"),
    ],
)
def test_group_without_subcommand_prints_help_and_one_line(group: list[str], commands: str) -> None:
    proc = run_cli(*group, check=False)
    path = " ".join(["tierwise", *group])
    assert_user_error(proc, f"{path} needs a command", f"allowed: {commands}", f"{path} --help")
    assert "Usage:" in proc.stdout and "Commands" in proc.stdout


def test_help_and_version_still_exit_zero() -> None:
    assert run_cli("--version").stdout.startswith("tierwise ")
    assert "Usage:" in run_cli("schedule", "--help").stdout
