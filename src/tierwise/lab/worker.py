"""``python -m tierwise.lab.worker``: one rank of `tierwise lab run` (the runtime adapter).

Started by the launcher inside a node's namespace with torchrun-style env vars, plus
`TASK_ENV` (a JSON task file) and `NODE_ENV` (the namespace's node index, which differs from
the launcher's block placement under ``--placement naive``). It joins the job over gloo,
probes both tiers on the physical placement, then times each algorithm per size with the
runtime's collectives and buffers (out-of-place, nccl-tests semantics) on the *logical*
placement (ranks ``k*K .. k*K+K-1`` form "node" k, as a topology-unaware job assumes).
Rank 0 writes the results as JSON to the task's ``out`` path.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from tierwise.errors import TierwiseError
from tierwise.lab.probe import probe
from tierwise.runtime.bench import build_case, summarize, time_iters
from tierwise.runtime.faults import (
    HEARTBEAT_DIR_ENV,
    Heartbeat,
    describe_collective_error,
    write_error_file,
)
from tierwise.runtime.hierarchical import FlatCollectives, HierarchicalCollectives
from tierwise.runtime.launch import RankEnv, detect_env
from tierwise.runtime.mesh import build_mesh, exchange_placement, init_distributed
from tierwise.runtime.options import BenchConfig
from tierwise.runtime.placement import Placement

TASK_ENV = "TIERWISE_LAB_TASK"
NODE_ENV = "TIERWISE_LAB_NODE"


@dataclass(frozen=True)
class Task:
    """What every rank runs; sizes in bytes as nccl-tests' ``-b/-e``."""

    op: str
    sizes: list[int]
    ranks_per_node: int
    rate_bit: int
    out: str
    algos: list[str] = field(default_factory=lambda: ["flat", "hierarchical"])
    warmup: int = 1
    iters: int = 3
    timeout_s: float = 120.0
    step: dict[str, Any] | None = None

    def to_json(self) -> str:
        """JSON text for the task file."""
        return json.dumps(asdict(self))


def time_algo(task: Task, algo: str, coll: Any, env: RankEnv, heartbeat: Heartbeat) -> list[dict]:
    """Out-of-place rows of ``algo`` at every size (a collective call on all ranks)."""
    device, rows = torch.device("cpu"), []
    for size in task.sizes:
        cfg = BenchConfig(
            op=task.op,
            min_bytes=size,
            max_bytes=size,
            algo=algo,
            backend="gloo",
            warmup=task.warmup,
            iters=task.iters,
            check=False,
            timeout_s=task.timeout_s,
        )
        for size_bytes, count in cfg.counts(env.world_size):
            mode = build_case(cfg, count, coll, env.rank, env.world_size, device).out_of_place
            mode.fill()
            for _ in range(task.warmup):
                mode.run()
                heartbeat.beat()
            lat = time_iters(mode.run, task.iters, device)
            heartbeat.beat()
            half = summarize(task.op, size_bytes, lat, None, device)
            rows.append({"size_bytes": size_bytes, "count": count, **asdict(half)})
    return rows


def run_task(task: Task, env: RankEnv, node: int) -> dict[str, Any] | None:
    """Probe, then time every algorithm; rank 0 returns the results, others None."""
    device = init_distributed(env, "gloo", task.timeout_s)
    try:
        physical = exchange_placement(node, device)
        phys_mesh = build_mesh(physical, device)
        fitted = probe(phys_mesh, task.rate_bit)
        logical = Placement.contiguous(env.world_size, task.ranks_per_node)
        mesh = phys_mesh if logical == physical else build_mesh(logical, device)
        heartbeat = Heartbeat(env.rank, os.environ.get(HEARTBEAT_DIR_ENV))
        rows = {}
        for algo in task.algos:
            coll = FlatCollectives() if algo == "flat" else HierarchicalCollectives(mesh)
            rows[algo] = time_algo(task, algo, coll, env, heartbeat)
        out: dict[str, Any] = {
            "probe": fitted.as_dict(),
            "rows": rows,
            "node_of": list(physical.node_of),
        }
        if task.step is not None:
            from tierwise.lab.step import measure_step

            out["step"] = measure_step(task.step, mesh, env.rank)
        return out if env.rank == 0 else None
    finally:
        dist.destroy_process_group()


def guarded(body: Callable[[], None], what: str) -> int:
    """Run one rank's ``body`` with one torch thread: 0, or 1 after writing the one-line
    reason of its failure (``what`` names the worker)."""
    torch.set_num_threads(1)
    try:
        body()
        return 0
    except TierwiseError as exc:
        write_error_file(str(exc))
    except Exception as exc:  # torch.distributed raises RuntimeError subclasses
        write_error_file(describe_collective_error(exc, what, 0.0))
    return 1


def _run() -> None:
    env = detect_env()
    if env is None:
        raise TierwiseError(
            "the lab worker needs RANK/WORLD_SIZE/MASTER_* (run via `tierwise lab run`)"
        )
    task = Task(**json.loads(Path(os.environ[TASK_ENV]).read_text()))
    result = run_task(task, env, int(os.environ[NODE_ENV]))
    if result is not None:
        Path(task.out).write_text(json.dumps(result))


def main() -> int:
    """Entry point of one rank; a failure writes its one-line reason and exits 1."""
    return guarded(_run, "lab worker")


if __name__ == "__main__":
    sys.exit(main())
