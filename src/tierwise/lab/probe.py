"""A short alpha/beta probe of each tier, run by every rank inside the lab (torch, gloo).

intra: every node's ranks all-reduce among themselves at once (loopback; the CPUs are shared by
all nodes, as in the intra stage of a hierarchical collective). leaf: the first rank of each
node all-reduce across nodes (one flow per NIC). Each tier's times at a few sizes are fitted
to ``t = steps * alpha + busbw_factor * n / beta`` (the ring model): alpha in us per step,
beta the bus bandwidth in GB/s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.distributed as dist

from tierwise.formats.ops import BUSBW_FACTORS
from tierwise.runtime.bench import time_iters
from tierwise.runtime.mesh import HierarchicalMesh

#: Probe sizes (bytes per rank) of the intra tier.
INTRA_SIZES = (64 << 10, 1 << 20, 4 << 20)
#: The leaf probe's largest size moves about this long at the shaped rate, s.
LEAF_TARGET_S = 0.12
LEAF_MIN_BYTES, LEAF_MAX_BYTES = 256 << 10, 8 << 20
PROBE_WARMUP, PROBE_ITERS = 1, 3


@dataclass(frozen=True)
class TierFit:
    """One tier's fitted ring constants and the points they were fitted on."""

    alpha_us: float
    beta_GBps: float
    ranks: int
    size_bytes: tuple[int, ...]
    time_us: tuple[float, ...]


@dataclass(frozen=True)
class ProbeResult:
    """Fits of the intra (loopback) and leaf (shaped veth) tiers, and one rank's compute."""

    intra: TierFit | None
    leaf: TierFit | None
    matmul_tflops: float

    def as_dict(self) -> dict[str, object]:
        """JSON form."""
        return asdict(self)


def fit(ranks: int, sizes: list[int], times_us: list[float]) -> TierFit:
    """Least-squares ``t = a + b n``; alpha = a / ring steps, beta = factor / b (GB/s)."""
    b, a = np.polyfit(np.asarray(sizes, float), np.asarray(times_us, float), 1)
    steps = 2 * (ranks - 1)
    factor = BUSBW_FACTORS["all_reduce"](ranks)
    slope = max(float(b), 1e-12)
    return TierFit(
        alpha_us=max(float(a), 0.0) / steps,
        beta_GBps=factor / slope * 1e-3,
        ranks=ranks,
        size_bytes=tuple(sizes),
        time_us=tuple(times_us),
    )


def leaf_sizes(rate_bit: float) -> list[int]:
    """Leaf probe sizes for a NIC of ``rate_bit``: 1/16, 1/4 and 1 x the target size."""
    target = rate_bit / 8 * LEAF_TARGET_S
    top = 1 << int(np.clip(np.log2(target), np.log2(LEAF_MIN_BYTES), np.log2(LEAF_MAX_BYTES)))
    return [top >> 4, top >> 2, top]


def _time_group(group: dist.ProcessGroup | None, size: int) -> float:
    """Mean iteration time (us) of an all-reduce of ``size`` bytes on ``group``; all ranks of
    the world call it, those outside the group (None) only wait at the barrier."""
    took = 0.0
    if group is not None:
        buf = torch.ones(size // 4, dtype=torch.float32)

        def run() -> None:
            dist.all_reduce(buf, group=group)

        time_iters(run, PROBE_WARMUP, buf.device)
        took = float(np.mean(time_iters(run, PROBE_ITERS, buf.device)))
    dist.barrier()
    return took


def _world_mean(value: float, counted: bool) -> float:
    """Mean of ``value`` over the ranks that set ``counted``."""
    t = torch.tensor([value if counted else 0.0, float(counted)], dtype=torch.float64)
    dist.all_reduce(t)
    return float(t[0] / t[1])


def matmul_tflops(n: int = 512, iters: int = 5) -> float:
    """This rank's fp32 matmul throughput, TFLOP/s (one thread, as the lab ranks run)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    times = time_iters(lambda: a @ b, iters, a.device)
    return 2 * n**3 / (min(times) * 1e-6) / 1e12


def probe(mesh: HierarchicalMesh, rate_bit: float) -> ProbeResult:
    """Fit both tiers on the physical mesh (nodes = namespaces); a collective call."""
    intra = leaf = None
    if mesh.local_size > 1:
        times = [_time_group(mesh.local_group, n) for n in INTRA_SIZES]
        mean = [_world_mean(t, True) for t in times]
        intra = fit(mesh.local_size, list(INTRA_SIZES), mean)
    if mesh.nodes > 1:
        first = mesh.local_index == 0
        sizes = leaf_sizes(rate_bit)
        times = [_time_group(mesh.rail_group if first else None, n) for n in sizes]
        leaf = fit(mesh.nodes, sizes, [_world_mean(t, first) for t in times])
    tflops = _world_mean(matmul_tflops(), True)
    return ProbeResult(intra=intra, leaf=leaf, matmul_tflops=tflops)
