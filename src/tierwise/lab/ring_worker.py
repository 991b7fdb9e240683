"""``python -m tierwise.lab.ring_worker``: one rank of `tierwise lab ecmp`.

Every rank sends a buffer to the next rank and receives one from the previous (one step of a
ring collective, every ring link busy at once: nccl-tests' sendrecv), over gloo, bound to its
namespace's veth. A step's time is the slowest rank's; rank 0 writes the mean over the timed
iterations as JSON to the task's ``out`` path.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from tierwise.errors import TierwiseError
from tierwise.lab.worker import guarded
from tierwise.runtime.launch import detect_env
from tierwise.runtime.mesh import init_distributed

TASK_ENV = "TIERWISE_LAB_RING_TASK"


RING_BUFFERS = 2
"""Buffers of `RingTask.size_bytes` each rank holds: the one it sends and the one it receives."""


@dataclass(frozen=True)
class RingTask:
    """Bytes each rank sends per step, untimed and timed steps, the deadline (s), and where
    rank 0 writes its result."""

    size_bytes: int
    warmup: int = 1
    iters: int = 3
    timeout_s: float = 300.0
    out: str = ""

    def __post_init__(self) -> None:
        if self.size_bytes < 4 or self.warmup < 0 or self.iters < 1:
            raise TierwiseError(
                f"lab ecmp: need --size >= 4 B, --warmup >= 0, --iters >= 1; got "
                f"{self.size_bytes}, {self.warmup}, {self.iters}"
            )

    def to_json(self) -> str:
        """JSON text for the task file."""
        return json.dumps(asdict(self))


def ring_step_s(task: RingTask, rank: int, world: int) -> list[float]:
    """Seconds of each timed ring step (the slowest rank's)."""
    count = max(1, task.size_bytes // 4)
    send, recv = torch.ones(count, dtype=torch.float32), torch.empty(count, dtype=torch.float32)
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    out = []
    for i in range(task.warmup + task.iters):
        dist.barrier()
        start = time.perf_counter()
        reqs = [dist.isend(send, nxt), dist.irecv(recv, prev)]
        for req in reqs:
            req.wait()
        took = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(took, dist.ReduceOp.MAX)
        if i >= task.warmup:
            out.append(float(took.item()))
    return out


def _run() -> None:
    env = detect_env()
    if env is None:
        raise TierwiseError("the ring worker needs RANK/WORLD_SIZE/MASTER_* (lab ecmp)")
    task = RingTask(**json.loads(Path(os.environ[TASK_ENV]).read_text()))
    init_distributed(env, "gloo", task.timeout_s)
    try:
        steps = ring_step_s(task, env.rank, env.world_size)
    finally:
        dist.destroy_process_group()
    if env.rank == 0:
        Path(task.out).write_text(json.dumps({"step_s": steps}))


def main() -> int:
    """Entry point of one rank; a failure writes its one-line reason and exits 1."""
    return guarded(_run, "lab ring worker")


if __name__ == "__main__":
    sys.exit(main())
