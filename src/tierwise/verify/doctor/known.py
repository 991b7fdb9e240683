"""Facts the doctor knows about lines and hardware, each with its source.

``HARMLESS``: lines people post that look alarming but are no fault; they are recognised,
listed in the facts with their source, and never become findings. ``NIC_MODELS``: the
fastest port rate of each Mellanox/NVIDIA NIC model, so a port below what its model runs
can be told from a port of a slower model.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Harmless(NamedTuple):
    """A line that is no fault: what matches it, why it is harmless, where that is said."""

    key: str
    pattern: re.Pattern[str]
    why: str
    source: str


HARMLESS: tuple[Harmless, ...] = (
    Harmless(
        "ibverbs_provider_probe",
        # any provider but mlx5's (Mellanox/NVIDIA NICs): libibverbs tries every provider it has
        re.compile(r"couldn't load driver '(?!libmlx5)lib[\w\-]+-rdmav\d+\.so'"),
        "libibverbs probes every provider in its list; a missing provider for other vendors'"
        " NICs does not stop the mlx5 one from working",
        "https://github.com/NVIDIA/nccl/issues/1044 (maintainer KaimingOuyang)",
    ),
    Harmless(
        "net_plugin_older_api",
        re.compile(r"Failed to find nccl(?:Coll)?Net(?:Plugin)?_v\d+ symbol"),
        "NCCL asks a net plugin for its newest API first and loads the older version it has",
        "NCCL src/plugin/net.cc (tries each plugin version in turn); the log of"
        " https://github.com/NVIDIA/nccl/issues/1000 loads the v5 plugin right after",
    ),
    Harmless(
        "no_net_plugin",
        re.compile(
            r"No plugin found \(libnccl-net\.so\)(?:, using internal implementation)?\s*$"
            r"|NET/Plugin\s*:?\s*Could not find:? libnccl-net\.so\.?(?: Using internal)?"
            r"|Plugin load \(libnccl-net\.so\) returned \d+ : libnccl-net\.so: cannot open"
            r"|dlerror=libnccl-net\.so: cannot open shared object file"
        ),
        "without a net plugin NCCL uses its internal IB and socket transports",
        "NCCL environment docs (NCCL_NET_PLUGIN); plugins are needed only for other"
        " networks (e.g. AWS EFA: aws-ofi-nccl)",
    ),
    Harmless(
        "iface_speed_default",
        re.compile(r"Could not get speed from /sys/class/net/\S+/speed"),
        "virtual interfaces report no speed; NCCL assumes 10 Gb/s for its socket topology",
        "NCCL src/misc/socket.cc / net_socket.cc",
    ),
    Harmless(
        "connect_retry",
        re.compile(r"Call to connect returned Connection refused, retrying"),
        "a peer's listening socket is not up yet; NCCL retries the connection",
        "NCCL src/misc/socket.cc (connect retry loop)",
    ),
    Harmless(
        "dmabuf_off",
        re.compile(r"Dmabuf feature disabled without NCCL_DMABUF_ENABLE"),
        "an informational line: DMA-BUF is off by default, peer memory is used instead",
        "NCCL environment docs (NCCL_DMABUF_ENABLE)",
    ),
    Harmless(
        "proc_mounts",
        re.compile(r"Unexpected end of /proc/mounts line"),
        "printed by hwloc/glibc for very long overlay mount lines in containers",
        "https://github.com/horovod/horovod/issues/313 (the run continues)",
    ),
)
"""Known-harmless lines, matched anywhere on a line."""


def harmless(text: str) -> Harmless | None:
    """The harmless entry ``text`` matches, if any."""
    if (
        "rdmav" not in text
        and "lugin" not in text
        and "Could not" not in text
        and ("retrying" not in text and "mabuf" not in text and "/proc/mounts" not in text)
    ):
        return None  # none of the patterns can match: the common case, kept cheap
    if "(required by" in text or "undefined symbol" in text:
        return None  # a plugin that exists but cannot load: a version mismatch
    return next((h for h in HARMLESS if h.pattern.search(text)), None)


class NicModel(NamedTuple):
    """A NIC model: its name and the fastest rate one port runs (Gb/s)."""

    name: str
    max_Gbps: float


NIC_MODELS: dict[int, NicModel] = {
    # key: the PCI device id, which is also ibstat's `CA type: MT<decimal>` and ibv_devinfo's
    # `vendor_part_id` (0x101b = 4123). Names: the PCI ID database (pci-ids.ucw.cz, vendor
    # 15b3); rates: NVIDIA's ConnectX/BlueField product briefs (fastest port speed).
    4115: NicModel("ConnectX-4", 100.0),  # 0x1013, EDR / 100GbE
    4117: NicModel("ConnectX-4 Lx", 50.0),  # 0x1015
    4119: NicModel("ConnectX-5", 100.0),  # 0x1017, EDR / 100GbE
    4121: NicModel("ConnectX-5 Ex", 100.0),  # 0x1019
    4123: NicModel("ConnectX-6", 200.0),  # 0x101b, HDR / 200GbE
    4125: NicModel("ConnectX-6 Dx", 200.0),  # 0x101d, 200GbE
    4127: NicModel("ConnectX-6 Lx", 50.0),  # 0x101f, 25/50GbE
    4129: NicModel("ConnectX-7", 400.0),  # 0x1021, NDR / 400GbE
    4131: NicModel("ConnectX-8", 800.0),  # 0x1023, XDR / 800GbE
    41686: NicModel("BlueField-2", 200.0),  # 0xa2d6
    41692: NicModel("BlueField-3", 400.0),  # 0xa2dc
}
"""Mellanox/NVIDIA NIC models by PCI device id."""

_MODEL_ID = re.compile(r"(?:MT)?(\d{4,5})\b|0x([0-9a-fA-F]{4})\b")


def nic_model(text: str | None) -> NicModel | None:
    """The model a ``CA type``/``vendor_part_id``/``0x1021`` (PCI device) value names."""
    if not text:
        return None
    found = _MODEL_ID.search(text.split("/")[-1])
    if not found:
        return None
    number = int(found.group(1)) if found.group(1) else int(found.group(2), 16)
    return NIC_MODELS.get(number)
