"""Tool printouts people paste beside NCCL logs, read into ``Facts`` one line at a time.

* package lists: ``pip freeze`` (``name==1.2``), ``pip list``/``conda list`` (name, version
  columns), ``dpkg -l`` (``ii name version``): versions of NCCL, CUDA, torch, the net
  plugins and libfabric, so one package at two versions (two nodes, two environments) shows;
* ``ldd`` (``libnccl.so.2 => /path/libnccl.so.2.19.3``, ``=> not found``) and ``LD_DEBUG``
  (``calling init: /path/libnccl.so.2``): which NCCL a process loads;
* the ``nvidia-smi`` header (driver and CUDA versions) and ``nvidia-smi -q``'s fabric state;
* ``nvidia-smi topo -m``: the link between each pair of GPUs;
* ``lspci -vvv`` ``LnkSta`` lines a link trained below its capability marks ``(downgraded)``;
* lines of the system around NCCL: missing ``/dev/infiniband``, IMEX channels, peer-memory
  registration, libibverbs providers, loader errors (``version `X' not found``, ``undefined
  symbol``), driver/library mismatches, Fabric Manager state.
"""

from __future__ import annotations

import re

from tierwise.verify.doctor.facts import KEEP, Facts
from tierwise.verify.doctor.model import Evidence

_RELEVANT = re.compile(
    r"nccl|^torch$|^cuda|cudart|^nvidia-cuda|^cudatoolkit|aws-ofi|^ofi|libfabric|^efa|peermem|"
    r"^nvidia-driver|fabricmanager|^mlnx|^rdma-core|^libibverbs|^ibverbs|hpcx|sharp",
    re.IGNORECASE,
)
_PIP_FREEZE = re.compile(r"^\s*([A-Za-z][\w.\-]*)==(\d[\w.+\-]*)\s*$")
_DPKG = re.compile(r"^ii\s+([A-Za-z][\w.+\-]*?)(?::\w+)?\s+(\d[\w.+:~\-]*)\s")
_COLUMNS = re.compile(r"^\s*([A-Za-z][\w.+\-]*)\s+v?(\d[\w.+\-]*)(?:\s+\S+){0,2}\s*$")
_LDD = re.compile(r"^\s*(lib[\w+\-]+\.so[\w.]*)\s+=>\s+(not found|\S+)")
_LD_DEBUG_INIT = re.compile(r"^\s*\d+:\s+calling init:\s+(\S*libnccl\.so\S*)")
_LIB_VERSION = re.compile(r"libnccl\.so\.(\d+\.\d+\.\d+)")
_TORCH_NCCL = re.compile(r"nccl\.version\(\)\)?\s*[:=,]?\s*\(?(\d+), ?(\d+), ?(\d+)\)?")
_SMI_HEADER = re.compile(r"Driver Version:\s*([\d.]+)(?:\s+CUDA Version:\s*([\d.]+))?")
_TOPO_HEADER = re.compile(r"^\s*GPU0\s+(?:GPU\d+|NIC\d+|mlx\w+|CPU Affinity)")
_TOPO_CELL = re.compile(r"^(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")
_FABRIC_STATE = re.compile(r"^\s*State\s*:\s*(Not Started|In Progress|Not Supported)\s*$")
_SERVICE_DOWN = re.compile(r"^\s*Active:\s+(inactive|failed)\b")

# (key, pattern): system lines worth a fact wherever they appear
SYSTEM_LINES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("no_dev_infiniband", re.compile(r"/dev/infiniband\S*: No such file or directory")),
    (
        "no_verbs_provider",
        re.compile(
            r"no userspace device-specific driver found"
            r"|couldn't load driver 'libmlx5-rdmav\d+\.so'"
            r"|couldn't open config directory '/etc/libibverbs\.d'"
        ),
    ),
    (
        "peermem_missing",
        re.compile(
            r"memory_peers/nv_mem\w*/version: No such file"
            r"|Module nvidia[_-]peermem not found|could not insert 'nvidia[_-]peermem'"
        ),
    ),
    (
        "symbol_version",
        re.compile(r"version `[^']+' not found|undefined symbol: ?\w+"),
    ),
    (
        "driver_too_old",
        re.compile(
            r"driver version is insufficient for CUDA runtime"
            r"|NVIDIA driver on your system is too old|older than the minimal"
        ),
    ),
    ("nvml_mismatch", re.compile(r"Driver/library version mismatch")),
    (
        "imex_missing",
        re.compile(
            r"nvidia-caps-imex-channels\S*: No such file|IMEX channel\S* (?:not|missing)"
            r"|CUDA_ERROR_NOT_PERMITTED.*cuMemCreate|cuMemCreate.*CUDA_ERROR_NOT_PERMITTED"
        ),
    ),
    ("caps_missing", re.compile(r"/dev/nvidia-caps\S*'?: No such file")),
    (
        "fm_error",
        re.compile(
            r"(?i)fabric ?manager\S*.*\b(?:error|failed|not running|not started|inactive)"
            r"|failed to configure all the available GPUs or NVSwitches"
        ),
    ),
    ("pcie_downgraded", re.compile(r"LnkSta:.*\(downgraded\)")),
)


def read_printout(facts: Facts, line: str, ev: Evidence, state: dict[str, int]) -> bool:
    """Read one line of a tool printout into ``facts``; False when it is none of them.
    ``state`` carries what a printout's earlier lines said (the topology header's width, a
    Fabric Manager unit named above an ``Active:`` line)."""
    hit = False
    if line.lstrip().startswith("#"):
        return False  # a comment or a root shell prompt: a command, not its output
    for key, pattern in SYSTEM_LINES:
        if pattern.search(line):
            facts.mark(key, ev)
            hit = True
    if "fabricmanager" in line or line.strip() == "Fabric":
        state["fabric_line"] = ev.line
        hit = True
    near_fabric = 0 < ev.line - state.get("fabric_line", -99) <= 8
    if near_fabric and (_FABRIC_STATE.match(line) or _SERVICE_DOWN.match(line)):
        facts.mark("fm_error", ev)
        return True
    return topo_matrix(facts, line, ev, state) or _versions(facts, line, ev) or hit


def topo_matrix(facts: Facts, line: str, ev: Evidence, state: dict[str, int]) -> bool:
    """``nvidia-smi topo -m``: the header gives the GPU count, each row the link from that
    GPU to the GPUs after it (each pair once)."""
    if _TOPO_HEADER.match(line):
        state["topo_gpus"] = sum(1 for w in line.split() if w.startswith("GPU"))
        return True
    gpus = state.get("topo_gpus", 0)
    words = line.split()
    if not gpus or not words or not words[0].startswith("GPU") or not words[0][3:].isdigit():
        return False
    row = int(words[0][3:])
    cells = words[1 : gpus + 1]
    if len(cells) < gpus or not all(_TOPO_CELL.match(c) for c in cells):
        return False
    for col in range(row + 1, gpus):
        facts.topo_links[cells[col]] += 1
    if len(facts.topo_lines) < KEEP:
        facts.topo_lines.append(ev)
    return True


def _versions(facts: Facts, line: str, ev: Evidence) -> bool:
    """Package, library and driver versions."""
    smi = _SMI_HEADER.search(line)
    if smi:
        facts.add_version("NVIDIA driver", smi.group(1), ev)
        if smi.group(2):
            facts.add_version("CUDA (driver)", smi.group(2), ev)
        return True
    ldd = _LDD.match(line)
    if ldd:
        target = ldd.group(2)
        if target == "not found":
            facts.mark("lib_not_found", ev)
        elif (found := _LIB_VERSION.search(target)) is not None:
            facts.add_version("libnccl.so", found.group(1), ev)
        return True
    torch_nccl = _TORCH_NCCL.search(line)
    if torch_nccl:
        facts.add_version("NCCL", ".".join(torch_nccl.groups()), ev)
        return True
    init = _LD_DEBUG_INIT.match(line)
    if init:
        facts.add_version("libnccl.so loaded", init.group(1), ev)
        return True
    package = _PIP_FREEZE.match(line) or _DPKG.match(line) or _COLUMNS.match(line)
    if package and _RELEVANT.search(package.group(1)):
        facts.add_version(f"package {package.group(1).lower()}", package.group(2), ev)
        return True
    return False
