"""Parse `nvidia-smi topo -m` (optionally preceded by `nvidia-smi -L`) into a NodeTopology.

The matrix has one column per device (GPU0.., NIC0.. or mlx5_0..), then CPU Affinity, NUMA
Affinity and (newer drivers) GPU NUMA ID; cells are X, NV# (# bonded NVLinks), PIX, PXB, PHB,
NODE or SYS (SOC on old drivers). A "NIC Legend" maps NIC# to device names. Tabs or the spaces a
terminal turns them into both work.
"""

from __future__ import annotations

import re
from itertools import combinations

import networkx as nx

from tierwise.errors import ParseError
from tierwise.hardware.ingest.common import DISTANCES, gpu_key_from_name
from tierwise.hardware.ingest.node import GpuInfo, NicInfo, NodeTopology, with_rails
from tierwise.textio import ascii_int

AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_HEADER_TOKEN = re.compile("|".join(AFFINITY_COLUMNS) + r"|\S+")
_GPU_LABEL = re.compile(r"GPU(\d{1,6})$", re.ASCII)
_NVLINK = re.compile(r"NV(\d{1,4})$", re.ASCII)
_GPU_NAME = re.compile(r"^GPU ([\d, ]+):(.*)$", re.ASCII)  # the name is cut in _gpu_names
_NIC_LEGEND = re.compile(r"^\s*(NIC\d{1,6}):\s*(\S+)\s*$", re.ASCII)
#: Most devices (GPUs + NICs) one matrix may list: the matrix is quadratic in them, and a node
#: has at most a few dozen (16 GPUs and 16 NICs on the largest HGX boards).
MAX_DEVICES = 256
_ALLOWED = "X, NV#, " + ", ".join(DISTANCES)


def parse_topo_matrix(text: str, source: str = "<nvidia-smi>") -> NodeTopology:
    """The node behind one `nvidia-smi topo -m` printout; malformed input is a ParseError."""
    lines = text.splitlines()
    head = next((i for i, ln in enumerate(lines) if ln.split()[:1] == ["GPU0"]), None)
    if head is None:
        raise ParseError(
            "no `nvidia-smi topo -m` matrix: expected a header line starting with GPU0",
            source=source,
        )
    labels, extras = _header(lines[head], head + 1, source)
    rows = _rows(lines, head, labels, extras, source)
    names = _gpu_names(lines[:head])
    legend = dict(m.groups() for ln in lines[head:] if (m := _NIC_LEGEND.match(ln)))
    return _topology(labels, extras, rows, names, legend, source)


def _header(line: str, lineno: int, source: str) -> tuple[list[str], list[str]]:
    tokens = _HEADER_TOKEN.findall(line)
    n = next((i for i, t in enumerate(tokens) if t in AFFINITY_COLUMNS), len(tokens))
    labels, extras = tokens[:n], tokens[n:]
    if any(_is_cell(t) for t in labels):
        raise ParseError(
            "this is a matrix row, not the header: the header line (GPU0 GPU1 ...) is missing",
            line=lineno,
            source=source,
        )
    if len(labels) > MAX_DEVICES:
        raise ParseError(
            f"header lists {len(labels)} devices; a node has at most {MAX_DEVICES}",
            line=lineno,
            source=source,
        )
    if len(set(labels)) != len(labels):
        raise ParseError("header lists a device twice", line=lineno, source=source)
    if any(t not in AFFINITY_COLUMNS for t in extras):
        raise ParseError(
            f"header: unexpected columns after {extras[0]!r}", line=lineno, source=source
        )
    return labels, extras


def _rows(
    lines: list[str], head: int, labels: list[str], extras: list[str], source: str
) -> dict[str, tuple[int, list[str]]]:
    rows: dict[str, tuple[int, list[str]]] = {}
    i = head + 1
    while i < len(lines) and (tokens := lines[i].split()) and tokens[0] in labels:
        rows[tokens[0]] = (i + 1, tokens[1:])
        i += 1
    missing = [label for label in labels if label not in rows]
    if missing:
        raise ParseError(
            f"row {missing[0]} is missing: the header lists {len(labels)} devices "
            f"({labels[0]}..{labels[-1]}) but {len(rows)} rows follow; the output looks truncated",
            line=i + 1,
            source=source,
        )
    for label, (lineno, cells) in rows.items():
        k = next((i for i, c in enumerate(cells) if not _is_cell(c)), len(cells))
        tail = len(extras) if _GPU_LABEL.match(label) else 0
        if k < len(labels) and len(cells) - k <= tail:
            raise ParseError(
                f"row {label} has {k} of {len(labels)} device columns (column {labels[k]} is "
                "missing); the output looks truncated",
                line=lineno,
                source=source,
            )
        for col, cell in zip(labels, cells, strict=False):
            _check_cell(label, col, cell, lineno, source)
    return rows


def _is_cell(token: str) -> bool:
    return token == "X" or token in DISTANCES or token == "SOC" or bool(_NVLINK.match(token))


def _check_cell(row: str, col: str, cell: str, lineno: int, source: str) -> None:
    ok = cell == "X" if row == col else (_is_cell(cell) and cell != "X")
    if not ok:
        expect = "X" if row == col else _ALLOWED
        raise ParseError(
            f"row {row}, column {col}: {cell[:40]!r} is not a link type; allowed: {expect}",
            line=lineno,
            source=source,
        )


def _gpu_names(lines: list[str]) -> dict[int, str]:
    """`nvidia-smi -L` lines (``GPU 0: NVIDIA H100 80GB HBM3 (UUID: ...)``) as {index: name}."""
    names: dict[int, str] = {}
    for line in lines:
        if not (m := _GPU_NAME.match(line.strip())):
            continue
        name = m.group(2).partition("(UUID:")[0].strip()
        indices = m.group(1).replace(",", " ").split()
        if name and indices and all(len(i) <= 6 for i in indices):
            names.update((int(i), name) for i in indices)
    return names


def _topology(
    labels: list[str],
    extras: list[str],
    rows: dict[str, tuple[int, list[str]]],
    names: dict[int, str],
    legend: dict[str, str],
    source: str,
) -> NodeTopology:
    n = len(labels)
    gpu_labels = [lb for lb in labels if _GPU_LABEL.match(lb)]
    nic_labels = [lb for lb in labels if lb not in gpu_labels]
    index = {lb: int(lb.removeprefix("GPU")) for lb in gpu_labels}
    cell = {(r, c): rows[r][1][labels.index(c)] for r in labels for c in labels}
    nv = {
        (index[a], index[b]): int(m.group(1))
        for a, b in combinations(gpu_labels, 2)
        if (m := _NVLINK.match(cell[a, b]))
    }
    switched = len(gpu_labels) > 1 and len(nv) == len(gpu_labels) * (len(gpu_labels) - 1) // 2
    switched = switched and len(set(nv.values())) == 1
    graph = nx.Graph(list(nv))
    graph.add_nodes_from(index.values())
    connected = len(gpu_labels) > 1 and nx.is_connected(graph)
    gpus, distances = [], {}
    for lb in gpu_labels:
        i = index[lb]
        lineno, tokens = rows[lb]
        affinity = dict(zip(extras, tokens[n:], strict=False))
        if len(affinity) < len(extras):
            raise ParseError(
                f"row {lb}: column {extras[len(affinity)]!r} is missing; output looks truncated",
                line=lineno,
                source=source,
            )
        links = next(iter(nv.values())) if switched else sum(c for p, c in nv.items() if i in p)
        gpus.append(
            GpuInfo(
                index=i,
                name=names.get(i),
                numa_node=_int_or_none(affinity.get("NUMA Affinity")),
                cpu_affinity=_none_if_na(affinity.get("CPU Affinity")),
                nvlinks=links,
            )
        )
        distances[i] = {
            legend.get(nic, nic): _distance(cell[lb, nic])
            for nic in nic_labels
            if not _NVLINK.match(cell[lb, nic])
        }
    nics = [NicInfo(name=legend.get(nic, nic)) for nic in nic_labels]
    keys = {gpu_key_from_name(name) for name in names.values()}
    notes = []
    if len(keys) > 1:
        notes.append(f"gpu: GPUs have different names {sorted(set(names.values()))}; none used")
    elif keys == {None}:
        notes.append(f"gpu: {next(iter(names.values()))!r} is not in the catalog")
    gpu_infos, nic_infos = with_rails(gpus, nics, distances)
    return NodeTopology(
        tool="nvidia-smi",
        source=source,
        gpus=gpu_infos,
        nics=nic_infos,
        nvlink_switched=switched,
        nvlink_connected=connected,
        gpu_key=next(iter(keys)) if len(keys) == 1 else None,
        notes=tuple(notes),
    )


def _distance(cell: str) -> str:
    return "SYS" if cell == "SOC" else cell


def _none_if_na(value: str | None) -> str | None:
    return None if value in (None, "N/A") else value


def _int_or_none(value: str | None) -> int | None:
    value = _none_if_na(value)
    try:
        return None if value is None else ascii_int(value, 6)
    except ValueError:
        return None
