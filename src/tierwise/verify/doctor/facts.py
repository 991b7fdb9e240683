"""Facts read from NCCL_DEBUG output and tool printouts, each kept with its evidence line.

``Facts`` is filled line by line (``readers`` calls the ``add_*`` methods); every list of
evidence keeps only the first ``KEEP`` lines so a 50 MB log costs constant memory.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tierwise.formats.nccl_tests import NcclTest
from tierwise.verify.doctor.model import Evidence

KEEP = 8
"""Evidence lines kept per fact."""

GPUS_PER_NODE_GUESS = 8
"""GPUs per node assumed when counting nodes from ranks and GPU indices alone (a lower bound
on the node count for nodes of up to 8 GPUs)."""

_RING = re.compile(r"^Channel\s+\d+/(\d+)\s*:\s+\d")
_COMM = re.compile(r"\bnRanks\s+(\d+)\s+nNodes\s+(\d+)\s+localRanks\s+(\d+)")
_INIT = re.compile(r"\brank\s+(\d+)\s+nranks\s+(\d+)\b")
_CHANNELS = re.compile(
    r"^(\d+)\s+coll channels,(?:\s+(\d+)\s+collnet channels,)?(?:\s+(\d+)\s+nvls channels,)?"
)
_SET_BY_ENV = re.compile(r"^(NCCL_[A-Z0-9_]+) set by environment to (.*?)\.?\s*$")
_SET_TO = re.compile(r"^(NCCL_[A-Z0-9_]+) set to (\S+)\s*$")
_VERSION = re.compile(r"NCCL version (\S+)")
_DRIVER = re.compile(r"cudaDriverVersion (\d+)")
_NET_IB = re.compile(r"\[(\d+)\]([\w.\-]+):(\d+)/(IB|RoCE)")
# NCCL_DEBUG_SUBSYS=NET (2.19+): "NET/IB: [0] mlx5_0:uverbs0:1/IB provider=Mlx5 speed=400000 ..."
# (speed in Mb/s, src/transport/net_ib/init.cc).
_NET_IB_SPEED = re.compile(r"^NET/IB\s*:\s*\[\d+\]\s*([\w.\-]+):.*?/(IB|RoCE)\b.*?\bspeed=(\d+)")
_NET_SOCKET = re.compile(r"\[(\d+)\]([^:\s\[\]]+):")
_BOOTSTRAP = re.compile(r"^Bootstrap\s*:\s*Using\s+(?:\[\d+\])?([^:\s]+):")
_RINGS_FLAGS = re.compile(r"PXN (\d) GDR (\d)")
_PLUGIN = re.compile(
    r"Loaded (?:net|collnet) plugin (.+?)\s*$|P2P plugin (\S+)|Plugin Path\s*:\s*(\S+)"
)
_NO_PLUGIN = re.compile(r"No plugin found|Could not find:? libnccl-net|Plugin load .* returned")
_CONN_RANKS = re.compile(r":\s*(\d+)\[[^\]]*\]\s*->\s*(\d+)\[")
_NETWORK = re.compile(r"^Using network (.+?)\s*$")
_NVLS = re.compile(r"NVLS multicast support is (not )?available")
_TUNED = re.compile(r"^(\w+):\s+(\d+) Bytes -> Algo (\S+) proto (\S+)")
ALGO_NAMES = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
"""NCCL's algorithm ids as older versions print them (NCCL_ALGO_* in NCCL's tuner.h)."""
PROTO_NAMES = ("LL", "LL128", "Simple")
"""NCCL's protocol ids (NCCL_PROTO_* in NCCL's tuner.h)."""


def transport_of(via: str) -> tuple[str, bool]:
    """(transport kind, GPUDirect RDMA used) of the text after ``via`` in a connection line."""
    gdr = "GDRDMA" in via
    if via.startswith("P2P/IPC"):
        return "P2P/IPC", gdr
    if via.startswith("P2P/CUMEM"):
        return "P2P/CUMEM", gdr
    if via.startswith("P2P/direct pointer") or via.startswith("direct pointer"):
        return "P2P/direct pointer", gdr
    if via.startswith("P2P"):
        return "P2P", gdr
    if via.startswith("SHM") or "shared memory" in via:
        return "SHM", gdr
    if via.startswith("NET/IB"):
        return "NET/IB", gdr
    if via.startswith("NET/Socket"):
        return "NET/Socket", gdr
    if via.startswith("NET/"):
        return "NET/OFI" if ("OFI" in via or "Libfabric" in via) else via.split("/")[
            0
        ] + "/" + via.split("/")[1], gdr
    if via.upper().startswith("COLLNET"):
        return "CollNet", gdr
    if via.startswith("NVLS"):
        return "NVLS", gdr
    return via.split("/")[0], gdr


@dataclass
class Port:
    """One NIC port; ``kind``: ``rdma`` (ibstat/ibstatus/ibv_devinfo), ``eth`` (ethtool,
    ip link) or ``xml`` (NCCL topology dump)."""

    device: str
    kind: str = "rdma"
    model: str | None = None  # CA type, vendor part id, or PCI class/device in a topology dump
    port: str = "1"
    state: str | None = None  # normalised: active, down, init, polling, ...
    rate_Gbps: float | None = None
    link_layer: str | None = None
    evidence: Evidence | None = None  # the line naming the port
    state_evidence: Evidence | None = None
    rate_evidence: Evidence | None = None


@dataclass(frozen=True)
class HostRun:
    """One measured run over a set of hosts: an nccl-tests table with rank lines, or a line
    ``hostA,hostB <busbw>`` of a pairwise sweep summary (busbw in GB/s)."""

    hosts: tuple[str, ...]
    busbw_GBps: float
    op: str | None
    evidence: Evidence


@dataclass
class Facts:
    """Everything read from the inputs (see module doc)."""

    version: str | None = None
    cuda_driver: str | None = None
    plugins: list[str] = field(default_factory=list)
    network: str | None = None
    hosts: set[str] = field(default_factory=set)
    devices: set[int] = field(default_factory=set)
    ranks: set[int] = field(default_factory=set)
    nranks: int | None = None
    nnodes: int | None = None
    local_ranks: int | None = None
    transports: Counter[tuple[str, bool]] = field(default_factory=Counter)
    transport_lines: dict[tuple[str, bool], list[Evidence]] = field(default_factory=dict)
    conn_plans: dict[tuple[Any, ...], tuple[Any, ...]] = field(default_factory=dict)  # cache
    collectives: Counter[str] = field(default_factory=Counter)  # NCCL_DEBUG_SUBSYS=COLL calls
    tuned: dict[str, dict[str, int]] = field(default_factory=dict)  # op -> algo/proto -> bytes
    ring_channels: int | None = None
    coll_channels: list[tuple[int, Evidence]] = field(default_factory=list)
    collnet_channels: int | None = None
    nvls_channels: int | None = None
    nvls_available: list[Evidence] = field(default_factory=list)
    nvls_unavailable: list[Evidence] = field(default_factory=list)
    trees: int = 0
    pxn: int | None = None
    gdr_flag: list[tuple[int, Evidence]] = field(default_factory=list)
    gdr_disabled: list[Evidence] = field(default_factory=list)
    gdr_enabled: list[Evidence] = field(default_factory=list)
    ib_nics: dict[str, str] = field(default_factory=dict)  # name -> IB|RoCE
    ib_nic_lines: list[Evidence] = field(default_factory=list)
    ib_nic_order: dict[str, str] = field(default_factory=dict)  # NCCL's NET/IB index -> name
    gpu_nets: dict[tuple[str, int], set[str]] = field(default_factory=dict)  # NET/IB/<i> used
    nics_per_process: int = 0
    socket_ifaces: set[str] = field(default_factory=set)
    socket_lines: list[Evidence] = field(default_factory=list)
    bootstrap_ifaces: set[str] = field(default_factory=set)
    bootstrap_lines: list[Evidence] = field(default_factory=list)
    env: dict[str, tuple[str, Evidence]] = field(default_factory=dict)
    warnings: list[Evidence] = field(default_factory=list)
    warning_count: int = 0
    messages: dict[str, list[Evidence]] = field(default_factory=dict)  # keyword -> lines
    gpu_names: set[str] = field(default_factory=set)
    gpu_sms: set[int] = field(default_factory=set)  # compute capability x10 (topology XML)
    nic_speeds: dict[str, tuple[float, str]] = field(default_factory=dict)  # name -> Gb/s, kind
    ports: list[Port] = field(default_factory=list)
    nvlink_in_topo: list[Evidence] = field(default_factory=list)
    acs_enabled: list[Evidence] = field(default_factory=list)
    xml_gdr_off: list[Evidence] = field(default_factory=list)
    pcie_links: list[tuple[float, Evidence]] = field(default_factory=list)  # GT/s per GPU
    tables: list[tuple[str, NcclTest]] = field(default_factory=list)
    runs: list[HostRun] = field(default_factory=list)
    # comparative facts: what each host (or rank, when no host is named) says
    versions: dict[str, dict[str, list[Evidence]]] = field(default_factory=dict)  # kind -> value
    host_plugins: dict[str, tuple[str, Evidence]] = field(default_factory=dict)  # host -> plugin
    host_nics: dict[str, tuple[int, Evidence]] = field(default_factory=dict)  # host -> NICs used
    net_paths: dict[str, dict[bool, list[Evidence]]] = field(default_factory=dict)  # who -> GDR?
    topo_links: Counter[str] = field(default_factory=Counter)  # nvidia-smi topo GPU-GPU cells
    topo_lines: list[Evidence] = field(default_factory=list)
    harmless: list[tuple[Evidence, str, str]] = field(default_factory=list)  # line, why, source
    intra_GBps: float | None = None  # the model cluster's NVLink/PCIe GB/s per GPU
    nic_kind: str | None = None  # the model cluster's NIC kind: ib, roce, eth
    notes: list[str] = field(default_factory=list)

    # -- helpers -----------------------------------------------------------------------------

    def mark(self, key: str, ev: Evidence) -> None:
        """Remember that a known message ``key`` was seen on ``ev``."""
        lines = self.messages.setdefault(key, [])
        if len(lines) < KEEP:
            lines.append(ev)

    def seen(self, *keys: str) -> list[Evidence]:
        """Evidence of the first of ``keys`` that was seen, else []."""
        for key in keys:
            if self.messages.get(key):
                return self.messages[key]
        return []

    def add_version(self, kind: str, value: str, ev: Evidence) -> None:
        """One version of ``kind`` (``NCCL``, ``CUDA driver``, a package) seen on ``ev``."""
        lines = self.versions.setdefault(kind, {}).setdefault(value, [])
        if len(lines) < KEEP:
            lines.append(ev)

    def env_value(self, name: str) -> str | None:
        """The value an NCCL_* variable was set to, if the inputs say."""
        item = self.env.get(name)
        return None if item is None else item[0]

    @property
    def node_count(self) -> int | None:
        """Nodes in the run: NCCL's ``nNodes``, else the most of: distinct hosts, ranks over
        the GPUs one host shows, the table's nodes; None when nothing says."""
        if self.nnodes is not None:
            return self.nnodes
        counts = [len(self.hosts)] + [t.nodes or 0 for _, t in self.tables]
        nranks = self.nranks or len(self.ranks)
        if nranks and self.devices:
            seen = max(self.devices) + 1  # GPUs per node is at least the highest index seen
            counts.append(-(-nranks // max(seen, GPUS_PER_NODE_GUESS)))
            counts.append(2 if nranks > seen else 1)
        if any(kind.startswith("NET/") for kind, _ in self.transports):
            counts.append(2)  # network connections only ever leave a node
        return max(counts) or None

    def transport_count(self, kind: str, gdr: bool | None = None) -> int:
        """Connections seen over ``kind`` (with or without GDRDMA, or both when None)."""
        return sum(n for (k, g), n in self.transports.items() if k == kind and gdr in (None, g))

    def transport_evidence(self, kind: str, gdr: bool | None = None) -> list[Evidence]:
        """First connection lines over ``kind``."""
        out = [
            e
            for (k, g), lines in self.transport_lines.items()
            if k == kind and gdr in (None, g)
            for e in lines
        ]
        return sorted(out, key=lambda e: (e.file, e.line))[:KEEP]

    # -- NCCL messages -----------------------------------------------------------------------

    def add_nccl(
        self, level: str, msg: str, host: str | None, device: int | None, ev: Evidence
    ) -> bool:
        """One NCCL INFO/WARN/TRACE message (prefix removed) from ``host``'s GPU ``device``;
        False for the lines most of a big log is (connections, rings, trees, calls, tuning),
        True for the other messages (settings, warnings)."""
        if host:
            self.hosts.add(host)
        if device is not None:
            self.devices.add(device)
        if level == "WARN":
            self.warning_count += 1
            if len(self.warnings) < 4 * KEEP:
                self.warnings.append(ev)
        if " via " in msg:
            self.add_connection(msg, ev, host, device)
            return False
        if msg.startswith("Channel "):
            ring = _RING.match(msg)
            if ring:
                self.ring_channels = max(self.ring_channels or 0, int(ring.group(1)))
            return False
        if msg.startswith("Trees"):
            self.trees += 1
            return False
        if " opCount " in msg:  # "AllReduce: opCount 1a sendbuff ... [nranks=128] stream ..."
            self.collectives[msg.split(":", 1)[0]] += 1
            return False
        if " Bytes -> Algo " in msg:  # NCCL_DEBUG_SUBSYS=TUNING: the choice for one call
            self.add_choice(msg)
            return False
        self.add_setting(msg, ev, host)
        return True

    def add_choice(self, msg: str) -> None:
        """``AllReduce: 4096 Bytes -> Algo Tree proto LL ...`` (or ids: ``Algo 1 proto 2``):
        keeps the largest size each algorithm/protocol was chosen for, per op."""
        tuned = _TUNED.match(msg)
        if not tuned:
            return
        op, size, algo, proto = tuned.groups()
        if algo.isdigit() and int(algo) < len(ALGO_NAMES):
            algo = ALGO_NAMES[int(algo)]
        if proto.isdigit() and int(proto) < len(PROTO_NAMES):
            proto = PROTO_NAMES[int(proto)]
        choices = self.tuned.setdefault(op, {})
        key = f"{algo}/{proto}"
        choices[key] = max(choices.get(key, 0), int(size))

    def add_connection(
        self, msg: str, ev: Evidence, host: str | None = None, device: int | None = None
    ) -> None:
        """``Channel 03/0 : 5[5] -> 12[4] [send] via NET/IB/3/GDRDMA`` and older forms. What
        a (host, GPU, transport, direction) means is worked out once (``_conn_plan``)."""
        if not msg.startswith(("Channel", "Ring", "Tree", "CollNet")):
            return
        if "->" not in msg and not msg.startswith("CollNet"):
            return
        via = msg[msg.rfind(" via ") + 5 :].strip()
        direction = "[receive]" if "[receive]" in msg else "[send]" if "[send]" in msg else ""
        plan_key = (host, device, via, direction)
        plan = self.conn_plans.get(plan_key)
        if plan is None:
            plan = self._conn_plan(host, device, via, direction)
            if len(self.conn_plans) < 4096:
                self.conn_plans[plan_key] = plan
        key, net, who = plan
        if net is not None and len(self.gpu_nets) < 4096:
            self.gpu_nets.setdefault((host or "?", device), set()).add(net)  # type: ignore[arg-type]
        self.transports[key] += 1
        lines = self.transport_lines.setdefault(key, [])
        if len(lines) < KEEP:
            lines.append(ev)
        if key[0] == "NET/IB" and len(self.net_paths) < 4096:
            if who is None:  # no host printed: the rank on this side of the connection
                ranks = _CONN_RANKS.search(msg)
                if ranks is None:
                    return
                who = "rank " + ranks.group(2 if direction == "[receive]" else 1)
            paths = self.net_paths.setdefault(f"{who} {direction}".strip(), {})
            same = paths.setdefault(key[1], [])
            if len(same) < 2:
                same.append(ev)

    @staticmethod
    def _conn_plan(
        host: str | None, device: int | None, via: str, direction: str
    ) -> tuple[tuple[str, bool], str | None, str | None]:
        """(transport kind and GDR, the NET/<i> a GPU uses or None, the host) of a connection."""
        key = transport_of(via)
        net = None
        if key[0].startswith("NET/") and device is not None:
            net = via.split("/")[2].split("(")[0] if via.count("/") >= 2 else "?"  # 0(4): PXN
        return key, net, host

    def add_setting(self, msg: str, ev: Evidence, host: str | None = None) -> None:
        """Every non-connection message NCCL prints once per rank or communicator (``host``:
        the host that printed it, when the line says)."""
        env = _SET_BY_ENV.match(msg) or _SET_TO.match(msg)
        if env:
            self.env.setdefault(env.group(1), (env.group(2), ev))
            return
        if "NCCL version" in msg:
            version = _VERSION.search(msg).group(1)  # type: ignore[union-attr]
            self.version = self.version or version
            self.add_version("NCCL", version.rstrip(".,;"), ev)
        elif msg.startswith("cudaDriverVersion"):
            found = _DRIVER.search(msg)
            self.cuda_driver = self.cuda_driver or (found.group(1) if found else None)
            if found:
                self.add_version("CUDA driver", found.group(1), ev)
        elif msg.startswith("NET/IB") and " Using " in msg:
            nics = _NET_IB.findall(msg)
            for index, name, _port, kind in nics:
                self.ib_nics[name] = kind
                self.ib_nic_order.setdefault(index, name)
            self.nics_per_process = max(self.nics_per_process, len(nics))
            if host and nics:
                seen = self.host_nics.get(host)
                if seen is None or seen[0] < len(nics):
                    self.host_nics[host] = (len(nics), ev)
            if len(self.ib_nic_lines) < KEEP:
                self.ib_nic_lines.append(ev)
        elif msg.startswith("NET/IB") and "speed=" in msg:
            speed = _NET_IB_SPEED.match(msg)
            if speed and int(speed.group(3)) > 0:
                name, kind, mbps = speed.groups()
                self.nic_speeds.setdefault(name, (int(mbps) / 1000, kind))
        elif msg.startswith("NET/Socket") and " Using " in msg:
            for _, name in _NET_SOCKET.findall(msg.split("Using", 1)[1]):
                self.socket_ifaces.add(name)
            if len(self.socket_lines) < KEEP:
                self.socket_lines.append(ev)
        elif msg.startswith("NET : Using interface "):  # NCCL before 2.4
            self.socket_ifaces.add(msg[22:].split(":", 1)[0])
            if len(self.socket_lines) < KEEP:
                self.socket_lines.append(ev)
        elif msg.startswith("Bootstrap"):
            boot = _BOOTSTRAP.match(msg)
            if boot:
                self.bootstrap_ifaces.add(boot.group(1))
                if len(self.bootstrap_lines) < KEEP:
                    self.bootstrap_lines.append(ev)
            elif "no socket interface found" in msg:
                self.mark("no_interface", ev)
        elif msg.startswith("Using network"):
            self.network = self.network or _NETWORK.match(msg).group(1)  # type: ignore[union-attr]
            self.mark("using_network_" + (self.network or "").split()[0].lower(), ev)
        elif "GPU Direct RDMA Disabled" in msg:
            if len(self.gdr_disabled) < KEEP:
                self.gdr_disabled.append(ev)
        elif "GPU Direct RDMA Enabled" in msg:
            if len(self.gdr_enabled) < KEEP:
                self.gdr_enabled.append(ev)
        elif _NVLS.search(msg):
            target = self.nvls_unavailable if "not available" in msg else self.nvls_available
            if len(target) < KEEP:
                target.append(ev)
        elif "coll channels" in msg:
            chan = _CHANNELS.match(msg)
            if chan:
                if len(self.coll_channels) < KEEP:
                    self.coll_channels.append((int(chan.group(1)), ev))
                if chan.group(2) is not None:
                    self.collnet_channels = max(self.collnet_channels or 0, int(chan.group(2)))
                if chan.group(3) is not None:
                    self.nvls_channels = max(self.nvls_channels or 0, int(chan.group(3)))
        elif "Connected all rings" in msg:
            flags = _RINGS_FLAGS.search(msg)
            if flags:
                self.pxn = int(flags.group(1))
                if len(self.gdr_flag) < KEEP:
                    self.gdr_flag.append((int(flags.group(2)), ev))
        elif " nRanks " in msg:
            comm = _COMM.search(msg)
            if comm:
                self.nranks = max(self.nranks or 0, int(comm.group(1)))
                self.nnodes = max(self.nnodes or 0, int(comm.group(2)))
                self.local_ranks = max(self.local_ranks or 0, int(comm.group(3)))
        elif " nranks " in msg:
            init = _INIT.search(msg)
            if init:
                self.ranks.add(int(init.group(1)))
                self.nranks = max(self.nranks or 0, int(init.group(2)))
        elif "lugin" in msg:
            plugin = _PLUGIN.search(msg)
            if plugin:
                name = next(g for g in plugin.groups() if g)
                if name not in self.plugins:
                    self.plugins.append(name)
                if "RDMA" in name or "IBext" in name or "rdma_sharp" in name:
                    self.mark("rdma_plugin", ev)  # HPC-X's IB plugin: the run expects RDMA
                if host and (plugin.group(3) or host not in self.host_plugins):
                    # its path when printed (comparable between hosts), else that one loaded
                    self.host_plugins[host] = (plugin.group(3) or "loaded", ev)
            elif host and _NO_PLUGIN.search(msg):
                self.host_plugins.setdefault(host, ("none", ev))

    # -- JSON --------------------------------------------------------------------------------

    def as_dict(self) -> dict[str, Any]:
        """The facts as JSON (evidence as ``file:line``)."""
        transports: dict[str, dict[str, int]] = {}
        for (kind, gdr), n in sorted(self.transports.items()):
            entry = transports.setdefault(kind, {"connections": 0, "gdrdma": 0})
            entry["connections"] += n
            entry["gdrdma"] += n if gdr else 0
        return {
            "nccl_version": self.version,
            "cuda_driver": self.cuda_driver,
            "net_plugins": self.plugins,
            "network": self.network,
            "hosts": sorted(self.hosts),
            "nranks": self.nranks or (len(self.ranks) or None),
            "nodes": self.node_count,
            "local_ranks": self.local_ranks,
            "transports": transports,
            "ib_nics": dict(sorted(self.ib_nics.items())),
            "nics_per_process": self.nics_per_process,
            "nics_per_gpu": {
                f"{host}:{dev}": sorted(self.ib_nic_order.get(n, f"NET/{n}") for n in nets)
                for (host, dev), nets in sorted(self.gpu_nets.items())
            },
            "socket_interfaces": sorted(self.socket_ifaces),
            "bootstrap_interfaces": sorted(self.bootstrap_ifaces),
            "gdr_disabled_lines": len(self.gdr_disabled),
            "ring_channels": self.ring_channels,
            "coll_channels": max((n for n, _ in self.coll_channels), default=None),
            "collnet_channels": self.collnet_channels,
            "nvls_channels": self.nvls_channels,
            "nvls_available": bool(self.nvls_available)
            if (self.nvls_available or self.nvls_unavailable)
            else None,
            "tree_lines": self.trees,
            "collective_calls": dict(sorted(self.collectives.items())),
            "pxn": self.pxn,
            "algorithms": self.env_value("NCCL_ALGO"),
            "protocols": self.env_value("NCCL_PROTO"),
            "algorithm_choices": {  # op -> algo/proto -> the largest size (B) it was chosen for
                op: dict(sorted(c.items())) for op, c in sorted(self.tuned.items())
            },
            "runs": [
                {"hosts": list(r.hosts), "busbw_GBps": r.busbw_GBps, "op": r.op} for r in self.runs
            ],
            "env": {k: v for k, (v, _) in sorted(self.env.items())},
            "gpu_names": sorted(self.gpu_names),
            "gpu_sms": sorted(self.gpu_sms),
            "nic_speeds_Gbps": {n: r for n, (r, _) in sorted(self.nic_speeds.items())},
            "ports": [
                {
                    "device": p.device,
                    "port": p.port,
                    "state": p.state,
                    "rate_Gbps": p.rate_Gbps,
                    "link_layer": p.link_layer,
                }
                for p in self.ports
            ],
            "warnings": self.warning_count,
            "warning_lines": [f"{e.file}:{e.line}: {e.text.strip()[:300]}" for e in self.warnings],
            "tables": len(self.tables),
            "versions": {kind: sorted(values) for kind, values in sorted(self.versions.items())},
            "net_plugin_per_host": {h: p for h, (p, _) in sorted(self.host_plugins.items())},
            "nics_per_host": {h: n for h, (n, _) in sorted(self.host_nics.items())},
            "gpu_links": dict(sorted(self.topo_links.items())),  # nvidia-smi topo -m pairs
            "harmless_lines": [
                {
                    "line": f"{e.file}:{e.line}",
                    "text": e.text.strip()[:300],
                    "why": why,
                    "source": source,
                }
                for e, why, source in self.harmless
            ],
            "notes": self.notes,
        }
