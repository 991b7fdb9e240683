"""The lab fabric: up/status/down, shaping, twice-up, stale leftovers, killed owner (root)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.conftest import assert_user_error, run_cli
from tierwise.lab import fabric, netns, shaping

# One prefix per test process: two suites on one machine never touch each other's namespaces.
PREFIX = f"tw{os.getpid() % 100000}t-"
pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(
        netns.missing_requirements() is not None,
        reason=f"lab unavailable: {netns.missing_requirements()}",
    ),
]


def leftovers(prefix: str = PREFIX) -> list[str]:
    """Namespaces and root-namespace links with the prefix, and the state file."""
    found = netns.namespaces(prefix) + netns.links(prefix)
    return found + ([str(fabric.state_path(prefix))] if fabric.state_path(prefix).exists() else [])


@pytest.fixture
def lab_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The test prefix for this process and CLI subprocesses; asserts nothing remains after."""
    assert not leftovers(), f"leftovers before the test: {leftovers()}"
    monkeypatch.setenv(netns.PREFIX_ENV, PREFIX)
    yield PREFIX
    remaining = leftovers()
    fabric.teardown(PREFIX)
    assert not remaining, f"the test left {remaining}"


def wait_clean(timeout_s: float = 15.0) -> list[str]:
    """Poll until nothing with the prefix remains; what is left at the deadline."""
    deadline = time.monotonic() + timeout_s
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    return leftovers()


def test_up_status_down_shapes_every_port(lab_env: str) -> None:
    data = json.loads(
        run_cli(
            "lab",
            "up",
            "--nodes",
            "4",
            "--inter-rate",
            "50mbit",
            "--oversubscription",
            "2",
            "--json",
        ).stdout
    )
    assert data["up"] and not data["stale"]
    cfg = fabric.FabricConfig(**data["config"])
    assert set(data["namespaces"]) == {cfg.switch_ns, *(cfg.node_ns(i) for i in range(4))}
    for i in range(4):
        assert shaping.shaped_rate(cfg.node_ns(i), cfg.node_dev(i)) == 50_000_000
        assert shaping.shaped_rate(cfg.switch_ns, cfg.port_dev(i)) == 50_000_000
    # Two leaves of two nodes, 2:1: the uplink carries 2 x 50 / 2 Mbit/s each way.
    assert shaping.shaped_rate(cfg.switch_ns, f"{PREFIX}up0") == 50_000_000
    assert netns.links(PREFIX) == []  # nothing in the root namespace
    addr = netns.ip("-o", "-4", "addr", "show", cfg.node_dev(3), ns=cfg.node_ns(3))
    assert "192.0.2.4/24" in addr
    assert_user_error(run_cli("lab", "up", "--nodes", "2", check=False), "already up", "lab down")
    status = json.loads(run_cli("lab", "status", "--json").stdout)
    assert status["up"] and status["persistent"]
    removed = json.loads(run_cli("lab", "down", "--json").stdout)["removed"]
    assert len(removed) == 5
    assert not json.loads(run_cli("lab", "status", "--json").stdout)["namespaces"]


def test_tbf_shaping(lab_env: str) -> None:
    cfg = fabric.FabricConfig(nodes=2, rate_bit=20_000_000, qdisc="tbf", prefix=PREFIX)
    with fabric.Fabric(cfg):
        assert shaping.qdiscs(cfg.node_ns(1), cfg.node_dev(1)) == ["tbf"]
        assert shaping.shaped_rate(cfg.node_ns(1), cfg.node_dev(1)) == 20_000_000
    assert not leftovers()


def test_stale_namespace_is_reported_and_removed(lab_env: str) -> None:
    netns.add_namespace(f"{PREFIX}node0")  # what a crashed run leaves behind
    status = json.loads(run_cli("lab", "status", "--json").stdout)
    assert status["stale"] and not status["up"]
    assert "stale" in run_cli("lab", "status").stdout
    assert_user_error(run_cli("lab", "up", check=False), "stale lab", f"{PREFIX}node0", "lab down")
    assert_user_error(run_cli("lab", "run", check=False), "stale lab")
    assert json.loads(run_cli("lab", "down", "--json").stdout)["removed"] == [f"{PREFIX}node0"]


def test_failed_build_removes_what_it_made(lab_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise netns.NetError("tc: injected failure")

    monkeypatch.setattr(shaping, "shape", broken)
    with (
        pytest.raises(netns.NetError, match="injected"),
        fabric.Fabric(fabric.FabricConfig(nodes=2, rate_bit=10_000_000, prefix=PREFIX)),
    ):
        pass
    assert not leftovers()


HOLD = """
import sys, time
from tierwise.lab.fabric import Fabric, FabricConfig
with Fabric(FabricConfig(nodes=2, rate_bit=10_000_000, prefix=sys.argv[1])):
    print("up", flush=True)
    time.sleep(120)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_owner_killed_or_interrupted_leaves_nothing(lab_env: str, sig: signal.Signals) -> None:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, PREFIX], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    assert json.loads(run_cli("lab", "status", "--json").stdout)["owner_pid"] == proc.pid
    assert_user_error(run_cli("lab", "up", check=False), "already up", f"pid {proc.pid}")
    os.kill(proc.pid, sig)
    proc.wait(30)
    assert wait_clean() == []
