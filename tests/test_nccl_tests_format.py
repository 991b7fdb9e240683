"""nccl-tests text format: parser on every layout, writer, round trip, fuzzing, busbw factors."""

# ruff: noqa: E501  (verbatim fixed-width nccl-tests lines are wider than 100 columns)

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.errors import ParseError, TierwiseError
from tierwise.formats import (
    OPS,
    NcclHalf,
    NcclRank,
    NcclRow,
    NcclTest,
    avg_busbw,
    busbw_factor,
    canonical_op,
    format_test,
    format_tests,
    op_in_name,
    parse_file,
    parse_log,
)
from tierwise.formats.infer import infer_op

DATA = Path(__file__).parent / "data" / "nccl"
REAL_LOG = "nccl/dgx-h100_1x8_all_reduce.txt"

HEADER = """\
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""
ROW_8 = "           8             2     float     sum      -1    13.67    0.00    0.00      0    13.03    0.00    0.00      0"
ROW_16 = "          16             4     float     sum      -1    13.00    0.00    0.00      0    13.07    0.00    0.00      0"
FOOTER = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.0123\n"


def one(text: str, **kwargs: object) -> NcclTest:
    tests = parse_log(text, **kwargs)  # type: ignore[arg-type]
    assert len(tests) == 1
    return tests[0]


# -- real and sample logs ------------------------------------------------------------------


def test_real_dgx_h100_log_exact_numbers(calibration_dir: Path) -> None:
    (test,) = parse_file(calibration_dir / REAL_LOG)
    assert test.op == "all_reduce"  # from '# nccl-tests all_reduce_perf -b 8 ...'
    assert len(test.rows) == 32
    first, last = test.rows[0], test.rows[-1]
    assert (first.size_bytes, first.count, first.type, first.redop, first.root) == (
        8,
        2,
        "float",
        "sum",
        -1,
    )
    assert first.out_of_place == NcclHalf(13.67, 0.0, 0.0, 0)
    assert first.in_place == NcclHalf(13.03, 0.0, 0.0, 0)
    assert last.size_bytes == 17179869184 and last.count == 4294967296
    assert last.out_of_place == NcclHalf(62648.0, 274.23, 479.90, 0)
    assert last.in_place == NcclHalf(62636.0, 274.28, 479.99, 0)
    assert test.rows[16].size_bytes == 524288 and test.rows[16].out_of_place.time_us == 20.66
    assert [r.size_bytes for r in test.rows] == [8 * 2**i for i in range(32)]
    assert test.avg_busbw_GBps == 159.151 and test.out_of_bounds == 0
    assert avg_busbw(test.rows) == pytest.approx(159.151, abs=0.005)  # footer = mean of halves
    assert not test.truncated and test.nranks is None  # the file has no rank lines


def test_real_log_busbw_is_algbw_times_the_all_reduce_factor(calibration_dir: Path) -> None:
    (test,) = parse_file(calibration_dir / REAL_LOG)
    factor = busbw_factor(test.op or "", 8)
    for row in test.rows[-8:]:  # large sizes: 2 printed decimals are enough precision
        half = row.out_of_place
        assert half.busbw_GBps == pytest.approx(half.algbw_GBps * factor, abs=0.02)


def test_writer_reproduces_the_real_log_table_byte_for_byte(calibration_dir: Path) -> None:
    original = (calibration_dir / REAL_LOG).read_text().splitlines()
    (test,) = parse_file(calibration_dir / REAL_LOG)
    written = format_test(test).splitlines()
    table = original[2:]  # the file's own two-line description comes first
    assert written[-len(table) :] == table
    assert written[0] == "# Collective test starting: all_reduce_perf"


def test_multinode_mpi_log_with_noise() -> None:
    (test,) = parse_file(DATA / "h100_2x8_all_reduce_mpi.txt")
    assert (test.op, test.nranks, test.nodes, test.gpus_per_node) == ("all_reduce", 16, 2, 8)
    assert test.hosts == ("gpu-node-017", "gpu-node-018")
    assert test.ranks[9] == NcclRank(
        rank=9,
        host="gpu-node-018",
        device=1,
        group=0,
        pid=32230,
        bus_id="0000:2a:00",
        device_name="NVIDIA H100 80GB HBM3",
    )
    assert test.header["nThread"] == "1" and test.header["maxBytes"] == "8589934592"
    assert test.header["step"] == "2(factor)" and test.header["warmup iters"] == "5"
    assert test.header["agg iters"] == "1" and test.header["graph"] == "0"
    assert len(test.rows) == 31  # NCCL INFO lines between rows 4 and 5 are skipped
    assert [r.size_bytes for r in test.rows][3:6] == [64, 128, 256]
    assert test.rows[-1].out_of_place == NcclHalf(44248.0, 194.13, 364.00, 0)
    assert test.avg_busbw_GBps == 125.98


def test_old_layout_two_tests_without_redop_root() -> None:
    gather, a2a = parse_file(DATA / "v100_1x8_all_gather_alltoall_old.txt")
    assert (gather.op, a2a.op) == ("all_gather", "alltoall")  # from the shell command lines
    for test in (gather, a2a):
        assert (test.nranks, test.nodes, test.gpus_per_node) == (8, 1, 8)
        assert len(test.rows) == 20
        assert all(r.redop is None and r.root is None for r in test.rows)
        assert test.ranks[0].group is None and test.ranks[0].bus_id == "0x06"
        assert "agg iters" not in test.header and test.header["validation"] == "1"
    assert a2a.rows[3].in_place is not None and a2a.rows[3].in_place.wrong == 2e-07
    assert gather.avg_busbw_GBps == 41.3768 and a2a.avg_busbw_GBps == 32.8782


def test_srun_labels_root_column_and_na_wrong() -> None:
    bcast, reduce = parse_file(DATA / "a100_1x8_broadcast_reduce_srun.txt")
    assert (bcast.op, reduce.op) == ("broadcast", "reduce")
    assert {r.redop for r in bcast.rows} == {"none"} and {r.redop for r in reduce.rows} == {"sum"}
    assert {r.root for r in bcast.rows + reduce.rows} == {0}
    assert all(r.out_of_place.wrong is None for r in bcast.rows)  # '-c 0': #wrong is N/A
    assert bcast.header["validation"] == "0" and bcast.header["unalign"] == "0"
    assert bcast.rows[-1].out_of_place.time_us == 18820.0  # integer time for > 10 ms
    assert len(bcast.rows) == len(reduce.rows) == 23


def test_mpirun_tag_output_two_hosts_one_gpu_each() -> None:
    (test,) = parse_file(DATA / "h100_2x1_sendrecv_tagged.txt")
    assert (test.op, test.nranks, test.nodes, test.gpus_per_node) == ("sendrecv", 2, 2, 1)
    assert len(test.rows) == 28 and test.rows[-1].size_bytes == 2**30


def test_truncated_final_row_is_reported_not_dropped_silently() -> None:
    (test,) = parse_file(DATA / "h100pcie_1x4_reduce_scatter_truncated.txt")
    assert test.truncated and test.partial_row_line == 35
    assert test.avg_busbw_GBps is None and len(test.rows) == 22
    assert test.rows[-1].size_bytes == 134217728


def test_garbled_row_is_an_error_with_its_line() -> None:
    with pytest.raises(ParseError) as info:
        parse_file(DATA / "garbled_row_all_reduce.txt")
    assert info.value.line == 35
    assert "garbled_row_all_reduce.txt:35:" in str(info.value) and "busbw" in str(info.value)


# -- layout variants and line rules ---------------------------------------------------------


def test_rows_without_any_header_use_the_cell_count() -> None:
    test = one(ROW_8 + "\n" + ROW_16 + "\n" + FOOTER, default_op="all_reduce")
    assert test.op == "all_reduce" and len(test.rows) == 2 and test.rows[1].root == -1
    seven = one("   1024   256   float   5.1   0.20   0.20   0\n")
    assert seven.rows[0].in_place is None and seven.rows[0].redop is None and seven.truncated


def test_blank_redop_cell_of_gather() -> None:
    row = "      1024        32     float               0    12.50    0.08    0.07      0    12.40    0.08    0.07      0"
    test = one(HEADER + row + "\n" + FOOTER)
    assert test.rows[0].redop is None and test.rows[0].root == 0


def test_algo_extra_column_is_read_back() -> None:
    text = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong   algo\n"
        "     1048576        262144     float     sum      -1    27.37   38.31   67.04    N/A   nvls\n"
        "     2097152        524288     float     sum      -1    42.21   49.68   86.94    N/A    N/A\n"
    )
    test = one(text + FOOTER)
    assert test.rows[0].extra == {"algo": "nvls"} and test.rows[1].extra == {}
    assert test.rows[0].in_place is None and test.rows[0].out_of_place.wrong is None


def test_per_iteration_and_timestamp_columns() -> None:
    header = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "   i_min   i_max   i_p99   i_cv%     time   algbw   busbw #wrong   i_min   i_max"
        "   i_p99   i_cv% timestamp\n"
    )
    row = (
        "        1024           256     float     sum      -1    16.94    0.06    0.11      0"
        "   16.10   18.20   18.00    2.10    16.17    0.06    0.11      0   15.90   17.00"
        "   16.90    1.90 2025-03-01 12:00:01\n"
    )
    (r,) = one(header + row + FOOTER).rows
    assert r.extra["i_min"] == "16.10" and r.extra["in_place_i_min"] == "15.90"
    assert r.extra["timestamp"] == "2025-03-01 12:00:01" and r.in_place is not None


def test_header_without_hash_and_old_error_column() -> None:
    text = (
        "                                             out-of-place                       in-place\n"
        "       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "  4294967296     134217728   float    29122  129.05  129.05  1e+00    29169  128.84  128.84  1e+00\n"
        " Out of bounds values : 2 FAILED\n Avg bus bandwidth    : 128.942\n"
    )
    test = one(text, default_op="all_gather")
    assert test.out_of_bounds == 2 and test.avg_busbw_GBps == 128.942
    assert test.rows[0].out_of_place == NcclHalf(29122.0, 129.05, 129.05, 1.0)


def test_unknown_line_inside_table_is_an_error_outside_is_skipped() -> None:
    with pytest.raises(ParseError) as info:
        parse_log(HEADER + ROW_8 + "\nSegmentation fault (core dumped)\n" + ROW_16 + "\n")
    assert info.value.line == 5
    test = one("Running on node x\nsome banner\n" + HEADER + ROW_8 + "\n" + FOOTER + "bye\n")
    assert len(test.rows) == 1


def test_noise_inside_table_is_skipped() -> None:
    noise = (
        "host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
        "[host:12345] 3 more processes have sent help message help-mpi-btl.txt\n"
        "srun: error: node7: task 3: Exited with exit code 1\n"
        "--------------------------------------------------------------------------\n"
    )
    assert len(one(HEADER + ROW_8 + "\n" + noise + ROW_16 + "\n" + FOOTER).rows) == 2


def test_short_row_inside_the_file_is_an_error() -> None:
    with pytest.raises(ParseError, match="12 cells, the column layout has 13") as info:
        parse_log(HEADER + ROW_8.rsplit(maxsplit=1)[0] + "\n" + ROW_16 + "\n" + FOOTER)
    assert info.value.line == 4


def test_footer_missing_marks_truncated() -> None:
    test = one(HEADER + ROW_8 + "\n" + ROW_16 + "\n")
    assert test.truncated and test.partial_row_line is None and len(test.rows) == 2
    text = HEADER + ROW_8 + "\n# nThread 1 nGpus 8\n" + HEADER + ROW_16 + "\n" + FOOTER
    killed, rerun = parse_log(text)
    assert killed.truncated and not rerun.truncated and killed.rows[0].size_bytes == 8


@pytest.mark.parametrize(
    ("text", "needle", "line"),
    [
        ("", "no nccl-tests results", None),
        ("hello\nworld\n", "no nccl-tests results", None),
        (FOOTER, "footer line without a results table", 1),
        ("#  Rank zero on host device 0\n", None, None),  # 'Rank' not followed by a number
        ("#  Rank  0 Group 0 Pid 1 host-a device\n", "cannot read the rank line", 1),
        ("#  Rank  0 on a device 0\n#  Rank  0 on b device 0\n", "rank 0 listed twice", 2),
        (HEADER + ROW_8.replace("13.67", "1e999") + "\n", "finite", 4),
        (HEADER + ROW_8.replace("13.67", "nan") + "\n", "a number or N/A", 4),
        (HEADER + ROW_8.replace("     8", "9" * 30, 1) + "\n", "non-negative integer", 4),
        ("#  size count type time\n", "cannot read the column header", 1),
        (HEADER + ROW_8 + "\n# Avg bus bandwidth : fast\n", "cannot read the footer", 5),
    ],
)
def test_malformed_input(text: str, needle: str | None, line: int | None) -> None:
    if needle is None:
        with pytest.raises(ParseError, match="no nccl-tests results"):
            parse_log(text)
        return
    with pytest.raises(ParseError, match=needle) as info:
        parse_log(text, source="x.log")
    assert info.value.line == line and str(info.value).startswith("x.log")


def test_uneven_hosts_leave_gpus_per_node_unknown() -> None:
    ranks = "".join(
        f"#  Rank {i} Group 0 Pid 9 on {h} device {i} [0x0{i}] GPU\n" for i, h in enumerate("aab")
    )
    test = one(ranks + HEADER + ROW_8 + "\n" + FOOTER)
    assert (test.nranks, test.nodes, test.gpus_per_node) == (3, 2, None)


def test_crlf_and_op_from_file_name(tmp_path: Path) -> None:
    path = tmp_path / "cluster7_2x8_reduce_scatter.log"
    path.write_bytes((HEADER + ROW_8 + "\n" + FOOTER).replace("\n", "\r\n").encode())
    (test,) = parse_file(path)
    assert test.op == "reduce_scatter" and len(test.rows) == 1
    with pytest.raises(ParseError, match="cannot read"):
        parse_file(tmp_path / "missing.txt")


def test_banner_overrides_command_line_and_applies_to_the_next_test() -> None:
    first = "+ srun all_gather_perf -b 8\n# Collective test starting: all_reduce_perf\n"
    second = "# next: srun broadcast_perf -b 8\n"  # a comment inside the first table
    tests = parse_log(first + HEADER + ROW_8 + "\n" + second + FOOTER + HEADER + ROW_16 + "\n")
    assert [t.op for t in tests] == ["all_reduce", "broadcast"]


# -- writer and round trip ------------------------------------------------------------------

_TIMES = st.one_of(
    st.none(),
    st.integers(0, 9999).map(lambda n: n / 100),  # %.2f below 100 us
    st.integers(1000, 99999).map(lambda n: n / 10),  # %.1f below 10 ms
    st.integers(10000, 10**8).map(float),  # %.0f above
)
_BW = st.one_of(st.none(), st.integers(0, 10**6).map(lambda n: n / 100))
_WRONG = st.one_of(st.none(), st.integers(0, 10**9).map(float), st.floats(1e-12, 1e6))
_HALF = st.builds(NcclHalf, _TIMES, _BW, _BW, _WRONG)
_IN_PLACE = st.one_of(st.none(), _HALF.filter(lambda h: h != NcclHalf(None, None, None, None)))
_ROW = st.builds(
    NcclRow,
    size_bytes=st.integers(0, 2**40),
    count=st.integers(0, 2**38),
    type=st.sampled_from(["float", "half", "bfloat16", "int8", "double", "fp8_e4m3"]),
    redop=st.one_of(st.none(), st.sampled_from(["sum", "prod", "max", "min", "avg", "none"])),
    root=st.one_of(st.none(), st.integers(-1, 1023)),
    out_of_place=_HALF,
    in_place=_IN_PLACE,
    extra=st.dictionaries(
        st.sampled_from(["algo", "proto"]),
        st.sampled_from(["ring", "tree", "nvls", "hierarchical", "sharp", "LL128"]),
    ),
)
_RANK = st.builds(
    NcclRank,
    rank=st.just(0),
    host=st.sampled_from(["node-a", "node-b", "gpu-node-017"]),
    device=st.integers(0, 15),
    group=st.one_of(st.none(), st.integers(0, 3)),
    pid=st.one_of(st.none(), st.integers(1, 4194304)),
    bus_id=st.one_of(st.none(), st.sampled_from(["0000:18:00", "0x07"])),
    device_name=st.sampled_from(["NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB", ""]),
)
_HEADER_KEYS = ["nGpus", "minBytes", "maxBytes", "step", "warmup iters", "iters", "agg iters"]


@st.composite
def _tests(draw: st.DrawFn, truncated: bool | None = None) -> NcclTest:
    ranks = draw(st.lists(_RANK, max_size=6))
    ranks = [NcclRank(**{**r.__dict__, "rank": i}) for i, r in enumerate(ranks)]
    small = st.one_of(st.none(), st.integers(1, 4096))
    keys = draw(st.lists(st.sampled_from(_HEADER_KEYS), unique=True))
    header = {"nThread": "1", **{k: str(draw(st.integers(0, 2**34))) for k in keys}}
    cut = draw(st.booleans()) if truncated is None else truncated
    return NcclTest(
        op=draw(st.one_of(st.none(), st.sampled_from(OPS))),
        rows=draw(st.lists(_ROW, max_size=6)),
        nranks=draw(small),
        nodes=draw(small),
        gpus_per_node=draw(small),
        ranks=ranks,
        header=header if draw(st.booleans()) else {},
        avg_busbw_GBps=None
        if cut
        else draw(st.none() | st.floats(0, 1e4).map(lambda x: float(f"{x:.6g}"))),
        out_of_bounds=None if cut else draw(st.none() | st.integers(0, 1000)),
        truncated=cut,
    )


def _as_read(test: NcclTest) -> NcclTest:
    """``test`` as reading its text gives it back: a test printed without an op gets the one
    its table fits, if exactly one does."""
    if test.op is not None or not test.rows:
        return test
    try:
        return replace(test, op=infer_op(test))
    except ParseError:
        return test


@settings(max_examples=120, deadline=None)
@given(_tests())
def test_round_trip_of_generated_tests(test: NcclTest) -> None:
    if not test.rows:
        with pytest.raises(ParseError, match="no complete result row"):
            parse_log(format_test(test))
        return
    assert parse_log(format_test(test)) == [_as_read(test)]


@settings(max_examples=40, deadline=None)
@given(st.lists(_tests(truncated=False), min_size=1, max_size=3))
def test_round_trip_of_several_tests_in_one_file(tests: list[NcclTest]) -> None:
    if not any(t.rows for t in tests):
        with pytest.raises(ParseError, match="no complete result row"):
            parse_log(format_tests(tests))
        return
    assert parse_log(format_tests(tests)) == [_as_read(t) for t in tests]


_ANY_TIME = st.floats(0, 1e9)
_ANY_BW = st.floats(0, 1e5)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(_ANY_TIME, _ANY_BW, _ANY_BW), min_size=1, max_size=5))
def test_arbitrary_floats_come_back_at_printed_precision(values: list[tuple[float, ...]]) -> None:
    rows = [
        NcclRow(2**i, 2**i, "float", "sum", -1, NcclHalf(t, a, b, 0))
        for i, (t, a, b) in enumerate(values)
    ]
    (back,) = parse_log(format_test(NcclTest("all_reduce", rows, avg_busbw_GBps=1.0)))
    for row, (t, a, b) in zip(back.rows, values, strict=True):
        half = row.out_of_place
        step = 1.0 if t >= 9999.5 else (0.1 if t >= 99.995 else 0.01)
        assert half.time_us is not None and abs(half.time_us - t) <= step / 2 + 1e-9 * t
        assert half.algbw_GBps == pytest.approx(a, abs=0.005 + 1e-12 * a)
        assert half.busbw_GBps == pytest.approx(b, abs=0.005 + 1e-12 * b)
    assert parse_log(format_test(back)) == [back]  # printing is a fixed point


def test_writer_rejects_what_nccl_tests_text_cannot_carry() -> None:
    bad = NcclRow(8, 2, "float", "sum", -1, NcclHalf(math.inf, 0.0, 0.0, 0))
    with pytest.raises(ValueError, match="non-finite"):
        format_test(NcclTest("all_reduce", [bad]))
    spaced = NcclRow(8, 2, "float", "sum", -1, NcclHalf(1.0, 0.0, 0.0), extra={"algo": "a b"})
    with pytest.raises(ValueError, match="blank or has spaces"):
        format_test(NcclTest("all_reduce", [spaced]))
    with pytest.raises(ValueError, match="extra column name"):
        format_test(NcclTest("all_reduce", [spaced]), extra_columns=["busbw"])


def test_prediction_with_algo_column_and_placement_line() -> None:
    rows = [
        NcclRow(
            s,
            s // 2,
            "bfloat16",
            "sum",
            -1,
            NcclHalf(t, s / t / 1e3, s / t / 1e3 * 1.875),
            extra={"algo": a},
        )
        for s, t, a in [(1024, 25.0, "tree"), (2**30, 2900.0, "ring")]
    ]
    test = NcclTest("all_reduce", rows, nranks=16, nodes=2, gpus_per_node=8)
    text = format_test(test)
    assert "# tierwise placement: nranks 16 nodes 2 gpus_per_node 8" in text
    assert text.splitlines()[4].split()[-1] == "algo"
    assert text.splitlines()[6].split()[-2:] == ["N/A", "tree"]  # a prediction has no #wrong
    (back,) = parse_log(text)
    assert back.rows[1].extra == {"algo": "ring"} and back.rows[1].out_of_place.time_us == 2900.0
    assert format_test(test, extra_columns=()).count("ring") == 0


# -- fuzzing: nothing but ParseError ---------------------------------------------------------

_SAMPLES = [p.read_text() for p in sorted(DATA.glob("*.txt"))]
_ALPHABET = st.sampled_from([*"0123456789 .-#:eN/A[]\n\tabcxyz", "N/A", "Rank", "size"])


def _parse_or_parse_error(text: str) -> None:
    try:
        tests = parse_log(text)
    except ParseError:
        return
    assert all(isinstance(t, NcclTest) for t in tests)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(_SAMPLES),
    st.lists(
        st.tuples(st.floats(0, 1), st.integers(0, 12), st.lists(_ALPHABET, max_size=8)), max_size=6
    ),
)
def test_fuzz_mutated_real_logs(sample: str, edits: list[tuple[float, int, list[str]]]) -> None:
    text = sample
    for where, length, insert in edits:
        at = int(where * len(text))
        text = text[:at] + "".join(insert) + text[at + length :]
    _parse_or_parse_error(text)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=400) | st.lists(_ALPHABET, max_size=200).map("".join))
def test_fuzz_random_text(text: str) -> None:
    _parse_or_parse_error(text)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_SAMPLES), st.integers(0, 10**6))
def test_any_truncation_parses_or_names_a_line(sample: str, cut: int) -> None:
    _parse_or_parse_error(sample[: cut % (len(sample) + 1)])


# -- ops and busbw factors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        ("all_reduce", 8, 14 / 8),
        ("all_reduce", 16, 30 / 16),
        ("all_reduce", 2, 1.0),
        ("all_reduce", 1, 0.0),
        ("all_gather", 8, 7 / 8),
        ("reduce_scatter", 4, 3 / 4),
        ("alltoall", 128, 127 / 128),
        ("broadcast", 64, 1.0),
        ("reduce", 8, 1.0),
        ("sendrecv", 2, 1.0),
    ],
)
def test_busbw_factor_hand_values(op: str, n: int, factor: float) -> None:
    assert busbw_factor(op, n) == pytest.approx(factor)


@pytest.mark.parametrize(
    ("alias", "op"),
    [
        ("allreduce", "all_reduce"),
        ("all_reduce_perf", "all_reduce"),
        ("ncclAllReduce", "all_reduce"),
        ("AllGather", "all_gather"),
        ("reduce-scatter", "reduce_scatter"),
        ("alltoall_perf", "alltoall"),
        ("bcast", "broadcast"),
        ("sendrecv", "sendrecv"),
    ],
)
def test_op_aliases(alias: str, op: str) -> None:
    assert canonical_op(alias) == op


def test_unknown_op_and_bad_nranks_are_user_errors() -> None:
    with pytest.raises(TierwiseError, match="allowed: all_reduce, all_gather"):
        canonical_op("allsum")
    with pytest.raises(TierwiseError, match="nranks must be an integer >= 1"):
        busbw_factor("all_reduce", 0)


def test_op_in_file_names() -> None:
    assert op_in_name("dgx-h100_1x8_all_reduce.txt") == "all_reduce"
    assert op_in_name("run3-allgather.log") == "all_gather"
    assert op_in_name("reduce_scatter_2x8.txt") == "reduce_scatter"
    assert op_in_name("all_reduce_vs_all_gather.txt") is None
    assert op_in_name("results.txt") is None
