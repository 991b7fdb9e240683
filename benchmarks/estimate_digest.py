"""Digest of the step model's outputs (JSON out): proof that a speed change moved no number.

Hashes (sha256, exact float reprs) of: every calibration run's estimates (each candidate layout
of training_runs.yaml, the stated layouts of the modern and at-scale runs), `plan` searches of
five preset models, 60 layouts sampled from each of five search spaces estimated one by one,
and the vectorised batch of 20,000 layouts of estimate_speed.py. Run it before and after a
change (or with PYTHONPATH at another tree); the digests must be equal.

    python benchmarks/estimate_digest.py
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from tierwise.errors import SpecError
from tierwise.hardware.cluster import load_cluster
from tierwise.perf.estimate import estimate, estimate_batch
from tierwise.perf.step import Flags
from tierwise.plan.search import layout_at, search
from tierwise.plan.space import build_space
from tierwise.workload.load import load_model

sys.path.insert(0, str(Path(__file__).parent))
import at_scale_runs
import estimate_speed
import modern_runs
import validate_estimate

# (model, cluster preset, nodes, flags) of the plan searches and the sampled layouts.
PLANS = [
    ("llama3-70b", "dgx-h100", 128, {}),
    ("llama3-405b", "dgx-h100", 256, {}),
    ("deepseek-v3", "gb200-nvl72", 144, {}),
    ("mixtral-8x7b", "dgx-h100", 16, {"framework": "torchtitan"}),
    ("llama3-8b", "dgx-a100", 8, {"framework": "deepspeed"}),
]
SAMPLED = [
    ("llama3-70b", "dgx-h100", 64, {}),
    ("deepseek-v3", "gb200-nvl72", 144, {}),
    ("mixtral-8x7b", "dgx-h100", 16, {"framework": "torchtitan"}),
    ("llama3-8b", "dgx-a100", 8, {"framework": "deepspeed"}),
    ("qwen3-30b-a3b", "dgx-b200", 8, {"tp_comm_overlap": True}),
]
SAMPLES = 60
BATCH = 20_000


def digest(value: Any) -> str:
    """First 16 hex digits of the sha256 of `value` as JSON (floats as their exact repr)."""
    text = json.dumps(value, sort_keys=True, default=_encode)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _encode(value: Any) -> Any:
    """Arrays by their bytes, anything else (named tuples' members, None arrays) by repr."""
    array = np.asarray(value)
    return array.tobytes().hex() if array.dtype != object else repr(value)


def calibration_runs() -> dict[str, str]:
    """Every calibration run's estimates: each candidate layout of the old runs, the stated
    layout of the modern and at-scale runs."""
    out = []
    for run in yaml.safe_load(validate_estimate.RUNS.read_text())["runs"]:
        run, model, cluster, flags = validate_estimate.context(run)
        out += [
            estimate(model, cluster, lay, flags) for lay in validate_estimate.candidates(run, model)
        ]
    parts = {"training_runs": digest(out)}
    for source in (modern_runs, at_scale_runs):
        stated = []
        for run in source.load_runs():
            model, cluster = source.model_of(run), source.cluster_of(run)
            layout = source.layout_of(run, model)
            stated.append(estimate(model, cluster, layout, source.flags_of(run)))
        parts[source.__name__] = digest(stated)
    return parts


def plans() -> dict[str, str]:
    """The top five plans of each search, with its candidate counts (or its error)."""
    parts = {}
    for name, preset, nodes, flags in PLANS:
        model, cluster = load_model(name), load_cluster(preset, nodes=nodes)
        try:
            found = search(model, cluster, 4096, 4096, top=5, flags=Flags(**flags))
            value: Any = [found.plans, found.candidates_evaluated, found.candidates_fitting]
        except SpecError as exc:
            value = str(exc)
        parts[f"plan {name} {preset}"] = digest(value)
    return parts


def sampled_layouts() -> dict[str, str]:
    """Layouts drawn from each search space, estimated one by one (or their errors)."""
    parts = {}
    rng = np.random.default_rng(1)
    for name, preset, nodes, flags in SAMPLED:
        model, cluster = load_model(name), load_cluster(preset, nodes=nodes)
        space = build_space(
            model, cluster, cluster.world, 2048, 4096, framework=flags.get("framework", "any")
        )
        out: list[Any] = []
        for i in rng.integers(space.size, size=SAMPLES):
            layout = layout_at(space.arrays, int(i), model.layers)
            try:
                out.append(estimate(model, cluster, layout, Flags(**flags)))
            except SpecError as exc:
                out.append(str(exc))
        parts[f"sampled {name}"] = digest(out)
    return parts


def batch() -> dict[str, str]:
    """estimate_batch over estimate_speed.py's random llama3-70b layouts."""
    model, cluster = load_model("llama3-70b"), load_cluster("dgx-h100", nodes=128)
    terms = estimate_batch(
        model, cluster, estimate_speed.random_layouts(BATCH, cluster.world, model)
    )
    return {"batch": digest({**terms, "memory": terms["memory"]._asdict()})}


def main() -> None:
    parts = calibration_runs() | plans() | sampled_layouts() | batch()
    print(json.dumps({"all": digest(parts), **parts}, indent=2))


if __name__ == "__main__":
    main()
