"""`Flags`: the framework behaviour a layout runs with (what the cost terms read).

Each field's default is stated once, here; a framework that runs otherwise by default says so
in its row of `tierwise.frameworks` (``Framework.defaults``), and `Flags.resolve` applies it.
Adding a flag: see the `tierwise.frameworks` docstring.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from tierwise.errors import SpecError
from tierwise.frameworks import LAUNCHED, Framework, row

FRAMEWORKS = LAUNCHED
# Megatron-LM's --attention-backend names: flash (FlashAttention) and fused (cuDNN fused
# attention through Transformer Engine) keep the scores on chip and skip the masked half;
# unfused (Megatron's own softmax kernels, what 2021-22 runs used) writes them to HBM.
ATTENTION_BACKENDS = ("flash", "fused", "unfused")
# Megatron-core's token dispatchers (flex: DeepEP / HybridEP).
MOE_DISPATCHERS = ("alltoall", "allgather", "flex")


@dataclass(frozen=True)
class Flags:
    """Framework behaviour a layout runs with."""

    tp_comm_overlap: bool = False
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    order: tuple[str, ...] = ("tp", "cp", "dp", "pp")
    scatter_nodes: bool = False
    cp_comm: str = "p2p"  # context parallelism: "p2p" ring attention or "a2a" (Ulysses)
    attention_backend: str = "flash"  # one of ATTENTION_BACKENDS
    pipeline_schedule: str | None = None  # torchtitan's names; None: 1F1B / Interleaved1F1B
    framework: str | None = None  # one of FRAMEWORKS; None: the generic DP model
    # MoE, Megatron's names (tierwise.perf.terms.ep): --moe-token-dispatcher-type,
    # --moe-router-force-load-balancing, --overlap-moe-expert-parallel-comm.
    moe_token_dispatcher_type: str = "alltoall"
    moe_router_force_load_balancing: bool = False
    overlap_moe_expert_parallel_comm: bool = False
    # CUDA graphs over the MoE layers (Megatron's --cuda-graph-impl with the moe_preprocess
    # scope, or a full-iteration graph): no host synchronisation per MoE layer
    # (tierwise.perf.terms.host).
    cuda_graphs: bool = False
    # Megatron's --fp8-param-gather: FP8/MXFP8 layouts all-gather parameters in their format
    # (NeMo's and Megatron-Bridge's FP8 and MXFP8 recipes set it; torchtitan's float8 FSDP2
    # gathers per-tensor float8 whatever this says, DeepSpeed never).
    fp8_param_gather: bool = True
    # Megatron-core's TransformerConfig.fp8_dot_product_attention: the attention core in FP8
    # (cuDNN), not BF16.
    fp8_dot_product_attention: bool = False

    def __post_init__(self) -> None:
        if self.attention_backend not in ATTENTION_BACKENDS:
            raise SpecError(
                f"--attention-backend: {self.attention_backend!r}; allowed: "
                f"{', '.join(ATTENTION_BACKENDS)}"
            )
        if self.moe_token_dispatcher_type not in MOE_DISPATCHERS:
            raise SpecError(
                f"--moe-token-dispatcher-type: {self.moe_token_dispatcher_type!r}; allowed: "
                f"{', '.join(MOE_DISPATCHERS)}"
            )
        row(self.framework)  # a one-line error unless a framework of the table

    @classmethod
    def resolve(cls, framework: str | None, given: Mapping[str, Any]) -> Flags:
        """The flags a layout runs with under `framework` (None: the generic model): each
        field as `given` (None or absent: not given), else the framework's default
        (`Framework.defaults`), else this class's."""
        chosen = {k: v for k, v in given.items() if v is not None}
        unknown = set(chosen) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"Flags has no field {', '.join(sorted(unknown))}")
        return cls(**{**row(framework).defaults, **chosen, "framework": framework})

    @property
    def runner(self) -> Framework:
        """The framework table's row these flags run under (`tierwise.frameworks`)."""
        return row(self.framework)

    @property
    def flash_attention(self) -> bool:
        """A fused attention kernel (flash or cuDNN): no score matrix in HBM."""
        return self.attention_backend != "unfused"
