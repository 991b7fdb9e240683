"""Comparative evidence: what differs between hosts, ranks or versions of one run, and what
falls below what the hardware offers.

Each function returns the lines that show a difference (empty when there is none) and a
short description; ``rules`` turns them into findings.
"""

from __future__ import annotations

import re

from tierwise.verify.doctor.facts import Facts, Port
from tierwise.verify.doctor.known import nic_model
from tierwise.verify.doctor.model import Evidence

_NUMERIC = re.compile(r"\d+(?:\.\d+)*")

MODEL_RATE_RATIO = 0.9
"""A port below this fraction of its model's fastest rate runs below what the NIC supports."""


def gdr_split(f: Facts) -> tuple[list[Evidence], str]:
    """Hosts (else ranks) whose NET/IB connections use GPUDirect RDMA beside others whose
    connections use none in a direction where GDR runs elsewhere (receives always use it when
    it works; sends only where GDR reads are on): GDR on some paths only."""
    gdr: dict[str, set[str]] = {}  # who -> directions with GDRDMA
    plain: dict[str, dict[str, Evidence]] = {}  # who -> directions without it -> a line
    for key, by_gdr in f.net_paths.items():
        who, direction = _who(key)
        if True in by_gdr:
            gdr.setdefault(who, set()).add(direction)
        elif False in by_gdr:
            plain.setdefault(who, {})[direction] = by_gdr[False][0]
    used_with_gdr = {d for dirs in gdr.values() for d in dirs} | {"[receive]", ""}
    without = {
        who: [e for d, e in dirs.items() if d in used_with_gdr]
        for who, dirs in plain.items()
        if who not in gdr
    }
    without = {who: ev for who, ev in without.items() if ev}
    if not gdr or not without:
        return [], ""
    with_lines = [
        lines[True][0]
        for key, lines in sorted(f.net_paths.items())
        if True in lines and _who(key)[0] in sorted(gdr)[:2]
    ]
    ev = with_lines[:2] + [e for who in sorted(without)[:4] for e in without[who][:1]]
    return ev, (
        f"GPUDirect RDMA on {', '.join(sorted(gdr)[:3])} but not on"
        f" {', '.join(sorted(without)[:4])}"
    )


def _who(key: str) -> tuple[str, str]:
    """(host or rank, direction) of a ``Facts.net_paths`` key (``node1 [send]``, ``rank 3``)."""
    if key.endswith("]"):
        who, _, direction = key.rpartition(" ")
        return who, direction
    return key, ""


def nic_count_split(f: Facts) -> tuple[list[Evidence], str]:
    """Hosts where NCCL uses fewer NICs than on the others."""
    counts = {host: n for host, (n, _) in f.host_nics.items()}
    if len(set(counts.values())) < 2:
        return [], ""
    most = max(counts.values())
    fewer = sorted(h for h, n in counts.items() if n < most)
    ev = [f.host_nics[h][1] for h in fewer[:3]] + [
        next(e for h, (n, e) in sorted(f.host_nics.items()) if n == most)
    ]
    named = ", ".join(f"{h} ({counts[h]})" for h in fewer[:4])
    return ev, f"NCCL uses fewer NICs on {named} than on the other hosts ({most})"


def below_model(ports: list[Port]) -> list[tuple[Port, str]]:
    """Active InfiniBand ports below the fastest rate their NIC model runs (``CA type``,
    ``vendor_part_id`` or the PCI device of a topology dump; ``known.NIC_MODELS``)."""
    slow = []
    dual = {p.model for p in ports if p.port not in ("1", "")}  # two-port SKUs run slower ports
    for p in ports:
        model = nic_model(p.model)
        if p.model in dual:
            continue
        if model is None or not p.rate_Gbps or p.state not in (None, "active"):
            continue
        if (p.link_layer or "InfiniBand").lower() != "infiniband":
            continue  # Ethernet SKUs of one model ship at several rates (2x100, 1x200 GbE)
        if p.rate_Gbps < MODEL_RATE_RATIO * model.max_Gbps:
            slow.append(
                (p, f"{p.device} at {p.rate_Gbps:g} Gb/s, a {model.name} runs {model.max_Gbps:g}")
            )
    return slow


def version_splits(f: Facts) -> tuple[list[Evidence], list[str]]:
    """Each kind of version (NCCL, CUDA driver, a package, the libnccl a process loads) seen
    with more than one value, and the net plugin loaded on some hosts only."""
    ev: list[Evidence] = []
    details: list[str] = []
    for kind, values in sorted(f.versions.items()):
        if kind == "NCCL":
            values = _by_number(values)
        if len(values) > 1:
            details.append(f"{kind} {' vs '.join(sorted(values)[:3])}")
            ev += [lines[0] for _, lines in sorted(values.items())[:3]]
    plugins = {name for name, _ in f.host_plugins.values()}
    if len(plugins) > 1 and (len(f.host_plugins) > 1):
        hosts = sorted(f.host_plugins, key=lambda h: f.host_plugins[h][0])
        named = ", ".join(f"{h}: {f.host_plugins[h][0]}" for h in hosts[:4])
        details.append(f"net plugin differs between hosts ({named})")
        ev += [f.host_plugins[h][1] for h in hosts[:4]]
    return ev, details


def _by_number(values: dict[str, list[Evidence]]) -> dict[str, list[Evidence]]:
    """NCCL versions grouped by their number (``2.18.5+cuda12.2`` and ``2.18.5`` agree)."""
    out: dict[str, list[Evidence]] = {}
    for value, lines in values.items():
        number = _NUMERIC.match(value)
        out.setdefault(number.group(0) if number else value, []).extend(lines)
    if len(out) > 1:
        return out
    builds = {v.split("+", 1)[1] for v in values if "+" in v}  # same number, other CUDA build
    return values if len(builds) > 1 else out
