"""Held-out check (nothing is fitted on it): MPT training on 8 A100 80GB with modern kernels,
mosaicml/llm-foundry, scripts/train/benchmarking/README.md, table "A100 80GB with 1600 Gbps
node-node interconnect (RoCE)": FSDP FULL_SHARD, amp_bf16, flash attention, seq and micro-batch
as stated, activation checkpointing on or off as stated. MPT: vocab 50368, ffn 4h, GELU.

Every A100 run in ../shared/calibration is Megatron-LM of 2021 (unfused softmax, full
recompute, 52% of peak at best); these rows show what the model predicts where A100 runs
FlashAttention-class kernels. The layout is the stated one on `dgx-a100` (InfiniBand stands
in for RoCE; one node, so no inter-node traffic), framework torchtitan (FSDP2 stands in for
PyTorch FSDP1). Prints JSON: per row the published and predicted tokens/s per GPU, the
step-time error (predicted / published - 1) and the predicted MFU (tierwise's convention:
causal half of the s^2 core; llm-foundry counts all of it, so its MFU is a few points higher
at the same speed).
"""

from __future__ import annotations

import json
from typing import Any

from tierwise.hardware.cluster import load_cluster
from tierwise.perf.estimate import estimate
from tierwise.perf.flags import Flags
from tierwise.workload.layout import Layout
from tierwise.workload.spec import ModelSpec

GPUS = 8
# (model, layers, hidden, heads, seq, mbs, gbs, checkpointing, tokens/s/GPU, published MFU)
RUNS = [
    ("mpt-3b", 32, 2560, 20, 2048, 10, 160, False, 10811, 0.6211),
    ("mpt-7b", 32, 4096, 32, 2048, 6, 96, False, 4641, 0.6423),
    ("mpt-7b", 32, 4096, 32, 4096, 16, 256, True, 3684, 0.5484),
    ("mpt-13b", 40, 5120, 40, 2048, 2, 48, False, 2262, 0.5957),
    ("mpt-13b", 40, 5120, 40, 4096, 10, 240, True, 2060, 0.5762),
    ("mpt-30b", 48, 7168, 64, 2048, 3, 504, True, 916, 0.553),
]


def estimates() -> list[tuple[tuple, Layout, dict[str, Any]]]:
    """Each run of RUNS with its stated layout and the estimate of it."""
    cluster = load_cluster("dgx-a100", nodes=1)
    flags = Flags(framework="torchtitan")
    out = []
    for run in RUNS:
        name, layers, hidden, heads, seq, mbs, gbs, ckpt = run[:8]
        shape = {"layers": layers, "hidden": hidden, "heads": heads}
        model = ModelSpec.parse({"name": name, **shape, "vocab": 50368, "activation": "gelu"})
        recompute = "full" if ckpt else "none"
        layout = Layout(dp=GPUS, mbs=mbs, gbs=gbs, seq=seq, recompute=recompute, zero=3)
        layout = layout.validate_for(model, GPUS)
        out.append((run, layout, estimate(model, cluster, layout, flags)))
    return out


def main() -> None:
    rows = []
    for run, layout, result in estimates():
        name, seq, mbs, published, published_mfu = run[0], run[4], run[5], run[8], run[9]
        predicted = result["tokens_per_s"] / GPUS
        rows.append(
            {
                "model": name,
                "seq": seq,
                "mbs": mbs,
                "recompute": layout.recompute,
                "published_tokens_per_s_per_gpu": published,
                "predicted_tokens_per_s_per_gpu": round(predicted),
                "step_time_error": round(published / predicted - 1, 3),
                "published_mfu": published_mfu,
                "predicted_mfu": round(result["mfu"], 3),
                "fits": result["fits"],
                "compute_parts_s": {k: round(v, 3) for k, v in result["compute_parts_s"].items()},
            }
        )
    errors = [abs(r["step_time_error"]) for r in rows]
    summary = {"mean_abs_step_error": round(sum(errors) / len(errors), 3), "max": max(errors)}
    print(json.dumps({"runs": rows, **summary}, indent=1))


if __name__ == "__main__":
    main()
