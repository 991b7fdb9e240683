"""Egress rate limits with ``tc``: htb (default) or tbf. This kernel has no netem, so there is
no injected delay: latency comes from queueing behind the rate limit.

Rates are in bits per second; ``parse_rate`` reads ``1gbit``, ``200mbit``, ``500kbit``.
"""

from __future__ import annotations

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
    """Limit egress of ``dev`` in ``ns`` to ``rate_bit`` bits/s with ``qdisc``."""
    rate = format_rate(rate_bit)
    burst = str(max(MIN_BURST_B, int(rate_bit / 8 * BURST_S)))
    if check_qdisc(qdisc) == "htb":
        _tc(ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
        _tc(
            ns,
            "class",
            "replace",
            "dev",
            dev,
            "parent",
            "1:",
            "classid",
            "1:10",
            "htb",
            "rate",
            rate,
            "ceil",
            rate,
            "burst",
            burst,
            "cburst",
            burst,
        )
        return
    _tc(
        ns,
        "qdisc",
        "replace",
        "dev",
        dev,
        "root",
        "tbf",
        "rate",
        rate,
        "burst",
        burst,
        "latency",
        f"{TBF_LATENCY_MS}ms",
    )


def shaped_rate(ns: str, dev: str) -> int | None:
    """The rate (bits/s) an htb class or tbf root on ``dev`` enforces; None when unshaped."""
    out = _tc(ns, "class", "show", "dev", dev) + _tc(ns, "qdisc", "show", "dev", dev)
    found = re.search(r"\brate (\d+(?:\.\d+)?[KMG]?bit)", out)
    return parse_rate(found.group(1), "tc rate") if found else None


def qdiscs(ns: str, dev: str) -> list[str]:
    """Kinds of the qdiscs on ``dev`` in ``ns`` (e.g. ``["htb"]``)."""
    return re.findall(r"^qdisc (\w+)", _tc(ns, "qdisc", "show", "dev", dev), re.MULTILINE)
