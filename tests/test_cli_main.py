"""The CLI shell: exit codes, one-line errors, lazy start, literal and uncut output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tierwise.cli import output
from tierwise.cli.main import command_modules

HEAVY = ("numpy", "networkx", "pydantic", "yaml", "matplotlib", "torch")
CRASH = (
    "import tierwise.cli.main as m\n"
    "def boom(**kwargs):\n    raise ValueError('bad\\nstate')\n"
    "m.app = boom\nm.main()\n"
)


def _python(
    code: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def _model(folder: Path, name: str) -> Path:
    path = folder / "model.yaml"
    path.write_text(
        f"name: '{name}'\nlayers: 2\nhidden: 256\nheads: 4\nffn_hidden: 1024\nvocab: 1000\n"
    )
    return path


def test_internal_error_is_one_line_exit_3() -> None:
    proc = _python(CRASH, "--json")
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("internal error: ValueError: bad state")
    assert "TIERWISE_DEBUG=1" in lines[0]
    assert json.loads(proc.stdout) == {"error": lines[0], "exit_code": 3}


def test_debug_env_shows_the_traceback() -> None:
    proc = _python(CRASH, env={"TIERWISE_DEBUG": "1"})
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "ValueError" in proc.stderr


def test_user_error_under_json_is_an_error_object() -> None:
    proc = run_cli("collective", "--gpus", "0", "--json", check=False)
    assert proc.returncode == 2
    assert json.loads(proc.stdout) == {"error": proc.stderr.strip(), "exit_code": 2}
    assert "--gpus: 0" in proc.stderr


def test_usage_errors_stay_exit_2() -> None:
    assert run_cli("no-such-command", check=False).returncode == 2
    assert run_cli("estimate", "--tp", "x", check=False).returncode == 2


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_start_imports_nothing_heavy(args: list[str]) -> None:
    code = (
        "import sys\nfrom tierwise.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
    )
    proc = _python(code, *args)
    assert proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr


def test_bench_help_imports_no_numpy() -> None:
    """`bench` reads nccl-tests' size rule (`collectives.sizes`), not the collective model."""
    code = (
        "import sys\nfrom tierwise.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('numpy' in sys.modules, file=sys.stderr)\n"
    )
    proc = _python(code, "bench", "--help")
    assert proc.stderr.strip().splitlines()[-1] == "False", proc.stderr


def test_help_lists_every_command_and_the_exit_codes() -> None:
    text = run_cli("--help", timeout=60).stdout
    for name in command_modules():
        assert f" {name} " in text, name
    assert "Exit codes" in text and "TIERWISE_DEBUG" in text


def test_markup_in_data_prints_literally(tmp_path: Path) -> None:
    model = _model(tmp_path, "[/]x[bold red]")
    assert "[/]x[bold red]" in run_cli("show", "model", str(model)).stdout


def test_long_digit_string_prints_fast(capsys: pytest.CaptureFixture[str]) -> None:
    digits = "7" * 20_000
    start = time.perf_counter()
    output.console.print(f"value {digits}")
    output.console.print(output.table("t", ["v"], [[digits]]))
    assert time.perf_counter() - start < 5  # rich's highlighter took 26 s on this
    assert digits in capsys.readouterr().out.replace("\n", "")


def test_json_has_no_inf_or_nan(capsys: pytest.CaptureFixture[str]) -> None:
    output.print_json({"a": float("inf"), "b": [1.5, float("nan")], "c": (-float("inf"),)})
    assert json.loads(capsys.readouterr().out) == {"a": None, "b": [1.5, None], "c": [None]}


def test_piped_output_is_not_cut_and_honours_columns(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    model = _model(tmp_path, "m" * 150)
    args = ["estimate", "--model", str(model), "--nodes", "1", "--gbs", "8"]
    code = "from tierwise.cli.main import main; main()"
    piped = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=60
    ).stdout
    head = piped.splitlines()[0]
    assert head.startswith("m" * 150) and "grads=" in head  # one line, not cut at 140
    narrow = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "60"},
        timeout=60,
    ).stdout
    assert max(len(line) for line in narrow.splitlines()) <= 60


def test_error_lines_are_cut() -> None:
    from tierwise.cli.main import MESSAGE_LIMIT, one_line

    assert len(one_line(ValueError("9" * 20_000))) == MESSAGE_LIMIT
    assert one_line(ValueError("a\n  b")) == "a b"
