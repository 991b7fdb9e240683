"""Parse NCCL's topology dump (`NCCL_TOPO_DUMP_FILE=topo.xml`) into a NodeTopology.

Layout: <system><cpu numaid= affinity=><pci busid= class= vendor= device= link_speed= link_width=>
... <gpu dev= sm= rank=><nvlink target= count= tclass=/></gpu> ... <nic><net name= speed= (Mb/s)
port=/></nic></pci></cpu></system>. NVLink targets of class 0x068000 are NVSwitches, 0x0302xx
GPUs. GPU<->NIC distance comes from the PCI tree: PIX when both hang off the same bridge, PXB
below a common bridge further up, PHB when they meet only at the CPU, SYS across CPUs (NCCL's own
classes; NCCL does not tell PHB from NODE).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from xml.parsers import expat

import networkx as nx

from tierwise.errors import ParseError
from tierwise.hardware.ingest.common import (
    GPU_PCI_KEYS,
    NVLINK_GEN_BY_SM,
    PCIE_GEN_BY_GTS,
)
from tierwise.hardware.ingest.node import GpuInfo, NicInfo, NodeTopology, with_rails

NVSWITCH_CLASS = "0x068000"
GPU_CLASSES = ("0x030200", "0x030000")
IB_CLASS_PREFIX = "0x0207"
_RDMA_NAME = re.compile(r"^(mlx\d+_|bnxt_re|irdma|erdma|ionic|rdma)")
MBPS_PER_GBPS = 1000
_LINK_SPEED = re.compile(r"\s*(\d{1,4}(?:\.\d{1,4})?)\s*GT/s", re.ASCII)
_LINK_WIDTH = re.compile(r"^\d{1,3}$", re.ASCII)
MAX_DEPTH = 64  # deepest element nesting read (NCCL's dumps: system/cpu/pci.../gpu/nvlink)


@dataclass(eq=False)
class _Elem:
    tag: str
    attrs: dict[str, str]
    line: int
    parent: _Elem | None
    children: list[_Elem] = field(default_factory=list)

    def ancestors(self) -> list[_Elem]:
        out, node = [], self.parent
        while node is not None:
            out.append(node)
            node = node.parent
        return out

    def walk(self) -> list[_Elem]:
        """This element and all below it, in document order."""
        out, todo = [], [self]
        while todo:
            elem = todo.pop()
            out.append(elem)
            todo += reversed(elem.children)
        return out


def parse_nccl_topo(text: str, source: str = "<nccl-xml>") -> NodeTopology:
    """The node described by one NCCL topology XML; malformed input is a ParseError."""
    root = _parse(text, source)
    if root.tag != "system":
        raise ParseError(
            f"root element is <{root.tag}>, expected <system> (an NCCL_TOPO_DUMP_FILE)",
            line=root.line,
            source=source,
        )
    elems = root.walk()
    gpu_elems = [e for e in elems if e.tag == "gpu"]
    if not gpu_elems:
        raise ParseError("no <gpu> element: NCCL found no GPU in this dump", line=1, source=source)
    nets = [e for e in elems if e.tag == "net"]
    return _topology(gpu_elems, nets, source)


def _parse(text: str, source: str) -> _Elem:
    parser = expat.ParserCreate()
    stack: list[_Elem] = []
    roots: list[_Elem] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        parent = stack[-1] if stack else None
        if len(stack) >= MAX_DEPTH:
            raise ParseError(
                f"elements nested deeper than {MAX_DEPTH}; an NCCL topology nests under 10",
                line=parser.CurrentLineNumber,
                source=source,
            )
        elem = _Elem(tag, attrs, parser.CurrentLineNumber, parent)
        (parent.children if parent else roots).append(elem)
        stack.append(elem)

    parser.StartElementHandler = start
    parser.EndElementHandler = lambda _tag: stack.pop()
    try:
        parser.Parse(text, True)
    except expat.ExpatError as exc:
        raise ParseError(
            f"malformed XML ({expat.ErrorString(exc.code)}, column {exc.offset + 1})",
            line=exc.lineno,
            source=source,
        ) from None
    return roots[0]


def _attr(elem: _Elem, name: str, source: str) -> str:
    if name not in elem.attrs:
        raise ParseError(f"<{elem.tag}> has no {name}= attribute", line=elem.line, source=source)
    return elem.attrs[name]


def _int_attr(elem: _Elem, name: str, source: str) -> int:
    value = _attr(elem, name, source)
    try:
        return int(value, 0)
    except ValueError:
        raise ParseError(
            f"<{elem.tag}> {name}={value[:40]!r} is not an integer", line=elem.line, source=source
        ) from None


def _device(elem: _Elem) -> _Elem:
    """The PCI element a <gpu>/<nic> hangs off (the element itself when it has no <pci>)."""
    return elem.parent if elem.parent is not None and elem.parent.tag == "pci" else elem


def _cpu(elem: _Elem) -> _Elem | None:
    return next((a for a in elem.ancestors() if a.tag == "cpu"), None)


def distance(gpu_dev: _Elem, nic_dev: _Elem) -> str:
    """PCIe distance class between two device elements of the XML tree."""
    if _cpu(gpu_dev) is not _cpu(nic_dev):
        return "SYS"
    nic_up = nic_dev.ancestors()
    common = next(a for a in gpu_dev.ancestors() if any(a is b for b in nic_up))
    if common.tag != "pci":
        return "PHB"
    return "PIX" if common is gpu_dev.parent and common is nic_dev.parent else "PXB"


def _topology(gpu_elems: list[_Elem], nets: list[_Elem], source: str) -> NodeTopology:
    devs = {_int_attr(g, "dev", source): g for g in gpu_elems}
    busid = {_device(g).attrs.get("busid", "").lower(): i for i, g in devs.items()}
    links, to_switch, graph = {}, {}, nx.Graph()
    graph.add_nodes_from(devs)
    for i, g in devs.items():
        nvlinks = [c for c in g.children if c.tag == "nvlink"]
        counted = [c for c in nvlinks if c.attrs.get("tclass") in (NVSWITCH_CLASS, *GPU_CLASSES)]
        links[i] = sum(_int_attr(c, "count", source) for c in counted)
        to_switch[i] = any(c.attrs.get("tclass") == NVSWITCH_CLASS for c in counted)
        for c in counted:
            peer = busid.get(c.attrs.get("target", "").lower())
            if peer is not None:
                graph.add_edge(i, peer)
    switched = all(to_switch.values())
    connected = len(devs) > 1 and (switched or nx.is_connected(graph))
    nics = [_nic(n, source) for n in nets]
    nic_devs = {n.attrs["name"]: _device(n.parent) for n in nets if n.parent is not None}
    gpus, distances = [], {}
    for i, g in sorted(devs.items()):
        cpu = _cpu(g)
        gpus.append(
            GpuInfo(
                index=i,
                numa_node=_numa(cpu, source),
                cpu_affinity=_affinity(cpu, source),
                nvlinks=links[i],
            )
        )
        distances[i] = {name: distance(_device(g), dev) for name, dev in nic_devs.items()}
    gpu_infos, nic_infos = with_rails(gpus, nics, distances)
    gpu_key, notes = _gpu_key(devs, source)
    gen, lanes = _pcie(devs.values())
    return NodeTopology(
        tool="nccl-xml",
        source=source,
        gpus=gpu_infos,
        nics=nic_infos,
        nvlink_switched=switched and len(devs) > 1,
        nvlink_connected=connected,
        nvlink_gen=_common(NVLINK_GEN_BY_SM.get(_sm(g, source)) for g in devs.values()),
        gpu_key=gpu_key,
        pcie_gen=gen,
        pcie_lanes=lanes,
        notes=tuple(notes),
    )


def _sm(gpu: _Elem, source: str) -> int | None:
    return _int_attr(gpu, "sm", source) if "sm" in gpu.attrs else None


def _numa(cpu: _Elem | None, source: str) -> int | None:
    return _int_attr(cpu, "numaid", source) if cpu is not None and "numaid" in cpu.attrs else None


def _affinity(cpu: _Elem | None, source: str) -> str | None:
    if cpu is None or "affinity" not in cpu.attrs:
        return None
    try:
        return cpulist(cpu.attrs["affinity"])
    except ValueError:
        raise ParseError(
            f"<cpu> affinity={cpu.attrs['affinity']!r} is not a hex CPU mask",
            line=cpu.line,
            source=source,
        ) from None


def _nic(net: _Elem, source: str) -> NicInfo:
    name = _attr(net, "name", source)
    container = net.parent if net.parent is not None else net
    pci_class = _device(container).attrs.get("class", "")
    if pci_class.startswith(IB_CLASS_PREFIX):
        kind = "ib"
    elif name.startswith("efa"):
        kind = "efa"
    else:
        kind = "roce" if _RDMA_NAME.match(name) else "eth"
    speed = _int_attr(net, "speed", source) if "speed" in net.attrs else None
    return NicInfo(
        name=name,
        numa_node=_numa(_cpu(net), source),
        rate_Gbps=speed / MBPS_PER_GBPS if speed else None,
        kind=kind,
    )


def _gpu_key(devs: dict[int, _Elem], source: str) -> tuple[str | None, list[str]]:
    ids = {
        (_device(g).attrs.get("vendor", "?"), _device(g).attrs.get("device", "?"))
        for g in devs.values()
    }
    keys = {GPU_PCI_KEYS.get(pid) for pid in ids}
    if len(keys) == 1 and None not in keys:
        return keys.pop(), []
    shown = ", ".join(f"{v}:{d}" for v, d in sorted(ids))
    return None, [f"gpu: PCI id {shown} is not in the catalog's GPU table"]


def _pcie(gpus: Iterable[_Elem]) -> tuple[int | None, int | None]:
    speeds, widths = [], []
    for g in gpus:
        dev = _device(g)
        if m := _LINK_SPEED.match(dev.attrs.get("link_speed", "")):
            speeds.append(float(m.group(1)))
        if _LINK_WIDTH.match(dev.attrs.get("link_width", "")):
            widths.append(int(dev.attrs["link_width"]))
    if not speeds:
        return None, min(widths, default=None)
    gts = min(speeds)
    gen = PCIE_GEN_BY_GTS[min(PCIE_GEN_BY_GTS, key=lambda k: abs(k - gts))]
    return gen, min(widths, default=None)


def _common(values: Iterable[int | None]) -> int | None:
    found = set(values)
    return found.pop() if len(found) == 1 else None


def cpulist(mask: str) -> str:
    """A Linux CPU mask as NCCL prints it ("ffff0000,0000ffff") -> cpulist ("0-15,48-63")."""
    bits = int(mask.replace(",", ""), 16)
    cpus = [i for i in range(bits.bit_length()) if bits >> i & 1]
    ranges: list[str] = []
    start = prev = None
    for c in [*cpus, None]:
        if c is not None and prev is not None and c == prev + 1:
            prev = c
            continue
        if start is not None:
            ranges.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = c
    return ",".join(ranges)
