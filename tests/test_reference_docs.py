"""The input formats are documented in the repository, from the models, and round-trip."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, cli_json, run_cli
from tierwise.cli.spec_fields import FIELD_NOTES, TRACE_COLUMNS
from tierwise.cli.specs import FORMATS, PAGES, json_schema
from tierwise.hardware.cluster import load_cluster, presets
from tierwise.schedule.jobs import OPTIONAL, REQUIRED, read_trace
from tierwise.verify.contract import load_contract
from tierwise.workload.load import load_model


def test_checked_in_pages_are_up_to_date() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.stem for p in (REPO / "docs" / "reference").glob("*.md")) == sorted(PAGES)


def _objects(kind: str) -> dict[str, dict]:
    schema = json_schema(kind)
    return {schema["title"]: schema, **schema.get("$defs", {})}


@pytest.mark.parametrize("kind", list(FORMATS))
def test_every_field_is_described(kind: str) -> None:
    for title, node in _objects(kind).items():
        for field, prop in node["properties"].items():
            assert prop.get("description"), f"{title}.{field} has no description"


def test_field_notes_name_real_fields() -> None:
    fields = {
        f"{title}.{field}"
        for kind in FORMATS
        for title, node in _objects(kind).items()
        for field in node["properties"]
    }
    assert set(FIELD_NOTES) <= fields, set(FIELD_NOTES) - fields
    assert list(TRACE_COLUMNS) == [*REQUIRED, *OPTIONAL]


def test_examples_load() -> None:
    examples = REPO / "examples"
    assert load_cluster(examples / "cluster.yaml").topology.oversubscription == 2.0
    assert load_model(str(examples / "model.yaml")).kv_heads == 8
    assert load_contract(examples / "contract.yaml").checks
    assert len(read_trace(examples / "jobs.csv")) == 3


@pytest.mark.parametrize("kind", list(FORMATS))
def test_schema_command_prints_the_schema(kind: str) -> None:
    out = cli_json("schema", kind)
    assert out == json.loads(json.dumps(json_schema(kind)))
    assert out["$schema"].startswith("https://json-schema.org/") and out["type"] == "object"


def test_cluster_schema_takes_catalog_keys() -> None:
    gpu = json_schema("cluster")["properties"]["gpu"]
    assert "h100-sxm" in gpu["anyOf"][0]["enum"] and gpu["anyOf"][1] == {"$ref": "#/$defs/GPU"}


@pytest.mark.parametrize("preset", ["dgx-h100", "gb200-nvl72", "pcie-h100"])
def test_show_cluster_json_loads_back(preset: str, tmp_path: Path) -> None:
    shown = cli_json("show", "cluster", preset, "--nodes", "4" if preset != "gb200-nvl72" else "18")
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(shown))
    assert cli_json("show", "cluster", str(path)) == shown
    spec = tmp_path / "spec.yaml"  # the spec alone is a cluster YAML too
    spec.write_text(json.dumps(shown["spec"]))
    assert cli_json("show", "cluster", str(spec)) == shown
    assert preset in presets()


def test_readme_points_to_the_reference_pages() -> None:
    readme = (REPO / "README.md").read_text()
    for page in PAGES:
        assert f"docs/reference/{page}.md" in readme
    assert run_cli("schema", "model").returncode == 0
