"""End-to-end `tierwise report` and `tierwise demo`: a self-contained file, JSON, errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO, assert_user_error, cli_json, run_cli

LOG = REPO / "tests" / "data" / "nccl" / "h100_2x8_all_reduce_mpi.txt"
CONTRACT = """name: test-contract
checks:
  - {op: all_reduce, tier: leaf, metric: busbw, min_size: 64M, min_GBps: 150}
  - {op: all_reduce, metric: latency, max_size: 8, max_us: 40}
"""


def assert_self_contained(html: str) -> None:
    """No scripts, stylesheets, images or frames loaded from anywhere."""
    assert "<script" not in html and "<link" not in html and "<iframe" not in html
    assert not re.search(r'\s(src|href)="(?!#)', html), "external reference"
    assert "@import" not in html and "url(http" not in html


def test_report_with_logs_and_contract(tmp_path: Path) -> None:
    contract = tmp_path / "contract.yaml"
    contract.write_text(CONTRACT)
    out = tmp_path / "r.html"
    summary = cli_json(
        "report",
        "--model",
        "llama3-8b",
        "--cluster",
        "dgx-h100",
        "--nodes",
        "4",
        "--gbs",
        "64",
        "--seq",
        "4096",
        "--logs",
        str(LOG),
        "--contract",
        str(contract),
        "--out",
        str(out),
    )
    html = out.read_text()
    assert summary["report"] == str(out) and summary["size_bytes"] == len(html.encode())
    assert summary["busbw_figures"] == 2 and len(summary["plans"]) >= 1
    assert summary["naive_over_aware_step_time"] >= 1.0
    assert_self_contained(html)
    for fig in (
        "fig-topology",
        "fig-busbw-1",
        "fig-busbw-2",
        "fig-mapping",
        "fig-breakdown",
        "fig-sweep",
        "fig-ettr",
    ):
        assert f'id="{fig}"' in html
    assert "measured: h100_2x8_all_reduce_mpi.txt" in html
    assert "contract: test-contract" not in html  # checks are labelled by their own names
    assert "contract: all_reduce.leaf.busbw" in html
    assert "name: llama3-8b" in html and "nodes: 4" in html  # inputs for reproducing it


def test_demo_prints_plan_and_path(tmp_path: Path) -> None:
    out = tmp_path / "demo.html"
    proc = run_cli("demo", "--out", str(out))
    assert proc.stdout.strip().splitlines()[-1] == str(out.resolve())
    assert "top plans: llama3-70b on 128 x h100-sxm" in proc.stdout
    assert out.stat().st_size > 50_000
    assert "torch" not in out.read_text()


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--out", "r.pdf"], ["--out", ".html"]),
        (["--out", "missing-dir/r.html"], ["--out", "missing-dir"]),
        (["--logs", "nope.txt", "--out", "{tmp}/r.html"], ["--logs", "nope.txt"]),
        (["--model", "gpt-9", "--out", "{tmp}/r.html"], ["gpt-9"]),
        (["--contract", "nope.yaml", "--out", "{tmp}/r.html"], ["nope.yaml"]),
    ],
)
def test_user_errors(tmp_path: Path, args: list[str], needles: list[str]) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = run_cli("report", "--cluster", "dgx-h100", "--nodes", "2", *args, check=False)
    assert_user_error(proc, *needles)
