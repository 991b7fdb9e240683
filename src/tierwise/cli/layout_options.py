"""Layout flags shared by `estimate` and `plan` (--tp --cp --ep --pp --vpp --dp --mbs ...), named
as Megatron-LM names them."""

from __future__ import annotations

from typing import Annotated

import typer

TpOpt = Annotated[int | None, typer.Option("--tp", help="Tensor parallel size.")]
CpOpt = Annotated[int | None, typer.Option("--cp", help="Context parallel size.")]
EpOpt = Annotated[int | None, typer.Option("--ep", help="Expert parallel size (within dp*cp).")]
PpOpt = Annotated[int | None, typer.Option("--pp", help="Pipeline stages.")]
VppOpt = Annotated[int | None, typer.Option("--vpp", help="Virtual stages per pipeline rank.")]
DpOpt = Annotated[int | None, typer.Option("--dp", help="Data parallel size (default: the rest).")]
MbsOpt = Annotated[int | None, typer.Option("--mbs", help="Micro-batch size, sequences.")]
GbsOpt = Annotated[int | None, typer.Option("--gbs", help="Global batch size, sequences.")]
PpLayersOpt = Annotated[
    str | None,
    typer.Option("--pp-layers", help="Uneven pipeline split, layers per stage, e.g. 19,21,21,19."),
]
SeqOpt = Annotated[int, typer.Option("--seq", help="Sequence length, tokens.")]
SpOpt = Annotated[bool | None, typer.Option("--sp/--no-sp", help="Sequence parallelism.")]
RecomputeOpt = Annotated[str | None, typer.Option("--recompute", help="none|selective|full")]
RecomputeModulesOpt = Annotated[
    str | None,
    typer.Option(
        "--recompute-modules",
        help="Megatron's, with --recompute selective: modules re-run in backward, comma or "
        "space separated: core_attn (default), layernorm, moe_act, mlp, moe, shared_experts, "
        "mla_up_proj.",
    ),
]
CpuOffloadLayersOpt = Annotated[
    int | None,
    typer.Option(
        "--cpu-offloading-num-layers",
        help="Megatron's CPU activation offloading: layers per pipeline stage whose "
        "activations wait in host memory between forward and backward.",
    ),
]
ZeroOpt = Annotated[int | None, typer.Option("--zero", help="ZeRO stage 0-3 (3 = FSDP).")]
DtypeOpt = Annotated[
    str | None,
    typer.Option("--dtype", help="bf16|fp8|mxfp8|nvfp4: precision of the layers' GEMMs."),
]
Fp8RecipeOpt = Annotated[
    str | None,
    typer.Option(
        "--fp8-recipe",
        help="delayed|tensorwise|blockwise (Megatron's; tensorwise = current scaling). "
        "Default delayed.",
    ),
]
DistOptOpt = Annotated[
    bool | None,
    typer.Option(
        "--use-distributed-optimizer/--no-use-distributed-optimizer",
        help="Megatron's distributed optimizer (optimizer states over dp*cp).",
    ),
]
GradBf16Opt = Annotated[
    bool | None,
    typer.Option(
        "--grad-reduce-in-bf16/--no-grad-reduce-in-bf16",
        help="16-bit main grads and DP reduce at any ZeRO stage (as Megatron's flag; "
        "DeepSpeed's default); default fp32 (Megatron, torchtitan).",
    ),
]
CpCommOpt = Annotated[
    str,
    typer.Option(
        "--cp-comm-type", help="Context parallel comm (Megatron's flag): p2p (ring attention), a2a."
    ),
]
PpLayoutOpt = Annotated[
    str | None,
    typer.Option(
        "--pp-layout",
        help="Megatron's --pipeline-model-parallel-layout: virtual stages split by |, E "
        "embedding, t layer, L loss, x*n and (...)*n repeats, e.g. Et|(tt|)*62tL.",
    ),
]
AccountEmbeddingOpt = Annotated[
    bool,
    typer.Option(
        "--account-for-embedding-in-pipeline-split",
        help="Megatron's: the input embedding counts as one layer in the pipeline split.",
    ),
]
AccountLossOpt = Annotated[
    bool,
    typer.Option(
        "--account-for-loss-in-pipeline-split",
        help="Megatron's: the loss counts as one layer in the pipeline split.",
    ),
]
PipelineScheduleOpt = Annotated[
    str | None,
    typer.Option(
        "--pipeline-schedule",
        help="torchtitan's: 1F1B | Interleaved1F1B | InterleavedZeroBubble | ZBVZeroBubble | "
        "DualPipeV, or DeepSeek's DualPipe (default 1F1B, Interleaved1F1B with --vpp > 1).",
    ),
]
AttentionBackendOpt = Annotated[
    str,
    typer.Option(
        "--attention-backend",
        help="Megatron's: flash | fused (cuDNN) | unfused (softmax in HBM, 2021-22 Megatron).",
    ),
]
EstimateFrameworkOpt = Annotated[
    str | None,
    typer.Option(
        "--framework",
        help="megatron | torchtitan | deepspeed: how DP/FSDP runs (Megatron buckets, FSDP2 "
        "per block, ZeRO-3 per module) and which layouts and schedules it can run; default: "
        "the generic model.",
    ),
]
DpShardOpt = Annotated[
    int | None,
    typer.Option(
        "--dp-shard",
        help="torchtitan's data_parallel_shard_degree: HSDP shards over this many dp ranks "
        "and replicates over the rest (needs --framework torchtitan, --zero 2 or 3).",
    ),
]
EtpOpt = Annotated[
    int | None,
    typer.Option(
        "--etp",
        help="Expert tensor parallel size (Megatron's "
        "--expert-tensor-parallel-size); default --tp.",
    ),
]
MoeDispatcherOpt = Annotated[
    str,
    typer.Option(
        "--moe-token-dispatcher-type",
        "--moe-dispatcher",
        help="Megatron's: alltoall | allgather | flex (DeepEP / HybridEP).",
    ),
]
MoeForceBalanceOpt = Annotated[
    bool,
    typer.Option(
        "--moe-router-force-load-balancing",
        help="Megatron's: every expert gets the same tokens (balanced routing, as NVIDIA's "
        "benchmarks run); default dropless with an imbalance factor.",
    ),
]
MoeRoutingOpt = Annotated[
    str | None,
    typer.Option(
        "--moe-routing",
        help="balanced (forced-balance dropless, as NVIDIA's benchmarks run) | dropless (with "
        "the documented imbalance factor) | capacity (the capacity factor: "
        "--moe-expert-capacity-factor or the model's). Default: the model's capacity factor "
        "if it has one, else dropless.",
    ),
]
MoeCapacityOpt = Annotated[
    float | None,
    typer.Option(
        "--moe-expert-capacity-factor",
        help="Megatron's: capacity routing, experts padded to this factor (tokens beyond it "
        "dropped); overrides the model's capacity_factor.",
    ),
]
CudaGraphOpt = Annotated[
    bool,
    typer.Option(
        "--enable-cuda-graph",
        help="CUDA graphs over the layers (Megatron's): no host time per MoE layer and expert.",
    ),
]
Fp8ParamGatherOpt = Annotated[
    bool,
    typer.Option(
        "--fp8-param-gather/--no-fp8-param-gather",
        help="Megatron's: FP8/MXFP8 layouts all-gather parameters in their format (NeMo's "
        "recipes do).",
    ),
]
Fp8AttentionOpt = Annotated[
    bool,
    typer.Option(
        "--fp8-dot-product-attention",
        help="The attention core in FP8 (Megatron-core's TransformerConfig "
        "fp8_dot_product_attention), not BF16.",
    ),
]
MoeA2aOverlapOpt = Annotated[
    bool,
    typer.Option(
        "--overlap-moe-expert-parallel-comm",
        "--moe-a2a-overlap",
        help="Megatron's combined 1F1B: expert all-to-alls hidden behind the other "
        "micro-batch's compute.",
    ),
]
