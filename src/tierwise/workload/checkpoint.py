"""Bytes of a training checkpoint one GPU writes, from the layout's sharded model states.

A checkpoint holds each parameter's 16-bit weight and its mixed-precision Adam state (fp32
master, first and second moment): ``WEIGHT_BYTES + OPTIMIZER_BYTES`` = 14 bytes per parameter.
Megatron's distributed checkpoint (``--ckpt-format torch_dist`` with fully parallel save, its
default) and PyTorch DCP write each tensor once and spread the writes of replicated tensors
over their replicas, so a rank writes its optimizer shard plus the same share of its weights,
and with an unsharded optimizer (ZeRO-0, every data-parallel rank holds the whole state) one
replica's share of it.
"""

from __future__ import annotations

from tierwise.workload.flops import Array
from tierwise.workload.layout import Layout, hsdp_fields
from tierwise.workload.memory import OPTIMIZER_BYTES, WEIGHT_BYTES

CHECKPOINT_BYTES_PER_PARAM = WEIGHT_BYTES + OPTIMIZER_BYTES
"""bf16 weight + fp32 master weight + Adam's two moments."""


def state_replicas(
    zero: Array, distributed_optimizer: Array, dp: Array, cp: Array, dp_shard: Array = 0
) -> Array:
    """Ranks holding the same optimizer state: 1 when ZeRO (or Megatron's distributed
    optimizer) shards it over dp*cp, all dp*cp ranks when it does not; HSDP (``dp_shard``)
    replicates each shard dp/dp_shard times."""
    sharded = (zero >= 1) | distributed_optimizer
    hsdp = dp / (dp_shard + (dp_shard == 0) * dp)  # 1 without HSDP
    return sharded * hsdp + (1 - sharded) * dp * cp


def checkpoint_bytes_per_gpu(optimizer_bytes: Array, replicas: Array) -> Array:
    """Bytes one GPU writes per checkpoint: the share of its weights and optimizer state that
    no other rank writes, from the optimizer bytes it holds (``memory.MemoryBreakdown``)."""
    return optimizer_bytes * CHECKPOINT_BYTES_PER_PARAM / OPTIMIZER_BYTES / replicas


def layout_checkpoint_bytes(layout: Layout, optimizer_bytes: float) -> float:
    """Bytes one GPU of `layout` writes per checkpoint, from the optimizer bytes it holds."""
    shard = hsdp_fields(layout).get("dp_shard", 0)
    replicas = state_replicas(
        layout.zero, layout.distributed_optimizer, layout.dp, layout.cp, shard
    )
    return float(checkpoint_bytes_per_gpu(optimizer_bytes, replicas))
