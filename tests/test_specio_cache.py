"""The JSON copy of shipped YAML data: same data as the YAML, used when current, rebuilt when
the YAML changes, never written where Python writes no bytecode, skipped where JSON cannot
hold the data."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tierwise import specio

PACKAGE = "tw_cache_probe"


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An importable package holding data/specs.yaml; bytecode (and the cache) writable."""
    root = tmp_path / PACKAGE
    (root / "data").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "data" / "specs.yaml").write_text("a: 1\nb: [1.5, true, null, x]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    yield root
    sys.modules.pop(PACKAGE, None)


def _cache(root: Path) -> Path:
    return root / "data" / "__pycache__" / "specs.yaml.json"


def test_cache_is_written_and_gives_the_same_data(package: Path) -> None:
    first = specio.data_yaml(PACKAGE, "data/specs.yaml")
    assert first == {"a": 1, "b": [1.5, True, None, "x"]}
    assert _cache(package).exists()
    assert specio.data_yaml(PACKAGE, "data/specs.yaml") == first


def test_a_current_cache_is_read_not_the_yaml(package: Path) -> None:
    specio.data_yaml(PACKAGE, "data/specs.yaml")
    text = _cache(package).read_text().replace('"a": 1', '"a": 2')
    _cache(package).write_text(text)  # same key: the copy is trusted
    assert specio.data_yaml(PACKAGE, "data/specs.yaml")["a"] == 2


def test_an_edited_yaml_rebuilds_the_cache(package: Path) -> None:
    specio.data_yaml(PACKAGE, "data/specs.yaml")
    source = package / "data" / "specs.yaml"
    source.write_text("a: 10\n")
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert specio.data_yaml(PACKAGE, "data/specs.yaml") == {"a": 10}
    assert '"a": 10' in _cache(package).read_text()


def test_a_corrupt_cache_falls_back_to_the_yaml(package: Path) -> None:
    specio.data_yaml(PACKAGE, "data/specs.yaml")
    _cache(package).write_text("{not json")
    assert specio.data_yaml(PACKAGE, "data/specs.yaml")["a"] == 1


def test_no_cache_without_bytecode_writing(package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert specio.data_yaml(PACKAGE, "data/specs.yaml")["a"] == 1
    assert not _cache(package).exists()


def test_data_json_cannot_hold_is_not_cached(package: Path) -> None:
    (package / "data" / "specs.yaml").write_text("8: eight\n")  # an int key
    assert specio.data_yaml(PACKAGE, "data/specs.yaml") == {8: "eight"}
    assert not _cache(package).exists()


def test_shipped_data_loads_without_pyyaml_once_cached() -> None:
    code = (
        "import sys\n"
        "from tierwise.hardware.cluster import load_cluster\n"
        "from tierwise.workload.load import load_model\n"
        "load_cluster('dgx-h100', nodes=2); load_model('llama3-8b')\n"
        "print('yaml' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    run = [sys.executable, "-c", code]
    subprocess.run(run, env=env, check=True, capture_output=True)  # writes the copies
    out = subprocess.run(run, env=env, check=True, capture_output=True, text=True).stdout
    assert out.strip() == "False"
