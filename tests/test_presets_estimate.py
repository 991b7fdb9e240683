"""Every new preset estimates on DGX H100 and GB200 NVL72 with a layout like its published
recipes (Megatron-Bridge / Megatron-MoE-ModelZoo shapes: EP inside the NVLink domain, uneven
pipeline ends for 61- and 94-layer models), fits in memory, and shows its memory terms."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import run_cli
from tierwise.hardware.cluster import load_cluster
from tierwise.perf.estimate import estimate
from tierwise.workload import Layout, load_model
from tierwise.workload.memory import GIB_KEYS

DSV3_PP16 = (3, *(4,) * 14, 2)  # 61 layers: short first and last stages (Megatron recipes)
DSV3_PP8 = (7, *(8,) * 6, 6)
# preset: (H100 nodes, H100 layout, GB200 nodes, GB200 layout)
LAYOUTS: dict[str, tuple[int, dict[str, Any], int, dict[str, Any]]] = {
    "deepseek-v3": (
        128,
        dict(tp=2, etp=1, pp=16, ep=64, dp=32, gbs=8192, recompute="full", pp_layers=DSV3_PP16),
        64,
        dict(pp=8, ep=32, dp=32, gbs=8192, recompute="full", pp_layers=DSV3_PP8),
    ),
    "kimi-k2": (
        128,
        dict(tp=2, etp=1, pp=16, ep=64, dp=32, gbs=8192, recompute="full", pp_layers=DSV3_PP16),
        64,
        dict(pp=8, ep=32, dp=32, gbs=8192, recompute="full", pp_layers=DSV3_PP8),
    ),
    "qwen3-8b": (2, dict(dp=16, gbs=256), 4, dict(dp=16, gbs=256)),
    "qwen3-32b": (
        8,
        dict(tp=4, pp=2, dp=8, gbs=256, recompute="selective"),
        4,
        dict(tp=2, dp=8, gbs=256),
    ),
    "qwen3-30b-a3b": (
        2,
        dict(ep=8, dp=16, gbs=512, recompute="full"),
        2,
        dict(ep=8, dp=8, gbs=512),
    ),
    "qwen3-235b-a22b": (
        32,
        dict(tp=2, pp=8, ep=16, dp=16, gbs=2048, recompute="full", pp_layers=(11, *(12,) * 6, 11)),
        16,
        dict(pp=4, ep=16, dp=16, gbs=2048, recompute="full", pp_layers=(23, 24, 24, 23)),
    ),
    "gpt-oss-20b": (1, dict(ep=8, dp=8, gbs=256), 2, dict(ep=8, dp=8, gbs=256)),
    "gpt-oss-120b": (
        8,
        dict(pp=4, ep=8, dp=16, gbs=1280, recompute="selective"),
        16,
        dict(ep=8, dp=64, gbs=1280),
    ),
    "llama4-scout": (
        8,
        dict(tp=2, pp=2, ep=16, dp=16, gbs=512, recompute="full"),
        8,
        dict(ep=16, dp=32, gbs=512, recompute="full"),
    ),
    "llama4-maverick": (
        32,
        dict(tp=2, pp=8, ep=16, dp=16, gbs=2048, recompute="full"),
        32,
        dict(pp=4, ep=32, dp=32, gbs=2048, recompute="full"),
    ),
    "mixtral-8x22b": (
        16,
        dict(tp=2, pp=8, vpp=7, ep=8, dp=8, gbs=256),
        16,
        dict(tp=2, pp=4, ep=8, dp=8, gbs=256, recompute="selective"),
    ),
    "gemma3-27b": (
        4,
        dict(tp=4, pp=2, dp=4, gbs=256, recompute="full"),
        4,
        dict(tp=2, dp=8, gbs=256, recompute="selective"),
    ),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
@pytest.mark.parametrize("cluster", ["dgx-h100", "gb200-nvl72"])
def test_preset_estimates_and_fits(name: str, cluster: str) -> None:
    h100_nodes, h100, gb200_nodes, gb200 = LAYOUTS[name]
    nodes, fields = (h100_nodes, h100) if cluster == "dgx-h100" else (gb200_nodes, gb200)
    layout = Layout(seq=4096, distributed_optimizer=True, **fields)
    r = estimate(load_model(name), load_cluster(cluster, nodes=nodes), layout)
    assert r["fits"], (name, cluster, r["memory"])
    assert set(GIB_KEYS) <= set(r["memory"]) and r["memory"]["activations_gib"] > 0
    assert 0.05 < r["mfu"] < 0.7 and r["step_time_s"] > 0


def test_estimate_cli_shows_memory_terms_for_an_mla_model() -> None:
    out = run_cli(
        *("estimate", "--model", "deepseek-v3", "--cluster", "gb200-nvl72", "--nodes", "64"),
        *("--pp", "8", "--pp-layers", "7,8,8,8,8,8,8,6", "--ep", "32", "--dp", "32"),
        *("--gbs", "8192", "--recompute", "full", "--use-distributed-optimizer"),
    ).stdout
    for term in ("weights", "grads", "optimizer", "activations", "logits"):
        assert term in out
