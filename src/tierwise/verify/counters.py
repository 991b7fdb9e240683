"""NIC counter snapshots before and after a run: parse, subtract, classify, flag.

A snapshot file may mix the three formats operators capture, line by line:

* ``ethtool -S IFACE`` output (``     rx_discards_phy: 0``). The interface comes from the
  nearest preceding line naming the command (``$ ethtool -S eth0`` or ``# ethtool -S eth0``);
  ``NIC statistics:`` headers are skipped. Other echoed commands (``$ rdma statistic show``)
  end an ethtool block.
* ``rdma statistic show`` output: ``link mlx5_0/1 out_of_sequence 0 packet_seq_err 0 ...``.
* sysfs ``counters``/``hw_counters`` files as
  ``grep -H . /sys/class/infiniband/*/ports/*/*counters/*`` prints them:
  ``/sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_sequence:0``.

``# time: <seconds since the epoch>`` (``echo "# time: $(date +%s.%N)"``) records when the
snapshot was taken, for rates; other ``#`` lines are comments. Any other line is an error, so a
wrong file is caught rather than read as zero counters.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tierwise.errors import ParseError, TierwiseError
from tierwise.textio import ascii_int, read_text
from tierwise.units import MIN_DURATION_S

#: PFC pause frames per second, on one counter, above which a run counts as a pause storm.
#: A heuristic default (no public standard sets one); contracts override it with pause_per_s.
DEFAULT_PAUSE_STORM_PER_S = 1000.0

#: Counter categories in the order names are matched (first match wins).
#: pause: PFC/global pause frames; pause_storm_events: the NIC's own storm detector (mlx5);
#: congestion: ECN/CNP and wait counters (signs of congestion control working, not of loss).
CATEGORY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("pause_storm_events", re.compile(r"pause_storm")),
    ("congestion", re.compile(r"cnp|ecn|xmit_wait|pause_duration|pause_transition")),
    ("pause", re.compile(r"^(?:rx|tx)_(?:prio\d+_|global_)?pause(?:_ctrl)?(?:_frames)?(?:_phy)?$")),
    ("out_of_sequence", re.compile(r"out_of_sequence|packet_seq_err|out_of_order")),
    ("retransmits", re.compile(r"retrans|retr(?:y|ies)|timeout|rnr_nak|implied_nak|duplicate_req")),
    ("drops", re.compile(r"discard|out_of_buffer|dropped|drops?$|missed")),
    ("errors", re.compile(r"^(?!.*flush).*(?:err|crc|symbol|link_downed|fcs)")),
)
CATEGORIES: tuple[str, ...] = tuple(name for name, _ in CATEGORY_PATTERNS)

_TIME = re.compile(r"^#\s*time\s*:\s*(\d{1,30}(?:\.\d{0,30})?)\s*$", re.ASCII)
_ETHTOOL_CMD = re.compile(r"^(?:[#$]\s*)?(?:sudo\s+)?ethtool\s+(?:-S|--statistics)\s+(\S+)\s*$")
_PROMPT = "$"  # a shell command echoed into the snapshot (`$ rdma statistic show`)
_DIGITS = re.compile(r"^[0-9]+$")
_SYSFS = re.compile(r"(?:^|/)([^/\s]+)/ports/(\d+)/(?:hw_)?counters/([^/:\s]+):\s*(\d+)\s*$")
_RDMA = re.compile(r"^link\s+(\S+/\d+)\s+(.*)$")
_FORMATS = "ethtool -S, rdma statistic or /sys/class/infiniband/.../counters/NAME:VALUE lines"


def category(counter: str) -> str | None:
    """The category of a counter name (see CATEGORY_PATTERNS), None if it is not one we flag."""
    lowered = counter.lower()
    return next((name for name, pat in CATEGORY_PATTERNS if pat.search(lowered)), None)


@dataclass(frozen=True)
class Snapshot:
    """Counter values by (device, counter); device is an interface or ``mlx5_0/1``."""

    source: str
    values: dict[tuple[str, str], int]
    time_s: float | None = None


def _ethtool_value(line: str) -> tuple[str, str] | None:
    """(name, digits) of an ``ethtool -S`` line ``  rx_discards_phy: 0``, else None."""
    name, sep, value = line.rpartition(":")
    name, value = name.strip(), value.strip()
    return (name, value) if sep and name and _DIGITS.match(value) else None


def parse_counters(text: str, source: str = "<counters>") -> Snapshot:
    """Read one snapshot; raises ParseError naming the line."""
    values: dict[tuple[str, str], int] = {}
    time_s: float | None = None
    iface: str | None = None

    def put(lineno: int, device: str, name: str, token: str) -> None:
        if (device, name) in values:
            raise ParseError(f"counter {name} of {device} listed twice", lineno, source)
        try:
            values[device, name] = ascii_int(token)
        except ValueError as exc:
            raise ParseError(f"counter {name} of {device}: {exc}", lineno, source) from None

    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line == "NIC statistics:":
            continue
        if cmd := _ETHTOOL_CMD.match(line):
            iface = cmd.group(1)
        elif line.startswith(_PROMPT):
            iface = None
        elif stamp := _TIME.match(line):
            if time_s is not None:
                raise ParseError("a second '# time:' line", lineno, source)
            time_s = float(stamp.group(1))
            if not math.isfinite(time_s):
                raise ParseError("'# time:' is not a finite number of seconds", lineno, source)
        elif line.startswith("#"):
            continue
        elif sysfs := _SYSFS.search(line):
            dev, port, name, value = sysfs.groups()
            put(lineno, f"{dev}/{port}", name, value)
        elif rdma := _RDMA.match(line):
            tokens = rdma.group(2).split()
            if len(tokens) % 2 or not all(_DIGITS.match(v) for v in tokens[1::2]):
                raise ParseError(
                    "rdma statistic line is not 'link DEV/PORT name value ...'", lineno, source
                )
            for name, value in zip(tokens[::2], tokens[1::2], strict=True):
                put(lineno, rdma.group(1), name, value)
        elif (stat := _ethtool_value(line)) and iface is not None:
            put(lineno, iface, *stat)
        elif stat:
            raise ParseError(
                "ethtool counter before any 'ethtool -S IFACE' line naming its interface",
                lineno,
                source,
            )
        else:
            raise ParseError(
                f"not a counter line {line[:60]!r}; expected {_FORMATS}", lineno, source
            )
    if not values:
        raise ParseError(f"no counters found; expected {_FORMATS}", source=source)
    return Snapshot(source, values, time_s)


def read_snapshot(path: Path) -> Snapshot:
    """`parse_counters` of a file."""
    return parse_counters(read_text(path), str(path))


@dataclass(frozen=True)
class Delta:
    """One counter's increase over the run; ``per_s`` when the interval is known."""

    device: str
    counter: str
    category: str | None
    before: int
    after: int
    per_s: float | None

    @property
    def delta(self) -> int:
        """after - before (count)."""
        return self.after - self.before

    def as_dict(self) -> dict[str, object]:
        """JSON form."""
        return {
            "device": self.device,
            "counter": self.counter,
            "category": self.category,
            "before": self.before,
            "after": self.after,
            "delta": self.delta,
            "per_s": self.per_s,
        }


def interval_s(before: Snapshot, after: Snapshot, given_s: float | None = None) -> float | None:
    """Seconds between the snapshots: ``given_s`` if set, else from their ``# time:`` lines."""
    if given_s is not None:
        return given_s
    if before.time_s is None or after.time_s is None:
        return None
    span = after.time_s - before.time_s
    if 0 < span < MIN_DURATION_S:
        raise TierwiseError(
            f"{after.source}: '# time:' {after.time_s} is {span:g} s after {before.source}'s; "
            f"allowed: at least {MIN_DURATION_S * 1e3:g} ms (a rate over less is noise)"
        )
    if span <= 0:
        raise TierwiseError(
            f"{after.source}: '# time:' {after.time_s} is not after {before.source}'s "
            f"{before.time_s}; pass the snapshots in order (--counters-before, --counters-after)"
        )
    return span


def deltas(before: Snapshot, after: Snapshot, seconds: float | None) -> list[Delta]:
    """Every counter in both snapshots, in the after snapshot's order; a counter that went
    backwards (driver reload, reset between snapshots) is an error naming it."""
    common = [key for key in after.values if key in before.values]
    if not common:
        raise TierwiseError(
            f"{before.source} and {after.source} have no counter in common "
            "(snapshots of different hosts or devices?)"
        )
    out = []
    for device, counter in common:
        b, a = before.values[device, counter], after.values[device, counter]
        if a < b:
            raise TierwiseError(
                f"{after.source}: counter {counter} of {device} went from {b} to {a} "
                "(reset between the snapshots?)"
            )
        rate = (a - b) / seconds if seconds else None
        out.append(Delta(device, counter, category(counter), b, a, rate))
    return out


def by_category(items: Iterable[Delta]) -> dict[str, list[Delta]]:
    """Deltas of flagged categories that moved, grouped by category (CATEGORIES order)."""
    groups: dict[str, list[Delta]] = {name: [] for name in CATEGORIES}
    for d in items:
        if d.category is not None and d.delta > 0:
            groups[d.category].append(d)
    return groups
