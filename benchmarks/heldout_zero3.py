"""Held-out check (nothing is fitted on it): SC'21 (Narayanan et al., arXiv 2104.04473) Table 2,
the ZeRO-3 rows for the 175B model (DeepSpeed ZeRO-3 without model parallelism, batch 1536, on
384, 768 and 1,536 A100 80GB: micro-batch 4, 2, 1; 144, 88, 44 TFLOP/s per GPU by eq. 3).

The calibration file holds the same table's 530B rows; these three are priced as those are
(`at_scale_runs.py`): DeepSpeed before 0.5.5 (`--legacy-zero3`), full recompute, unfused
attention, fp16 gradients, Selene's DGX A100 nodes with 8 HDR 200 NICs. The published step
time is eq. 3's FLOPs over GPUs x TFLOP/s. Prints JSON: per row the published and predicted
step time and the step-time error (predicted / published - 1).
"""

from __future__ import annotations

import json
from typing import Any

from tierwise.hardware.cluster import load_cluster
from tierwise.perf.estimate import estimate
from tierwise.perf.flags import Flags
from tierwise.workload.flops import megatron_eq3_flops
from tierwise.workload.layout import Layout
from tierwise.workload.spec import ModelSpec

LAYERS, HIDDEN, HEADS, VOCAB, SEQ, BATCH = 96, 12288, 96, 51200, 2048, 1536
# (GPUs, micro-batch, TFLOP/s per GPU as Table 2 states)
RUNS = [(384, 4, 144), (768, 2, 88), (1536, 1, 44)]
FLAGS = Flags(framework="deepspeed", legacy_zero3=True, attention_backend="unfused")


def model() -> ModelSpec:
    """GPT-3 175B as SC'21 states it."""
    return ModelSpec.parse(
        {
            "name": "gpt3-175b",
            "layers": LAYERS,
            "hidden": HIDDEN,
            "heads": HEADS,
            "ffn_hidden": 4 * HIDDEN,
            "vocab": VOCAB,
            "activation": "gelu",
        },
        "model",
    )


def published_step_s(gpus: int, tflops: float) -> float:
    """Eq. 3's FLOPs per step over the GPUs at the stated TFLOP/s."""
    return megatron_eq3_flops(BATCH, SEQ, LAYERS, HIDDEN, VOCAB) / (gpus * tflops * 1e12)


def estimates() -> list[tuple[tuple[int, int, int], Layout, dict[str, Any]]]:
    """Each run of RUNS with its stated layout and the estimate of it."""
    out = []
    for run in RUNS:
        gpus, mbs, _ = run
        layout = Layout(
            dp=gpus, mbs=mbs, gbs=BATCH, seq=SEQ, recompute="full", zero=3, grad_reduce_bf16=True
        )
        cluster = load_cluster("dgx-a100", nodes=gpus // 8)
        out.append((run, layout, estimate(model(), cluster, layout, FLAGS)))
    return out


def main() -> None:
    rows = []
    for (gpus, mbs, tflops), _, r in estimates():
        published = published_step_s(gpus, tflops)
        rows.append(
            {
                "gpus": gpus,
                "mbs": mbs,
                "published_step_s": round(published, 2),
                "predicted_step_s": round(r["step_time_s"], 2),
                "step_time_error": round(r["step_time_s"] / published - 1, 4),
                "dp_comm_s": round(r["breakdown"]["dp_comm_s"], 2),
                "fits": r["fits"],
            }
        )
    print(json.dumps({"runs": rows}, indent=2))


if __name__ == "__main__":
    main()
