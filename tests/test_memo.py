"""`tierwise.memo.by_identity`: values of a frozen spec memoised by the spec's identity."""

from __future__ import annotations

from tierwise.memo import by_identity
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
