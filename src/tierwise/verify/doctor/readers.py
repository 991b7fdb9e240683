"""Read the files of one run into ``Facts``: one pass over each file, linear in its size.

Every line is offered to each reader in turn, so a file may hold several kinds of output
(a job log with the environment, NCCL_DEBUG lines and the nccl-tests table):

* NCCL_DEBUG=INFO/TRACE lines ``host:pid:tid [dev] [file:line] NCCL INFO|WARN|TRACE msg``,
  after any launcher prefix (``[1,0]<stdout>:``, ``0:``, ``[rank0]:``, ``[default0]:``,
  timestamps) and with ranks interleaved; ``NCCL version`` lines; NCCL before 2.3 wrote
  ``host:pid:tid [dev] [file:line] INFO|WARN msg`` without ``NCCL``.
* nccl-tests tables: the existing reader (``tierwise.formats``) on the same text with the
  NCCL lines blanked (line numbers kept).
* ``ibstat``, ``ibstatus``, ``ibv_devinfo``, ``ethtool``, ``ip link`` printouts (NIC ports:
  state, rate, link layer), ``lspci -vvv`` ACSCtl lines, ``nvidia-smi topo -m`` NVLink cells,
  NCCL topology XML (NCCL_TOPO_DUMP_FILE: ``<net>``, ``<gpu sm=>`` and GPU ``<pci>``
  elements), ``nvidia-smi`` and ``nvidia-smi -L`` GPU names,
  ``NCCL_*=value`` environment dumps and command lines.
* a few messages frameworks print around NCCL (``Bus error``, NVLS multicast bind failures).

Empty, binary and unrecognisable files are a ``ParseError`` naming the file.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from tierwise.errors import ParseError
from tierwise.formats import parse_log
from tierwise.formats.nccl_reader import rank_line
from tierwise.formats.ops import op_in_name
from tierwise.textio import MAX_INPUT_BYTES, open_regular
from tierwise.verify.doctor.facts import KEEP, Facts, HostRun, Port
from tierwise.verify.doctor.known import harmless
from tierwise.verify.doctor.model import Evidence
from tierwise.verify.doctor.printouts import read_printout, topo_matrix
from tierwise.verify.doctor.records import split_records

_WHERE = re.compile(r"^[\w./\-]+:\d+$")  # "transport/net_ib.cc:839", "ofi_init:700"
_LEVELS = ("INFO", "WARN", "TRACE", "ERROR")
_OLD_LEVEL = re.compile(r"(?:^|(?<=\s))(?:INFO|WARN) ")
_VERSION_LINE = re.compile(r"\bNCCL version \S+")
_ENV = re.compile(r"(?:^|[\s\"'])(?:-x\s+|export\s+|--env[= ])?(NCCL_[A-Z0-9_]+)=([^\s\"';]*)")
# nvidia-smi -L ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)") and the nvidia-smi table
# ("|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |")
_SMI_LIST = re.compile(r"^\s*GPU\s+\d+:\s+(.+?)\s+\(UUID:")
_SMI_TABLE = re.compile(r"^\|\s+\d+\s+((?:NVIDIA|Tesla|Quadro|AMD)\b.*?)\s+(?:On|Off)\s+\|")
_XML_GPU = re.compile(r"<gpu\b[^>]*\bsm=\"(\d+)\"")
_XML_NET = re.compile(r"<net\b([^>]*)>")
_XML_PCI = re.compile(r"<pci\b([^>]*)>")
_XML_ATTR = re.compile(r'(\w+)="([^"]*)"')
_TOPO_ROW = re.compile(r"^\s*GPU\d+\s+(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)\s")
_NVLINK_CELL = re.compile(r"\bNV\d+\b")
_IP_LINK = re.compile(r"^\d+:\s+([^:@\s]+)(?:@\S+)?:\s+<[^>]*>\s+mtu\s+(\d+).*?\bstate\s+(\w+)")
_PAIR_RUN = re.compile(
    r"^\s*([A-Za-z][\w.\-]*(?:,[A-Za-z][\w.\-]*)+)\s+(\d+(?:\.\d+)?)\s*(?:#.*)?$"
)
_IBV_SPEED = re.compile(r"([\d.]+)\s*Gbps")
_IBV_WIDTH = re.compile(r"(\d+)X")
_MESSAGES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("bus_error", re.compile(r"\bBus error\b")),
    (
        "shm_create",
        re.compile(r"Error while creating shared memory segment|posix_fallocate failed"),
    ),
    (
        "p2p_disabled",
        re.compile(r"cudaDeviceEnablePeerAccess returned|peer access is not supported"),
    ),
    (
        "nccl_error",
        re.compile(r"unhandled system error|ncclSystemError|ncclInternalError|ncclRemoteError"),
    ),
    (
        "nvls_bind",
        re.compile(r"Failed to bind NVLink SHARP|transport/nvls\.cc:\d+ NCCL WARN Cuda failure"),
    ),
)
_NCCL_WARN_KEYS: tuple[tuple[str, str], ...] = (
    ("shm_create", "Error while creating shared memory segment"),
    ("shm_create", "posix_fallocate failed"),
    ("shm_create", "failed to extend /dev/shm"),
    ("no_ib_device", "NET/IB : No device found"),
    ("libibverbs", "Failed to open libibverbs"),
    ("ib_open_failed", "Unable to open device"),
    ("ib_open_failed", "ibv_open_device failed"),
    ("ofi_efa_only", "NET/OFI Only EFA provider is supported"),
    ("no_net_plugin", "Failed to initialize any NET plugin"),
    ("ib_error_4", "with error 4,"),  # IBV_WC_LOC_PROT_ERR: GPUDirect RDMA blocked (ACS)
    ("ib_error_4", "status=4 "),
    ("ib_error_4", "IBV_WC_LOC_PROT_ERR"),
    ("ib_error_12", "with error 12,"),  # IBV_WC_RETRY_EXC_ERR: the peer NIC never answered
    ("ib_error_12", "status=12 "),
    ("ib_error_12", "IBV_WC_RETRY_EXC_ERR"),
    ("ib_completion_error", "Got completion "),
    ("modify_qp_failed", "ibv_modify_qp failed"),
    ("no_interface", "no socket interface found"),
    ("no_interface", "No interface found in the same subnet"),
    ("no_interface", "Socket creation failed"),
    ("topo_real_path", "Could not find real path"),
    ("topo_affinity", "unable to find GPU/CPU"),
    ("topo_not_pci", "is not a PCI device"),
    ("collnet_fallback", "Cannot initialize CollNet"),
    ("sharp_error", "SHARP coll init error"),
    ("sharp_error", "SHARP group create"),
    ("p2p_disabled", "P2P is disabled"),
    ("p2p_disabled", "peer access is not supported"),
    ("p2p_disabled", "cudaDeviceEnablePeerAccess"),
    ("nvls_bind", "Failed to bind NVLink SHARP"),
    ("truncated", "message truncated"),  # ranks disagree on sizes: versions or settings differ
    ("reg_mr_failed", "ibv_reg_mr"),
    ("p2p_disabled", "Could not enable P2P"),
    ("symbol_version", "not found (required by"),  # a plugin built against a newer library
    ("symbol_version", "undefined symbol"),
    ("connect_failed", "Connection timed out"),
    ("connect_failed", "No route to host"),
    ("connect_failed", "Connection refused"),
    ("connect_failed", "socketStartConnect"),
    ("bad_address", "is neither AF_INET"),  # no interface matched, or mismatched NCCL versions
    ("init_complete", "Init COMPLETE"),
    ("using_network_socket", "Using internal Network Socket"),  # NCCL 2.2/2.3
    ("no_ib_device", "returned 0 devices"),  # NCCL 2.3: "Net/IB: call to devices() returned 0"
)
_MAX_BINARY_RATIO = 0.1
"""Share of control bytes in the first 64 KiB above which a file is binary."""


def _is_binary(head: bytes) -> bool:
    if b"\x00" in head:
        return True
    text = head.decode("utf-8", errors="replace")
    if not text:
        return False
    odd = sum(1 for c in text if c == "\ufffd" or (ord(c) < 32 and c not in "\t\n\r\f\v\x1b"))
    return odd / len(text) > _MAX_BINARY_RATIO


class _Scan:
    """One file's pass; ``recognised`` counts lines any reader understood."""

    def __init__(self, facts: Facts, source: str):
        self.facts = facts
        self.source = source
        self.recognised = 0
        self.nonblank = 0  # lines with anything on them
        self.port: Port | None = None  # the ibstat/ibstatus/ibv_devinfo/ethtool block being read
        self.device: str | None = None
        self.width = 1  # ibv_devinfo active_width, for the active_speed line after it
        self.model: str | None = None  # NIC model of the ports that follow
        self.prefixes: dict[str, tuple[str | None, int | None, str | None]] = {}
        self.rank_lines: list[int] = []  # nccl-tests "# Rank" lines, to cite a table's hosts
        self.printout_state: dict[str, int] = {}  # see printouts.read_printout
        self.key_cache: dict[str, str | None] = {}  # message -> its _NCCL_WARN_KEYS key

    def ev(self, lineno: int, line: str) -> Evidence:
        return Evidence(self.source, lineno, line.strip()[:300])

    def nccl(self, lineno: int, line: str) -> bool:
        """An NCCL debug line (or ``NCCL version``); False if ``line`` is none."""
        at = line.find("NCCL ")
        level = line[at + 5 : at + 10].rstrip() if at >= 0 else ""
        if level not in _LEVELS:
            if version := _VERSION_LINE.search(line):
                self.facts.add_setting(version.group(0), self.ev(lineno, line))
                self.other(lineno, line)  # a framework's error quoting the version
                return True
            return False
        self.record(lineno, line, level, line[at + 6 + len(level) :].strip(), line[:at])
        return True

    def record(self, lineno: int, line: str, level: str, msg: str, before: str) -> None:
        """Add one NCCL message; ``before``: what precedes the level (host, GPU, location)."""
        host, dev, where = self.prefix(before)
        ev = Evidence(self.source, lineno, line)  # stripped when a finding cites it
        known_harmless = level == "WARN" and self.known_harmless(msg, ev)
        if known_harmless:
            level = "INFO"  # a harmless WARN is not a warning
        if not self.facts.add_nccl(level, msg, host, dev, ev) or known_harmless:
            return  # connection, ring and call lines (most of a big log) name no fault
        if not self.known_harmless(msg, ev) and not self.keys(msg, ev) and level == "WARN":
            self.facts.mark("unexplained_warn", ev)
        if level == "WARN" and where and "nvls" in where:
            self.facts.mark("nvls_bind", ev)

    def keys(self, text: str, ev: Evidence) -> bool:
        """Mark the first known NCCL message ``text`` holds; False when none."""
        key = self.key_cache.get(text, "")
        if key == "":
            key = next((k for k, needle in _NCCL_WARN_KEYS if needle in text), None)
            if len(self.key_cache) < 100_000:  # ranks repeat their messages word for word
                self.key_cache[text] = key
        if key is None:
            return False
        self.facts.mark(key, ev)
        return True

    def known_harmless(self, text: str, ev: Evidence) -> bool:
        """Whether ``text`` is a known-harmless line (kept in the facts with its source)."""
        entry = harmless(text)
        if entry is None:
            return False
        if len(self.facts.harmless) < KEEP:
            self.facts.harmless.append((ev, entry.why, entry.source))
        return True

    def old_nccl(self, lineno: int, line: str) -> bool:
        """A line of NCCL before 2.3 (``host:pid:tid [dev] [file:line] INFO|WARN msg``), or a
        record pasted without its prefix (``file.cc:line WARN msg``, ``INFO msg``)."""
        match = _OLD_LEVEL.search(line)
        if not match:
            return False
        before = line[: match.start()]
        if self.prefix(before)[1] is None and not all(_WHERE.match(w) for w in before.split()):
            return False  # neither ``host:pid:tid [dev]`` nor only a ``file.cc:line`` before it
        level = match.group(0).strip()
        self.record(lineno, line, level, line[match.end() :].strip(), before)
        return True

    def prefix(self, text: str) -> tuple[str | None, int | None, str | None]:
        """(host, GPU index, source location) from what precedes ``NCCL LEVEL``: any launcher
        tag, then ``host:pid:tid [dev]``, then ``file.cc:line`` on WARN lines; cached."""
        cached = self.prefixes.get(text)
        if cached is not None:
            return cached
        words = text.split()
        where = words.pop() if words and _WHERE.match(words[-1]) else None
        if words and words[-1][:1].isdigit() and words[-1].replace(".", "").isdigit():
            words.pop()  # TRACE time stamp
        host = dev = None
        if words and words[-1].startswith("[") and words[-1][1:-1].isdigit():
            dev = int(words[-1][1:-1])  # ``[dev] NCCL INFO`` also without a host before it
            parts = words[-2].rsplit(":", 2) if len(words) >= 2 else []
            if len(parts) == 3:
                host = parts[0].rsplit("]", 1)[-1].rsplit(":", 1)[-1].rsplit(">", 1)[-1] or None
        result = (host, dev, where)
        if len(self.prefixes) < 100_000:
            self.prefixes[text] = result
        return result

    # -- tool printouts ----------------------------------------------------------------------

    def new_port(self, device: str, port: str, lineno: int, line: str, kind: str = "rdma") -> None:
        self.port = Port(
            device=device, kind=kind, model=self.model, port=port, evidence=self.ev(lineno, line)
        )
        self.facts.ports.append(self.port)

    def tools(self, lineno: int, line: str) -> bool:
        s = line.strip()
        if s.startswith("CA '"):  # ibstat
            self.device, self.model = s[4:].rstrip("':"), None
            return True
        if s.startswith(("CA type:", "vendor_part_id:")):  # ibstat, ibv_devinfo
            self.model = s.split(":", 1)[1].strip()
            return True
        if s.startswith("Port ") and s.endswith(":") and self.device:  # ibstat
            self.new_port(self.device, s[5:-1], lineno, line)
            return True
        if s.startswith("Infiniband device '"):  # ibstatus
            parts = s.split("'")
            port = s.split(" port ")[1].split()[0] if " port " in s else "1"
            self.new_port(parts[1], port, lineno, line)
            return True
        if s.startswith("hca_id:"):  # ibv_devinfo
            self.device, self.model = s.split(":", 1)[1].strip(), None
            return True
        if s.startswith("port:") and self.device:  # ibv_devinfo
            self.new_port(self.device, s.split(":", 1)[1].strip(), lineno, line)
            return True
        if s.startswith("Settings for ") and s.endswith(":"):  # ethtool
            self.new_port(s[13:-1], "1", lineno, line, kind="eth")
            self.port.link_layer = "Ethernet"  # type: ignore[union-attr]
            return True
        ip = _IP_LINK.match(s)
        if ip:
            self.new_port(ip.group(1), "1", lineno, line, kind="eth")
            self.port.state = "active" if ip.group(3) == "UP" else ip.group(3).lower()  # type: ignore[union-attr]
            self.port.state_evidence = self.port.evidence  # type: ignore[union-attr]
            self.port.link_layer = "Ethernet"  # type: ignore[union-attr]
            return True
        port = self.port
        if port is None or ":" not in s:
            return False
        key, value = (x.strip() for x in s.split(":", 1))
        key = key.lower()
        ev = self.ev(lineno, line)
        if key in ("state", "port_state"):  # "Active", "4: ACTIVE", "PORT_ACTIVE (4)"
            word = value.split(":")[-1].split("(")[0].strip().lower().removeprefix("port_")
            port.state, port.state_evidence = word, ev
        elif key == "rate":  # ibstat "400", ibstatus "200 Gb/sec (4X HDR)"
            try:
                port.rate_Gbps, port.rate_evidence = float(value.split()[0]), ev
            except ValueError:
                return False
        elif key == "active_width":
            width = _IBV_WIDTH.search(value)
            self.width = int(width.group(1)) if width else 1
        elif key == "active_speed":
            speed = _IBV_SPEED.search(value)
            if speed:
                port.rate_Gbps, port.rate_evidence = float(speed.group(1)) * self.width, ev
        elif key in ("link layer", "link_layer"):
            port.link_layer = value
        elif key == "speed" and value.endswith("Mb/s"):  # ethtool
            try:
                port.rate_Gbps, port.rate_evidence = float(value[:-4]) / 1000, ev
            except ValueError:
                return False
        elif key == "link detected":
            port.state, port.state_evidence = ("active" if value == "yes" else "down"), ev
        else:
            return False
        return True

    def topology(self, lineno: int, line: str) -> bool:
        facts = self.facts
        if "ACSCtl:" in line:
            if "SrcValid+" in line and len(facts.acs_enabled) < 8:
                facts.acs_enabled.append(self.ev(lineno, line))
            return True
        if _TOPO_ROW.match(line):
            if _NVLINK_CELL.search(line) and len(facts.nvlink_in_topo) < 8:
                facts.nvlink_in_topo.append(self.ev(lineno, line))
            topo_matrix(facts, line, self.ev(lineno, line), self.printout_state)
            return True
        if "<net " in line or "<pci " in line:
            self.xml(lineno, line)
            return True
        sm = _XML_GPU.search(line)
        if sm:
            facts.gpu_sms.add(int(sm.group(1)))
            return True
        return False

    def xml(self, lineno: int, line: str) -> None:
        facts = self.facts
        net = _XML_NET.search(line)
        if net:
            attrs = dict(_XML_ATTR.findall(net.group(1)))
            p = Port(
                device=attrs.get("name", "?"),
                kind="xml",
                model=self.model,
                port=attrs.get("port", "1"),
                evidence=self.ev(lineno, line),
            )
            if attrs.get("speed", "").isdigit():
                p.rate_Gbps, p.rate_evidence = int(attrs["speed"]) / 1000, p.evidence
            if self.model and self.model.startswith(("0x0200", "0x0207")):  # PCI class
                p.link_layer = "Ethernet" if self.model.startswith("0x0200") else "InfiniBand"
            facts.ports.append(p)
            if attrs.get("gdr") == "0" and len(facts.xml_gdr_off) < 8:
                facts.xml_gdr_off.append(self.ev(lineno, line))
        pci = _XML_PCI.search(line)
        if pci:
            attrs = dict(_XML_ATTR.findall(pci.group(1)))
            self.model = f"{attrs.get('class')}/{attrs.get('device')}"  # the NIC's own <pci>
            speed = attrs.get("link_speed", "")
            if (
                attrs.get("class", "").startswith("0x03")
                and speed.split(" ")[0].replace(".", "").isdigit()
            ):
                facts.pcie_links.append((float(speed.split(" ")[0]), self.ev(lineno, line)))

    def other(self, lineno: int, line: str) -> bool:
        hit = False
        settings = [] if line.lstrip().startswith("#") else _ENV.findall(line)  # commented out
        for name, value in settings:
            self.facts.env.setdefault(name, (value, self.ev(lineno, line)))
            hit = True
        hash_at = line.find("#")
        rank = rank_line(line[hash_at + 1 :].strip()) if hash_at >= 0 else None
        if rank is not None:  # nccl-tests' rank lines, even without a table after them
            self.facts.hosts.add(rank.host)
            if rank.device_name:
                self.facts.gpu_names.add(rank.device_name)
            self.rank_lines.append(lineno)
            hit = True
        smi = _SMI_LIST.match(line) or _SMI_TABLE.match(line)
        if smi:
            self.facts.gpu_names.add(smi.group(1))
            hit = True
        pair = _PAIR_RUN.match(line)
        if pair:
            hosts = tuple(pair.group(1).split(","))
            run = HostRun(hosts, float(pair.group(2)), None, self.ev(lineno, line))
            self.facts.runs.append(run)
            hit = True
        for key, pattern in _MESSAGES:
            if pattern.search(line):
                self.facts.mark(key, self.ev(lineno, line))
                hit = True
        ev = self.ev(lineno, line)
        if self.known_harmless(line, ev):
            return True
        if read_printout(self.facts, line, ev, self.printout_state):
            hit = True
        return self.keys(line, ev) or hit

    def run(self, lines: Iterable[str]) -> list[str]:
        """Scan every line; returns the text the nccl-tests reader sees (NCCL lines blanked).
        A line holding a number no reader can take ('²', thousands of digits) is skipped."""
        readers: tuple[Callable[[int, str], bool], ...] = (self.topology, self.tools, self.other)
        table: list[str] = []
        skipped = 0
        for lineno, line in enumerate(lines, start=1):
            try:
                table.append(self.line(lineno, line, readers))
            except (ValueError, OverflowError):
                skipped += 1
                table.append("")
        if skipped:
            self.facts.notes.append(
                f"{self.source}: {skipped} line(s) with unreadable numbers skipped"
            )
        return table

    def line(self, lineno: int, line: str, readers: tuple[Callable[[int, str], bool], ...]) -> str:
        """Read one line into the facts; returns what the nccl-tests reader sees of it."""
        if "NCCL" in line:
            if line.count("NCCL ") < 2 and self.nccl(lineno, line):  # one record: most lines
                self.recognised += 1
                self.nonblank += 1
                if "NCCL_" in line and "=" in line:  # an NCCL_X=value on a launcher line
                    self.other(lineno, line)
                return ""
            records = split_records(line)
            found = [self.nccl(lineno, record) for record in records]
            if any(found):
                self.recognised += 1
                self.nonblank += 1
                if "NCCL_" in line and "=" in line:  # an NCCL_X=value on a launcher line
                    self.other(lineno, line)
                for record, was in zip(records, found, strict=True):
                    if not was:
                        self.line(lineno, record, readers)
                return ""
        if ("INFO " in line or "WARN " in line) and self.old_nccl(lineno, line):
            self.recognised += 1
            self.nonblank += 1
            return ""
        if not line.strip():
            self.port = None  # a port block (ibstat, ethtool, ...) has no blank line
            return line
        self.nonblank += 1
        if any(reader(lineno, line) for reader in readers):
            self.recognised += 1
        return line


def read_file(path: str | Path, facts: Facts) -> dict[str, object]:
    """Add one file's facts; returns {path, lines, recognised, tables}. Raises ParseError.
    The file is read as a stream of lines (a 50 MB log is never held as one string)."""
    path = Path(path)
    source = str(path)
    try:
        with open_regular(path, limit=MAX_INPUT_BYTES) as raw:  # no device, FIFO or folder
            head = raw.read(65536)
            if _is_binary(head):
                raise ParseError(
                    "binary file; expected text (NCCL_DEBUG output, nccl-tests log, ibstat, ...)",
                    source=source,
                )
            raw.seek(0)
            encoding = "utf-16" if head.startswith((b"\xff\xfe", b"\xfe\xff")) else "utf-8-sig"
            text = io.TextIOWrapper(raw, encoding=encoding, errors="replace", newline=None)
            scan = _Scan(facts, source)
            table_text = scan.run(line.rstrip("\n") for line in text)
    except OSError as exc:
        raise ParseError(f"cannot read the file: {exc.strerror or exc}", source=source) from None
    if not scan.nonblank:
        raise ParseError(
            "the file is empty; expected NCCL_DEBUG output, an nccl-tests log or a tool printout",
            source=source,
        )
    tables = _tables("\n".join(table_text), source, path.name, facts, scan.rank_lines)
    if not scan.recognised and not tables:
        raise ParseError(
            "nothing recognisable: no NCCL_DEBUG lines, nccl-tests table, NCCL_* settings or"
            " ibstat/ibv_devinfo/ethtool/ip link/nvidia-smi topo/lspci/topology XML output",
            source=source,
        )
    return {
        "path": source,
        "lines": len(table_text),
        "recognised_lines": scan.recognised,
        "tables": tables,
    }


def _tables(text: str, source: str, name: str, facts: Facts, rank_lines: list[int]) -> int:
    """nccl-tests tables in ``text``; a table that does not read is a note, not an error.
    A table with rank lines is also a host run (cited at its first rank line)."""
    try:
        tests = parse_log(text, source=source, default_op=op_in_name(name))
    except ParseError as exc:
        if "no nccl-tests results" not in str(exc):
            facts.notes.append(f"nccl-tests table not read: {exc}")
        return 0
    lines = iter(rank_lines)
    for test in tests:
        facts.tables.append((source, test))
        first = next(lines, 1)
        for _ in test.ranks[1:]:
            next(lines, None)
        peak = max((r.out_of_place.busbw_GBps or 0.0 for r in test.rows), default=0.0)
        if test.hosts and peak > 0:
            text = f"{test.op} on {', '.join(test.hosts)}: peak busbw {peak:g} GB/s"
            facts.runs.append(HostRun(test.hosts, peak, test.op, Evidence(source, first, text)))
        facts.gpu_names.update(r.device_name for r in test.ranks if r.device_name)
        facts.hosts.update(test.hosts)
    return len(tests)
