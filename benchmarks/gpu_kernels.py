"""Measured GEMM, attention and HBM rates of the local GPU beside tierwise's efficiency model.

Needs a CUDA GPU and torch; `--gpu` names the GPU's catalog key (default h200). Prints one JSON
object. Validation only (held out): nothing here is fitted; docs/validation-device.md records a
run on an H200.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from tierwise.hardware.catalog import GPU
from tierwise.hardware.catalog import gpu as catalog_gpu
from tierwise.perf import efficiency as eff
from tierwise.workload.precision import FORMATS

# (label, M tokens, N, K): per-GPU weight GEMM shapes of common layouts (sequence 8192, mbs 1).
GEMM_SHAPES = (
    ("square-8192", 8192, 8192, 8192),
    ("llama3-8b tp1 qkv", 8192, 6144, 4096),
    ("llama3-8b tp1 fc1", 8192, 28672, 4096),
    ("llama3-8b tp1 fc2", 8192, 4096, 14336),
    ("llama3-70b tp8 qkv", 8192, 1280, 8192),
    ("llama3-70b tp8 fc1", 8192, 7168, 8192),
    ("llama3-70b tp8 fc2", 8192, 8192, 3584),
    ("llama3-70b tp8 proj", 8192, 8192, 1024),
    ("skinny m=512", 512, 8192, 8192),
    ("skinny m=128", 128, 8192, 8192),
)
GEMM_FORMATS = ("bf16", "fp8-tensorwise")
# (sequence, heads, head dim) of causal BF16 attention, timed forward + backward.
ATTENTION_SHAPES = ((4096, 32, 128), (8192, 32, 128), (8192, 64, 128))
ATTENTION_BACKENDS = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION")
COPY_BYTES = 2 * 1024**3


def timed(fn: Callable[[], object], iters: int = 20, warm: int = 5) -> float:
    """Mean seconds of `fn` over `iters` runs after `warm` untimed ones (CUDA events)."""
    import torch

    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters / 1e3


def gemm_rows(gpu: GPU, fmt: str) -> list[dict]:
    """Measured vs modelled TFLOP/s of each shape in `fmt` (FP8: per-tensor scaled_mm)."""
    import torch

    code = next(i for i, f in enumerate(FORMATS) if f.name == fmt)
    rows = []
    for label, m, n, k in GEMM_SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        if code == 0:

            def run(a: torch.Tensor = a, b: torch.Tensor = b) -> object:
                return a @ b.t()
        else:
            a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
            one = torch.ones((), device="cuda")

            def run(
                a8: torch.Tensor = a8, b8: torch.Tensor = b8, one: torch.Tensor = one
            ) -> object:
                return torch._scaled_mm(
                    a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
                )

        sec = timed(run)
        flops = 2.0 * m * n * k
        model = float(eff.gemm_seconds(gpu, [eff.Gemm(flops, m, n, k, float(code != 0))], code))
        rows.append(
            {
                "shape": label,
                "format": fmt,
                "m": m,
                "n": n,
                "k": k,
                "measured_tflops": round(flops / sec / 1e12, 1),
                "predicted_tflops": round(flops / model / 1e12, 1),
                "error_pct": round((model - sec) / sec * 100, 1),
            }
        )
    return rows


def attention_rows(gpu: GPU) -> list[dict]:
    """Causal attention forward + backward per SDPA backend, in model FLOPs (forward 4 s^2 h d,
    backward twice that, half of it skipped by a causal kernel), beside the model's rate."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rows = []
    for s, h, d in ATTENTION_SHAPES:
        q, k, v = (
            torch.randn(1, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(3)
        )
        grad = torch.randn(1, h, s, d, device="cuda", dtype=torch.bfloat16)
        flops = 3 * 4 * s * s * h * d * eff.CAUSAL_WORK_FRACTION
        row: dict = {"seq": s, "heads": h, "head_dim": d}
        for backend in ATTENTION_BACKENDS:

            def step(q=q, k=k, v=v, grad=grad) -> None:
                F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)

            try:
                with sdpa_kernel(getattr(SDPBackend, backend)):
                    row[f"{backend.lower()}_tflops"] = round(flops / timed(step, 10) / 1e12, 1)
            except RuntimeError as err:  # the backend refuses this GPU or shape
                row[f"{backend.lower()}_tflops"] = f"unavailable: {str(err).splitlines()[0]}"
        row["predicted_tflops"] = round(eff.attention_tflops(gpu), 1)
        rows.append(row)
    return rows


def hbm_row(gpu: GPU) -> dict:
    """Device-to-device copy bandwidth (bytes read + written) against the datasheet."""
    import torch

    x = torch.empty(COPY_BYTES // 2, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    gbps = 2 * COPY_BYTES / timed(lambda: y.copy_(x)) / 1e9
    return {
        "copy_GBps": round(gbps),
        "datasheet_GBps": gpu.hbm_tbps * 1000,
        "measured_share": round(gbps / (gpu.hbm_tbps * 1000), 3),
        "model_hbm_efficiency": eff.HBM_EFFICIENCY,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--gpu", default="h200", help="catalog key of the local GPU")
    gpu = catalog_gpu(parser.parse_args().gpu)
    try:
        import torch
    except ImportError:
        print(json.dumps({"error": "needs torch: pip install 'tierwise[runtime]'"}))
        return
    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA GPU: this benchmark times kernels on one"}))
        return
    out = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "gemm": [row for fmt in GEMM_FORMATS for row in gemm_rows(gpu, fmt)],
        "attention": attention_rows(gpu),
        "hbm": hbm_row(gpu),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
