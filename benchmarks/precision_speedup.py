"""Modelled speed-up of each low-precision format over BF16 for large training GEMMs, per GPU.

For a square 8192^3 GEMM and a TP=8 Llama-3-70B MLP shard (16384 x 3584 x 8192), fprop +
dgrad + wgrad: BF16 GEMM time over the format's GEMM time plus its operand casts (one forward,
one backward), from perf/efficiency.py and perf/precision.py. Prints JSON.
"""

from __future__ import annotations

import json

from tierwise.hardware.catalog import gpu
from tierwise.perf.efficiency import Gemm, gemm_seconds
from tierwise.perf.precision import quantize_seconds
from tierwise.workload.precision import FORMATS, peak_of

SHAPES = {"square_8192": (8192, 8192, 8192), "llama3_70b_mlp_tp8": (16384, 3584, 8192)}
GPUS = ("a100-sxm-80gb", "h100-sxm", "h200", "b200", "b300", "gb200", "gb300")


def speedups(key: str) -> dict[str, dict[str, float]]:
    """{shape: {format: BF16 seconds / format seconds}} for the formats `key` runs."""
    g = gpu(key)
    out: dict[str, dict[str, float]] = {}
    for name, (m, n, k) in SHAPES.items():
        gemm = [Gemm(6 * m * n * k, m, n, k, 1.0)]
        bf16 = gemm_seconds(g, gemm, 0)
        out[name] = {
            f.name: round(
                float(bf16 / (gemm_seconds(g, gemm, code) + quantize_seconds(g, gemm, code, 1))),
                3,
            )
            for code, f in enumerate(FORMATS)
            if code and peak_of(g, code) is not None
        }
    return out


def main() -> None:
    print(json.dumps({key: speedups(key) for key in GPUS}, indent=1))


if __name__ == "__main__":
    main()
