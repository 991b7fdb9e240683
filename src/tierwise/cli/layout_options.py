"""Layout flags shared by `estimate` and `plan` (--tp --cp --ep --pp --vpp --dp --mbs ...), named
as Megatron-LM names them. The behaviour flags are `tierwise.cli.behaviour`'s."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.bounds import MAX_SEQ_TOKENS, MAX_SEQUENCES
from tierwise.cli.options import count_option, flag_name

TpOpt = Annotated[int | None, typer.Option("--tp", help="Tensor parallel size.")]
CpOpt = Annotated[int | None, typer.Option("--cp", help="Context parallel size.")]
EpOpt = Annotated[int | None, typer.Option("--ep", help="Expert parallel size (within dp*cp).")]
PpOpt = Annotated[int | None, typer.Option("--pp", help="Pipeline stages.")]
VppOpt = Annotated[int | None, typer.Option("--vpp", help="Virtual stages per pipeline rank.")]
DpOpt = Annotated[int | None, typer.Option("--dp", help="Data parallel size (default: the rest).")]
MbsOpt = Annotated[
    int | None, count_option("--mbs", help="Micro-batch size, sequences.", high=MAX_SEQUENCES)
]
GbsOpt = Annotated[
    int | None, count_option("--gbs", help="Global batch size, sequences.", high=MAX_SEQUENCES)
]
PpLayersOpt = Annotated[
    str | None,
    typer.Option("--pp-layers", help="Uneven pipeline split, layers per stage, e.g. 19,21,21,19."),
]
SeqOpt = Annotated[
    int,
    count_option("--seq", help="Sequence length, tokens.", high=MAX_SEQ_TOKENS),
]
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
RecomputeMethodOpt = Annotated[
    str | None,
    typer.Option(
        "--recompute-method",
        help="Megatron's, with --recompute full: uniform (every layer; the input of each group "
        "of --recompute-num-layers kept) or block (only the first --recompute-num-layers "
        "layers of each virtual stage).",
    ),
]
RecomputeNumLayersOpt = Annotated[
    int | None,
    typer.Option("--recompute-num-layers", help="Megatron's, with --recompute full (default 1)."),
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
    typer.Option(
        "--dtype",
        help="bf16|fp8|mxfp8|nvfp4: precision of the layers' GEMMs (plan: any searches every "
        "one the GPU and framework run; default bf16).",
    ),
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
MemHeadroomOpt = Annotated[
    str,
    typer.Option(
        "--mem-headroom",
        help="HBM a plan leaves free: GiB (e.g. 4) or a share of HBM (e.g. 5%): allocator "
        "fragmentation, NCCL buffers, CUDA graphs.",
    ),
]


LAYOUT_FLAGS = {
    field: flag_name(option)
    for field, option in {
        "tp": TpOpt,
        "cp": CpOpt,
        "ep": EpOpt,
        "etp": EtpOpt,
        "pp": PpOpt,
        "vpp": VppOpt,
        "dp": DpOpt,
        "mbs": MbsOpt,
        "gbs": GbsOpt,
        "seq": SeqOpt,
        "sp": SpOpt,
        "recompute": RecomputeOpt,
        "recompute_modules": RecomputeModulesOpt,
        "recompute_method": RecomputeMethodOpt,
        "recompute_num_layers": RecomputeNumLayersOpt,
        "activation_offload_layers": CpuOffloadLayersOpt,
        "zero": ZeroOpt,
        "dtype": DtypeOpt,
        "fp8_recipe": Fp8RecipeOpt,
        "distributed_optimizer": DistOptOpt,
        "grad_reduce_bf16": GradBf16Opt,
        "pp_layers": PpLayersOpt,
        "mtp_rank": PpLayoutOpt,  # where a layout string places m apart from the loss
        "dp_shard_degree": DpShardOpt,
    }.items()
}
"""Layout field -> the estimate flag that sets it, so a bad value is named as it was typed."""
