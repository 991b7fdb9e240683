"""The doctor's catalog of rules (documented in docs/doctor-rules.md).

Each rule looks at ``Facts`` and, when its cause shows, returns a severity, the evidence
lines and the fix. ``weight`` is the share of the tier's bandwidth the cause typically costs:
a ranking prior, with its source in the catalog doc; ``ranking`` turns it into GB/s when an
nccl-tests table gives the gap.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from tierwise.verify.doctor.compare import below_model, gdr_split, nic_count_split, version_splits
from tierwise.verify.doctor.facts import KEEP, Facts, HostRun, Port
from tierwise.verify.doctor.model import Evidence, Finding, Severity

_WIDTH_DOWN = re.compile(r"Width x\d+ \(downgraded\)")


class Hit(NamedTuple):
    """What a rule found: severity, evidence, the detail appended to the title, how sure
    (None: by severity, ``CONFIDENCE``) and, for doubtful evidence, the command that settles
    it."""

    severity: Severity
    evidence: Sequence[Evidence]
    detail: str
    confidence: float | None = None
    confirm: str | None = None


CONFIDENCE: dict[str, float] = {"error": 0.9, "warning": 0.7, "info": 0.4}
"""Confidence of a hit that names none: NCCL reporting the fault is near certain (error),
a setting or printout that costs bandwidth likely (warning)."""

LIKELY = 0.5
"""Below this confidence a finding's title says ``likely`` and it carries a ``confirm``."""

NVLS_GPUS = ("H100", "H200", "H800", "H20", "B200", "B300", "GB200", "GB300")
"""GPU names with NVLink SHARP on an NVSwitch baseboard (not their PCIe cards)."""

NVLINK_GPUS = ("A100-SXM", "A800-SXM", "V100-SXM", *NVLS_GPUS)
"""GPU names on NVLink baseboards (SXM): their peers are NVLink, not PCIe, away."""

_UNROUTABLE = re.compile(r"[:\s](?:172\.17|169\.254)\.\d+\.\d+")
"""Addresses other nodes cannot reach: docker's default bridge (172.17.0.0/16, a container
without the host network) and IPv4 link-local (169.254.0.0/16)."""

_IPOIB = re.compile(r"(?:\]|\s)ib[\w.]*:\d")
"""An IPoIB interface with its address (``[0]ib0:10.0.0.1``, ``interface ib0:...``)."""

_CONTAINER_HOST = re.compile(r"^[0-9a-f]{12}$")
"""A docker container's host name (its id's first 12 hex digits)."""

LOOPBACK_PREFIXES = ("lo", "docker", "virbr", "veth", "cni", "flannel")
"""Interfaces that cannot carry traffic between nodes (NCCL's own default skips lo, docker)."""

DEGRADED_RATIO = 0.9
"""A port below this fraction of its peers' rate counts as trained down."""

FAST_NVLINK_GBPS = 450.0
"""Per-GPU NVLink bandwidth (GB/s, NVLink 4 = H100) from which 16 channels are the floor."""

SLOW_NODE_RATIO = 0.75
"""A run below this fraction of the best busbw of runs of the same op is slow."""


@dataclass(frozen=True)
class Rule:
    """One catalog entry; ``check`` returns a Hit or None."""

    id: str
    category: str
    tier: Literal["inter", "intra", "any"]
    weight: float
    title: str
    fix: str
    check: Callable[[Facts], tuple[Any, ...] | None]

    def apply(self, facts: Facts) -> Finding | None:
        """The finding when the rule fires."""
        found = self.check(facts)
        if found is None:
            return None
        hit = Hit(*found)
        unique = [
            Evidence(e.file, e.line, e.text.strip()[:300])
            for e in sorted(set(hit.evidence), key=lambda e: (e.file, e.line))[:KEEP]
        ]
        confidence = CONFIDENCE[hit.severity] if hit.confidence is None else hit.confidence
        title = self.title + (f": {hit.detail}" if hit.detail else "")
        if confidence < LIKELY:
            title = "likely: " + title
        return Finding(
            id=self.id,
            category=self.category,
            severity=hit.severity,
            title=title,
            evidence=tuple(unique),
            fix=self.fix,
            tier=self.tier,
            weight=self.weight,
            confidence=confidence,
            confirm=hit.confirm,
        )


def _multi_node(f: Facts) -> bool:
    """More than one node (network connections count as proof, see ``Facts.node_count``)."""
    return (f.node_count or 1) > 1


def _is_gpu(names: set[str], families: Sequence[str]) -> bool:
    """A GPU of ``families`` on an NVSwitch baseboard (not a PCIe card, not an NVL pair)."""
    return any(
        fam in name and "PCIe" not in name and not name.rstrip().endswith("NVL")
        for name in names
        for fam in families
    )


# --- socket_fallback ---------------------------------------------------------------------------


def _socket(f: Facts) -> Hit | None:
    socket_conns = f.transport_evidence("NET/Socket")
    chose_socket = f.seen("using_network_socket")
    if not chose_socket and f.socket_lines and f.seen("no_ib_device"):  # NCCL < 2.5 says no more
        chose_socket = f.socket_lines
    # an RDMA device is there but cannot be used: it cannot be opened, the image has no
    # verbs provider for it, or the container has no /dev/infiniband
    unusable = f.seen("ib_open_failed", "no_verbs_provider", "no_dev_infiniband")
    expected = _rdma_expected(f)
    if f.nic_kind == "eth":
        return None  # a TCP-only fabric (--cluster says so) runs NCCL over sockets by design
    if not socket_conns and not chose_socket and unusable:
        return Hit(
            "warning",
            unusable[:3],
            "the RDMA device cannot be used here (no verbs provider or device node in the"
            " container), so NCCL falls back to TCP",
            0.6,
            "run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET and look for 'Using network"
            " Socket'; `ibv_devinfo` inside the container must list the device",
        )
    if not socket_conns and not (chose_socket and (_multi_node(f) or unusable or expected)):
        return None
    why = [
        e
        for key in (
            "ib_open_failed",
            "no_verbs_provider",
            "no_dev_infiniband",
            "no_ib_device",
            "libibverbs",
            "ofi_efa_only",
            "no_net_plugin",
        )
        for e in f.seen(key)[:2]
    ]
    disabled = f.env.get("NCCL_IB_DISABLE")
    ev = [*chose_socket[:2], *why, *socket_conns[:3]]
    if disabled and disabled[0] == "1":
        ev.append(disabled[1])
        return "warning", ev, "NCCL_IB_DISABLE=1 turns InfiniBand/RoCE off"
    forced = f.env.get("NCCL_NET")
    if forced and forced[0].lower() == "socket":
        return "warning", [forced[1], *ev], "NCCL_NET=Socket forces TCP"
    if unusable:
        return "error", ev, "the RDMA device cannot be opened (container without its devices?)"
    if f.seen("ofi_efa_only"):
        return "error", ev, "no EFA device for the OFI plugin, traffic goes over TCP"
    if f.ib_nics and socket_conns:
        detail = "RDMA NICs were found but the rings run over TCP sockets"
        return "error", [*f.ib_nic_lines[:1], *ev], detail
    if expected and not _multi_node(f):
        detail = (
            "NCCL found no RDMA device where one is expected (an RDMA plugin, NCCL_IB_*"
            " settings, IPoIB or a container), so it uses TCP sockets"
        )
        return "error", [*expected[:2], *ev], detail
    return "error", ev, "NCCL found no RDMA device and fell back to TCP sockets"


def _rdma_expected(f: Facts) -> list[Evidence]:
    """Lines saying the run expects RDMA although NCCL found no device: an RDMA/SHARP net
    plugin loaded (HPC-X), or NCCL_IB_HCA naming devices."""
    settings = [
        ev
        for name, (value, ev) in sorted(f.env.items())
        if name.startswith("NCCL_IB_") and not (name == "NCCL_IB_DISABLE" and value == "1")
    ]
    containers = [h for h in f.hosts if _CONTAINER_HOST.match(h)]
    ipoib = [e for e in f.socket_lines + f.bootstrap_lines if _IPOIB.search(e.text)]
    return [
        *f.seen("rdma_plugin")[:2],
        *f.ib_nic_lines[:1],
        *settings[:2],
        *ipoib[:1],  # sockets over IPoIB: the node has an InfiniBand NIC
        *(f.bootstrap_lines[:1] if containers else []),
    ]


# --- no_gdr ------------------------------------------------------------------------------------


def _no_gdr(f: Facts) -> Hit | None:
    split, detail = gdr_split(f)
    if split:
        return Hit("warning", split, detail, 0.8)
    peermem = f.seen("peermem_missing")
    if peermem:
        ev = [*peermem[:2], *f.gdr_disabled[:2]]
        return Hit("warning", ev, "the peer-memory module is not registered (nvidia-peermem)", 0.85)
    plain = f.transport_evidence("NET/IB", gdr=False)
    with_gdr = f.transport_count("NET/IB", gdr=True)
    disabled = [e for e in f.gdr_disabled if "NET/IB" in e.text and "distance" not in e.text]
    flag_off = [e for g, e in f.gdr_flag if g == 0]
    flag_on = any(g == 1 for g, _ in f.gdr_flag)
    uses_ib = bool(plain) or (bool(f.ib_nics) and _multi_node(f))
    if with_gdr or flag_on:
        return None
    if not uses_ib:
        if not disabled or f.node_count is not None:
            return None  # one node: its NICs carry no traffic
        return Hit(
            "warning",
            disabled[:3],
            "NCCL turned GPUDirect RDMA off for the NIC (if this run spans nodes)",
            0.45,
            "`lsmod | grep peermem` and `cat /sys/kernel/mm/memory_peers/nv_mem/version` (the"
            " module must be loaded and registered); NCCL_DEBUG_SUBSYS=INIT,NET shows"
            " `via NET/IB/N/GDRDMA` when it works",
        )
    chosen = [e for e in f.gdr_disabled if "distance" in e.text]
    if chosen and not disabled:
        return None  # NCCL chose host staging: the NIC is too far from the GPU for GDR
    ev = [*disabled[:3], *plain[:3], *flag_off[:2], *f.xml_gdr_off[:2]]
    level = f.env.get("NCCL_NET_GDR_LEVEL")
    if level and level[0].upper() in ("LOC", "0"):
        return "warning", [level[1], *ev], f"NCCL_NET_GDR_LEVEL={level[0]} turns it off"
    if not (disabled or plain or f.xml_gdr_off):
        return None
    detail = "the GPU memory is not registered with the NIC"
    if any("no module" in e.text for e in disabled):
        detail += " (no nvidia-peermem module)"
    return "warning", ev, detail


# --- nic_selection ----------------------------------------------------------------------------


def _loopback(f: Facts) -> Hit | None:
    ifaces = f.socket_ifaces | f.bootstrap_ifaces
    bad = sorted(i for i in ifaces if i.startswith(LOOPBACK_PREFIXES))
    forced = f.env.get("NCCL_SOCKET_IFNAME")
    no_iface = f.seen("no_interface")
    if no_iface:
        ev = [*no_iface[:3], *([forced[1]] if forced else [])]
        return "error", ev, "no usable network interface for NCCL's sockets"
    if not bad:
        return None
    lines = [e for e in f.socket_lines + f.bootstrap_lines if any(b in e.text for b in bad)]
    if _multi_node(f):
        return "error", lines[:4], f"NCCL uses {', '.join(bad)}, which does not reach other nodes"
    if forced and forced[0].lstrip("=^").startswith(LOOPBACK_PREFIXES):
        return (
            "warning",
            [forced[1], *lines[:2]],
            f"NCCL_SOCKET_IFNAME={forced[0]} pins a local-only interface",
        )
    return None


def _bootstrap(f: Facts) -> Hit | None:
    """The interface NCCL's bootstrap chose, when the run did not get past bootstrap (no
    connection, no table, no ``Init COMPLETE``) or its connections failed."""
    progressed = bool(f.transports or f.tables or f.seen("init_complete") or f.coll_channels)
    failed = [e for e in f.seen("connect_failed") if "WARN" in e.text]
    bridge = [e for e in f.bootstrap_lines + f.socket_lines if _UNROUTABLE.search(e.text)]
    confirm = (
        "`ip -br addr` on every node: set NCCL_SOCKET_IFNAME to the interface that holds the"
        " address the other nodes reach (the same on every node), rerun with"
        " NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,NET"
    )
    if bridge and _multi_node(f):
        return Hit(
            "error",
            bridge[:3],
            "NCCL uses a docker bridge (172.17.x.x) or link-local (169.254.x.x) address that"
            " other nodes cannot reach",
            0.75,
            confirm,
        )
    ipoib = sorted(i for i in f.bootstrap_ifaces if i.startswith("ib"))
    if ipoib and not progressed:
        lines = [e for e in f.bootstrap_lines if any(i in e.text for i in ipoib)]
        return Hit(
            "warning",
            [*lines[:2], *failed[:2]],
            f"bootstrap runs over the IPoIB interface {', '.join(ipoib)} and init got no"
            " further; only NCCL_SOCKET_IFNAME picks that interface",
            0.6 if failed else 0.45,
            confirm,
        )
    bad_address = f.seen("bad_address")
    if bad_address:
        forced = f.env.get("NCCL_SOCKET_IFNAME")
        return Hit(
            "error",
            [*bad_address[:2], *([forced[1]] if forced else [])],
            "NCCL got no usable socket address (NCCL_SOCKET_IFNAME matches no interface, or"
            " the ranks run different NCCL versions)",
            0.5,
            confirm + "; compare `NCCL version` on every node",
        )
    if failed and not progressed:
        return Hit(
            "warning",
            [*failed[:3], *f.bootstrap_lines[:1]],
            "connections between ranks fail before init completes (wrong interface or a firewall)",
            0.45,
            confirm + "; check the ports between nodes are open (`nc -zv HOST PORT`)",
        )
    return None


def _nic_subset(f: Facts) -> Hit | None:
    hca = f.env.get("NCCL_IB_HCA")
    rdma = [
        p
        for p in f.ports
        if p.state == "active"
        and (p.link_layer or "").lower() in ("infiniband", "ethernet")
        and p.device.startswith("mlx")
    ]
    used = len(f.ib_nics)
    if hca is None or not used or len(rdma) <= used:
        return None
    ev = [hca[1], *f.ib_nic_lines[:1], *[p.state_evidence for p in rdma if p.state_evidence][:3]]
    return (
        "warning",
        ev,
        f"NCCL_IB_HCA={hca[0]} leaves {len(rdma) - used} of {len(rdma)} active RDMA ports unused",
    )


# --- p2p_disabled_or_acs -----------------------------------------------------------------------


def _p2p(f: Facts) -> Hit | None:
    disabled = f.env.get("NCCL_P2P_DISABLE")
    ev: list[Evidence] = []
    details = []
    if disabled and disabled[0] == "1":
        ev.append(disabled[1])
        details.append("NCCL_P2P_DISABLE=1")
    level = f.env.get("NCCL_P2P_LEVEL")
    if level and level[0].upper() in ("LOC", "0"):
        ev.append(level[1])
        details.append(f"NCCL_P2P_LEVEL={level[0]} allows no GPU peer path")
    if f.seen("p2p_disabled"):
        ev += f.seen("p2p_disabled")[:2]
        details.append("NCCL reports P2P disabled")
    shm = f.transport_evidence("SHM")
    if shm and (f.nvlink_in_topo or f.nvls_available or _is_gpu(f.gpu_names, NVLINK_GPUS)):
        ev += shm[:2] + f.nvlink_in_topo[:1]
        details.append("GPUs with NVLink talk through host shared memory")
    elif shm and (f.topo_links["PIX"] or f.topo_links["PXB"]):
        ev += shm[:2] + f.topo_lines[:2]
        details.append("GPUs under one PCIe switch talk through host shared memory")
    elif shm and not f.transport_count("P2P") and max(f.local_ranks or 0, len(f.devices)) >= 8:
        return Hit(
            "warning",
            shm[:3],
            "8 GPUs of one node talk only through host shared memory: on an NVLink server"
            " P2P is disabled or blocked",
            0.45,
            "`nvidia-smi topo -m` (NV# between GPUs means NVLink), `env | grep NCCL_P2P`, and"
            " `sudo lspci -vvv | grep -i ACSCtl` on PCIe servers",
        )
    if f.acs_enabled:
        ev += f.acs_enabled[:3]
        details.append("PCIe ACS is enabled (peer traffic is redirected through the root complex)")
    if ev:
        return "warning", ev, "; ".join(details)
    through_cpu = sum(f.topo_links[k] for k in ("NODE", "PHB", "SYS", "SOC"))
    nvlink = sum(n for k, n in f.topo_links.items() if k.startswith("NV"))
    if through_cpu and not nvlink and not any(k.startswith("P2P") for k, _ in f.transports):
        return Hit(
            "warning",
            f.topo_lines[:4],
            "GPU pairs connect through the CPU's PCIe root complex (NODE/PHB/SYS), where ACS"
            " or the IOMMU can stop or slow peer-to-peer traffic",
            0.35,
            "`nvidia-smi topo -p2p r` (peer reads must say OK), `sudo lspci -vvv | grep -i"
            " ACSCtl` (SrcValid+ means ACS is on), and rerun with NCCL_P2P_DISABLE=1: if that"
            " run works, P2P is blocked",
        )
    return None


def _ib_protection(f: Facts) -> Hit | None:
    ev = f.seen("ib_error_4")
    if not ev:
        return None
    return "error", ev[:4], "NIC writes into GPU memory fail (IB error 4: local protection)"


# --- nvls_unavailable --------------------------------------------------------------------------


def _nvls(f: Facts) -> Hit | None:
    bind = f.seen("nvls_bind")
    fabric, imex, caps = f.seen("fm_error"), f.seen("imex_missing"), f.seen("caps_missing")
    missing = [
        what
        for what, lines in (
            ("the Fabric Manager has not configured the NVSwitches", fabric),
            ("no IMEX channel", imex),
            ("no /dev/nvidia-caps in the container", caps),
        )
        if lines
    ]
    capable = _is_gpu(f.gpu_names, NVLS_GPUS) or any("NV18" in e.text for e in f.nvlink_in_topo)
    if bind:
        detail = "NVLink SHARP multicast memory could not be set up"
        return (
            "error",
            [*bind[:4], *fabric[:2], *imex[:2], *caps[:2]],
            "; ".join([detail, *missing]),
        )
    if missing:
        return Hit(
            "error",
            [*fabric[:3], *imex[:3], *caps[:3]],
            "NVLS prerequisites missing: " + "; ".join(missing),
            0.8 if capable or f.nvls_unavailable else 0.6,
            "`nvidia-smi -q | grep -A2 Fabric` (State must be Completed), `systemctl status"
            " nvidia-fabricmanager`, `ls /dev/nvidia-caps*` inside the container",
        )
    if not capable or f.nvls_available:
        return None
    env = f.env.get("NCCL_NVLS_ENABLE")
    if env and env[0] == "0":
        return "warning", [env[1]], "NCCL_NVLS_ENABLE=0 turns NVLink SHARP off"
    algo = f.env.get("NCCL_ALGO")
    if algo and _leaves_out_nvls(algo[0]):
        return "warning", [algo[1]], f"NCCL_ALGO={algo[0]} leaves NVLS out"
    if f.nvls_unavailable:
        return (
            "warning",
            f.nvls_unavailable[:3],
            "NCCL sees no NVLink SHARP multicast on these GPUs",
        )
    return None


def _leaves_out_nvls(value: str) -> bool:
    """Whether an NCCL_ALGO value (``Ring,Tree``, ``^NVLS``, ``allreduce:ring``) excludes NVLS."""
    names = value.lower()
    return "nvls" in names if names.startswith("^") else "nvls" not in names


# --- link_degraded -----------------------------------------------------------------------------


def _link(f: Facts) -> Hit | None:
    used = set(f.ib_nics)
    sockets = f.socket_ifaces | f.bootstrap_ifaces  # Ethernet ports count when NCCL uses them
    ports = [
        p
        for p in f.ports
        if (p.device in sockets if p.kind == "eth" else not used or p.device in used)
    ]
    ev: list[Evidence] = []
    details: list[str] = []
    down = [p for p in ports if p.state not in (None, "active", "up") and p.kind == "rdma"]
    if down:
        ev += [e for p in down for e in (p.evidence, p.state_evidence) if e]
        details.append(", ".join(f"{p.device} port {p.port} {p.state}" for p in down[:4]))
    slow = slow_ports(ports)
    if slow:
        ev += [e for p, _ in slow for e in (p.evidence, p.rate_evidence) if e]
        details += [f"{p.device} at {p.rate_Gbps:g} Gb/s (peers {top:g})" for p, top in slow[:4]]
    slow_ids = {id(p) for p, _ in slow}
    below = [(p, text) for p, text in below_model(ports) if id(p) not in slow_ids]
    if below:
        ev += [e for p, _ in below for e in (p.evidence, p.rate_evidence) if e]
        details += [text for _, text in below[:4]]
    fewer, fewer_detail = nic_count_split(f)
    if fewer:
        ev += fewer
        details.append(fewer_detail)
    gens = [s for s, _ in f.pcie_links]
    if gens and min(gens) < DEGRADED_RATIO * max(gens):
        ev += [e for s, e in f.pcie_links if s < DEGRADED_RATIO * max(gens)][:3]
        details.append(f"a GPU PCIe link at {min(gens):g} GT/s (others {max(gens):g})")
    downgraded = f.seen("pcie_downgraded")
    if not ev and downgraded:
        width = [e for e in downgraded if _WIDTH_DOWN.search(e.text)]
        return Hit(
            "warning",
            downgraded[:4],
            "a PCIe link trained below its capability (lspci LnkSta downgraded)",
            0.6 if width else 0.3,  # an idle GPU lowers its link speed, never its width
            "`nvidia-smi -q -d PCIE` under load (Link Width/Generation Current vs Max) and"
            " `sudo lspci -vv -s BDF | grep -E 'LnkCap|LnkSta'`",
        )
    if not ev:
        return None
    only_model = below and len(details) == len(below[:4])
    if only_model:  # no peer of the model shows the faster rate: the fabric may run so
        return Hit(
            "warning",
            ev,
            "; ".join(details),
            0.55,
            "`ibstat` on the peers, `mlxlink -d DEV -m` (cable and the switch port's speed):"
            " if the fabric is built for this rate (split cables), ignore this",
        )
    return "warning", ev, "; ".join(details)


def slow_ports(ports: list[Port]) -> list[tuple[Port, float]]:
    """(port, the fastest peer's Gb/s) of active ports below ``DEGRADED_RATIO`` x the fastest
    port of the same NIC model and link layer (their peers show the faster rate is possible)."""
    out: list[tuple[Port, float]] = []
    for group in {(p.link_layer, p.model) for p in ports}:
        peers = [
            p
            for p in ports
            if (p.link_layer, p.model) == group and p.rate_Gbps and p.state in (None, "active")
        ]
        top = max((p.rate_Gbps or 0 for p in peers), default=0)
        slow = [p for p in peers if (p.rate_Gbps or 0) < DEGRADED_RATIO * top]
        if len(slow) < len(peers):
            out += [(p, top) for p in slow]
    return out


# --- roce_config -------------------------------------------------------------------------------


def _roce(f: Facts) -> Hit | None:
    ev = f.seen("ib_error_12") + f.seen("modify_qp_failed")
    if not ev:
        return None
    gid = f.env.get("NCCL_IB_GID_INDEX")
    detail = "RDMA connections time out between NICs"
    if gid is None and "RoCE" in f.ib_nics.values():
        detail += " (RoCE NICs, NCCL_IB_GID_INDEX not set)"
    return "error", ev[:4] + f.ib_nic_lines[:1], detail


# --- container_limits --------------------------------------------------------------------------


def _shm(f: Facts) -> Hit | None:
    ev = f.seen("shm_create") + f.seen("bus_error")
    if not ev:
        return None
    return "error", ev[:4], "/dev/shm is too small for NCCL's shared-memory buffers"


def _memlock(f: Facts) -> Hit | None:
    ev = f.seen("reg_mr_failed")
    return (
        ("error", ev[:3], "the locked-memory limit stops NIC memory registration") if ev else None
    )


# --- topology_detection ------------------------------------------------------------------------


def _topology(f: Facts) -> Hit | None:
    ev = f.seen("topo_real_path") + f.seen("topo_affinity") + f.seen("topo_not_pci")
    if not ev:
        return None
    severity: Severity = "error" if any("NCCL WARN" in e.text for e in ev) else "warning"
    return severity, ev[:4], "NCCL cannot read the PCI topology from /sys (VM or container)"


# --- collnet_sharp -----------------------------------------------------------------------------


def _collnet(f: Facts) -> Hit | None:
    ev = f.seen("collnet_fallback") + f.seen("sharp_error")
    enabled = f.env.get("NCCL_COLLNET_ENABLE")
    if not ev and enabled and enabled[0] == "1" and f.collnet_channels == 0:
        ev = [enabled[1]]
    if not ev:
        return None
    return "warning", ev[:4], "SHARP in-network reduction was requested but is not in use"


# --- channels ----------------------------------------------------------------------------------


def _channels(f: Facts) -> Hit | None:
    caps = [
        (int(v), e)
        for k in ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS")
        if (item := f.env.get(k))
        for v, e in [item]
        if v.isascii() and v.isdigit()
    ]
    if not caps:
        return None
    cap, ev = min(caps, key=lambda c: c[0])
    needed = channels_needed(f)
    if cap >= needed:
        return None
    coll = [e for n, e in f.coll_channels if n <= cap][:2]
    return (
        "warning",
        [ev, *coll],
        f"at most {cap} channels, {needed} needed to keep every link busy",
    )


def channels_needed(f: Facts) -> int:
    """Channels a run needs: two per NIC a process sees (maintainer, NVIDIA/nccl issue 438:
    two channels per NIC keep it busy), and on H100-class NVLink (NVLink 4+, or such a GPU
    in the log) at least 16 (NCCL builds 32 coll channels on H100, e.g. NVIDIA/nccl issue
    1050's log); 8 elsewhere."""
    fast_nvlink = _is_gpu(f.gpu_names, NVLS_GPUS) or (f.intra_GBps or 0) >= FAST_NVLINK_GBPS
    return max(16 if fast_nvlink else 8, 2 * max(f.nics_per_process, 1))


# --- version_mismatch --------------------------------------------------------------------------


def _versions(f: Facts) -> Hit | None:
    ev, details = version_splits(f)
    loader = f.seen("symbol_version") + f.seen("lib_not_found")
    driver = f.seen("driver_too_old", "nvml_mismatch")
    if driver:
        details.insert(0, "the NVIDIA driver does not match the CUDA runtime or its kernel module")
        ev = [*driver[:3], *ev]
    if loader:
        details.insert(0, "a library was built against a newer version than the one installed")
        ev = [*loader[:3], *ev]
    truncated = f.seen("truncated")
    if not details and truncated:
        return Hit(
            "error",
            truncated[:3],
            "a rank received more bytes than it expected: the ranks disagree on the operation"
            " (NCCL versions or NCCL_* settings that differ between nodes, or mismatched calls)",
            0.45,
            "print `NCCL version` and `env | grep NCCL_` on every node; compare the collective"
            " calls of each rank (NCCL_DEBUG_SUBSYS=COLL)",
        )
    if not details:
        return None
    if loader or driver:
        return Hit("error", ev, "; ".join(details), 0.9)
    # NCCL itself or its plugin differing breaks the run; a driver differing only may not
    nccl = any(d.startswith(("NCCL", "libnccl", "net plugin", "package")) for d in details)
    return Hit(
        "warning",
        ev,
        "; ".join(details),
        0.75 if nccl else 0.5,
        "on every node: `python -c 'import torch; print(torch.cuda.nccl.version())'`,"
        " `ldconfig -p | grep nccl`, `nvidia-smi` (driver), `pip list | grep -i nccl`, and"
        " NCCL_DEBUG=INFO's `NCCL version` line of each rank",
    )


# --- slow_node ---------------------------------------------------------------------------------


def _slow_node(f: Facts) -> Hit | None:
    groups: dict[str, list[HostRun]] = {}
    for run in f.runs:
        groups.setdefault(run.op or "", []).append(run)
    for runs in groups.values():
        if len(runs) < 3:
            continue
        best = max(r.busbw_GBps for r in runs)
        limit = SLOW_NODE_RATIO * best
        slow = [r for r in runs if r.busbw_GBps < limit]
        fast_hosts = {h for r in runs if r.busbw_GBps >= limit for h in r.hosts}
        counts = Counter(h for r in slow for h in r.hosts if h not in fast_hosts)
        if not counts:
            continue
        suspects = sorted(counts, key=lambda h: (-counts[h], h))
        named = ", ".join(f"{h} ({counts[h]} of {len(slow)} slow runs)" for h in suspects[:4])
        detail = f"runs below {SLOW_NODE_RATIO:g} x the best ({best:g} GB/s) include {named}"
        return "warning", [r.evidence for r in slow], detail
    return None


# --- anything NCCL warned of that no rule explains ----------------------------------------------

_WARN_CATEGORIES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("nvls",), "nvls_unavailable"),
    (("port error", "catastrophic", "link down", "LinkDown"), "link_degraded"),
    (("shm", "/dev/shm"), "container_limits"),
    (("p2p", "P2P"), "p2p_disabled_or_acs"),
    (("graph/", "topo", "xml.cc"), "topology_detection"),
    (("sharp", "collnet", "CollNet"), "collnet_sharp"),
    (("lugin", "dlerror"), "version_mismatch"),
    (("net_ib", "ibvwrap", "NET/IB", "ibv_"), "roce_config"),
)
"""Where an unexplained NCCL WARN comes from (its source file or subsystem) -> the category
its cause most often has; anything else (sockets, bootstrap, proxy) is nic_selection."""


def unexplained(f: Facts) -> Finding | None:
    """A finding for NCCL warnings or errors no rule explains, so a broken run is never
    reported clean; its category follows the warning's subsystem (``_WARN_CATEGORIES``)."""
    keys = ("unexplained_warn", "connect_failed", "ib_completion_error", "no_net_plugin")
    lines = sorted({e for key in (*keys, "nccl_error") for e in f.seen(key)})
    if not lines:
        return None
    first = lines[0].text
    category = next(
        (cat for needles, cat in _WARN_CATEGORIES if any(n in first for n in needles)),
        "nic_selection",
    )
    return Finding(
        id="unexplained-warn",
        category=category,
        severity="warning",
        title="likely: NCCL reports a fault no rule explains: " + first.strip()[:160],
        evidence=tuple(Evidence(e.file, e.line, e.text.strip()[:300]) for e in lines[:KEEP]),
        fix="Read the first WARN of each rank; the ones above it say what NCCL tried.",
        tier="any",
        weight=0.2,
        confidence=0.25,
        confirm="rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,ENV and pass the"
        " log of every rank (and `nvidia-smi topo -m`, `ibv_devinfo`) to tierwise doctor",
    )


RULES: tuple[Rule, ...] = (
    Rule(
        "net-socket",
        "socket_fallback",
        "inter",
        0.9,
        "Inter-node traffic uses TCP sockets instead of InfiniBand/RoCE",
        "Make the RDMA devices visible: install rdma-core/libibverbs (MLNX_OFED/DOCA) on the host"
        " and in the image, run containers with --device=/dev/infiniband --cap-add=IPC_LOCK"
        " --ulimit memlock=-1 (Kubernetes: the RDMA device plugin), check `ibv_devinfo` shows"
        " PORT_ACTIVE, unset NCCL_IB_DISABLE; on AWS install aws-ofi-nccl and set"
        " FI_PROVIDER=efa; NCCL_IB_HCA must name existing devices.",
        _socket,
    ),
    Rule(
        "gdr-off",
        "no_gdr",
        "inter",
        0.5,
        "GPUDirect RDMA is off: NIC traffic is staged through host memory",
        "Load the peer-memory module (`modprobe nvidia-peermem`; built with the driver after"
        " MLNX_OFED) or use DMA-BUF (open kernel driver, Linux >= 5.12, NCCL_DMABUF_ENABLE=1);"
        " on bare metal disable PCIe ACS (BIOS, or `setpci ... ECAP_ACS+6.w=0000`); in a VM"
        " enable ATS; NCCL_NET_GDR_LEVEL=SYS only if the topology is misdetected.",
        _no_gdr,
    ),
    Rule(
        "nic-loopback",
        "nic_selection",
        "inter",
        1.0,
        "NCCL's sockets use an interface other nodes cannot reach",
        "Set NCCL_SOCKET_IFNAME to the interface that carries the node's routable address"
        " (e.g. NCCL_SOCKET_IFNAME=eth0, or =^lo,docker to exclude), the same on every node;"
        " run containers with --network=host.",
        _loopback,
    ),
    Rule(
        "bootstrap-iface",
        "nic_selection",
        "inter",
        1.0,
        "NCCL's bootstrap uses an interface the other ranks cannot reach",
        "Set NCCL_SOCKET_IFNAME to the routable Ethernet interface (e.g. NCCL_SOCKET_IFNAME=eth0;"
        " bootstrap uses only this variable, never NCCL_IB_HCA) on every node, run containers"
        " with --network=host, open the ports between nodes.",
        _bootstrap,
    ),
    Rule(
        "nic-subset",
        "nic_selection",
        "inter",
        0.5,
        "NCCL uses fewer NICs than the node has",
        "Widen NCCL_IB_HCA (e.g. NCCL_IB_HCA=mlx5 for all mlx5 ports) or unset it, so every"
        " GPU gets its closest NIC.",
        _nic_subset,
    ),
    Rule(
        "p2p-off",
        "p2p_disabled_or_acs",
        "intra",
        0.6,
        "GPU peer-to-peer is disabled or blocked",
        "Unset NCCL_P2P_DISABLE; disable PCIe ACS in the BIOS (or `setpci -s BDF"
        " ECAP_ACS+6.w=0000`, kernel `pci=noacs`), set the IOMMU to passthrough (`iommu=pt`);"
        " in a VM enable ATS; check `nvidia-smi topo -p2p r`.",
        _p2p,
    ),
    Rule(
        "acs-blocks-gdr",
        "p2p_disabled_or_acs",
        "inter",
        1.0,
        "PCIe ACS or the IOMMU blocks GPUDirect RDMA between NIC and GPU",
        "Disable ACS on the PCIe switches/root ports (BIOS, or `setpci -s BDF"
        " ECAP_ACS+6.w=0000`, kernel `pci=noacs`) and set the IOMMU to passthrough"
        " (`iommu=pt`); in a VM enable ATS on the NIC. NCCL_NET_GDR_LEVEL=0 confirms it (the"
        " error goes away) but costs bandwidth.",
        _ib_protection,
    ),
    Rule(
        "nvls-off",
        "nvls_unavailable",
        "intra",
        0.23,
        "NVLink SHARP (NVLS) is not available on an NVSwitch system",
        "Run nvidia-fabricmanager with the driver's exact version (`systemctl status"
        " nvidia-fabricmanager`, `nvidia-smi -q | grep -A2 Fabric` must show Completed/Success),"
        " CUDA driver >= 12.1, unset NCCL_NVLS_ENABLE=0; in containers/VMs pass the IMEX"
        " channels; a multicast error needs the Fabric Manager/NVSwitch fixed (or"
        " NCCL_NVLS_ENABLE=0 as a workaround).",
        _nvls,
    ),
    Rule(
        "link-degraded",
        "link_degraded",
        "inter",
        0.5,
        "A link is down or trained below its peers' rate",
        "Reseat or replace the cable/transceiver, check `ibstat`/`mlxlink -d DEV` for the"
        " negotiated width and speed, and `lspci -vv` LnkSta for the GPU's PCIe link; take the"
        " node out until the link trains at full rate.",
        _link,
    ),
    Rule(
        "roce-timeout",
        "roce_config",
        "inter",
        1.0,
        "RDMA connections between NICs fail or time out",
        "Set NCCL_IB_GID_INDEX to the RoCEv2 GID (`show_gids`, usually 3), NCCL_IB_TC/NCCL_IB_SL"
        " to the lossless class with PFC/ECN on the switches, the same MTU end to end; on a"
        " rail-only fabric set NCCL_CROSS_NIC=0; check with `ib_write_bw -x GID`.",
        _roce,
    ),
    Rule(
        "shm-exhausted",
        "container_limits",
        "intra",
        1.0,
        "NCCL cannot allocate shared memory",
        "Give the container more /dev/shm: docker --shm-size=1g (or more) or --ipc=host;"
        " Kubernetes: mount an emptyDir with medium: Memory at /dev/shm. NCCL_SHM_DISABLE=1"
        " works around it at a bandwidth cost.",
        _shm,
    ),
    Rule(
        "memlock",
        "container_limits",
        "inter",
        1.0,
        "NIC memory registration fails",
        "Raise the locked-memory limit: docker --ulimit memlock=-1, Slurm/PAM limits.conf"
        " `* - memlock unlimited`.",
        _memlock,
    ),
    Rule(
        "topo-sysfs",
        "topology_detection",
        "any",
        0.5,
        "NCCL cannot read the node topology",
        "Give NCCL the topology: NCCL_TOPO_FILE=<xml> (cloud VM images ship one, e.g. Azure"
        " /opt/microsoft/ndv*-topo.xml; on bare metal dump it with NCCL_TOPO_DUMP_FILE), or"
        " mount /sys into the container.",
        _topology,
    ),
    Rule(
        "collnet-off",
        "collnet_sharp",
        "inter",
        0.3,
        "SHARP (CollNet) was requested but NCCL fell back to point-to-point",
        "Check sharp_am runs next to the subnet manager and SHARP is enabled for the job,"
        " the SHARP plugin (libnccl-net.so from nccl-rdma-sharp-plugins / HPC-X) is on"
        " LD_LIBRARY_PATH; otherwise set NCCL_COLLNET_ENABLE=0.",
        _collnet,
    ),
    Rule(
        "channels-capped",
        "channels",
        "any",
        0.5,
        "NCCL is limited to too few channels",
        "Unset NCCL_MAX_NCHANNELS/NCCL_MAX_CTAS (or raise them to at least twice the NICs per"
        " GPU and 16+ on NVLink systems).",
        _channels,
    ),
    Rule(
        "slow-node",
        "slow_node",
        "inter",
        0.5,
        "Runs that include one node are slower than the rest",
        "Run the same test on pairs of nodes to isolate the node, check its NICs (`ibstat`,"
        " error counters), PCIe links and GPU clocks (`nvidia-smi -q -d CLOCK,PERFORMANCE`),"
        " drain it until fixed.",
        _slow_node,
    ),
    Rule(
        "version-mismatch",
        "version_mismatch",
        "any",
        1.0,
        "Versions differ between nodes or from what a library was built against",
        "Install one NCCL (and net plugin, CUDA driver) version on every node: the same"
        " container image or the same pip wheel (nvidia-nccl-cu12==X), no older libnccl earlier"
        " on LD_LIBRARY_PATH; a plugin built for a newer libfabric/NCCL needs that version or a"
        " plugin release built for the installed one (e.g. aws-ofi-nccl matching libfabric).",
        _versions,
    ),
)
"""Every rule, in catalog order."""


def apply_rules(facts: Facts) -> list[Finding]:
    """The findings of every rule that fires (unranked); when none does, NCCL warnings no
    rule explains are one doubtful finding (``unexplained``)."""
    findings = [finding for rule in RULES if (finding := rule.apply(facts)) is not None]
    if not findings and (fallback := unexplained(facts)) is not None:
        findings.append(fallback)
    return findings
