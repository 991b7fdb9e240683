"""A prediction as an nccl-tests table (`NcclTest`), so it prints and diffs like a measurement."""

from __future__ import annotations

from tierwise.collectives.predict import Prediction
from tierwise.collectives.sizes import ranks_sharing
from tierwise.errors import SpecError
from tierwise.formats.infer import TYPE_BYTES
from tierwise.formats.nccl_tests import NcclHalf, NcclRow, NcclTest

DATATYPES = (
    "int8", "uint8", "int32", "uint32", "int64", "uint64",
    "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2",
)  # fmt: skip
"""nccl-tests' `-d` type names (`test_typenames` in src/common.cu), as its table prints them."""
_REDUCING = {"all_reduce", "reduce_scatter", "reduce"}
_ROOTED = {"broadcast", "reduce"}


def prediction_test(
    pred: Prediction, nodes: int, gpus_per_node: int, dtype: str = "float"
) -> NcclTest:
    """nccl-tests rows for a prediction (in-place = out-of-place), with `algo`/`proto` columns
    and the runner-up candidate (`next`) with its `margin` (how much slower it is); the count
    column is each rank's elements, as nccl-tests prints it."""
    per_rank = element_bytes(dtype) * ranks_sharing(pred.op, pred.nranks)
    rows = []
    for r in pred.rows():
        half = NcclHalf(
            time_us=round(float(r["time_us"]), 2),  # type: ignore[arg-type]
            algbw_GBps=round(float(r["algbw_GBps"]), 2),  # type: ignore[arg-type]
            busbw_GBps=round(float(r["busbw_GBps"]), 2),  # type: ignore[arg-type]
            wrong=None,
        )
        rows.append(
            NcclRow(
                size_bytes=int(r["size_bytes"]),  # type: ignore[call-overload]
                count=int(r["size_bytes"]) // per_rank,  # type: ignore[call-overload]
                type=dtype,
                redop="sum" if pred.op in _REDUCING else "none",
                root=0 if pred.op in _ROOTED else -1,
                out_of_place=half,
                in_place=half,
                extra={
                    "algo": str(r["algo"]),
                    "proto": str(r["proto"]),
                    "next": str(r["runner_up"]),
                    "margin": "-" if r["margin_pct"] is None else f"+{r['margin_pct']:.1f}%",
                },
            )
        )
    busbw = [row.out_of_place.busbw_GBps or 0.0 for row in rows]
    return NcclTest(
        op=pred.op,
        rows=tuple(rows),
        nranks=pred.nranks,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        avg_busbw_GBps=round(sum(busbw) / len(busbw), 3) if busbw else None,
        out_of_bounds=0,
    )


def element_bytes(dtype: str) -> int:
    """Bytes per element of nccl-tests' type `dtype` (its `-d`); another name is the user's
    error."""
    if dtype not in DATATYPES:
        raise SpecError(f"--datatype: {dtype!r}; allowed: {', '.join(DATATYPES)}")
    return TYPE_BYTES[dtype]
