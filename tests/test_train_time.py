"""Time to train: failure rates, Young-Daly, ETTR closed form vs Monte Carlo, days, cost, energy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import assert_user_error, cli_json, run_cli
from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec, dump_cluster, load_cluster
from tierwise.hardware.reliability import FAILURE_RATES, ReliabilitySpec
from tierwise.perf import train_time as T
from tierwise.perf.train_sim import _waits, simulate
from tierwise.specio import build
from tierwise.units import parse_count
from tierwise.workload.checkpoint import checkpoint_bytes_per_gpu, state_replicas

DAY = 86_400.0


def cluster(nodes: int = 2048, preset: str = "dgx-h100", **reliability: object) -> ClusterSpec:
    data = dump_cluster(load_cluster(preset, nodes=nodes))
    data["reliability"] = {**data["reliability"], **reliability}
    return build(ClusterSpec, data, "test")


def with_rate(c: ClusterSpec, rate: float) -> ClusterSpec:
    return T.TrainRequest(node_failure_rate=rate).on(c)


def test_mttf_is_one_over_nodes_times_rate() -> None:
    # 2,048 nodes (16,384 GPUs) at Kokolis et al.'s RSC-1 rate: 1,000 / (2,048 x 6.5) days.
    c = cluster(node_failures_per_1000_node_days="meta-rsc1")
    out = T.train_time(c, T.Run(1e12, 1e6, 16_384, 1e9))
    assert out["mttf_h"] == pytest.approx(1000 / (2048 * 6.5) * 24)
    assert out["mttf_h"] == pytest.approx(1.80, abs=0.005)
    # 131,072 GPUs: about 15 minutes.
    big = cluster(16_384, node_failures_per_1000_node_days=6.5)
    assert T.train_time(big, T.Run(1e12, 1e6, 131_072, 1e9))["mttf_h"] * 60 == pytest.approx(
        13.5, 0.01
    )


def test_llama3_interruptions_in_54_days() -> None:
    c = cluster(node_failures_per_1000_node_days="llama3-405b")
    expected = T.node_rate_per_s(c, 16_384 // 8) * 54 * DAY
    assert expected == pytest.approx(419, rel=0.10)
    # A simulated 54-day run that loses (almost) nothing to them counts as many (Poisson).
    tl = T.Timeline(54 * DAY, 1.0, 0.0, 0.0, 0.0, node_rate=T.node_rate_per_s(c, 2048))
    sim = simulate(tl, trials=100)
    assert sim["interruptions"] == pytest.approx(419, rel=0.10)


def test_auto_interval_is_young_daly() -> None:
    c = cluster()
    out = T.train_time(c, T.Run(15e12, 2.5e6, 16_384, 3e9))
    w, mttf = out["checkpoint_write_s"], out["mttf_h"] * 3600
    assert out["checkpoint_interval"] == "young-daly"
    assert out["checkpoint_interval_min"] * 60 == pytest.approx(math.sqrt(2 * w * mttf))
    # ... and it is (to first order) the best interval of the closed form.
    rate, u0 = 1 / mttf, out["restart_s"]
    best = out["checkpoint_interval_min"] * 60
    for other in (0.5 * best, 0.8 * best, 1.25 * best, 2 * best):
        assert T.ettr(rate, u0, other, w, 0.0) < T.ettr(rate, u0, best, w, 0.0)


def test_given_interval_and_hand_computed_ettr() -> None:
    c = cluster(512)  # 4,096 GPUs
    out = T.train_time(c, T.Run(1e12, 1e6, 4096, 2e9, interval_min=30))
    assert out["checkpoint_interval_min"] == 30
    rel = c.reliability
    rate = 512 * rel.node_failures_per_1000_node_days / 1000 / DAY
    # 2 GB per GPU: 16 GB per node at 25 GB/s, 8.2 TB at 2 TB/s: the storage system limits.
    write = max(2e9 * 8 / 25e9, 2e9 * 4096 / 2000e9)
    u0 = rel.detection_s + rel.relaunch_s + rel.nccl_init_s + 2.5 * 4.096 + write
    first_order = (1 - rate * (u0 + 900)) / (1 + write / 1800)
    renewal = rate * 1800 * math.exp(-rate * u0) / math.expm1(rate * (1800 + write))
    assert out["checkpoint_write_s"] == pytest.approx(write)
    assert out["restart_s"] == pytest.approx(u0)
    assert out["ettr_first_order"] == pytest.approx(first_order)
    assert out["ettr"] == pytest.approx(renewal)
    assert out["ettr"] == pytest.approx(first_order, rel=0.01)  # equal to first order


def test_time_to_train_is_tokens_over_throughput_times_ettr() -> None:
    c = cluster()
    tokens, tps = 15e12, 2.5e6
    out = T.train_time(c, T.Run(tokens, tps, 16_384, 3e9))
    wall = tokens / (tps * out["ettr"])
    assert out["time_to_train_days"] * DAY == pytest.approx(wall)
    assert out["gpu_hours"] == pytest.approx(16_384 * wall / 3600)
    assert out["cost_usd"] == pytest.approx(out["gpu_hours"] * 2.5)
    assert out["interruptions"] == pytest.approx(wall / (out["mttf_h"] * 3600))
    # Energy: 2,048 nodes x (8 x 700 W + 4,600 W) x PUE 1.2 over the wall-clock time.
    node_w = 8 * 700 + (10_200 - 5_600)
    assert out["energy_MWh"] == pytest.approx(2048 * node_w * 1.2 * wall / 3600 / 1e6)


def test_energy_overrides_and_missing_board_power() -> None:
    data = dump_cluster(load_cluster("dgx-h100"))
    data["power"] = {"gpu_w": 500, "node_overhead_w": 1000, "pue": 1.5}
    c = build(ClusterSpec, data, "test")
    out = T.train_time(c, T.Run(1e12, 1e6, 256, 1e9))
    wall = out["time_to_train_days"] * DAY
    assert out["energy_MWh"] == pytest.approx(32 * (8 * 500 + 1000) * 1.5 * wall / 3600e6)
    data = dump_cluster(load_cluster("dgx-h100"))
    data["gpu"] = {**data["gpu"], "key": "inline", "board_power_w": None}
    out = T.train_time(build(ClusterSpec, data, "test"), T.Run(1e12, 1e6, 256, 1e9))
    assert out["energy_MWh"] is None
    assert any("power.gpu_w" in n for n in out["time_to_train_notes"])


def test_a_run_that_never_finishes_says_so() -> None:
    c = cluster(16_384, node_failures_per_1000_node_days=200.0)
    out = T.train_time(c, T.Run(15e12, 1e7, 131_072, 1e9))
    assert out["ettr"] < 1e-6 and out["ettr_first_order"] == 0
    assert out["time_to_train_days"] is None
    assert "never finishes" in out["time_to_train_notes"][-1]


@pytest.mark.parametrize(
    ("nodes", "rate", "restart_s", "write_s", "lag_s"),
    [(2048, 3.79, 600.0, 20.0, 0.0), (512, 6.5, 900.0, 60.0, 0.0), (1024, 2.34, 300.0, 5.0, 40.0)],
)
def test_closed_form_within_two_percent_of_monte_carlo(
    nodes: int, rate: float, restart_s: float, write_s: float, lag_s: float
) -> None:
    # Where the closed form's assumptions hold (unlimited spares, no rack failures, restarts
    # short against the MTTF, so that failures during restarts are rare).
    node_rate = nodes * rate / 1000 / DAY
    interval = max(T.young_daly_interval_s(write_s, 1 / node_rate), lag_s)
    tl = T.Timeline(30 * DAY, interval, write_s, lag_s, restart_s, node_rate=node_rate)
    sim = simulate(tl, trials=200, seed=1)
    first_order = T.ettr_first_order(node_rate, restart_s, interval, write_s, lag_s)
    assert sim["ettr"] == pytest.approx(first_order, rel=0.02)
    assert sim["ettr"] == pytest.approx(tl.ettr, rel=0.02)
    assert sim["unfinished_trials"] == 0


def test_failures_during_restart() -> None:
    # 131,072 GPUs at RSC-1's rate: a failure every ~14 min against 15-min restarts. The
    # first-order form charges each a full restart and a half interval, and gives up; the
    # simulation sees many strike a restart, which then costs less and loses no work, as the
    # renewal form has it.
    node_rate = 16_384 * 6.5 / 1000 / DAY
    tl = T.Timeline(10 * DAY, 300.0, 20.0, 0.0, 900.0, node_rate=node_rate)
    sim = simulate(tl, trials=50)
    assert sim["failed_restarts"] > 0.3 * sim["interruptions"]
    assert T.ettr_first_order(node_rate, 900.0, 300.0, 20.0, 0.0) == 0
    assert sim["ettr"] == pytest.approx(tl.ettr, rel=0.02)
    c = cluster(16_384, node_failures_per_1000_node_days="meta-rsc1")
    notes = T.train_time(c, T.Run(15e12, 1e7, 131_072, 1e9))["time_to_train_notes"]
    assert any("first-order ETTR" in n for n in notes)


def test_simulation_is_deterministic_per_seed() -> None:
    tl = T.Timeline(DAY, 600.0, 10.0, 0.0, 300.0, node_rate=1 / 3600)
    assert simulate(tl, 20, seed=3) == simulate(tl, 20, seed=3)
    assert simulate(tl, 20, seed=3) != simulate(tl, 20, seed=4)


def test_no_failures_means_only_checkpoint_stalls() -> None:
    tl = T.Timeline(10_000.0, 1000.0, 10.0, 0.0, 300.0, node_rate=0.0)
    sim = simulate(tl, trials=3)
    assert sim["time_to_train_days"] * DAY == pytest.approx(10_000 + 9 * 10)
    assert sim["interruptions"] == 0


def test_spare_waits_by_hand() -> None:
    t = np.array([[1.0, 2.0, 3.0]])
    # One spare, repair 10 s: the 2nd failure waits for the 1st node (back at 11), the 3rd
    # for the 2nd (back at 12).
    assert _waits(t, np.ones((1, 3), dtype=int), 1, 10.0).tolist() == [[0.0, 9.0, 9.0]]
    # A rack of 4 against 2 spares waits for its own repair.
    sizes = np.array([[4, 1, 1]])
    assert _waits(t, sizes, 2, 10.0).tolist() == [[10.0, 9.0, 8.0]]


def test_too_few_spares_cost_time_and_rack_failures_count() -> None:
    rate = 2048 * 3.79 / 1000 / DAY
    base = T.Timeline(20 * DAY, 1800.0, 20.0, 0.0, 600.0, node_rate=rate)
    plenty = simulate(base, 50)
    # 7.8 failures a day, each node back after a day: 8 spares run short now and then.
    few = simulate(T.Timeline(**{**base.__dict__, "spares": 8, "repair_s": DAY}), 50)
    assert few["spare_wait_h"] > 1 and plenty["spare_wait_h"] == 0
    assert few["time_to_train_days"] > plenty["time_to_train_days"]
    # 2 spares: the job waits most of the time (P(at most 2 nodes in repair) ~ 2%).
    starved = simulate(T.Timeline(**{**base.__dict__, "spares": 2, "repair_s": DAY}), 10)
    assert starved["time_to_train_days"] > 10 * plenty["time_to_train_days"]
    assert starved["spare_wait_h"] / 24 == pytest.approx(starved["time_to_train_days"], 0.2)
    racks = T.Timeline(**{**base.__dict__, "rack_rate": rate, "rack_nodes": 4})
    sim = simulate(racks, 50)  # rack events interrupt as often again
    assert sim["interruptions"] == pytest.approx(2 * rate * sim["time_to_train_days"] * DAY, 0.05)


def test_spare_shortfall_probability_is_poisson_tail() -> None:
    c = cluster(spare_nodes=8, repair_h=24.0)
    mean = T.node_rate_per_s(c, 2048) * 24 * 3600
    tail = 1 - sum(math.exp(-mean) * mean**k / math.factorial(k) for k in range(9))
    assert T.train_time(c, T.Run(1e12, 1e6, 16_384, 1e9))["spare_shortfall_probability"] == (
        pytest.approx(tail)
    )
    assert (
        T.train_time(cluster(), T.Run(1e12, 1e6, 16_384, 1e9))["spare_shortfall_probability"]
        is None
    )


def test_async_checkpoint_stalls_for_the_host_copy_only() -> None:
    c = cluster(async_checkpoint=True)
    out = T.train_time(c, T.Run(15e12, 2.5e6, 16_384, 4e9))
    # H100 host link: PCIe Gen5 x16; the write to storage runs in the background.
    assert out["checkpoint_write_s"] < out["checkpoint_persist_s"]
    assert out["checkpoint_persist_s"] == pytest.approx(4e9 * 16_384 / 2000e9)
    sync = T.train_time(cluster(), T.Run(15e12, 2.5e6, 16_384, 4e9))
    assert out["ettr"] > sync["ettr"]


@settings(max_examples=60, deadline=None)
@given(
    rate=st.floats(1e-9, 1e-2),
    restart=st.floats(0, 3600),
    interval=st.floats(60, 36_000),
    write=st.floats(0, 600),
)
def test_ettr_is_a_share_and_falls_with_every_cost(
    rate: float, restart: float, interval: float, write: float
) -> None:
    for form in (T.ettr, T.ettr_first_order):
        share = form(rate, restart, interval, write, 0.0)
        assert 0 <= share <= 1
        assert form(rate * 1.5, restart, interval, write, 0.0) <= share
        assert form(rate, restart + 60, interval, write, 0.0) <= share
        assert form(rate, restart, interval, write + 1, 0.0) <= share
    # The two forms agree while failures are rare against a restart plus an interval.
    exposure = rate * (restart + interval + write)  # failures per restart-plus-cycle
    if exposure < 0.01:  # they differ by O(exposure): the stall's own lost half, lam w / 2
        assert T.ettr(rate, restart, interval, write, 0.0) == pytest.approx(
            T.ettr_first_order(rate, restart, interval, write, 0.0), rel=exposure
        )


def test_ettr_without_failures_is_the_checkpoint_share() -> None:
    assert T.ettr(0.0, 600.0, 1000.0, 10.0, 0.0) == pytest.approx(1000 / 1010)
    assert T.ettr(np.zeros(2), 600.0, np.array([1000.0, 90.0]), 10.0, 0.0) == pytest.approx(
        [1000 / 1010, 0.9]
    )


def test_checkpoint_share_per_gpu() -> None:
    # ZeRO-1: each rank writes its optimizer shard and the same share of the weights.
    assert state_replicas(1, False, 64, 1) == 1
    assert checkpoint_bytes_per_gpu(12e9, 1) == pytest.approx(14e9)
    # ZeRO-0 without Megatron's distributed optimizer: dp*cp copies, each writes 1/(dp*cp).
    assert state_replicas(0, False, 8, 2) == 16
    assert state_replicas(0, True, 8, 2) == 1
    assert state_replicas(3, False, 32, 1, dp_shard=8) == 4  # HSDP: 4 replicas of 8 shards


def test_reliability_spec_validation() -> None:
    assert ReliabilitySpec(node_failures_per_1000_node_days="meta-rsc2").model_dump()[
        "node_failures_per_1000_node_days"
    ] == pytest.approx(2.34)
    assert ReliabilitySpec().node_failures_per_1000_node_days == FAILURE_RATES["llama3-405b"]
    for bad in ("meta-rsc9", -1.0, "-2"):
        with pytest.raises(SpecError, match="node_failures_per_1000_node_days"):
            cluster(node_failures_per_1000_node_days=bad)
    with pytest.raises(SpecError, match=r"reliability\.storage_GBps"):
        cluster(storage_GBps=0)
    with pytest.raises(SpecError, match=r"reliability\.spare"):
        cluster(spare=3)
    assert cluster(18, "gb200-nvl72").reliability.rack_nodes(18) == 18
    assert cluster(nodes_per_rack=2).reliability.rack_nodes(1) == 2


def test_parse_count() -> None:
    assert parse_count("15T") == 15e12
    assert parse_count("2.5e12") == 2.5e12
    assert parse_count("300B") == 300e9
    for bad in ("", "x", "-3T", "0"):
        with pytest.raises(SpecError.__mro__[1]):
            parse_count(bad)


ESTIMATE = ["estimate", "-m", "llama3-8b", "--nodes", "4", "--tp", "8", "--gbs", "64"]


def test_estimate_train_tokens_json() -> None:
    out = cli_json(*ESTIMATE, "--train-tokens", "1T", "--node-failure-rate", "meta-rsc1")
    issue_keys = "time_to_train_days gpu_hours cost_usd energy_MWh interruptions mttf_h"
    assert set(T.RUN_KEYS) == {*issue_keys.split(), "checkpoint_interval_min"} | {
        "checkpoint_write_s",
        "ettr",
    }
    for key in T.RUN_KEYS:
        assert isinstance(out[key], float), key
    assert out["node_failures_per_1000_node_days"] == 6.5
    wall = 1e12 / (out["tokens_per_s"] * out["ettr"])
    assert out["time_to_train_days"] * DAY == pytest.approx(wall)
    assert "simulation" not in out
    sim = cli_json(*ESTIMATE, "--train-tokens", "1T", "--simulate", "--simulate-trials", "20")
    assert sim["simulation"]["trials"] == 20
    assert sim["simulation"]["ettr"] == pytest.approx(sim["ettr"], rel=0.02)
    given = cli_json(*ESTIMATE, "--train-tokens", "1T", "--checkpoint-interval", "45")
    assert given["checkpoint_interval_min"] == 45


def test_estimate_train_tokens_table() -> None:
    text = run_cli(*ESTIMATE, "--train-tokens", "1T").stdout
    assert "time to train" in text and "ETTR" in text and "young-daly" in text


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--node-failure-rate", "3"], ["--node-failure-rate", "--train-tokens"]),
        (["--simulate"], ["--simulate", "--train-tokens"]),
        (["--train-tokens", "lots"], ["--train-tokens", "lots"]),
        (["--train-tokens", "1T", "--checkpoint-interval", "-5"], ["--checkpoint-interval"]),
        (["--train-tokens", "1T", "--node-failure-rate", "often"], ["--node-failure-rate"]),
    ],
)
def test_estimate_train_options_user_errors(args: list[str], needles: list[str]) -> None:
    assert_user_error(run_cli(*ESTIMATE, *args, check=False), *needles)


def test_plan_objective_time_to_train_trades_gpus_for_fewer_failures() -> None:
    from tierwise.plan.search import effective_tokens_per_s, search
    from tierwise.workload.load import load_model

    model = load_model("llama3-8b")
    reliable = with_rate(load_cluster("dgx-h100", nodes=64), 0.0)
    fast = search(model, reliable, 512, 4096, top=1).plans[0]
    assert (
        search(model, reliable, 512, 4096, top=1, objective="time_to_train").plans[0]["gpus"]
        == (fast["gpus"])
    )
    # A failure every ~3 minutes on 64 nodes: half the job loses less than half its speed.
    flaky = with_rate(reliable, 8000.0)
    best = search(model, flaky, 512, 4096, top=3, objective="time_to_train").plans
    assert best[0]["gpus"] < 512
    speeds = []
    for plan in best:
        out = T.estimate_train_time(flaky, plan, 1e12)
        speeds.append(1e12 / (out["time_to_train_days"] * DAY))
        full = T.estimate_train_time(flaky, fast, 1e12)
        assert out["time_to_train_days"] < full["time_to_train_days"]
    assert speeds == sorted(speeds, reverse=True)
    assert callable(effective_tokens_per_s)


def test_sweep_nodes_shows_where_more_gpus_stop_helping() -> None:
    from tierwise.plan.sweep import fastest_run, sweep
    from tierwise.workload.load import load_model

    c = with_rate(load_cluster("dgx-h100", nodes=16), 8000.0)
    rows = sweep(
        load_model("llama3-8b"), c, 512, 4096, [("nodes", [16, 32, 64])], train_tokens=1e12
    )
    assert [r["gpus"] for r in rows] == [128, 256, 512]
    for r in rows:
        assert r["time_to_train_days"] == pytest.approx(
            1e12 / (r["tokens_per_s"] * r["ettr"]) / DAY
        )
    assert rows[0]["ettr"] > rows[1]["ettr"] > rows[2]["ettr"]
    fastest = fastest_run(rows)
    assert fastest is not None and fastest["gpus"] < 512 and fastest["more_gpus_slower"]
    assert fastest_run([{"gpus": 8, "tokens_per_s": 1.0}]) is None


def test_estimate_train_tokens_imports_no_numpy() -> None:
    # The closed form is plain python on one layout: --train-tokens keeps a small estimate's
    # start-up (it loads no numpy; tests/test_placement_paths.py).
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from tierwise.cli.main import main\n"
        f"sys.argv = ['tierwise', *{ESTIMATE[:]!r}, '--train-tokens', '1T', '--json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('numpy' in sys.modules, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert '"time_to_train_days"' in proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == "False"


def test_assumed_defaults_are_said() -> None:

    preset = load_cluster("dgx-h100")
    note = T.assumed_fields(preset)[0]
    assert "reliability.node_failures_per_1000_node_days" in note and "price_per_gpu_hour" in note
    assert "node_failures" not in T.assumed_fields(with_rate(preset, 2.0))[0]
    data = dump_cluster(preset)  # every field written out: nothing assumed
    assert T.assumed_fields(build(ClusterSpec, data, "test")) == []


def test_ettr_figure_data() -> None:
    from tierwise.report.figures import count_label, ettr_data

    c = cluster(2048)
    data = ettr_data(c, 16_384, 0.35e9)
    renewal, first = data.series
    assert renewal.x[0] == 8 and renewal.x[-1] == 131_072 and len(renewal.x) == 15
    assert list(renewal.y) == sorted(renewal.y, reverse=True)  # more GPUs, less ETTR
    at_16k = T.train_time(c, T.Run(1e12, 1e6, 16_384, 0.35e9))
    assert renewal.y[renewal.x.index(16_384)] == pytest.approx(at_16k["ettr"])
    assert first.y[first.x.index(16_384)] == pytest.approx(at_16k["ettr_first_order"])
    assert data.x_ticks is not None and data.x_ticks[-1] == count_label(131_072) == "128K"


def test_plan_and_sweep_train_tokens_cli() -> None:
    base = ["-m", "llama3-8b", "--nodes", "8", "--gbs", "128", "--top", "2"]
    out = cli_json("plan", *base, "--train-tokens", "1T", "--objective", "time_to_train")
    for row in out["plans"]:
        assert row["time_to_train_days"] == pytest.approx(
            1e12 / (row["tokens_per_s"] * row["ettr"]) / DAY
        )
    days = [row["time_to_train_days"] for row in out["plans"]]
    assert days == sorted(days)
    text = run_cli("plan", *base, "--train-tokens", "1T").stdout
    assert "plan 1: time to train" in text and "ETTR" in text
    sweep = cli_json(
        "sweep",
        "-m",
        "llama3-8b",
        "--nodes",
        "4",
        "--gbs",
        "64",
        "--vary",
        "nodes=4,8",
        "--train-tokens",
        "1T",
        "--node-failure-rate",
        "meta-rsc1",
    )
    assert [r["gpus"] for r in sweep["rows"]] == [32, 64]
    assert all(r["ettr"] > 0.9 for r in sweep["rows"])
    assert sweep["fastest_run"]["gpus"] == 64 and not sweep["fastest_run"]["more_gpus_slower"]
    assert_user_error(
        run_cli("plan", *base, "--simulate", check=False), "--simulate", "--train-tokens"
    )
