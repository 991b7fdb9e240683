"""Shared test helpers: run the CLI as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CALIBRATION = SHARED / "calibration"


def run_cli(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `tierwise ARGS...` in a subprocess, output piped as a user's `| less` is (no
    COLUMNS: pytest sets it to 80); with check, assert exit code 0."""
    proc = subprocess.run(
        [sys.executable, "-c", "from tierwise.cli.main import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={k: v for k, v in os.environ.items() if k not in {"COLUMNS", "LINES"}},
    )
    if check:
        assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def cli_json(*args: str) -> Any:
    """Run `tierwise ARGS... --json` and parse stdout."""
    return json.loads(run_cli(*args, "--json").stdout)


def assert_user_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit code 2, one line on stderr containing each needle, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.fixture
def calibration_dir() -> Path:
    """../shared/calibration, skipping when the checkout has no shared/ beside it."""
    if not CALIBRATION.exists():
        pytest.skip("../shared/calibration is not present")
    return CALIBRATION
