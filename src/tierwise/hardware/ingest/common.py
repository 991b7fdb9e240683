"""Facts shared by the node ingesters: PCIe distance classes, NVLink rates, GPU name tables.

Distances follow `nvidia-smi topo -m` (nearest first): PIX (at most one PCIe bridge), PXB
(several bridges, no host bridge), PHB (through a PCIe host bridge), NODE (between host bridges
of one NUMA node), SYS (across the inter-socket link).
"""

from __future__ import annotations

DISTANCES = ("PIX", "PXB", "PHB", "NODE", "SYS")

# Per-link NVLink rate in GB/s per direction, by NVLink generation. NVLink 2/3/4 links all carry
# 25 GB/s each way (V100: 6 links = 300 GB/s bidirectional; A100: 12 = 600; H100: 18 = 900 --
# NVIDIA datasheets); NVLink 5 doubles it (B200: 18 links = 1.8 TB/s bidirectional).
NVLINK_GBPS_PER_LINK = {2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}

# CUDA compute capability (NCCL's `sm`, major*10+minor) -> NVLink generation of that architecture.
NVLINK_GEN_BY_SM = {70: 2, 80: 3, 90: 4, 100: 5}

# Links per GPU of the NVSwitch systems, used to guess the generation when nothing names the GPU:
# DGX A100 shows NV12, DGX H100 NV18 (DGX B200 also NV18, so 18 is ambiguous and reported so).
NVLINK_GEN_BY_COUNT = {12: 3, 18: 4}
DEFAULT_NVLINK_GEN = 4

# GPU marketing names as nvidia-smi / rocm-smi print them -> catalog key. Checked in order, first
# substring (case-insensitive) wins, so the more specific names come first.
GPU_NAME_KEYS = (
    ("GB200", "gb200"),
    ("B200", "b200"),
    ("H200", "h200"),
    ("H100 PCIe", "h100-pcie"),
    ("H100 80GB HBM3", "h100-sxm"),
    ("H100 SXM", "h100-sxm"),
    ("A100-SXM4-80GB", "a100-sxm-80gb"),
    ("A100-SXM4-40GB", "a100-sxm-40gb"),
    ("L40S", "l40s"),
    ("MI300X", "mi300x"),
)

# PCI vendor:device ids (pci.ids database) -> catalog key, for NCCL's topology XML.
GPU_PCI_KEYS = {
    ("0x10de", "0x20b0"): "a100-sxm-40gb",  # GA100 [A100 SXM4 40GB]
    ("0x10de", "0x20b2"): "a100-sxm-80gb",  # GA100 [A100 SXM4 80GB]
    ("0x10de", "0x2330"): "h100-sxm",  # GH100 [H100 SXM5 80GB]
    ("0x10de", "0x2331"): "h100-pcie",  # GH100 [H100 PCIe]
    ("0x10de", "0x2335"): "h200",  # GH100 [H200 SXM 141GB]
    ("0x10de", "0x2901"): "b200",  # GB100 [B200]
    ("0x10de", "0x26b9"): "l40s",  # AD102GL [L40S]
    ("0x1002", "0x74a1"): "mi300x",  # Aqua Vanjaram [Instinct MI300X]
}

# When the GPU is not named anywhere: the catalog GPU that goes with an intra-node link.
DEFAULT_GPU_BY_INTRA = {"nvlink3": "a100-sxm-80gb", "nvlink4": "h100-sxm", "nvlink5": "b200"}
DEFAULT_GPU_PCIE = "h100-pcie"
DEFAULT_GPU = "h100-sxm"

# PCIe transfer rate per lane (GT/s) -> generation; bandwidth per direction = GT/s x lanes / 8.
PCIE_GEN_BY_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def gpu_key_from_name(name: str) -> str | None:
    """The catalog key of a GPU marketing name, or None when the catalog has no match."""
    low = name.lower()
    return next((key for needle, key in GPU_NAME_KEYS if needle.lower() in low), None)


def distance_rank(distance: str) -> int:
    """Position of a PCIe distance class in DISTANCES (0 = nearest)."""
    return DISTANCES.index(distance)
