"""`tierwise.memo`: values of a frozen spec memoised by the spec's identity (`by_identity`),
and one layout's by a few of its sizes (`Filled`)."""

from __future__ import annotations

import numpy as np

from tierwise.hardware.cluster import load_cluster
from tierwise.memo import Filled, by_identity
from tierwise.perf.estimate import estimate
from tierwise.workload.flops import flops_batch
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model


def test_one_computation_per_spec_object() -> None:
    calls: list[str] = []

    @by_identity(kept=2)
    def layers(spec: object) -> int:
        calls.append(spec.name)  # type: ignore[attr-defined]
        return spec.layers  # type: ignore[attr-defined]

    model = load_model("llama3-8b")
    twin = model.model_copy()  # equal, another object: computed on its own
    assert layers(model) == layers(model) == layers(twin) == 32
    assert calls == ["llama3-8b", "llama3-8b"]
    other = load_model("llama3-70b")
    assert layers(other) == 80  # a third spec: the full memo (2) is forgotten first
    assert layers(model) == 32 and len(calls) == 4
    layers.cache_clear()  # type: ignore[attr-defined]
    assert layers(other) == 80 and len(calls) == 5


def test_a_changed_copy_is_not_served_the_old_value() -> None:
    @by_identity()
    def hidden(spec: object) -> int:
        return spec.hidden  # type: ignore[attr-defined]

    model = load_model("llama3-8b")
    assert hidden(model) == 4096
    assert hidden(model.model_copy(update={"hidden": 2048})) == 2048


def test_filled_computes_a_missing_key_once_and_forgets_all_when_full() -> None:
    calls: list[int] = []

    def square(key: int) -> int:
        calls.append(key)
        return key * key

    memo = Filled(square, kept=2)
    assert memo[3] == memo[3] == 9 and calls == [3]
    assert memo[4] == 16 and len(memo) == 2
    assert memo[5] == 25 and len(memo) == 1  # full: the two kept were forgotten first
    assert memo[3] == 9 and calls == [3, 4, 5, 3]


def test_size_memos_serve_python_scalars_as_computed_and_skip_arrays() -> None:
    """The per-size memos (layer FLOPs, activation bytes, priced GEMMs) give a fresh spec's
    values, python floats for a python layout, and arrays for arrays."""
    model, cluster = load_model("llama3-8b"), load_cluster("dgx-h100", nodes=2)
    layout = Layout(tp=2, pp=2, dp=4, gbs=64, seq=4096)
    first = estimate(model, cluster, layout)
    again = estimate(model, cluster, layout)  # served by the memos
    fresh = estimate(model.model_copy(), cluster, layout)  # another spec: computed anew
    assert first == again == fresh
    assert type(again["step_time_s"]) is float and type(again["memory"]["activations_gib"]) is float
    one = flops_batch(model, seq=4096, mbs=1, tp=2, stage_layers=16)
    many = flops_batch(model, seq=4096, mbs=1, tp=np.array([2, 2]), stage_layers=16)
    assert type(one.hardware) is float and isinstance(many.hardware, np.ndarray)
    assert many.hardware.tolist() == [one.hardware, one.hardware]
