"""Speed of the time-to-train model (JSON out), and the closed form against the simulation.

Targets (issue 32): `estimate --train-tokens` adds under 1 ms to an estimate (the closed form
and the checkpoint share of the layout); `--simulate` of a 100-day (failure-free), 131,072-GPU
run under 2 s.

    python benchmarks/train_time_speed.py
"""

from __future__ import annotations

import json
import time
import timeit

from tierwise.hardware.cluster import load_cluster
from tierwise.perf.estimate import estimate
from tierwise.perf.train_sim import DEFAULT_TRIALS, simulate
from tierwise.perf.train_time import DAY_S, Run, estimate_train_time, ettr_first_order, timeline
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model


def main() -> None:
    model = load_model("llama3-405b")
    cluster = load_cluster("dgx-h100", nodes=2048)
    layout = Layout(tp=8, pp=16, dp=128, gbs=2048, seq=8192, distributed_optimizer=True)
    est = estimate(model, cluster, layout)
    added = timeit.repeat(lambda: estimate_train_time(cluster, est, 15e12), number=200, repeat=7)
    closed = estimate_train_time(cluster, est, 15e12)

    big = load_cluster("dgx-h100", nodes=16_384)
    tokens_per_s = 1.3e7  # what `plan` finds for llama3-405b on 131,072 H100 (gbs 2048)
    saved = 14 * 405e9 / 131_072  # bf16 weights + Adam states, spread over every GPU
    runs = {}
    for rate in ("llama3-405b", "meta-rsc1"):
        data = big.model_dump(mode="json")
        data["reliability"]["node_failures_per_1000_node_days"] = rate
        c = type(big).model_validate(data)
        tl = timeline(c, Run(100 * DAY_S * tokens_per_s, tokens_per_s, 131_072, saved))
        simulate(tl, 8)  # warm numpy up
        started = time.perf_counter()
        sim = simulate(tl)
        runs[rate] = {
            "simulate_s": round(time.perf_counter() - started, 3),
            "trials": DEFAULT_TRIALS,
            "interruptions": round(sim["interruptions"]),
            "failed_restarts": round(sim["failed_restarts"]),
            "days_simulated": round(sim["time_to_train_days"], 2),
            "ettr_simulated": round(sim["ettr"], 4),
            "ettr_closed_form": round(tl.ettr, 4),
            "ettr_first_order": round(
                float(ettr_first_order(tl.rate, tl.restart_s, tl.interval_s, tl.write_s, 0.0)),
                4,
            ),
        }
    print(
        json.dumps(
            {
                "train_time_added_us": round(min(added) / 200 * 1e6, 1),
                "llama3_405b_16k_gpus_15T": {
                    k: closed[k]
                    for k in ("time_to_train_days", "ettr", "mttf_h", "checkpoint_interval_min")
                },
                "simulate_131072_gpus_100_days": runs,
                "targets": {"train_time_added_us": 1000, "simulate_s": 2.0},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
