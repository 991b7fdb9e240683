"""`Flags`: the framework behaviour a layout runs with (what the cost terms read)."""

from __future__ import annotations

from dataclasses import dataclass

from tierwise.errors import SpecError

FRAMEWORKS = ("megatron", "torchtitan", "deepspeed")
# Megatron-LM's --attention-backend names: flash (FlashAttention) and fused (cuDNN fused
# attention through Transformer Engine) keep the scores on chip and skip the masked half;
# unfused (Megatron's own softmax kernels, what 2021-22 runs used) writes them to HBM.
ATTENTION_BACKENDS = ("flash", "fused", "unfused")


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

    def __post_init__(self) -> None:
        if self.attention_backend not in ATTENTION_BACKENDS:
            raise SpecError(
                f"--attention-backend: {self.attention_backend!r}; allowed: "
                f"{', '.join(ATTENTION_BACKENDS)}"
            )
        if self.framework is not None and self.framework not in FRAMEWORKS:
            raise SpecError(f"--framework: {self.framework!r}; allowed: {', '.join(FRAMEWORKS)}")

    @property
    def flash_attention(self) -> bool:
        """A fused attention kernel (flash or cuDNN): no score matrix in HBM."""
        return self.attention_backend != "unfused"
