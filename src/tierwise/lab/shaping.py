"""Egress rate limits with ``tc``: htb (default) or tbf. This kernel has no netem, so there is
no injected delay: latency comes from queueing behind the rate limit.

htb shapes a link as one class at the rate with two children: small packets (under
`CONTROL_MAX_B` bytes: TCP's ACKs, gloo's control messages) go ahead of the bulk data, with
`CONTROL_SHARE` of the rate guaranteed and the rest borrowed by whichever band has traffic. A
lab link runs a thousand times slower than a fabric's, but its queue holds as many packets
(and a veth's are up to 64 KiB GSO packets): tens of milliseconds of data. Traffic crossing a
link both ways puts the ACKs of one direction's flows behind the other direction's data, and
the flows that start second crawl, ACK-clocked at that delay, until the first direction
finishes (a ring step over the lab's spines measured up to 1.7x its rate-limited time). A real
fabric's queue holds microseconds, so its ACKs never wait that long; the control band gives
the lab the same. tbf is one FIFO: no band.

Rates are in bits per second; ``parse_rate`` reads ``1gbit``, ``200mbit``, ``500kbit``.
"""

from __future__ import annotations

import json
import re

from tierwise.errors import TierwiseError
from tierwise.lab.netns import run

QDISCS = ("htb", "tbf")
_RATE_UNITS = {"": 1, "bit": 1, "k": 1e3, "kbit": 1e3, "m": 1e6, "mbit": 1e6, "g": 1e9, "gbit": 1e9}
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?(?:bit)?)(?:/s|ps)?\s*$", re.IGNORECASE)
#: Slowest and fastest rate the lab shapes to, bits/s.
MIN_RATE_BIT, MAX_RATE_BIT = 1e6, 100e9
#: Token bucket of either qdisc: at least this many bytes (a veth sends up to 64 KiB GSO
#: packets; tbf drops any packet larger than its bucket) and at least `BURST_S` at the rate.
MIN_BURST_B = 256 * 1024
BURST_S = 0.004
#: tbf queue: packets may wait this long behind the rate limit before being dropped, ms.
TBF_LATENCY_MS = 200
#: htb's control band: IPv4 packets shorter than this (bytes, whole datagram) go first: a TCP
#: ACK with SACK blocks is at most 112 bytes; every bulk segment is a full 1500-byte frame.
CONTROL_MAX_B = 256
#: Share of the link rate the control band is guaranteed (ACKs are ~3% of the data they ack:
#: a 66-112 byte ACK per two 1514-byte frames); the bulk band is guaranteed the rest and
#: either band borrows the whole rate when the other is idle.
CONTROL_SHARE = 0.05
#: DRR quantum of the two bands, bytes: one 64 KiB GSO packet (the bands have distinct
#: priorities, so it only silences htb's "quantum is small/big" warning at extreme rates).
HTB_QUANTUM_B = 65536
#: htb class ids: the link, its bulk band (the default) and its control band.
LINK_CLASS, BULK_CLASS, CONTROL_CLASS = "1:1", "1:10", "1:20"


def parse_rate(text: str, field: str = "--inter-rate") -> int:
    """Bits per second from ``1gbit``, ``200mbit``, ``500kbit``, ``1G`` (decimal units, as tc)."""
    match = _RATE_RE.match(str(text))
    if not match:
        raise TierwiseError(f"{field}: cannot read rate {text!r}; use e.g. 100mbit, 1gbit")
    rate = float(match.group(1)) * _RATE_UNITS[match.group(2).lower()]
    if not MIN_RATE_BIT <= rate <= MAX_RATE_BIT:
        raise TierwiseError(
            f"{field}: rate {text!r} must be between {format_rate(MIN_RATE_BIT)} and "
            f"{format_rate(MAX_RATE_BIT)}"
        )
    return int(rate)


def format_rate(rate_bit: float) -> str:
    """``200000000`` -> ``200mbit`` (tc's syntax)."""
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if rate_bit >= scale:
            return f"{rate_bit / scale:g}{unit}"
    return f"{rate_bit:g}bit"


def check_qdisc(qdisc: str) -> str:
    """``qdisc`` if it is one of `QDISCS`, else a one-line error."""
    if qdisc not in QDISCS:
        raise TierwiseError(f"--qdisc: {qdisc!r} is not one of {', '.join(QDISCS)}")
    return qdisc


def _tc(ns: str, *args: str) -> str:
    return run(["tc", "-n", ns, *args])


def shape(ns: str, dev: str, rate_bit: float, qdisc: str = "htb") -> None:
    """Limit egress of ``dev`` in ``ns`` to ``rate_bit`` bits/s with ``qdisc`` (htb: with the
    control band ahead of the bulk data)."""
    burst = str(max(MIN_BURST_B, int(rate_bit / 8 * BURST_S)))
    if check_qdisc(qdisc) == "tbf":
        _tc(ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", format_rate(rate_bit),
            "burst", burst, "latency", f"{TBF_LATENCY_MS}ms")  # fmt: skip
        return
    _tc(ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
    control = rate_bit * CONTROL_SHARE
    for classid, parent, rate, prio in (
        (LINK_CLASS, "1:", rate_bit, None),
        (BULK_CLASS, LINK_CLASS, rate_bit - control, 1),
        (CONTROL_CLASS, LINK_CLASS, control, 0),
    ):
        child = () if prio is None else ("prio", str(prio), "quantum", str(HTB_QUANTUM_B))
        _tc(ns, "class", "replace", "dev", dev, "parent", parent, "classid", classid, "htb",
            "rate", format_rate(rate), "ceil", format_rate(rate_bit),
            "burst", burst, "cburst", burst, *child)  # fmt: skip
    # u32 offsets count from the IP header: bytes 2-3 hold the datagram's total length, under
    # CONTROL_MAX_B (a power of two) when its high bits are zero
    _tc(ns, "filter", "replace", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
        "u32", "match", "u16", "0", f"{0x10000 - CONTROL_MAX_B:#x}", "at", "2",
        "flowid", CONTROL_CLASS)  # fmt: skip


def shaped_rate(ns: str, dev: str) -> int | None:
    """The rate (bits/s) an htb class or tbf root on ``dev`` enforces; None when unshaped."""
    out = _tc(ns, "class", "show", "dev", dev) + _tc(ns, "qdisc", "show", "dev", dev)
    found = re.search(
        rf"^(?:class htb {LINK_CLASS} root|qdisc tbf) .*?\brate (\d+(?:\.\d+)?[KMG]?bit)",
        out,
        re.MULTILINE,
    )
    return parse_rate(found.group(1), "tc rate") if found else None


def sent_bytes(ns: str, dev: str) -> int:
    """Bytes the root qdisc of ``dev`` in ``ns`` has sent, as the shaper charges them: whole
    frames, a GSO packet as the frames of its segments (an interface counter counts its
    headers once)."""
    roots = [q for q in json.loads(_tc(ns, "-s", "-j", "qdisc", "show", "dev", dev)) if q["root"]]
    return int(roots[0]["bytes"]) if roots else 0


def htb_classes(ns: str, dev: str) -> list[str]:
    """Ids of the htb classes on ``dev`` in ``ns``, sorted (empty without htb)."""
    return sorted(re.findall(r"^class htb (\S+)", _tc(ns, "class", "show", "dev", dev), re.M))


def qdiscs(ns: str, dev: str) -> list[str]:
    """Kinds of the qdiscs on ``dev`` in ``ns`` (e.g. ``["htb"]``)."""
    return re.findall(r"^qdisc (\w+)", _tc(ns, "qdisc", "show", "dev", dev), re.MULTILINE)
