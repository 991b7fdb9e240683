"""nccl-tests logs as people post them: no test name, srun/mpirun prefixes, several tests,
cut tables, stdin; the op comes from the table (tierwise.formats.infer) or --op."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.errors import ParseError
from tierwise.formats import NcclHalf, NcclRow, NcclTest, busbw_factor, parse_file, parse_log
from tierwise.formats.infer import MIN_ALGBW_GBPS, TYPE_BYTES, infer_op

REAL = Path(__file__).parent / "data" / "nccl" / "real"
SYNTH = Path(__file__).parent / "data" / "nccl"
RING8 = REAL / "nccltests252_ring_8ranks.txt"
TWO = REAL / "nccltests78_v100_8x8_two_tests.txt"
NVL72 = REAL / "coreweave43_gb200_nvl72_rack.txt"


@pytest.mark.parametrize(
    ("path", "ops"),
    [(RING8, ["all_reduce"]), (TWO, ["all_reduce", "alltoall"]), (NVL72, ["all_reduce"])],
)
def test_real_logs_without_a_test_name_get_their_op_from_the_table(
    path: Path, ops: list[str]
) -> None:
    tests = parse_file(path)
    assert [t.op for t in tests] == ops
    assert all(t.op_source == "table" for t in tests)
    assert all(t.rows and not t.truncated for t in tests)


def test_nvl72_paste_keeps_only_the_last_rank_line_yet_infers_all_reduce() -> None:
    (test,) = parse_file(NVL72)
    assert [r.rank for r in test.ranks] == [71]  # nranks 1 from that line is not trusted
    assert test.rows[-1].out_of_place.busbw_GBps == 834.57


@pytest.mark.parametrize("prefix", ["0: ", "  3: ", "[1,0]<stdout>:"])
def test_srun_and_mpirun_prefixes_read_the_same(prefix: str, tmp_path: Path) -> None:
    text = "".join(prefix + line for line in TWO.read_text().splitlines(keepends=True))
    assert parse_log(text) == parse_file(TWO)


def test_a_cut_real_table_is_truncated_and_still_inferred() -> None:
    lines = RING8.read_text().splitlines()
    cut = "\n".join(lines[:6]) + "\n" + lines[6][:30]  # a row cut mid-cell, no footer
    (test,) = parse_log(cut)
    assert test.truncated and len(test.rows) == 2 and test.op == "all_reduce"


def test_ambiguous_tables_name_the_ops_they_fit_and_op_settles_them() -> None:
    path = SYNTH / "h100_2x1_sendrecv_tagged.txt"  # 2 ranks: all_reduce's factor is 1 too
    (named,) = parse_file(path)
    with pytest.raises(ParseError, match=r"fits all_reduce, sendrecv; pass --op"):
        infer_op(replace(named, op=None))
    text = "\n".join(line for line in path.read_text().splitlines() if "sendrecv_perf" not in line)
    (test,) = parse_log(text)
    assert test.op is None
    (forced,) = parse_log(text, op="sendrecv")
    assert forced.op == "sendrecv" and forced.op_source == "--op"


def test_parse_cli_reads_stdin_and_reports_where_the_op_came_from() -> None:
    cli = [sys.executable, "-c", "from tierwise.cli.main import main; main()"]
    proc = subprocess.run(
        [*cli, "parse", "-", "--json"],
        input="".join("0: " + line + "\n" for line in RING8.read_text().splitlines()),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert '"op_source": "table"' in proc.stdout and '"source": "<stdin>"' in proc.stdout


def test_parse_cli_op_forces_every_test() -> None:
    data = cli_json("parse", str(TWO), "--op", "all_gather")
    assert [t["op"] for t in data["tests"]] == ["all_gather", "all_gather"]
    assert_user_error(run_cli("parse", str(TWO), "--op", "allsum", check=False), "allsum")


def test_verify_real_log_without_test_name(tmp_path: Path) -> None:
    contract = tmp_path / "c.yaml"
    contract.write_text(
        "name: nvl72\nchecks:\n  - {name: rack-busbw, op: all_reduce, tier: intra, "
        "metric: busbw, min_size: 4G, min_GBps: 800}\n"
    )
    args = ["verify", str(NVL72), "--contract", str(contract), "-c", "gb200-nvl72"]
    proc = run_cli(*args, "--nodes", "18", "--json")
    assert '"op": "all_reduce"' in proc.stdout and '"status": "PASS"' in proc.stdout


def test_verify_ambiguous_log_is_one_line_naming_the_ops(tmp_path: Path) -> None:
    log = tmp_path / "pasted.txt"
    lines = (SYNTH / "h100_2x1_sendrecv_tagged.txt").read_text().splitlines()
    log.write_text("\n".join(line for line in lines if "sendrecv_perf" not in line) + "\n")
    contract = tmp_path / "c.yaml"
    contract.write_text(
        "name: x\nchecks:\n  - {name: p2p, op: sendrecv, tier: leaf, metric: busbw, "
        "min_size: 1G, min_GBps: 1}\n"
    )
    args = ["verify", str(log), "--contract", str(contract), "-c", "dgx-h100", "--nodes", "2"]
    assert_user_error(run_cli(*args, check=False), "fits all_reduce, sendrecv", "--op")
    forced = run_cli(*args, "--op", "sendrecv", check=False)
    assert forced.returncode in (0, 1), forced.stderr


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("3\n", "no nccl-tests results"),
        ("#  size count type redop root time algbw busbw #wrong\n", "no nccl-tests results"),
        (RING8.read_text().replace(" 93.46 ", " -93.46 "), "'-93.46'"),
        (RING8.read_text().replace(" 93.46 ", " fast "), "'fast'"),
        (RING8.read_text().replace(" 93.46 ", " inf "), "'inf'"),
    ],
)
def test_bad_logs_are_one_line_errors(text: str, needle: str, tmp_path: Path) -> None:
    log = tmp_path / "bad.txt"
    log.write_text(text)
    assert_user_error(run_cli("parse", str(log), check=False), str(log), needle)


# -- property: tables printed the way nccl-tests prints each op are inferred --------------

_PER_RANK = {"all_gather", "reduce_scatter", "alltoall", "gather", "scatter"}
_ROOTED = {"broadcast": "none", "reduce": "sum", "gather": "none", "scatter": "none"}
_UNROOTED = {
    "all_reduce": "sum",
    "reduce_scatter": "sum",
    "all_gather": "none",
    "alltoall": "none",
    "sendrecv": "sum",
}


def _printed(op: str, nranks: int, dtype: str, times_us: list[float]) -> NcclTest:
    """A table as nccl-tests prints ``op`` on ``nranks`` ranks (src/common.cu TimeTest)."""
    width = TYPE_BYTES[dtype]
    rows = []
    for i, time_us in enumerate(times_us):
        count = 2 ** (10 + 2 * i)
        size = count * width * (nranks if op in _PER_RANK else 1)
        algbw = size / time_us / 1e3
        busbw = algbw * busbw_factor(op, nranks)
        redop = _ROOTED.get(op) or _UNROOTED[op]
        root = 0 if op in _ROOTED else -1
        half = NcclHalf(time_us, round(algbw, 2), round(busbw, 2), 0)
        in_place = replace(half, wrong=None) if op == "alltoall" else half
        rows.append(NcclRow(size, count, dtype, redop, root, half, in_place))
    return NcclTest(None, rows)


@settings(max_examples=150, deadline=None)
@given(
    op=st.sampled_from(sorted(_PER_RANK | set(_ROOTED) | set(_UNROOTED))),
    nranks=st.integers(2, 512),
    dtype=st.sampled_from(["float", "half", "bfloat16", "int8", "double"]),
    times=st.lists(st.floats(5.0, 1e5), min_size=1, max_size=6),
)
def test_inferred_op_is_the_printed_one_or_the_error_lists_it(
    op: str, nranks: int, dtype: str, times: list[float]
) -> None:
    test = _printed(op, nranks, dtype, times)
    try:
        assert infer_op(test) == op
    except ParseError as exc:  # gather/scatter, and all_reduce/sendrecv on 2 ranks, look alike
        assert op in str(exc).split("it fits ")[1]
        # sendrecv (factor 1) is all_reduce on 2 ranks to a table without rank lines; an
        # all_reduce on more ranks differs in busbw/algbw, when a row is precise enough
        no_ratio = max(r.out_of_place.algbw_GBps or 0 for r in test.rows) < MIN_ALGBW_GBPS
        all_reduce_alike = op == "all_reduce" and (nranks == 2 or no_ratio)
        assert op in {"sendrecv", "gather", "scatter"} or all_reduce_alike
    assert math.isfinite(test.rows[0].out_of_place.time_us or 0.0)
