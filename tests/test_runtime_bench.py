"""The bench loop on 4 gloo ranks (2 nodes x 2): every op, flat and hierarchical, checks pass
and a corrupted rank is counted; rank-0 JSON read back through `spawn_bench`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from tierwise.runtime.launch import launch
from tierwise.runtime.options import OPS, BenchConfig
from tierwise.runtime.worker import spawn_bench

pytestmark = pytest.mark.runtime
DTYPE_BY_OP = {
    "all_reduce": "bfloat16",
    "all_gather": "int8",
    "reduce_scatter": "double",
    "alltoall": "int64",
    "broadcast": "half",
    "sendrecv": "uint8",
}


def _worker() -> None:  # runs in every rank
    import os

    from tierwise.runtime.bench import CORRUPT_ENV, BenchRunner
    from tierwise.runtime.launch import detect_env
    from tierwise.runtime.mesh import init_distributed, shutdown
    from tierwise.runtime.placement import Placement

    env = detect_env()
    assert env is not None
    device = init_distributed(env, "gloo", timeout_s=60)
    placement = Placement.contiguous(env.world_size, 2)
    report = []
    for op in OPS:
        for algo in ("flat", "hierarchical"):
            if (op, algo) == ("sendrecv", "hierarchical"):
                continue
            for corrupt in ("", "2"):
                os.environ[CORRUPT_ENV] = corrupt
                redop = "max" if op == "reduce_scatter" else "sum"
                config = BenchConfig(
                    op=op, min_bytes=40, max_bytes=80, warmup=0, iters=2, algo=algo,
                    dtype=DTYPE_BY_OP[op], redop=redop, root=1,
                )  # fmt: skip
                result = BenchRunner(config, placement, device).run()
                wrong = [(r.count, r.out_of_place.wrong, r.in_place.wrong) for r in result.rows]
                report.append([op, algo, corrupt, wrong])
    print(json.dumps(report))
    shutdown()


def test_every_op_checks_and_counts_wrong_elements(tmp_path: Path) -> None:
    result = launch([sys.executable, __file__], 4, ranks_per_node=2, log_dir=tmp_path)
    result.raise_for_failure()
    report = json.loads((tmp_path / "rank0.out").read_text())
    assert len(report) == 2 * (2 * len(OPS) - 1)
    for op, algo, corrupt, rows in report:
        elem = {"bfloat16": 2, "half": 2, "int8": 1, "uint8": 1, "double": 8, "int64": 8}
        size = 40 // elem[DTYPE_BY_OP[op]]
        split = op in ("all_gather", "reduce_scatter", "alltoall")
        assert rows[0][0] == (size // 4 if split else size), (op, algo)
        for count, out_wrong, in_wrong in rows:
            # rank 2's result buffer holds 4 x count elements for all_gather / alltoall
            expect = 0 if not corrupt else count * (4 if op in ("all_gather", "alltoall") else 1)
            assert (out_wrong, in_wrong) == (expect, expect), (op, algo, corrupt)


def test_spawn_bench_returns_rank0_result() -> None:
    config = BenchConfig(op="all_gather", min_bytes=64, max_bytes=1024, factor=4, iters=2)
    result = spawn_bench(config, 2, env={"GLOO_SOCKET_IFNAME": "lo"})
    assert (result.op, result.nranks, result.nodes, result.algo) == ("all_gather", 2, 1, "flat")
    assert sorted(result.times_us()) == [64, 256, 1024]
    assert all(t > 0 for t in result.times_us(in_place=True).values())


if __name__ == "__main__":
    _worker()
