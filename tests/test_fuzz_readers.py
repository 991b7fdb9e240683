"""Fuzz every reader of a user's file: mutated real inputs, raw bytes and the saved corpus of
inputs that once crashed (tests/data/fuzz/) either read or fail as one TierwiseError line.

The mutations are those of ``benchmarks/fuzz.py`` (which runs 10^5 of them); here hypothesis
draws a few dozen per format so ``make test`` stays short.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz_targets import CORPUS, TARGETS, mutate, read_case

_SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_format_has_seeds_that_read(name: str) -> None:
    target = TARGETS[name]
    assert target.seeds, f"no seed files for {name}"
    assert any(read_case(target, seed) == "ok" for seed in target.seeds)


@pytest.mark.parametrize("name", sorted(TARGETS))
@_SETTINGS
@given(seed=st.integers(0, 2**32 - 1), which=st.integers(0, 100))
def test_mutated_real_inputs_read_or_fail_as_one_line(
    name: str, seed: int, which: int, tmp_path: Path
) -> None:
    target = TARGETS[name]
    source = target.seeds[which % len(target.seeds)].read_bytes()
    path = tmp_path / f"case{target.suffix}"
    path.write_bytes(mutate(source, target.suffix, random.Random(seed)))
    assert read_case(target, path) != "traceback", path.read_bytes()[:2000]


@pytest.mark.parametrize("name", sorted(TARGETS))
@_SETTINGS
@given(data=st.binary(max_size=2000) | st.text(max_size=500).map(str.encode))
def test_arbitrary_bytes_read_or_fail_as_one_line(name: str, data: bytes, tmp_path: Path) -> None:
    target = TARGETS[name]
    path = tmp_path / f"case{target.suffix}"
    path.write_bytes(data)
    assert read_case(target, path) != "traceback", data[:2000]


def _corpus() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if p.name != "README.md")


def test_the_corpus_covers_every_format() -> None:
    names = {p.name.split("-")[0] for p in _corpus()}
    assert names == set(TARGETS)


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.name)
def test_corpus_of_bad_inputs_fails_as_one_line(path: Path) -> None:
    target = TARGETS[path.name.split("-")[0]]
    assert read_case(target, path) == "user_error"
