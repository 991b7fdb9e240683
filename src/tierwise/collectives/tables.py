"""Constant tables of the collective model, NCCL-style: latencies in us, bandwidths in GB/s.

Source unless a line says otherwise: NVIDIA/nccl v2.30.7-1 (commit 5067397c, June 2026),
`src/graph/tuning.cc` (`ncclTunerConstantsDefaults`, `ncclTopoTuneModel`,
`ncclTopoGetAlgoTime`) and `src/transport/nvls.cc`. Tables are indexed
[algorithm][protocol] with protocols (LL, LL128, Simple), or [architecture][node index] with
node index 0, 1, 2 for 1, 2 and >= 4 nodes (3 nodes use the >= 4 column, as NCCL's
`index2 = nNodes <= 2 ? nNodes - 1 : 2`). The latencies are facts about NCCL's software
pipeline (kernel launch, proxy thread, flag polling), not wire latency: a tier's own hardware
latency is added on top as its difference to the reference it was measured with.
"""

from __future__ import annotations

PROTOCOLS = ("LL", "LL128", "Simple")
NCCL_VERSION = "2.30.7"

# NCCL algorithms as tierwise spells them (NCCL_ALGO Tree, Ring, CollNetDirect, CollNetChain,
# NVLS, NVLSTree, PAT): tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat.

# Fixed cost of launching one collective, us (baseLatencies).
BASE_LAT_US: dict[str, dict[str, float]] = {
    "tree": {"LL": 6.8, "LL128": 14.0, "Simple": 8.4},
    "ring": {"LL": 6.6, "LL128": 14.0, "Simple": 8.4},
    "collnet_direct": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
    "collnet_chain": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
    "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
    "nvls_tree": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
    "pat": {"LL": 8.0, "LL128": 8.0, "Simple": 8.0},
}

# Latency of one step by link class, us (hwLatencies[NVLINK|PCI|NET]).
STEP_LAT_US: dict[str, dict[str, dict[str, float]]] = {
    "nvlink": {
        "tree": {"LL": 0.6, "LL128": 1.25, "Simple": 4.0},
        "ring": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
        "collnet_direct": {"LL": 0.0, "LL128": 0.0, "Simple": 3.7},
        "collnet_chain": {"LL": 0.0, "LL128": 0.0, "Simple": 2.8},
        "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 25.0},
        "nvls_tree": {"LL": 0.0, "LL128": 0.0, "Simple": 25.0},
        "pat": {"LL": 0.0, "LL128": 0.0, "Simple": 4.0},
    },
    "pcie": {
        "tree": {"LL": 1.0, "LL128": 1.9, "Simple": 4.0},
        "ring": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7},
        "collnet_direct": {"LL": 0.0, "LL128": 0.0, "Simple": 3.7},
        "collnet_chain": {"LL": 0.0, "LL128": 0.0, "Simple": 2.8},
        "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
        "nvls_tree": {"LL": 0.0, "LL128": 0.0, "Simple": 0.0},
        "pat": {"LL": 0.0, "LL128": 0.0, "Simple": 4.0},
    },
    "net": {
        "tree": {"LL": 5.0, "LL128": 8.5, "Simple": 14.0},
        "ring": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
        "collnet_direct": {"LL": 0.0, "LL128": 0.0, "Simple": 31.0},
        "collnet_chain": {"LL": 0.0, "LL128": 0.0, "Simple": 30.0},
        "nvls": {"LL": 0.0, "LL128": 0.0, "Simple": 18.0},
        "nvls_tree": {"LL": 0.0, "LL128": 0.0, "Simple": 20.9},
        "pat": {"LL": 0.0, "LL128": 0.0, "Simple": 14.0},
    },
}

# Host cost of posting one network step, us (getNetOverhead: 1 us on Intel, 2 on AMD x86; x3
# for Simple). Multi-node ring steps inside the node cost at least this. Intel assumed.
NET_OVERHEAD_US = 1.0
NET_OVERHEAD_SIMPLE_MULT = 3.0

# Hardware one-way latency the NET row above was measured with (InfiniBand, ~1.2 us); a
# slower NIC (RoCE, TCP, EFA) adds its difference per inter-node step, us.
NET_REFERENCE_LATENCY_US = 1.2
# Same for intra-node links: the NVLINK/PCI rows assume this hardware latency, us.
INTRA_REFERENCE_LATENCY_US = {"nvlink": 0.6, "pcie": 1.0}

# --- bandwidth caps, [architecture][1 node, 2 nodes, >= 4 nodes] ------------------------------
# Architectures (NCCL compCapIndex): volta, ampere, hopper, blackwell.

# LL protocol ceiling of the whole communicator (llMaxBws): one node by GPU architecture; more
# nodes by host CPU (Intel row; AMD hosts: 22.5 and 19.0). GB/s of NCCL "busBw".
LL_MAX_BW_ONE_NODE = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0, "blackwell": 282.0}
LL_MAX_BW_MULTI_NODE = (39.0, 20.4)  # (2 nodes, >= 4 nodes), Intel hosts
# Per-channel ceilings, GB/s (perChMaxRingLL128Bws, perChMaxTreeLL128Bws, perChMaxTreeBws,
# perChMaxNVLSTreeBws).
PER_CH_MAX_RING_LL128 = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 36.7),
    "blackwell": (40.0, 40.0, 40.0),
}
PER_CH_MAX_TREE_LL128 = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 29.0),
    "blackwell": (55.6, 31.67, 20.0),
}
PER_CH_MAX_TREE = {
    "volta": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "hopper": (38.7, 41.4, 36.0),
    "blackwell": (70.0, 42.8, 24.0),
}
PER_CH_MAX_NVLS_TREE = {
    "volta": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "hopper": (0.0, 57.7, 45.5),
    "blackwell": (0.0, 96.0, 80.0),
}
# NVLS efficiency by architecture (nvlsEfficiency): Hopper 0.85, Blackwell 0.74.
NVLS_EFFICIENCY = {"volta": 0.0, "ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}

# --- channels ------------------------------------------------------------------------------
# NVLS channels (nvls.cc NVLS_NCHANNELS_SM90 16; SM100 32 across nodes, 24 in one NVLink domain).
NVLS_CHANNELS = {"hopper": (16, 16), "blackwell": (24, 32)}  # (one domain, several)
# Ring/tree channels: NCCL's search finds one channel per NIC (rail) across nodes and
# duplicates it (search.cc, "Duplicate channels"); inside one NVSwitch node it uses up to
# MAXCHANNELS / 2 = 32 (device.h MAXCHANNELS 64).
CHANNELS_PER_RAIL = 2
ONE_NODE_CHANNELS = 32
MAX_CHANNELS = 64

# NCCL's ring/tree graph search (src/graph/search.cc, `ncclTopoCompute`), whose channel count
# the tuner multiplies its per-channel bandwidth caps by (tuning.cc: `graphs[a]->nChannels`).
# Every channel's ring passes through every GPU of an NVLink domain, so channels x speed must
# fit one GPU's NVLink bandwidth as NCCL's topology sees it (topo.h SM80_NVLINK_BW 20.0,
# SM90_NVLINK_BW 20.6, SM100_NVLINK_BW 40.0 GB/s per link; 12 NVLink 3 links on A100, 18
# NVLink 4 on H100, 18 NVLink 5 on B200/GB200), and across domains each channel enters and
# leaves through one NIC at that speed. Speeds per channel tried, GB/s (`speedArrayIntra`,
# `sm90SpeedArrayIntra`, `sm100SpeedArrayIntra`, and the Inter arrays, NCCL 2.26-2.30).
NCCL_NVLINK_GBPS_PER_GPU = {"nvlink3": 12 * 20.0, "nvlink4": 18 * 20.6, "nvlink5": 18 * 40.0}
SEARCH_SPEEDS_INTRA = {
    "ampere": (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0),
}
SEARCH_SPEEDS_INTER = {
    "ampere": (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0),
    "hopper": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0),
    "blackwell": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0),
}
# `ncclTopoCompute` lowers the speed only while the next one stays above this share of the
# best graph's speed found so far ("speedArray[speedIndex + 1] / graph->bwInter > .49").
SEARCH_MIN_SPEED_RATIO = 0.49
# The ring graph's channel limit (init.cc: ringGraph.maxChannels = MAXCHANNELS / 2).
GRAPH_MAX_CHANNELS = 32
# `ncclTopoDupChannels`: a graph found at >= 25 GB/s per channel is duplicated (half the
# speed each), except on sm90+ below 50 GB/s per channel with more than 4 channels.
DUP_MIN_SPEED = 25.0
DUP_MIN_SPEED_SM90 = 50.0
DUP_MAX_CHANNELS_BELOW_SM90_SPEED = 4
# Run-time channels across nodes (connect.cc `ncclTopoPostset`): twice the graph's, and on
# sm90+ twice again when the graph runs above 45 GB/s a channel and fewer than 16 result.
COMPUTE_DUP_MIN_SPEED = 45.0
COMPUTE_DUP_BELOW = 16

# NVLS pipeline (enqueue.cc, chunk choice per message, NCCL 2.26-2.30): every NVLS channel
# moves one chunk per head at a time (`concurrentOps` = channels x heads; heads = the domain's
# GPUs, at most NCCL_MAX_NVLS_ARITY 32, device.h). The chunk starts at NCCL_NVLS_CHUNKSIZE
# (128 KiB, nvls.cc) and drops to a smaller size below (multiple x concurrentOps x chunk)
# bytes: NVLS (multiple, chunk) rules, then NVLS-tree's (whose chunk is 64 KiB at >= 4 nodes).
NVLS_CHUNK_BYTES = 128 * 1024
NVLS_MAX_HEADS = 32
NVLS_CHUNK_RULES = ((64, 65536), (8, 32768), (2, 16384))
NVLS_TREE_CHUNK_RULES = ((32, 262144), (16, 131072), (4, 65536), (1, 32768))
NVLS_TREE_MANY_NODES_CHUNK_BYTES = 65536
# NVLS across nodes (with SHARP) caps its chunk at 32 KiB when NCCL's NVLS bandwidth is below
# 150 GB/s.
NVLS_NET_SLOW_GBPS, NVLS_NET_SLOW_CHUNK_BYTES = 150.0, 32768

# --- protocol and algorithm refinements (ncclTopoTuneModel "model refinements") -----------
LL_BW_FACTOR = 0.5  # ring LL: half the Simple busBw (capped by the LL ceiling)
LL128_BW_FACTOR = 0.92  # ring LL128: "0.92 /*120.0/128.0*/"
TREE_BW_FACTOR = 0.92  # tree all_reduce
# A tree graph of NCCL's plain TREE pattern (the chain's first GPU takes both its parent's and
# its children's network traffic) instead of the balanced one (parent on the first GPU, children
# on the second, both through the same NIC): the tuner multiplies the tree's busBw of every
# protocol by 0.85 when any rank's tree graph has that pattern (tuning.cc, NCCL 2.19.3 to
# 2.30.7). On sm90+ the search falls back to it when it finds no balanced tree (search.cc,
# ncclTopoCompute, ccMin >= 90); which nodes: `collectives.shape.simple_tree_pattern`.
TREE_PATTERN_BW_FACTOR = 0.85
TREE_LL_BW_FACTOR = 1.0 / 3.8
TREE_LL128_BW_FACTOR_ONE_NODE = 7.0 / 9.0
TREE_LL128_BW_FACTOR = 120.0 / 128.0
PAT_BW_FACTOR = 0.75
PAT_STEP_LAT_US = 2.8  # PAT latency per rank ("still a linear part")
PAT_LOG_LAT_DIVISOR = 3.5  # PAT: log2(nodes) x net latency / 3.5
COLLNET_HOPPER_BW_FACTOR = 0.85  # CollNet direct on sm90+
COLLNET_ARITY_LAT_US = 0.4  # CollNet direct: "0.4 us arity serialization latency"
# Multi-node Simple ring all_reduce latency "plateau effect of ring" (ncclTopoGetAlgoTime):
# x1.4 on sm80+ (x1.9 before) once nBytes / (nChannels x nRanks) >= 64. Below that size LL
# is faster, so the factor is applied to the Simple ring candidate at every size.
RING_PLATEAU = {"volta": 1.9, "ampere": 1.4, "hopper": 1.4, "blackwell": 1.4}

# Tree all_reduce bandwidth correction by size (treeCorrectionFactor), per protocol, for
# 64 B x 2^i, i = 0..23 (NCCL also applies it to NVLS-tree on Blackwell x86 hosts; tierwise
# prices NVLS and NVLS-tree by their pipeline fill instead, below). tierwise interpolates it
# in log2(size) so time stays monotone between powers of two.
TREE_CORRECTION = {
    "LL": (
        *(1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5),
        *(0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0),
    ),
    "LL128": (
        *(1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6),
        *(0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0, 1.0),
    ),
    "Simple": (
        *(0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5),
        *(0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9, 0.9),
    ),
}
TREE_CORRECTION_MIN_BYTES = 64  # index 0; NCCL applies indices 0..22 (64 B .. 256 MiB)
TREE_CORRECTION_LAST_INDEX = 22

# --- fitted on ../shared/calibration/nccl (docs/validation-collectives.md) -----------------
# NVLS all_reduce algbw = NVLS_EFFICIENCY[arch] x NVLS_LINE_SHARE x NVLink line rate.
# DGX H100 1x8, 16 GiB: busbw 479.9 = algbw 274.2 GB/s = 0.609 x 450; 0.609 / 0.85 = 0.717.
NVLS_LINE_SHARE = 0.717
# NVLS stage of an NVLS-tree (the switch reduction also feeding the NICs) keeps this share of
# the single-node NVLS rate: H100 2x8 (Nebius), 8 GiB busbw 467.5 -> algbw 249.4 / 274.2.
NVLS_TREE_INTRA_SHARE = 0.91
# Loops of (concurrentOps x chunk) bytes an NVLS or NVLS-tree all_reduce takes to fill its
# pipeline before it streams (time += loops x min(loop bytes, n) / algbw). Fitted on the three
# NVLS tables (DGX H100 1x8, H100 2x8, B200 2x8) from 1 MiB up: 2 (one loop in the switch's
# reduction, one in its broadcast, with the network hop between them overlapped) leaves
# every row from 128 MiB within 6% (docs/validation-fabric.md); NCCL's tuner instead applies
# its tree correction by size, which left B200 2x8 at 128 MiB 29% high. NVLS-tree fills this
# many loops per level of its tree between domains (`model.nvls_pipeline`).
NVLS_FILL_LOOPS = 2.0
# SHARP sends each byte once up and once down per rail: algbw = NIC effective bandwidth.
SHARP_ALGBW_EFFICIENCY = 1.0

# GPU architecture row per catalog GPU (NCCL compCapIndex: >= sm100 blackwell, >= sm90 hopper,
# >= sm80 ampere); GPUs not listed by their intra link. MI300X runs RCCL, placed as ampere.
GPU_ARCH = {
    "a100-sxm-40gb": "ampere",
    "a100-sxm-80gb": "ampere",
    "l40s": "ampere",
    "h100-sxm": "hopper",
    "h100-pcie": "hopper",
    "h200": "hopper",
    "b200": "blackwell",
    "gb200": "blackwell",
    "mi300x": "ampere",
}
LINK_ARCH = {"nvlink3": "ampere", "nvlink4": "hopper", "nvlink5": "blackwell"}
