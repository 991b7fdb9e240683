"""NIC counter snapshots: the three formats, deltas, categories and the flags they raise."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.errors import ParseError, TierwiseError
from tierwise.verify.checks import evaluate_counters
from tierwise.verify.contract import CounterLimits
from tierwise.verify.counters import (
    DEFAULT_PAUSE_STORM_PER_S,
    category,
    deltas,
    interval_s,
    parse_counters,
    read_snapshot,
)

DATA = Path(__file__).parent / "data" / "verify"


def _flags(before: str, after: str, limits: CounterLimits | None = None, given_s=None):
    b, a = read_snapshot(DATA / before), read_snapshot(DATA / after)
    seconds = interval_s(b, a, given_s)
    rows = evaluate_counters(limits or CounterLimits(), deltas(b, a, seconds), seconds)
    return {r.metric: r for r in rows}


def test_reads_ethtool_rdma_and_sysfs() -> None:
    roce = read_snapshot(DATA / "roce_before.txt")
    assert roce.time_s == pytest.approx(1733150000.0)
    assert roce.values["eth0", "rx_out_of_buffer"] == 12
    assert roce.values["mlx5_1/1", "rx_write_requests"] > 0
    assert {d for d, _ in roce.values} == {"eth0", "eth1", "mlx5_0/1", "mlx5_1/1"}
    ib = read_snapshot(DATA / "ib_before.txt")
    assert ib.time_s is None
    assert ib.values["mlx5_3/1", "out_of_sequence"] == 0
    assert len(ib.values) == 4 * 16


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("rx_discards_phy", "drops"),
        ("rx_out_of_buffer", "drops"),
        ("out_of_buffer", "drops"),
        ("port_xmit_discards", "drops"),
        ("VL15_dropped", "drops"),
        ("rx_crc_errors_phy", "errors"),
        ("port_rcv_errors", "errors"),
        ("symbol_error", "errors"),
        ("link_downed", "errors"),
        ("req_cqe_flush_error", None),  # QP teardown, not a fault
        ("local_ack_timeout_err", "retransmits"),
        ("rnr_nak_retry_err", "retransmits"),
        ("roce_adp_retrans", "retransmits"),
        ("out_of_sequence", "out_of_sequence"),
        ("packet_seq_err", "out_of_sequence"),
        ("rx_prio3_pause", "pause"),
        ("tx_pause_ctrl_phy", "pause"),
        ("rx_pause_frames", "pause"),
        ("rx_prio3_pause_duration", "congestion"),
        ("tx_pause_storm_warning_events", "pause_storm_events"),
        ("port_xmit_wait", "congestion"),
        ("np_cnp_sent", "congestion"),
        ("rp_cnp_handled", "congestion"),
        ("rx_packets_phy", None),
        ("port_rcv_data", None),
    ],
)
def test_categories(name: str, expected: str | None) -> None:
    assert category(name) == expected


def test_pause_storm_drops_retransmits_out_of_sequence_are_flagged() -> None:
    rows = _flags("roce_before.txt", "roce_after_storm.txt")
    status = {metric: r.status for metric, r in rows.items()}
    assert status == {
        "drops": "FAIL",
        "errors": "PASS",
        "retransmits": "FAIL",
        "out_of_sequence": "FAIL",
        "pause_per_s": "FAIL",
        "pause_storm_events": "FAIL",
    }
    assert rows["drops"].measured == 1234 + 56
    assert rows["retransmits"].measured == 3 + 40
    assert rows["out_of_sequence"].measured == 17 + 9
    assert rows["pause_per_s"].measured == pytest.approx((1_800_000 + 240) / 60)
    assert rows["pause_per_s"].limit == DEFAULT_PAUSE_STORM_PER_S
    assert "eth1 rx_prio3_pause" in rows["pause_per_s"].note
    assert "eth0 rx_discards_phy +1,234" in rows["drops"].note


def test_clean_run_passes_and_congestion_is_limited_only_when_asked() -> None:
    rows = _flags("roce_before.txt", "roce_after_clean.txt")
    assert all(r.status == "PASS" for r in rows.values()), rows
    assert rows["pause_per_s"].measured == pytest.approx(4.0)
    assert "congestion" not in rows
    strict = _flags("roce_before.txt", "roce_after_clean.txt", CounterLimits(congestion=1000))
    assert strict["congestion"].status == "FAIL"
    assert strict["congestion"].measured == 2 * (9000 + 8800)


def test_ib_sysfs_drops_and_rates_from_interval() -> None:
    rows = _flags("ib_before.txt", "ib_after_drops.txt")
    assert rows["pause_per_s"].status == "SKIP"  # no '# time:' lines, no interval
    assert (rows["drops"].measured, rows["errors"].measured) == (40, 2)
    assert rows["retransmits"].status == "FAIL"
    timed = _flags("ib_before.txt", "ib_after_drops.txt", given_s=60.0)
    assert timed["pause_per_s"].status == "PASS"


def test_no_snapshots_is_one_skip_row() -> None:
    rows = evaluate_counters(CounterLimits(), None, None)
    assert [(r.name, r.status) for r in rows] == [("counters", "SKIP")]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("     rx_discards_phy: 3\n", "before any 'ethtool -S IFACE'"),
        ("$ ethtool -S eth0\n  rx_a: 1\n  rx_a: 2\n", "listed twice"),
        ("link mlx5_0/1 out_of_sequence\n", "rdma statistic line"),
        ("link mlx5_0/1 out_of_sequence x\n", "rdma statistic line"),
        ("# time: 1\n# time: 2\n$ ethtool -S e\n a: 1\n", "second '# time:'"),
        ("hello world\n", "not a counter line"),
        ("# only a comment\n", "no counters found"),
    ],
)
def test_bad_snapshot_names_the_line(text: str, needle: str) -> None:
    with pytest.raises(ParseError, match=needle):
        parse_counters(text, "snap.txt")


def test_bad_snapshot_line_number() -> None:
    with pytest.raises(ParseError, match=r"^snap.txt:3: "):
        parse_counters("$ ethtool -S eth0\n  rx_a: 1\ngarbage here\n", "snap.txt")


def test_counter_reset_and_disjoint_snapshots_are_errors() -> None:
    before = parse_counters("link mlx5_0/1 out_of_sequence 9\n", "b")
    with pytest.raises(TierwiseError, match="went from 9 to 2"):
        deltas(before, parse_counters("link mlx5_0/1 out_of_sequence 2\n", "a"), None)
    with pytest.raises(TierwiseError, match="no counter in common"):
        deltas(before, parse_counters("link mlx5_1/1 out_of_sequence 9\n", "a"), None)
    late = parse_counters("# time: 10\nlink mlx5_0/1 out_of_sequence 9\n", "b")
    early = parse_counters("# time: 5\nlink mlx5_0/1 out_of_sequence 9\n", "a")
    with pytest.raises(TierwiseError, match="not after"):
        interval_s(late, early)


_names = st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True)


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(_names, st.tuples(st.integers(0, 2**63), st.integers(0, 2**40)), min_size=1),
    st.floats(1, 1e4),
)
def test_deltas_and_rates_round_trip(counters: dict[str, tuple[int, int]], seconds: float) -> None:
    def snapshot(values: dict[str, int]) -> str:
        eth = "".join(f"     {k}: {v}\n" for k, v in values.items())
        sysfs = "".join(
            f"/sys/class/infiniband/mlx5_0/ports/1/hw_counters/{k}:{v}\n" for k, v in values.items()
        )
        return "$ ethtool -S eth0\nNIC statistics:\n" + eth + sysfs

    b = parse_counters(snapshot({k: v for k, (v, _) in counters.items()}))
    a = parse_counters(snapshot({k: v + d for k, (v, d) in counters.items()}))
    got = deltas(b, a, seconds)
    assert len(got) == 2 * len(counters)
    for d in got:
        assert d.delta == counters[d.counter][1]
        assert d.per_s == pytest.approx(d.delta / seconds)
        assert d.category == category(d.counter)
