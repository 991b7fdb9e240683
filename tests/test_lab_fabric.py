"""The lab fabric: up/status/down, shaping, twice-up, stale leftovers, killed owner (root)."""

from __future__ import annotations

import json
import os
import re
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
    # every htb link has its bulk band and, ahead of it, the control band
    bands = [shaping.LINK_CLASS, shaping.BULK_CLASS, shaping.CONTROL_CLASS]
    assert shaping.htb_classes(cfg.switch_ns, cfg.port_dev(0)) == sorted(bands)
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


# Two nodes blast 1400-byte UDP datagrams at node 1 (8 Mbit/s each into its 10 Mbit/s port), so
# the port's bulk queue grows by 0.75 MB/s; from 1 s on, node 0 sends a 64-byte probe every
# 50 ms that node 1 echoes, and prints their round trips (s; 1 when lost).
UDP_PORT, BLAST_S, PROBES, PROBE_GAP_S = 29600, 3.0, 20, 0.05
ECHO = f"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", {UDP_PORT}))
s.settimeout({BLAST_S + 5})
while True:
    data, peer = s.recvfrom(2048)
    if len(data) < 100:
        s.sendto(data, peer)
"""
BLAST = f"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
payload, end = bytes(1400), time.monotonic() + {BLAST_S}
while time.monotonic() < end:
    for _ in range(7):
        try:
            s.sendto(payload, (sys.argv[1], {UDP_PORT}))
        except OSError:
            pass  # the node's own queue is full: dropped, as a NIC would
    time.sleep(0.01)
"""
PROBE = f"""
import json, socket, sys, threading, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2.0)
sent, rtts = {{}}, [1.0] * {PROBES}
def receive():
    try:
        while True:
            i = int.from_bytes(s.recvfrom(64)[0], "big")
            rtts[i] = time.perf_counter() - sent[i]
    except (TimeoutError, OSError):
        pass
time.sleep(1.0)
for i in range({PROBES}):
    sent[i] = time.perf_counter()
    s.sendto(i.to_bytes(8, "big"), (sys.argv[1], {UDP_PORT}))
    if i == 0:
        threading.Thread(target=receive, daemon=True).start()
    time.sleep({PROBE_GAP_S})
time.sleep(1.5)
print(json.dumps(rtts))
"""


def _bulk_backlog_b(ns: str, dev: str) -> int:
    out = netns.run(["tc", "-s", "-n", ns, "class", "show", "dev", dev])
    found = re.search(rf"class htb {shaping.BULK_CLASS} .*?backlog (\d+)b", out, re.DOTALL)
    return int(found.group(1)) if found else 0


def test_small_packets_skip_the_bulk_queue(lab_env: str) -> None:
    """The htb control band: 64-byte probes cross a port whose bulk queue holds hundreds of
    milliseconds of data in a few milliseconds (a FIFO would hold them behind it all)."""
    cfg = fabric.FabricConfig(nodes=3, rate_bit=10_000_000, prefix=PREFIX)
    target = cfg.node_addr(1)

    def start(node: int, script: str) -> subprocess.Popen[str]:
        argv = [*netns.exec_prefix(cfg.node_ns(node)), sys.executable, "-c", script, target]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)

    with fabric.Fabric(cfg):
        echo = start(1, ECHO)
        procs = [start(0, BLAST), start(2, BLAST), start(0, PROBE)]
        try:
            time.sleep(1.5)
            backlog = _bulk_backlog_b(cfg.switch_ns, cfg.port_dev(1))
            rtts = json.loads(procs[-1].communicate(timeout=30)[0])
        finally:
            for proc in [*procs, echo]:
                proc.kill()
                proc.wait(10)
    queued_s = backlog * 8 / cfg.rate_bit
    assert queued_s > 0.2, f"the bulk queue held only {backlog} B"
    assert sorted(rtts)[PROBES // 2] < 0.02 < queued_s / 10, (rtts, queued_s)
    assert not leftovers()


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
