"""Thin wrappers around iproute2 (``ip``, ``tc``): namespaces, veth pairs, bridges, addresses.

Every object the lab makes carries a name prefix (default `DEFAULT_PREFIX`, or
``$TIERWISE_LAB_PREFIX``), so leftovers of any run can be found and removed by name alone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence

from tierwise.errors import TierwiseError

DEFAULT_PREFIX = "twlab-"
PREFIX_ENV = "TIERWISE_LAB_PREFIX"
#: Longest prefix that keeps every interface name within Linux's 15 characters
#: (``<prefix>n<NN>s``).
MAX_PREFIX_LEN = 10
_PREFIX_RE = re.compile(r"^[a-z][a-z0-9]*-$")
#: Seconds any single ``ip``/``tc`` call may take.
IP_TIMEOUT_S = 20.0


class LabUnavailable(TierwiseError):
    """This machine cannot run the lab (not root, not Linux, or iproute2 missing)."""


class NetError(TierwiseError):
    """An ``ip``/``tc`` command failed: a run-time fault (exit code 1), not bad input."""

    exit_code = 1


def lab_prefix(prefix: str | None = None) -> str:
    """The name prefix: ``prefix``, else ``$TIERWISE_LAB_PREFIX``, else `DEFAULT_PREFIX`."""
    value = prefix or os.environ.get(PREFIX_ENV) or DEFAULT_PREFIX
    if not _PREFIX_RE.match(value) or len(value) > MAX_PREFIX_LEN:
        raise TierwiseError(
            f"lab prefix: {value!r} must be lowercase letters/digits ending in '-', "
            f"at most {MAX_PREFIX_LEN} characters (e.g. {DEFAULT_PREFIX!r})"
        )
    return value


def missing_requirements() -> str | None:
    """Why the lab cannot run here (one line), or None when it can."""
    if os.uname().sysname != "Linux":
        return "the lab needs Linux network namespaces"
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces and tc); run it as root"
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return (
            f"the lab needs iproute2 ({', '.join(missing)} not found); "
            "install it with scripts/install-system-deps.sh"
        )
    return None


def require_lab() -> None:
    """Raise `LabUnavailable` with the reason when the lab cannot run here."""
    reason = missing_requirements()
    if reason:
        raise LabUnavailable(reason)


def run(argv: Sequence[str], check: bool = True) -> str:
    """Run one iproute2 command; its stdout. A failure raises `NetError` with its stderr."""
    proc = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
    )
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise NetError(f"{' '.join(argv)}: {detail[-1] if detail else f'exit {proc.returncode}'}")
    return proc.stdout


def ip(*args: str, ns: str | None = None, check: bool = True) -> str:
    """``ip [-n ns] args...``."""
    return run(["ip", *(("-n", ns) if ns else ()), *args], check=check)


def namespaces(prefix: str) -> list[str]:
    """Network namespaces whose name starts with ``prefix``."""
    names = [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]
    return sorted(n for n in names if n.startswith(prefix))


def links(prefix: str, ns: str | None = None) -> list[str]:
    """Interfaces in ``ns`` (the root namespace by default) whose name starts with ``prefix``."""
    out = []
    for line in ip("-o", "link", "show", ns=ns).splitlines():
        name = line.split(":", 2)[1].strip().split("@")[0]
        if name.startswith(prefix):
            out.append(name)
    return sorted(out)


def add_namespace(name: str) -> None:
    """Create namespace ``name`` with its loopback up."""
    ip("netns", "add", name)
    ip("link", "set", "lo", "up", ns=name)


def delete_namespace(name: str) -> None:
    """Delete namespace ``name`` (its interfaces go with it); a missing one is fine."""
    ip("netns", "delete", name, check=False)


def delete_link(name: str, ns: str | None = None) -> None:
    """Delete interface ``name`` (a veth takes its peer with it); a missing one is fine."""
    ip("link", "delete", name, ns=ns, check=False)


def add_veth(name: str, ns: str, peer: str, peer_ns: str) -> None:
    """A veth pair: ``name`` in ``ns``, ``peer`` in ``peer_ns``; both set up."""
    ip("link", "add", name, "netns", ns, "type", "veth", "peer", "name", peer, "netns", peer_ns)
    ip("link", "set", name, "up", ns=ns)
    ip("link", "set", peer, "up", ns=peer_ns)


def add_bridge(name: str, ns: str) -> None:
    """A bridge (the emulated switch) in ``ns``, set up."""
    ip("link", "add", name, "type", "bridge", ns=ns)
    ip("link", "set", name, "up", ns=ns)


def attach(dev: str, bridge: str, ns: str) -> None:
    """Plug ``dev`` into ``bridge`` (both in ``ns``)."""
    ip("link", "set", dev, "master", bridge, ns=ns)


def add_address(dev: str, cidr: str, ns: str) -> None:
    """Assign ``cidr`` (e.g. ``192.0.2.1/24``) to ``dev`` in ``ns``."""
    ip("addr", "add", cidr, "dev", dev, ns=ns)


def exec_prefix(ns: str) -> list[str]:
    """argv prefix that runs a command inside ``ns``."""
    return ["ip", "netns", "exec", ns]


def pids_in(ns: str) -> list[int]:
    """Processes living in namespace ``ns``."""
    return [int(p) for p in ip("netns", "pids", ns, check=False).split()]
