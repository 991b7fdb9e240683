"""Hierarchical collectives equal flat ones and a local reference, on 2, 4 and 8 gloo ranks.

Each test launches the ranks once (this file run as a script, through
`tierwise.runtime.launch.launch`); the ranks loop over placements, ops, dtypes and odd sizes,
then run a hypothesis property in lockstep (derandomized, no shrinking) and print a JSON report.
"""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("torch")

from tierwise.runtime.launch import launch

pytestmark = pytest.mark.runtime

#: Per world size: the placements to check, as node ids per rank.
PLACEMENTS: dict[int, list[list[int]]] = {
    2: [[0, 0], [0, 1]],
    4: [[0, 0, 1, 1], [0, 1, 0, 1]],
    8: [[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 2, 2, 3, 3], [1, 0, 2, 3, 3, 0, 1, 2]],
}
SIZES = (1, 7, 130)
DTYPES = ("float32", "bfloat16", "float64", "int32", "int64")
CASES = (
    ("all_reduce", "sum"),
    ("all_reduce", "avg"),
    ("all_reduce", "max"),
    ("reduce_scatter", "sum"),
    ("reduce_scatter", "min"),
    ("all_gather", None),
    ("all_to_all", None),
    ("broadcast", None),
)
PROPERTY_EXAMPLES = 12


def _worker() -> None:  # runs in every rank
    import torch
    from hypothesis import Phase, given, settings
    from hypothesis import strategies as st

    from tierwise.errors import TierwiseError
    from tierwise.runtime.hierarchical import FlatCollectives, HierarchicalCollectives
    from tierwise.runtime.launch import detect_env
    from tierwise.runtime.mesh import build_mesh, init_distributed, shutdown
    from tierwise.runtime.placement import Placement

    env = detect_env()
    assert env is not None
    device = init_distributed(env, "gloo", timeout_s=60)
    world, rank = env.world_size, env.rank
    flat = FlatCollectives()
    hiers = [
        HierarchicalCollectives(build_mesh(Placement.from_node_ids(ids), device))
        for ids in PLACEMENTS[world]
    ]
    failures: list[str] = []
    checked = 0

    def data(r: int, n: int, dtype: torch.dtype, salt: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(1000 * salt + r)
        if dtype.is_floating_point:
            return torch.randn(n, generator=gen, dtype=torch.float64).to(dtype)
        return torch.randint(-50, 50, (n,), generator=gen, dtype=torch.int64).to(dtype)

    def reference(op: str, red: str | None, n: int, dtype: torch.dtype, salt: int, root: int):
        world_n = n * world if op in ("reduce_scatter", "all_to_all") else n
        ins = torch.stack([data(r, world_n, dtype, salt) for r in range(world)]).double()
        if op == "broadcast":
            return ins[root]
        if op == "all_gather":
            return ins.reshape(-1)
        if op == "all_to_all":
            return ins.view(world, world, n)[:, rank].reshape(-1)
        reduced = {
            "sum": ins.sum(0),
            "avg": ins.mean(0),
            "max": ins.amax(0),
            "min": ins.amin(0),
        }[red or "sum"]
        return reduced if op == "all_reduce" else reduced.view(world, n)[rank]

    def run(coll, op: str, red: str | None, n: int, dtype: torch.dtype, salt: int, root: int):
        if op in ("all_reduce", "broadcast", "all_gather"):
            inp = data(rank, n, dtype, salt)
        else:
            inp = data(rank, n * world, dtype, salt)
        if op == "all_reduce":
            return coll.all_reduce(inp, red)
        if op == "broadcast":
            return coll.broadcast(inp, root)
        if op == "all_gather":
            return coll.all_gather(torch.empty(n * world, dtype=dtype), inp)
        if op == "reduce_scatter":
            return coll.reduce_scatter(torch.empty(n, dtype=dtype), inp, red)
        return coll.all_to_all(torch.empty_like(inp), inp)

    def close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> bool:
        if not dtype.is_floating_point:
            return torch.equal(got.double(), want)
        tol = {torch.bfloat16: 5e-2, torch.float16: 5e-3}.get(dtype, 1e-6)
        return torch.allclose(got.double(), want, rtol=tol, atol=tol * world)

    def check(which: int, op: str, red: str | None, n: int, dtype_name: str, salt: int) -> None:
        nonlocal checked
        dtype = getattr(torch, dtype_name)
        root = salt % world
        want = reference(op, red, n, dtype, salt, root)
        label = f"{PLACEMENTS[world][which]} {op}/{red} n={n} {dtype_name}"
        if red == "avg" and not dtype.is_floating_point:
            for coll in (flat, hiers[which]):
                try:
                    run(coll, op, red, n, dtype, salt, root)
                    failures.append(f"{label}: int avg did not raise")
                except TierwiseError:
                    pass
            return
        got_flat = run(flat, op, red, n, dtype, salt, root)
        got_hier = run(hiers[which], op, red, n, dtype, salt, root)
        checked += 1
        if not close(got_flat, want, dtype):
            failures.append(f"{label}: flat differs from the reference")
        if not close(got_hier, want, dtype):
            failures.append(f"{label}: hierarchical differs from the reference")
        if not dtype.is_floating_point and not torch.equal(got_hier, got_flat):
            failures.append(f"{label}: hierarchical != flat exactly")

    salt = 0
    for which in range(len(hiers)):
        for op, red in CASES:
            for dtype_name in DTYPES:
                for n in SIZES:
                    salt += 1
                    check(which, op, red, n, dtype_name, salt)

    @settings(
        max_examples=PROPERTY_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],  # no shrinking: every rank draws the same examples
    )
    @given(
        which=st.integers(0, len(hiers) - 1),
        case=st.sampled_from(CASES),
        n=st.integers(0, 257),
        dtype_name=st.sampled_from(("float32", "float16", "int64")),
        salt=st.integers(0, 10_000),
    )
    def prop(which: int, case: tuple[str, str | None], n: int, dtype_name: str, salt: int):
        check(which, case[0], case[1], n, dtype_name, salt)

    prop()
    print(json.dumps({"rank": rank, "checked": checked, "failures": failures}))
    hiers.clear()
    shutdown()


@pytest.mark.parametrize("world", sorted(PLACEMENTS))
def test_hierarchical_equals_flat(world: int, tmp_path) -> None:
    result = launch(
        [sys.executable, __file__],
        world,
        ranks_per_node=world,
        env={"GLOO_SOCKET_IFNAME": "lo"},
        deadline_s=240,
        log_dir=tmp_path,
    )
    result.raise_for_failure()
    reports = [json.loads((tmp_path / f"rank{r}.out").read_text()) for r in range(world)]
    for report in reports:
        assert report["failures"] == [], report["failures"][:5]
        expected = len(PLACEMENTS[world]) * len(CASES) * len(SIZES) * len(DTYPES)
        assert report["checked"] > expected * 0.8  # int avg cases are error checks
    assert all(pid_gone(p) for p in result.pids)


def pid_gone(pid: int) -> bool:
    """True when no process (zombie included) has this pid."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


if __name__ == "__main__":
    _worker()


def test_collectives_take_the_names_an_older_torch_has(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before torch renamed them (e.g. torch 2.11 in CUDA 13 images), only
    `all_gather_into_tensor` / `reduce_scatter_tensor` exist; bench must use those there."""
    import importlib

    import torch.distributed as dist

    from tierwise.runtime import dist_compat

    monkeypatch.delattr(dist, "all_gather_single", raising=False)
    monkeypatch.delattr(dist, "reduce_scatter_single", raising=False)
    try:
        old = importlib.reload(dist_compat)
        assert old.all_gather_single is dist.all_gather_into_tensor
        assert old.reduce_scatter_single is dist.reduce_scatter_tensor
    finally:
        monkeypatch.undo()
        importlib.reload(dist_compat)
