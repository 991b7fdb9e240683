"""Constant tables of the collective model, NCCL-style: latencies in us, bandwidth factors.

Latency values are NCCL's tuner constants (NVIDIA/nccl src/graph/tuning.cc, `baseLat` and
`hwLat`), indexed [algorithm][protocol]; protocols LL, LL128, Simple. They are facts about
NCCL's software pipeline (kernel launch, proxy thread, flag polling), not hardware latency:
a tier's own hardware latency is added on top as its difference to the reference below.
"""

from __future__ import annotations

PROTOCOLS = ("LL", "LL128", "Simple")

# Fixed cost of launching one collective, us (tuning.cc baseLat).
BASE_LAT_US: dict[str, dict[str, float]] = {
    "tree": {"LL": 6.8, "LL128": 14.0, "Simple": 14.0},
    "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
}

# Per-step latency by link class, us (tuning.cc hwLat[NVLINK|PCI|NET]).
STEP_LAT_US: dict[str, dict[str, dict[str, float]]] = {
    "nvlink": {
        "tree": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
        "ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
    },
    "pcie": {
        "tree": {"LL": 1.0, "LL128": 1.9, "Simple": 4.0},
        "ring": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7},
    },
    "net": {
        "tree": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0},
        "ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
    },
}

# Hardware one-way latency the NET row above was measured with (InfiniBand, ~1.2 us); a
# slower NIC (RoCE, TCP, EFA) adds its difference per inter-node step, us.
NET_REFERENCE_LATENCY_US = 1.2
# Same for intra-node links: the NVLINK/PCI rows assume this hardware latency, us.
INTRA_REFERENCE_LATENCY_US = {"nvlink": 0.6, "pcie": 1.0}

# In-network reduction: one Simple-protocol collective through NVSwitch (NVLS) or the IB
# switch (SHARP/CollNet) has a large fixed cost, us (tuning.cc NVLS/CollNet hwLat ~25-31 us).
NVLS_LAT_US = 25.0
SHARP_LAT_US = 31.0

# Bandwidth each protocol keeps of the Simple protocol's (tuning.cc "model refinements"):
# LL sends 4 B of flag per 4 B of data and polls: ~1/4 for all-reduce or multi-node, 1/3 else.
LL_BW_FACTOR_REDUCE_OR_NET = 0.25
LL_BW_FACTOR_OTHER = 1.0 / 3.0
# LL128 carries 120 of every 128 bytes; with fewer than 2 GPUs per node it pipelines worse.
LL128_BW_FACTOR = 120.0 / 128.0
LL128_BW_FACTOR_ONE_PER_NODE = 0.7
# The double binary tree all-reduce reaches 92% of the ring's per-link bandwidth (tuning.cc).
TREE_BW_FACTOR = 0.92

# NVLS all-reduce algbw as a share of NVLink line rate per direction. Fitted on
# shared/calibration/nccl/dgx-h100_1x8_all_reduce.txt: busbw 479.9 GB/s at 16 GiB on 8 GPUs =
# algbw 274.2 GB/s = 0.61 x 450 GB/s.
NVLS_ALGBW_EFFICIENCY = 0.61
# SHARP sends each byte once up and once down per rail: algbw = NIC effective bandwidth.
SHARP_ALGBW_EFFICIENCY = 1.0
