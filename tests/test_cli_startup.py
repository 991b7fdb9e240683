"""The CLI's start-up handling of the garbage collector: off while the command loads, back on
(with start-up's objects frozen) before it runs; a collector the caller turned off stays off."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tierwise.cli import main as cli


@pytest.fixture
def restore_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    cli._gc_paused = False
    (gc.enable if enabled else gc.disable)()


def test_resume_turns_a_paused_collector_back_on(restore_gc: None) -> None:
    gc.disable()
    cli._gc_paused = True
    cli.resume_gc()
    assert gc.isenabled() and not cli._gc_paused
    assert gc.get_freeze_count() > 0


def test_resume_leaves_a_collector_the_caller_turned_off(restore_gc: None) -> None:
    gc.disable()
    cli.resume_gc()
    assert not gc.isenabled()


def test_a_command_runs_with_the_collector_on() -> None:
    code = (
        "import gc, sys\n"
        "from tierwise.cli import main as m\n"
        "from tierwise.cli.commands import estimate\n"
        "seen = []\n"
        "run = estimate.estimate\n"
        "estimate.estimate = lambda *a, **k: seen.append(gc.isenabled()) or run(*a, **k)\n"
        "sys.argv = ['tierwise', 'estimate', '-m', 'llama3-8b', '--nodes', '1', '--json']\n"
        "try:\n    m.main()\nexcept SystemExit:\n    pass\n"
        "print(seen, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stderr.strip().splitlines()[-1] == "[True]"
