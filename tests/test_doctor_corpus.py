"""`tierwise doctor`'s corpus: every excerpt of the project's test data (tests/data/doctor,
expected categories in corpus.yaml) and every real thread of ../shared/doctor_cases
(meta.json's confirmed cause), one parametrised test: the top finding names the expected
category, and the logs of no fault (``other``) give no finding. A rule added for one thread
must not break another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import SHARED
from tierwise.hardware.cluster import load_cluster
from tierwise.verify.doctor import diagnose

DATA = Path(__file__).parent / "data" / "doctor"
CASES = SHARED / "doctor_cases"
CLUSTER = load_cluster("dgx-h100")


def _corpus() -> list[tuple[str, Path, str, str | None]]:
    """(id, log, expected category, expected rule id or None)."""
    own = yaml.safe_load((DATA / "corpus.yaml").read_text())
    rows = [(name, DATA / name, e["category"], e.get("rule")) for name, e in own.items()]
    for meta in sorted(CASES.glob("*/meta.json")) if CASES.exists() else []:
        category = json.loads(meta.read_text())["diagnosis_category"]
        rows.append((f"shared/{meta.parent.name}", meta.parent / "log.txt", category, None))
    return rows


CORPUS = _corpus()


def test_the_corpus_covers_every_file_and_category() -> None:
    named = {path for _, path, _, _ in CORPUS}
    on_disk = {p for p in DATA.rglob("*") if p.suffix in (".log", ".txt")}
    assert on_disk <= named, sorted(str(p) for p in on_disk - named)
    assert len({category for _, _, category, _ in CORPUS}) >= 12


@pytest.mark.parametrize(
    ("path", "category", "rule"),
    [pytest.param(path, category, rule, id=name) for name, path, category, rule in CORPUS],
)
def test_top_finding_is_the_expected_cause(path: Path, category: str, rule: str | None) -> None:
    findings = diagnose([path], CLUSTER).findings
    if category == "other":
        assert findings == (), [f.id for f in findings]
        return
    assert findings, "no finding"
    top = findings[0]
    assert top.category == category, [(f.category, f.id, f.confidence) for f in findings]
    assert rule is None or top.id == rule
    assert top.evidence and top.fix
    assert all(e.file == str(path) and not e.text.startswith("# ") for e in top.evidence)
    assert top.confirm or top.confidence >= 0.5  # doubtful findings say how to settle them
