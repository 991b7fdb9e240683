"""A `ClusterSpec` describing a running lab, from its shape and the probe of this run.

One "GPU" is one rank (a CPU process): its peak is the probed matmul rate. The intra link is
gloo over loopback with the probed alpha/beta; the NIC is the node's veth at the shaped rate,
its efficiency and latency from the leaf probe. Two leaves when oversubscribed.
"""

from __future__ import annotations

import os

from tierwise.errors import TierwiseError
from tierwise.hardware.catalog import GPU, NIC, Link
from tierwise.hardware.cluster import ClusterSpec, InterSpec, TopologySpec
from tierwise.lab.fabric import FabricConfig
from tierwise.lab.probe import ProbeResult

#: Fallbacks when a tier was not probed (a single node or one rank per node): the intra tier
#: is then unused by any group, the leaf tier runs at the line rate with this latency (us).
UNPROBED_INTRA_GBPS, UNPROBED_LATENCY_US = 1.0, 100.0
#: Memory bandwidth given to one rank, TB/s; the collective model does not use it.
RANK_MEMORY_TBPS = 0.01


def host_memory_bytes() -> int:
    """This machine's physical memory, bytes (every lab rank runs on it)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_buffers_fit(size_bytes: int, ranks: int, buffers: int, flag: str) -> None:
    """Refuse a size whose `buffers` buffers on each of `ranks` ranks exceed host memory."""
    memory = host_memory_bytes()
    limit = memory // (ranks * buffers)
    if size_bytes > limit:
        raise TierwiseError(
            f"{flag}: {size_bytes} B; allowed: at most {limit} B ({ranks} ranks x {buffers} "
            f"buffers in {memory / 2**30:.1f} GiB of host memory)"
        )


def lab_cluster(config: FabricConfig, ranks_per_node: int, probe: ProbeResult) -> ClusterSpec:
    """The lab as a cluster the collective model can predict for."""
    line_GBps = config.rate_bit / 8e9
    intra = probe.intra
    leaf = probe.leaf
    mem_gib = host_memory_bytes() / 2**30
    ranks = config.nodes * ranks_per_node
    return ClusterSpec(
        name=f"lab-{config.nodes}x{ranks_per_node}",
        gpu=GPU(
            key="cpu-rank",
            name="one CPU rank (gloo)",
            peak_bf16_tflops=max(probe.matmul_tflops, 1e-6),
            hbm_gib=mem_gib / ranks,
            hbm_tbps=RANK_MEMORY_TBPS,
            gemm_efficiency=1.0,  # the peak is the probed matmul rate: already achieved
        ),
        gpus_per_node=ranks_per_node,
        nodes=config.nodes,
        intra=Link(
            key="loopback",
            name="gloo over loopback (probed)",
            kind="loopback",
            bw_GBps=intra.beta_GBps if intra else UNPROBED_INTRA_GBPS,
            efficiency=1.0,
            latency_us=intra.alpha_us if intra else UNPROBED_LATENCY_US,
        ),
        inter=InterSpec(
            nic=NIC(
                key="veth",
                name=f"veth shaped to {config.rate_bit / 1e6:g} Mbit/s ({config.qdisc})",
                kind="veth",
                rate_Gbps=config.rate_bit / 1e9,
                efficiency=min(1.0, leaf.beta_GBps / line_GBps) if leaf else 1.0,
                latency_us=leaf.alpha_us if leaf else UNPROBED_LATENCY_US,
            ),
            nics_per_node=1,
        ),
        topology=TopologySpec(
            kind="spine-leaf" if config.leaves > 1 else "single-switch",
            nodes_per_leaf=config.nodes_per_leaf,
            oversubscription=config.oversubscription,
        ),
    )
