"""Bring the emulated fabric up and down: one namespace per node, bridges as leaf switches.

Layout (``p`` = prefix, default ``twlab-``)::

    p node<i>  (namespace)  p n<i>  192.0.2.<i+1>/24 --veth-- p n<i>s  in  p sw
    p sw       (namespace)  bridge p br<leaf>; with oversubscription two leaves joined by the
                            veth pair p up0 -- p up1, shaped to nodes_per_leaf x rate / ratio

Each node's veth is shaped in both directions (node egress and the switch port towards the
node) to the inter rate, so a node sends and receives at most that much, as a real NIC.
Nothing is made in the root namespace and every address lives inside the lab's namespaces
(192.0.2.0/24 is TEST-NET-1, never routed).

A lab started by `up` stays until `teardown`; a `Fabric` context (what `tierwise lab run`
uses) removes everything on exit, on an exception, on SIGINT/SIGTERM/SIGHUP, at interpreter
exit, and, through a guard process, when its owner is killed outright. The state file records
the owner so `status` tells a live lab from the stale leftovers of a crashed run.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from tierwise.errors import TierwiseError
from tierwise.lab import netns, shaping
from tierwise.lab.netns import DEFAULT_PREFIX

#: Where the state of each lab (by prefix) is kept; /run is cleared on reboot like namespaces.
STATE_DIR = Path("/run/tierwise-lab")
#: Lab addresses: TEST-NET-1 (RFC 5737), node i at .(i + 1).
SUBNET, SUBNET_BITS = "192.0.2.", 24
MAX_NODES = 64
#: Spine switches a routed lab may have (0: the bridged fabric), and the kernel's multipath
#: hash policies it can set (0: L3 source/destination address, 1: L4 5-tuple).
MIN_SPINES, MAX_SPINES = 2, 4
HASH_POLICIES = (0, 1)
#: Seconds the guard process gets to exit after its owner released the lab.
GUARD_EXIT_S = 10.0


@dataclass(frozen=True)
class FabricConfig:
    """N nodes, each with one NIC shaped to ``rate_bit`` bits/s, under one or two leaves.

    ``oversubscription`` > 1 splits the nodes over two leaves whose shared uplink carries
    ``nodes_per_leaf * rate_bit / oversubscription``. ``spines`` >= 2 instead routes the two
    leaves over that many spines with the kernel's ECMP (`tierwise.lab.spines`), each
    leaf-spine link carrying ``nodes_per_leaf * rate_bit / (oversubscription * spines)``, the
    flows hashed by ``net.ipv4.fib_multipath_hash_policy`` = ``hash_policy``.
    """

    nodes: int
    rate_bit: int
    oversubscription: float = 1.0
    qdisc: str = "htb"
    prefix: str = DEFAULT_PREFIX
    spines: int = 0
    hash_policy: int = 0

    def __post_init__(self) -> None:
        netns.lab_prefix(self.prefix)
        shaping.check_qdisc(self.qdisc)
        if not 1 <= self.nodes <= MAX_NODES:
            raise TierwiseError(f"--nodes: {self.nodes} must be between 1 and {MAX_NODES}")
        if not 1 <= self.oversubscription < math.inf:  # (nan too)
            raise TierwiseError(
                f"--oversubscription: {self.oversubscription:g} must be a finite number >= 1 "
                "(2 means 2:1)"
            )
        if self.spines and not (MIN_SPINES <= self.spines <= MAX_SPINES):
            raise TierwiseError(
                f"--spines: {self.spines} must be 0 (one bridge) or {MIN_SPINES}-{MAX_SPINES}"
            )
        if self.hash_policy not in HASH_POLICIES:
            raise TierwiseError(
                f"--hash-policy: {self.hash_policy} must be 0 (addresses) or 1 (5-tuple)"
            )
        if self.spines and (self.nodes < 4 or self.nodes % 2):
            raise TierwiseError(
                f"--spines: needs an even number of nodes >= 4 for two leaves, "
                f"got --nodes {self.nodes}"
            )
        if self.oversubscription > 1 and (self.nodes < 2 or self.nodes % 2):
            raise TierwiseError(
                f"--oversubscription: needs an even number of nodes >= 2 for two leaves, "
                f"got --nodes {self.nodes}"
            )

    @property
    def leaves(self) -> int:
        """Leaf switches (bridges): two when oversubscribed or routed over spines, else one."""
        return 2 if self.oversubscription > 1 or self.spines else 1

    @property
    def spine_link_rate_bit(self) -> float:
        """Rate of each leaf-spine link, bits/s (only with spines)."""
        return self.uplink_rate_bit / max(self.spines, 1)

    @property
    def nodes_per_leaf(self) -> int:
        """Nodes under each leaf."""
        return self.nodes // self.leaves

    @property
    def uplink_rate_bit(self) -> float:
        """Rate of the leaf-to-leaf link, bits/s (only with two leaves)."""
        return self.nodes_per_leaf * self.rate_bit / self.oversubscription

    @property
    def switch_ns(self) -> str:
        """Namespace holding the bridges."""
        return f"{self.prefix}sw"

    def node_ns(self, node: int) -> str:
        """Namespace of node ``node``."""
        return f"{self.prefix}node{node}"

    def node_dev(self, node: int) -> str:
        """The node's NIC (veth end inside its namespace)."""
        return f"{self.prefix}n{node}"

    def port_dev(self, node: int) -> str:
        """The switch port of the node (veth end in the switch namespace)."""
        return f"{self.prefix}n{node}s"

    def bridge(self, leaf: int) -> str:
        """Bridge of leaf ``leaf``."""
        return f"{self.prefix}br{leaf}"

    def leaf_of(self, node: int) -> int:
        """The leaf a node hangs off."""
        return node // self.nodes_per_leaf

    def node_addr(self, node: int) -> str:
        """IPv4 address of node ``node``."""
        if self.spines:
            from tierwise.lab.spines import node_addr

            return node_addr(self, node)
        return f"{SUBNET}{node + 1}"

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the state file)."""
        return asdict(self)


@dataclass(frozen=True)
class Owner:
    """The process that owns a running lab: pid and its start time (guards against pid reuse)."""

    pid: int
    start: str

    @classmethod
    def me(cls) -> Owner:
        """This process."""
        return cls(os.getpid(), _start_time(os.getpid()) or "")

    def alive(self) -> bool:
        """The process still runs (same pid and start time)."""
        return _start_time(self.pid) == self.start


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def state_path(prefix: str) -> Path:
    """State file of the lab with ``prefix``."""
    return STATE_DIR / f"{prefix}state.json"


@dataclass(frozen=True)
class LabStatus:
    """What exists under one prefix: namespaces, root-namespace links and the recorded state.

    ``up``: a complete lab whose owner is alive (or that was started to persist by `up`).
    ``stale``: leftovers of a run that crashed (owner gone, state missing or partial).
    """

    prefix: str
    namespaces: tuple[str, ...]
    links: tuple[str, ...]
    config: FabricConfig | None
    owner: Owner | None
    persistent: bool

    @property
    def leftovers(self) -> tuple[str, ...]:
        """Every object found by prefix."""
        return self.namespaces + self.links

    @property
    def up(self) -> bool:
        """A live lab holds these names."""
        if self.config is None or not self.namespaces:
            return False
        return self.persistent or (self.owner is not None and self.owner.alive())

    @property
    def stale(self) -> bool:
        """Something is left over and no live lab owns it."""
        return bool(self.leftovers) and not self.up

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` object of `tierwise lab status`."""
        return {
            "prefix": self.prefix,
            "up": self.up,
            "stale": self.stale,
            "namespaces": list(self.namespaces),
            "links": list(self.links),
            "config": None if self.config is None else self.config.to_dict(),
            "owner_pid": None if self.owner is None else self.owner.pid,
            "persistent": self.persistent,
        }


def status(prefix: str | None = None) -> LabStatus:
    """What the lab with ``prefix`` has left in the system (needs iproute2)."""
    prefix = netns.lab_prefix(prefix)
    netns.require_lab()
    state = _read_state(prefix)
    config = owner = None
    persistent = False
    if state is not None:
        config = FabricConfig(**state["config"])
        owner = Owner(**state["owner"]) if state.get("owner") else None
        persistent = bool(state.get("persistent"))
    return LabStatus(
        prefix=prefix,
        namespaces=tuple(netns.namespaces(prefix)),
        links=tuple(netns.links(prefix)),
        config=config,
        owner=owner,
        persistent=persistent,
    )


def _read_state(prefix: str) -> dict[str, Any] | None:
    try:
        data = json.loads(state_path(prefix).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "config" in data else None


def _write_state(config: FabricConfig, owner: Owner | None, persistent: bool) -> None:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    data = {
        "config": config.to_dict(),
        "owner": None if owner is None else asdict(owner),
        "persistent": persistent,
        "created": time.time(),
    }
    state_path(config.prefix).write_text(json.dumps(data))


def teardown(prefix: str | None = None) -> list[str]:
    """Remove every namespace and root-namespace link with ``prefix`` and the state file;
    returns what was removed (idempotent)."""
    prefix = netns.lab_prefix(prefix)
    netns.require_lab()
    removed = []
    for ns in netns.namespaces(prefix):
        netns.delete_namespace(ns)
        removed.append(ns)
    for link in netns.links(prefix):
        netns.delete_link(link)
        removed.append(link)
    with contextlib.suppress(FileNotFoundError):
        state_path(prefix).unlink()
    return removed


def refuse_if_taken(prefix: str) -> None:
    """Raise a one-line error when a lab (live or stale) already uses ``prefix``."""
    found = status(prefix)
    if found.up:
        cfg, owner = found.config, found.owner
        assert cfg is not None
        who = "started by `tierwise lab up`" if owner is None else f"owned by pid {owner.pid}"
        raise TierwiseError(
            f"lab {prefix!r} is already up ({cfg.nodes} nodes at "
            f"{shaping.format_rate(cfg.rate_bit)}, {who}); run `tierwise lab down` first"
        )
    if found.stale:
        names = ", ".join(found.leftovers[:4]) + (" ..." if len(found.leftovers) > 4 else "")
        gone = f"owner pid {found.owner.pid} is gone" if found.owner else "no owner recorded"
        raise TierwiseError(
            f"stale lab from a crashed run: {names} ({gone}); run `tierwise lab down` to remove it"
        )


def build(config: FabricConfig) -> None:
    """Create the namespaces, links, bridges, addresses and shaping of ``config``; on any
    failure remove everything with its prefix and re-raise."""
    try:
        _build(config)
    except BaseException:
        teardown(config.prefix)
        raise


def _build(c: FabricConfig) -> None:
    if c.spines:
        from tierwise.lab import spines

        spines.build(c)
        return
    sw = c.switch_ns
    netns.add_namespace(sw)
    for leaf in range(c.leaves):
        netns.add_bridge(c.bridge(leaf), sw)
    if c.leaves == 2:
        up0, up1 = f"{c.prefix}up0", f"{c.prefix}up1"
        netns.add_veth(up0, sw, up1, sw)
        netns.attach(up0, c.bridge(0), sw)
        netns.attach(up1, c.bridge(1), sw)
        shaping.shape(sw, up0, c.uplink_rate_bit, c.qdisc)
        shaping.shape(sw, up1, c.uplink_rate_bit, c.qdisc)
    for node in range(c.nodes):
        ns, dev, port = c.node_ns(node), c.node_dev(node), c.port_dev(node)
        netns.add_namespace(ns)
        netns.add_veth(dev, ns, port, sw)
        netns.attach(port, c.bridge(c.leaf_of(node)), sw)
        netns.add_address(dev, f"{c.node_addr(node)}/{SUBNET_BITS}", ns)
        shaping.shape(ns, dev, c.rate_bit, c.qdisc)
        shaping.shape(sw, port, c.rate_bit, c.qdisc)


def up(config: FabricConfig) -> None:
    """Start a lab that stays until `teardown` (`tierwise lab up`)."""
    refuse_if_taken(config.prefix)
    _write_state(config, None, persistent=True)
    build(config)


class Fabric:
    """A lab that lives as long as a ``with`` block (and never longer than its process)."""

    def __init__(self, config: FabricConfig) -> None:
        self.config = config
        self._guard: subprocess.Popen[bytes] | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Fabric:
        c = self.config
        refuse_if_taken(c.prefix)
        owner = Owner.me()
        _write_state(c, owner, persistent=False)
        atexit.register(self.down)
        self._install_signals()
        self._guard = _start_guard(c.prefix, owner.pid)
        try:
            build(c)
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.down()

    def down(self) -> None:
        """Remove the lab, release the guard and restore signal handlers (idempotent)."""
        teardown(self.config.prefix)
        atexit.unregister(self.down)
        if self._guard is not None:
            _release_guard(self._guard)
            self._guard = None
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _install_signals(self) -> None:
        def interrupt(signum: int, frame: FrameType | None) -> None:
            raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(ValueError):  # not the main thread: the guard still works
                self._previous[signum] = signal.signal(signum, interrupt)


@contextlib.contextmanager
def fabric(config: FabricConfig) -> Iterator[Fabric]:
    """``with fabric(cfg) as f:`` — the lab exists inside the block only."""
    with Fabric(config) as f:
        yield f


def _start_guard(prefix: str, owner_pid: int) -> subprocess.Popen[bytes]:
    """A process (own session, so Ctrl-C does not reach it) that tears the lab down when its
    owner dies without releasing it."""
    return subprocess.Popen(
        [sys.executable, "-m", "tierwise.lab.guard", prefix, str(owner_pid)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )


def _release_guard(guard: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):
        assert guard.stdin is not None
        guard.stdin.write(b"release\n")
        guard.stdin.close()
    try:
        guard.wait(GUARD_EXIT_S)
    except subprocess.TimeoutExpired:
        guard.kill()
        guard.wait()
