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
from tierwise.frameworks import CP_COMM_TYPES, LAUNCHED, Framework, legacy_zero3_rows, row
from tierwise.memo import by_identity

FRAMEWORKS = LAUNCHED
# Megatron-LM's --attention-backend names: flash (FlashAttention) and fused (cuDNN fused
# attention through Transformer Engine) keep the scores on chip and skip the masked half;
# unfused (Megatron's own softmax kernels, what 2021-22 runs used) writes them to HBM.
ATTENTION_BACKENDS = ("flash", "fused", "unfused")
# Megatron-core's token dispatchers (flex: DeepEP / HybridEP).
MOE_DISPATCHERS = ("alltoall", "allgather", "flex")
# Megatron-LM's overlap flags, as `Flags` fields (--overlap-grad-reduce ... on the CLI).
OVERLAP_FLAGS = (
    "overlap_grad_reduce",
    "overlap_param_gather",
    "tp_comm_overlap",
    "overlap_p2p_communication",
    "delay_wgrad_compute",
    "align_param_gather",
)
# Megatron-LM before August 2023 (core_r0.3 and older: no --overlap-grad-reduce,
# --overlap-param-gather or --tp-comm-overlap in megatron/arguments.py; those arrived with
# the distributed-optimizer overlap and Transformer Engine userbuffers in core_r0.4): every
# DP and TP collective on the critical path but the column-parallel backward's, which ran
# asynchronously from 2021-09 (`ASYNC_TP_FLAG`). Pass as `Flags(**MEGATRON_2023_NO_OVERLAP)`.
MEGATRON_2023_NO_OVERLAP = dict.fromkeys(OVERLAP_FLAGS, False)
# What Megatron-LM of 2021-09 on hides with no overlap flag (`Flags.async_tp_backward`),
# reported beside the overlap flags by Megatron's dest name.
ASYNC_TP_FLAG = "async_tensor_model_parallel_allreduce"
PARAM_GATHER_FOLLOWS = (
    "--overlap-param-gather off: it follows --no-overlap-grad-reduce (Megatron-LM asserts "
    "the one only with the other)"
)
"""What `Flags.resolve` assumed when only --no-overlap-grad-reduce was given."""


@dataclass(frozen=True)
class Flags:
    """Framework behaviour a layout runs with."""

    # Megatron-LM's communication-overlap flags (megatron/training/arguments.py; each has a
    # --no- form in tierwise). Megatron-LM before 2023-08 had none of the first three: DP
    # gradients were reduced after backward (DDP "local"), weights gathered after the
    # optimizer step, TP collectives waited on but the column-parallel backward's
    # (`MEGATRON_2023_NO_OVERLAP`).
    # --tp-comm-overlap: Transformer Engine userbuffers hide TP collectives (the SP
    # all-gathers and reduce-scatters, the backward re-gather) inside the GEMMs they feed.
    tp_comm_overlap: bool = False
    # Column-parallel linears' backward collectives (the input gradient's all-reduce, or with
    # SP its reduce-scatter and the input's re-gather) launched asynchronously behind the
    # weight- and input-gradient GEMMs, where the framework runs them so
    # (`Framework.async_tp_backward`; Megatron-LM from 2021-09-02, its
    # --no-async-tensor-model-parallel-allreduce turning the all-reduce's off until 2024-04).
    # Off: Megatron-LM v2.6 and older (SC'21), BigScience's Megatron-DeepSpeed (BLOOM).
    async_tensor_model_parallel_allreduce: bool = True
    # --overlap-grad-reduce: DP gradient buckets reduced as backward produces them.
    overlap_grad_reduce: bool = True
    # --overlap-param-gather: distributed-optimizer weight buckets gathered ahead of forward.
    overlap_param_gather: bool = True
    # --overlap-p2p-communication (Megatron's default on; interleaved schedule only): a
    # virtual stage's sends and receives run while the next chunk computes.
    overlap_p2p_communication: bool = True
    # --delay-wgrad-compute: weight-gradient GEMMs run after the input gradient's, so the
    # backward all-to-all (with --overlap-moe-expert-parallel-comm) hides behind them.
    delay_wgrad_compute: bool = False
    # --align-param-gather (on by default in current Megatron-LM, whose flag is
    # --no-align-param-gather; absent in 2023 releases): with interleaving, every virtual
    # stage's first weight bucket is gathered at the start of the step, not as each chunk's
    # forward begins.
    align_param_gather: bool = True
    # Pipeline sends split over the TP ranks, each sending 1/tp of the activation and the
    # receiver all-gathering it over TP (without sequence parallelism; with it they are split
    # already). Megatron-LM ran it by default from 2021-02 (commit 72e4230b, SC'21 section
    # 4.1; --no-scatter-gather-tensors-in-pipeline turned it off) until its p2p code moved to
    # megatron-core in 2023-03 (3c92fa93), which sends the whole activation from every TP
    # rank; DeepSpeed's pipeline engine partitions activations and gradients over the
    # model-parallel group by default (pipeline.pipe_partitioned / grad_partitioned).
    scatter_gather_tensors_in_pipeline: bool = False
    # --microbatch-group-size-per-virtual-pipeline-stage (Megatron's default: pp): the
    # interleaved schedule runs micro-batches in groups of this size through each chunk.
    microbatch_group_size_per_vp_stage: int | None = None
    order: tuple[str, ...] = ("tp", "cp", "dp", "pp")
    scatter_nodes: bool = False
    cp_comm: str = "p2p"  # --cp-comm-type: "p2p" ring attention, "a2a" (Ulysses), "allgather"
    attention_backend: str = "flash"  # one of ATTENTION_BACKENDS
    # torchtitan's names, and DeepSeek's DualPipe / DualPipeV; None: 1F1B / Interleaved1F1B
    pipeline_schedule: str | None = None
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
    # DeepSeek-V3's low-precision activation caching (technical report, section 3.3.3): the
    # routed experts keep their dispatched inputs and SwiGLU inputs in the layout's format
    # and recompute the SwiGLU output (tierwise.workload.memory); no Megatron flag.
    cache_expert_inputs: bool = False
    # Megatron-core's TransformerConfig.fp8_dot_product_attention: the attention core in FP8
    # (cuDNN), not BF16.
    fp8_dot_product_attention: bool = False
    # ZeRO-3 as its framework's releases before `Framework.legacy_zero3_before` ran it
    # (DeepSpeed before 0.5.5, 2021): each parameter gathered and each gradient
    # reduce-scattered on its own, through list collectives that narrow and copy one tensor
    # per rank, with a device synchronisation around every gather (tierwise.perf.terms.dp).
    legacy_zero3: bool = False

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
        group = self.microbatch_group_size_per_vp_stage
        if group is not None and group < 1:
            raise SpecError(
                f"--microbatch-group-size-per-virtual-pipeline-stage: {group}; allowed: >= 1"
            )
        row(self.framework)  # a one-line error unless a framework of the table
        runs = self.runner.cp_comm_types
        unknown = self.cp_comm not in CP_COMM_TYPES
        if unknown or (self.cp_comm != "p2p" and self.cp_comm not in runs):
            allowed = runs if self.framework else CP_COMM_TYPES
            raise SpecError(
                f"--cp-comm-type: {self.cp_comm!r}; allowed"
                + (f" with --framework {self.framework}" if self.framework else "")
                + f": {', '.join(allowed) or 'none (no context parallelism)'}"
            )
        if self.legacy_zero3 and self.runner.legacy_zero3_before is None:
            runs = [f"{r.name} (before {r.legacy_zero3_before})" for r in legacy_zero3_rows()]
            raise SpecError(
                f"--legacy-zero3: {self.runner.title} has no legacy ZeRO-3 release; allowed "
                f"only with --framework {' or '.join(runs)}"
            )
        if self.cache_expert_inputs and self.framework is not None:
            raise SpecError(
                f"--cache-expert-inputs: DeepSeek-V3's own training framework caches expert "
                f"inputs so; --framework {self.framework} has no such option (drop one of them)"
            )

    @classmethod
    def resolve(cls, framework: str | None, given: Mapping[str, Any]) -> Flags:
        """The flags a layout runs with under `framework` (None: the generic model): each
        field as `given` (None or absent: not given), else the framework's default
        (`Framework.defaults`), else this class's; the weight gather's overlap, not given,
        follows the gradient reduce's (Megatron-LM runs it only with that one:
        `PARAM_GATHER_FOLLOWS`)."""
        chosen = {k: v for k, v in given.items() if v is not None}
        unknown = set(chosen) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"Flags has no field {', '.join(sorted(unknown))}")
        values = {**row(framework).defaults, **chosen, "framework": framework}
        if "overlap_param_gather" not in chosen and values.get("overlap_grad_reduce") is False:
            values["overlap_param_gather"] = False
        return cls(**values)

    @property
    def runner(self) -> Framework:
        """The framework table's row these flags run under (`tierwise.frameworks`)."""
        return row(self.framework)

    def overlaps(self) -> dict[str, bool]:
        """The Megatron overlap flags the estimate assumed, and whether the column-parallel
        backward collectives ran asynchronously (`ASYNC_TP_FLAG`), by Megatron's dest names."""
        return dict(_overlaps(self))  # a copy: the caller may change it

    @property
    def async_tp_backward(self) -> bool:
        """The column-parallel backward collectives hide behind their GEMMs: the framework
        runs them so and the flag leaves them on."""
        return self.async_tensor_model_parallel_allreduce and self.runner.async_tp_backward

    @property
    def flash_attention(self) -> bool:
        """A fused attention kernel (flash or cuDNN): no score matrix in HBM."""
        return self.attention_backend != "unfused"


@by_identity()
def _overlaps(flags: Flags) -> dict[str, bool]:
    """`Flags.overlaps` of one (frozen) flags object, built once."""
    return {name: getattr(flags, name) for name in OVERLAP_FLAGS} | {
        ASYNC_TP_FLAG: flags.async_tp_backward
    }
