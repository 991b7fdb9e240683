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
ZeroOpt = Annotated[int | None, typer.Option("--zero", help="ZeRO stage 0-3 (3 = FSDP).")]
DtypeOpt = Annotated[str | None, typer.Option("--dtype", help="bf16|fp8")]
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
TpOverlapOpt = Annotated[
    bool, typer.Option("--tp-comm-overlap", help="TP communication overlapped with GEMMs.")
]
