"""Held-out check (nothing is fitted on it): torchtitan FSDP2 runs on 64 A100 80GB,
pytorch/torchtitan docs/performance.md, "Llama 3 performance numbers" (FSDP2, local batch 1,
global batch 64; WPS = tokens/s per GPU): Llama 3 8B with selective op AC 2,973 WPS; 70B with
full AC 331 WPS (the earlier revision of the page: 323). Sequence length 8192 (torchtitan's
Llama 3 training configs). The layout is the stated one on 8 `dgx-a100` nodes, framework
torchtitan (its selective AC is op-level SAC, `tierwise.workload.recompute.OP_SAC_MASK`).
Prints JSON: per run the published and predicted tokens/s per GPU and the step-time error
(predicted / published - 1).
"""

from __future__ import annotations

import json
from typing import Any

from tierwise.hardware.cluster import load_cluster
from tierwise.perf.estimate import estimate
from tierwise.perf.flags import Flags
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model

GPUS = 64
# (model, activation checkpointing, published tokens/s per GPU)
RUNS = [("llama3-8b", "selective", 2973), ("llama3-70b", "full", 331)]
FLAGS = Flags(framework="torchtitan")


def estimates() -> list[tuple[tuple[str, str, int], Layout, dict[str, Any]]]:
    """Each run of RUNS with its stated layout and the estimate of it."""
    cluster = load_cluster("dgx-a100", nodes=GPUS // 8)
    out = []
    for run in RUNS:
        name, recompute, _ = run
        layout = Layout(dp=GPUS, mbs=1, gbs=GPUS, seq=8192, zero=3, recompute=recompute)
        out.append((run, layout, estimate(load_model(name), cluster, layout, FLAGS)))
    return out


def main() -> None:
    rows = []
    for (name, recompute, published), _, result in estimates():
        predicted = result["tokens_per_s"] / GPUS
        rows.append(
            {
                "model": name,
                "recompute": recompute,
                "published_tokens_per_s_per_gpu": published,
                "predicted_tokens_per_s_per_gpu": round(predicted),
                "step_time_error": round(published / predicted - 1, 3),
                "predicted_mfu": round(result["mfu"], 3),
                "fits": result["fits"],
            }
        )
    print(json.dumps({"runs": rows}, indent=1))


if __name__ == "__main__":
    main()
