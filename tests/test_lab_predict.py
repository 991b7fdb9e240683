"""Lab pieces that need neither root nor torch ranks: predictions, the lab cluster, input errors."""

from __future__ import annotations

from math import inf, nan

import numpy as np
import pytest

from tests.conftest import assert_user_error, run_cli
from tierwise.cli.commands.lab import parse_sizes
from tierwise.collectives.predict import group_shape, predict
from tierwise.errors import TierwiseError
from tierwise.lab import netns
from tierwise.lab.cluster import lab_cluster
from tierwise.lab.fabric import FabricConfig
from tierwise.lab.predict import physical_placement, predict_lab, rank_nodes, staged_hierarchical_us
from tierwise.lab.probe import ProbeResult, TierFit, fit, leaf_sizes
from tierwise.lab.run import LabRun
from tierwise.lab.shaping import format_rate, parse_rate

SIZES = [1 << 20, 16 << 20]


def probe_result(intra_GBps: float = 0.8, leaf_GBps: float = 0.012) -> ProbeResult:
    return ProbeResult(
        intra=TierFit(alpha_us=1500.0, beta_GBps=intra_GBps, ranks=2, size_bytes=(), time_us=()),
        leaf=TierFit(alpha_us=2000.0, beta_GBps=leaf_GBps, ranks=2, size_bytes=(), time_us=()),
        matmul_tflops=0.05,
    )


def cluster(nodes: int = 2, k: int = 2, over: float = 1.0):
    return lab_cluster(
        FabricConfig(nodes=nodes, rate_bit=100_000_000, oversubscription=over), k, probe_result()
    )


def test_lab_cluster_carries_the_probe() -> None:
    c = cluster(4, 2, 2.0)
    assert c.intra.kind == "loopback" and c.intra.effective_GBps == pytest.approx(0.8)
    assert c.inter.nic.kind == "veth" and c.inter.nic.effective_GBps == pytest.approx(0.012)
    assert c.nodes_per_leaf == 2 and c.topology.oversubscription == 2.0


def test_staged_prediction_matches_the_model_for_aware_placement() -> None:
    c = cluster()
    place = physical_placement(c, rank_nodes(2, 2, "aware"))
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        model = predict(op, group_shape(c, placement=place), SIZES, "hierarchical").time_us
        staged = staged_hierarchical_us(c, place, op, 2, SIZES)
        np.testing.assert_allclose(staged, model, rtol=0.02)


def test_hierarchical_wins_aware_and_loses_naive() -> None:
    c = cluster()
    aware = predict_lab(c, "all_reduce", rank_nodes(2, 2, "aware"), SIZES)
    naive = predict_lab(c, "all_reduce", rank_nodes(2, 2, "naive"), SIZES)
    ratio = aware["flat"][-1]["time_us"] / aware["hierarchical"][-1]["time_us"]
    assert 1.3 < ratio < 1.5  # the link carries 1.5 n (flat ring) vs n (hierarchical)
    assert naive["hierarchical"][-1]["time_us"] > 1.5 * aware["hierarchical"][-1]["time_us"]
    assert naive["flat"][-1]["time_us"] > aware["flat"][-1]["time_us"]
    assert rank_nodes(2, 2, "naive") == [0, 1, 0, 1]


def test_probe_fit_recovers_alpha_beta() -> None:
    sizes = [1 << 16, 1 << 18, 1 << 20]
    beta_GBps, alpha_us, p = 0.02, 300.0, 2
    times = [2 * (p - 1) * alpha_us + 2 * (p - 1) / p * n / (beta_GBps * 1e3) for n in sizes]
    got = fit(p, sizes, times)
    assert got.alpha_us == pytest.approx(alpha_us) and got.beta_GBps == pytest.approx(beta_GBps)
    assert leaf_sizes(100e6)[-1] == 1 << 20 and len(set(leaf_sizes(1e9))) == 3


def test_rates() -> None:
    assert parse_rate("200mbit") == 200_000_000 and parse_rate("1G") == 1_000_000_000
    assert format_rate(1.5e9) == "1.5gbit" and format_rate(50e6) == "50mbit"


def test_without_root_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert "needs root" in (netns.missing_requirements() or "")
    with pytest.raises(netns.LabUnavailable, match="needs root"):
        netns.require_lab()


def test_bad_input_is_one_line() -> None:
    assert_user_error(run_cli("lab", "up", "--inter-rate", "fast", check=False), "--inter-rate")
    assert_user_error(
        run_cli("lab", "run", "--placement", "random", check=False), "--placement", "naive"
    )


@pytest.mark.parametrize(
    ("build", "needle"),
    [
        (lambda: FabricConfig(nodes=3, rate_bit=10**8, oversubscription=2), "even"),
        (lambda: FabricConfig(nodes=2, rate_bit=10**8, qdisc="netem"), "--qdisc"),
        (lambda: FabricConfig(nodes=0, rate_bit=10**8), "--nodes"),
        (lambda: FabricConfig(nodes=2, rate_bit=10**8, oversubscription=nan), "finite"),
        (lambda: FabricConfig(nodes=2, rate_bit=10**8, oversubscription=inf), "finite"),
        (lambda: parse_sizes("1M:x"), "--sizes"),
        (lambda: parse_sizes("1M:1K"), "--sizes MIN 1048576 is larger than --sizes MAX 1024"),
        (lambda: parse_sizes("1M:16M:1"), "--sizes FACTOR: must be an integer >= 2, got 1"),
        (lambda: parse_rate("5kbit"), "between"),
        (lambda: netns.lab_prefix("Bad_"), "prefix"),
        (lambda: LabRun(FabricConfig(nodes=2, rate_bit=10**8), 2, "broadcast", (1,)), "--op"),
        (
            lambda: LabRun(FabricConfig(nodes=2, rate_bit=10**8), 2, "all_reduce", (1 << 50,)),
            r"--sizes: 1125899906842624 B; allowed: at most \d+ B \(4 ranks x 3 buffers",
        ),
    ],
)
def test_validation_names_the_field(build, needle: str) -> None:
    with pytest.raises(TierwiseError, match=needle):
        build()
