"""`Flags`: the framework behaviour a layout runs with (what the cost terms read)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Flags:
    """Framework behaviour a layout runs with."""

    tp_comm_overlap: bool = False
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    order: tuple[str, ...] = ("tp", "cp", "dp", "pp")
    scatter_nodes: bool = False
    cp_comm: str = "p2p"  # context parallelism: "p2p" ring attention or "a2a" (Ulysses)
    flash_attention: bool = True  # False: unfused attention (Megatron before 2022)
    pipeline_schedule: str | None = None  # torchtitan's names; None: 1F1B / Interleaved1F1B
