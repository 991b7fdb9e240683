"""End-to-end `tierwise collective`: nccl-tests table, JSON keys, plot, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.formats.nccl_reader import parse_log


def test_json_rows_and_busbw_factor() -> None:
    out = cli_json(
        "collective",
        "-c",
        "dgx-h100",
        "--nodes",
        "2",
        "--op",
        "all_gather",
        "-b",
        "8",
        "-e",
        "1G",
        "-f",
        "4",
    )
    rows = out["rows"]
    # 8 and 32 B hold no float for each of 16 ranks: left out, and said
    assert [r["size_bytes"] for r in rows][:3] == [128, 512, 2048]
    assert any("2 of 14 sizes left out" in note for note in out["notes"])
    assert set(rows[0]) >= {"size_bytes", "time_us", "algbw_GBps", "busbw_GBps", "algo"}
    last = rows[-1]
    assert last["busbw_GBps"] == pytest.approx(last["algbw_GBps"] * 15 / 16)
    assert out["nranks"] == 16


def test_human_table_is_nccl_tests_and_parses_back() -> None:
    text = run_cli("collective", "-c", "dgx-h100", "--nodes", "1", "-b", "8", "-e", "64M").stdout
    tests = parse_log(text)
    assert len(tests) == 1 and tests[0].op == "all_reduce"
    rows = tests[0].rows
    assert rows[0].size_bytes == 8 and rows[-1].size_bytes == 64 << 20
    assert rows[-1].extra["algo"] == "nvls"
    json_rows = cli_json("collective", "-c", "dgx-h100", "--nodes", "1", "-b", "8", "-e", "64M")
    for parsed, exact in zip(rows, json_rows["rows"], strict=True):
        assert parsed.out_of_place.busbw_GBps == pytest.approx(exact["busbw_GBps"], abs=0.006)


def test_algo_override_and_ranks_per_node() -> None:
    ring = cli_json(
        "collective",
        "-c",
        "dgx-h100",
        "--nodes",
        "4",
        "--ranks-per-node",
        "1",
        "--algo",
        "ring",
        "-b",
        "1G",
        "-e",
        "1G",
    )
    assert ring["nranks"] == 4 and ring["rows"][0]["algo"] == "ring"
    assert ring["rows"][0]["busbw_GBps"] < 50


def test_plot_is_written(tmp_path: Path) -> None:
    png = tmp_path / "busbw.png"
    run_cli(
        "collective", "-c", "dgx-h100", "--nodes", "4", "-b", "1K", "-e", "1G", "--plot", str(png)
    )
    assert png.stat().st_size > 10_000


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--op", "allsum"], ["allsum", "allowed"]),
        (["--algo", "magic"], ["--algo", "magic"]),
        (["--algo", "sharp"], ["sharp", "available"]),
        (["-b", "12Q"], ["--min-bytes", "12Q"]),
        (["-b", "1G", "-e", "8"], ["--min-bytes"]),
        (["--gpus", "100000"], ["--gpus: 100000", "allowed: at most 16 ranks (2 nodes of 8"]),
        (["--ranks-per-node", "9"], ["--ranks-per-node: 9; allowed: 1 to 8"]),
    ],
)
def test_bad_input(args: list[str], needles: list[str]) -> None:
    proc = run_cli("collective", "-c", "dgx-h100", "--nodes", "2", *args, check=False)
    assert_user_error(proc, *needles)


def test_explain_shows_the_nvls_pipeline_fill() -> None:
    """--explain --json: an NVLS candidate carries its pipeline (16 channels x 8 heads on a DGX
    H100, chunks of up to 128 KiB, filled twice); a ring has none."""
    out = cli_json("collective", "--nodes", "1", "-b", "1G", "-e", "1G", "--explain")
    by_algo = {(c["algo"], c["proto"]): c for c in out["candidates"]}
    assert by_algo[("nvls", "Simple")]["nvls_pipeline"] == {
        "chunks_in_flight": 128,
        "max_chunk_bytes": 128 * 1024,
        "fill_loops": 2.0,
    }
    assert by_algo[("ring", "Simple")]["nvls_pipeline"] is None


@pytest.mark.parametrize(("datatype", "element"), [("float", 4), ("bfloat16", 2), ("f8e4m3", 1)])
def test_datatype_sets_count_and_type_as_nccl_tests_does(datatype: str, element: int) -> None:
    """nccl-tests' -d/--datatype: the count and type columns follow it; time does not."""
    args = ("collective", "-c", "dgx-h100", "--nodes", "2", "-b", "1M", "-e", "4M")
    (test,) = parse_log(run_cli(*args, "-d", datatype).stdout)
    assert {row.type for row in test.rows} == {datatype}
    assert [row.count for row in test.rows] == [r.size_bytes // element for r in test.rows]
    out = cli_json(*args, "--datatype", datatype)
    assert out["datatype"] == datatype and out["rows"] == cli_json(*args)["rows"]


def test_sizes_are_cut_to_whole_elements_per_rank_as_nccl_tests_does() -> None:
    """nccl-tests runs (size / element / ranks) whole elements of a split op per rank and
    prints that per-rank count: 1,000 B of floats on 16 ranks runs 15 per rank, 960 B."""
    args = ("collective", "-c", "dgx-h100", "--nodes", "2", "--op", "all_gather")
    (test,) = parse_log(run_cli(*args, "-b", "1000", "-e", "4000").stdout)
    assert [(r.size_bytes, r.count) for r in test.rows] == [(960, 15), (1984, 31), (3968, 62)]
    (reduce,) = parse_log(run_cli("collective", "-b", "6", "-e", "6", "-d", "half").stdout)
    assert [(r.size_bytes, r.count) for r in reduce.rows] == [(6, 3)]
    proc = run_cli(*args, "-b", "1", "-e", "32", check=False)
    assert_user_error(proc, "--max-bytes: 32", "64 B for all_gather on 16 ranks")


def test_unknown_datatype_is_a_user_error() -> None:
    proc = run_cli("collective", "-d", "bf16", check=False)
    assert_user_error(proc, "--datatype: 'bf16'", "allowed: int8,", "bfloat16")
