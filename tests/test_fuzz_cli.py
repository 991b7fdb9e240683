"""Fuzz every command's arguments (tests/fuzz_cli.py) a few dozen times, bounded: no traceback,
no exit 3, no hang, exit-2 messages of one line, --json errors as one object. The same cases
run 10^5-fold in ``benchmarks/fuzz.py``."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.fuzz_cli import COMMANDS, LEFT_OUT, mutate_args, problems, run_in_process, scratch
from tests.fuzz_targets import _alias_bomb, _big_input


@pytest.fixture(scope="module")
def tmp() -> Path:
    return scratch()


@pytest.mark.parametrize("seed", range(24))
def test_mutated_command_lines_fail_cleanly(seed: int, tmp: Path) -> None:
    rng = random.Random(seed)
    _, args = rng.choices(COMMANDS, [0 if w < 0.5 else w for w, _ in COMMANDS])[0]
    run = run_in_process(mutate_args(args, rng, tmp), limit_s=60, cwd=tmp)
    assert problems(run, slow_s=60) == [], (run.args, run.code, run.stderr, run.stdout[:500])


def test_every_command_is_fuzzed() -> None:
    from tierwise.cli.main import command_modules

    fuzzed = {args[0] for _, args in COMMANDS}
    assert fuzzed | set(LEFT_OUT) == set(command_modules())


@pytest.mark.parametrize(
    "args",
    [
        ["estimate", "--tp", "abc", "--json"],
        ["schedule", "--json"],
        ["parse", "/dev/zero", "--json"],
        ["collective", "-e", "9" * 5000, "--json"],
        ["schedule", "simulate", "--synthetic", "20", "--load", "1e-320", "--json"],
        ["estimate", "--pp", "2", "--pp-layout", "t*99999999999", "--json"],
    ],
)
def test_known_bad_command_lines_are_one_line_and_one_object(args: list[str]) -> None:
    run = run_in_process(args)
    assert run.code == 2 and problems(run) == [], (run.stderr, run.stdout)


@pytest.mark.parametrize("kind", ["alias", "deep", "runon"])
def test_big_spec_inputs_are_refused_in_time(kind: str, tmp: Path) -> None:
    data = {
        "alias": _alias_bomb(9),
        "deep": _big_input(".yaml", _Fixed(1, 5000)),
        "runon": b"x" * (8 << 20),
    }[kind]
    path = tmp / f"{kind}.yaml"
    path.write_bytes(data)
    run = run_in_process(["show", "cluster", "-c", str(path), "--json"], limit_s=60)
    assert run.code == 2 and problems(run, slow_s=30) == [], run.stderr


class _Fixed(random.Random):
    """A Random whose randrange and choice give fixed answers (one `_big_input` kind)."""

    def __init__(self, kind: int, choice: int) -> None:
        super().__init__(0)
        self.kind, self.value = kind, choice

    def randrange(self, *args: int, **kwargs: int) -> int:  # type: ignore[override]
        return self.kind

    def choice(self, seq: object) -> int:  # type: ignore[override]
        return self.value
