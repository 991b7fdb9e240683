"""The benchmark loop of `tierwise bench`, run on every rank (nccl-tests semantics).

Per size: ``warmup`` untimed then ``iters`` timed iterations, out-of-place then in-place, each
iteration timed on its own (host clock on CPU, CUDA events on GPU), then one run on a known
pattern to count wrong elements. With ``duration_s``, after that sweep the largest size runs
back to back for that long and every iteration's latency is kept (the sustained-load series).

Test hooks (env): ``TIERWISE_BENCH_CORRUPT_RANK=<r>`` makes rank r's result wrong after the
check run; ``TIERWISE_BENCH_FAULT=kill:<r>`` or ``hang:<r>`` makes rank r SIGKILL or SIGSTOP
itself after the first size.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist

from tierwise.errors import TierwiseError
from tierwise.runtime.dist_compat import all_gather_single
from tierwise.runtime.faults import HEARTBEAT_DIR_ENV, Heartbeat, RankFailure
from tierwise.runtime.faults import describe_collective_error as _describe
from tierwise.runtime.hierarchical import Collectives, FlatCollectives, collectives
from tierwise.runtime.launch import RankEnv
from tierwise.runtime.mesh import (
    build_mesh,
    exchange_placement,
    init_distributed,
    resolve_backend,
    shutdown,
)
from tierwise.runtime.options import REDUCING_OPS, BenchConfig
from tierwise.runtime.placement import Placement
from tierwise.runtime.results import (
    BenchResult,
    BenchRow,
    HalfResult,
    Series,
    bandwidths,
    percentile,
)

CORRUPT_ENV = "TIERWISE_BENCH_CORRUPT_RANK"
FAULT_ENV = "TIERWISE_BENCH_FAULT"

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float": torch.float32,
    "double": torch.float64,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int32": torch.int32,
    "int64": torch.int64,
}
#: Relative tolerance of the correctness check per float dtype (ints are exact).
RTOL: dict[torch.dtype, float] = {
    torch.float16: 1e-3,
    torch.bfloat16: 1e-2,
    torch.float32: 1e-5,
    torch.float64: 1e-12,
}
#: Test pattern ``(PATTERN_RANK*rank + PATTERN_INDEX*index) % PATTERN_MOD``: small integers,
#: exact in every dtype, different on every rank and position.
PATTERN_RANK, PATTERN_INDEX, PATTERN_MOD = 7, 3, 5
#: Wall time (s) between two agreed stop checks in sustained mode.
STOP_CHECK_S = 0.2


def pattern(rank: int, start: int, length: int, device: torch.device) -> torch.Tensor:
    """The int64 test pattern of ``rank`` at global indices ``start .. start+length-1``."""
    index = torch.arange(start, start + length, dtype=torch.int64, device=device)
    return (PATTERN_RANK * rank + PATTERN_INDEX * index) % PATTERN_MOD


def reduce_pattern(
    op: str, world: int, start: int, length: int, device: torch.device
) -> torch.Tensor:
    """The exact reduction over ranks ``0..world-1`` of `pattern` (float64 for ``avg``).

    The pattern only depends on ``rank % PATTERN_MOD``, so this sums at most five terms."""
    classes = torch.bincount(torch.arange(world) % PATTERN_MOD, minlength=PATTERN_MOD)
    terms = [(int(m), pattern(c, start, length, device)) for c, m in enumerate(classes) if m]
    if op in ("sum", "avg"):
        total = sum(m * t for m, t in terms)
        assert isinstance(total, torch.Tensor)
        return total.double() / world if op == "avg" else total
    stacked = torch.stack([t for _, t in terms])
    return stacked.amax(0) if op == "max" else stacked.amin(0)


def count_wrong(got: torch.Tensor, expected: torch.Tensor) -> int:
    """Elements of ``got`` that differ from ``expected`` (tolerance per float dtype)."""
    if got.dtype in RTOL:
        exp = expected.to(torch.float64)
        diff = (got.to(torch.float64) - exp).abs()
        return int((diff > RTOL[got.dtype] * exp.abs() + RTOL[got.dtype]).sum())
    return int((got != expected.to(got.dtype)).sum())  # both wrap alike on overflow


@dataclass
class Mode:
    """One way to run an op: fill its input with the pattern, run it, read its result."""

    fill: Callable[[], None]
    run: Callable[[], object]
    result: Callable[[], torch.Tensor]


@dataclass
class Case:
    """Both modes of one op at one size, and the result every rank expects."""

    out_of_place: Mode
    in_place: Mode
    expected: Callable[[], torch.Tensor]


def build_case(
    config: BenchConfig,
    count: int,
    c: Collectives,
    rank: int,
    world: int,
    device: torch.device,
) -> Case:
    """Buffers and closures for ``config.op`` with ``count`` elements per rank chunk."""
    dtype, op, redop, root = TORCH_DTYPES[config.dtype], config.op, config.redop, config.root
    split = count * world

    def buf(n: int) -> torch.Tensor:
        return torch.zeros(n, dtype=dtype, device=device)

    def put(t: torch.Tensor, who: int, start: int = 0) -> Callable[[], None]:
        return lambda: t.copy_(pattern(who, start, t.numel(), device))

    if op == "all_reduce":
        send, recv = buf(count), buf(count)
        return Case(
            Mode(put(send, rank), lambda: c.all_reduce(send, redop, out=recv), lambda: recv),
            Mode(put(recv, rank), lambda: c.all_reduce(recv, redop), lambda: recv),
            lambda: reduce_pattern(redop, world, 0, count, device),
        )
    if op == "reduce_scatter":
        send, recv = buf(split), buf(count)
        mine = send[rank * count : (rank + 1) * count]
        return Case(
            Mode(put(send, rank), lambda: c.reduce_scatter(recv, send, redop), lambda: recv),
            Mode(put(send, rank), lambda: c.reduce_scatter(mine, send, redop), lambda: mine),
            lambda: reduce_pattern(redop, world, rank * count, count, device),
        )
    if op == "all_gather":
        send, recv = buf(count), buf(split)
        mine = recv[rank * count : (rank + 1) * count]
        ranks = torch.arange(world, device=device).repeat_interleave(count)
        return Case(
            Mode(put(send, rank), lambda: c.all_gather(recv, send), lambda: recv),
            Mode(put(mine, rank), lambda: c.all_gather(recv, mine), lambda: recv),
            lambda: (
                (
                    PATTERN_RANK * ranks
                    + PATTERN_INDEX * (torch.arange(split, device=device) % count)
                )
                % PATTERN_MOD
            ),
        )
    if op == "alltoall":
        send, recv = buf(split), buf(split)
        ranks = torch.arange(world, device=device).repeat_interleave(count)
        start = rank * count
        return Case(
            Mode(put(send, rank), lambda: c.all_to_all(recv, send), lambda: recv),
            Mode(put(send, rank), lambda: c.all_to_all(send, send), lambda: send),
            lambda: (
                (
                    PATTERN_RANK * ranks
                    + PATTERN_INDEX * (start + torch.arange(split, device=device) % count)
                )
                % PATTERN_MOD
            ),
        )
    if op == "broadcast":
        send, recv = buf(count), buf(count)
        return Case(
            Mode(put(send, rank), lambda: c.broadcast(send, root, out=recv), lambda: recv),
            Mode(put(recv, rank), lambda: c.broadcast(recv, root), lambda: recv),
            lambda: pattern(root, 0, count, device),
        )
    if op == "sendrecv":
        send, recv = buf(count), buf(count)
        flat = c if isinstance(c, FlatCollectives) else FlatCollectives()
        return Case(
            Mode(put(send, rank), lambda: flat.sendrecv(recv, send), lambda: recv),
            Mode(put(recv, rank), lambda: flat.sendrecv(recv, recv), lambda: recv),
            lambda: pattern((rank - 1) % world, 0, count, device),
        )
    raise TierwiseError(f"op: {op!r} is not supported")


def time_iters(run: Callable[[], object], iters: int, device: torch.device) -> list[float]:
    """Latency of each of ``iters`` calls in microseconds (CUDA events on GPU)."""
    if device.type == "cuda":
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(iters)
        ]
        for start, end in events:
            start.record()
            run()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) * 1e3 for start, end in events]
    out = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        run()
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out


def gather_latencies(lat: list[float], device: torch.device) -> torch.Tensor:
    """``[world, len(lat)]`` latencies of every rank (all ranks ran the same iterations)."""
    mine = torch.tensor(lat, dtype=torch.float64, device=device)
    everyone = torch.empty(dist.get_world_size() * len(lat), dtype=torch.float64, device=device)
    all_gather_single(everyone, mine)
    return everyone.view(dist.get_world_size(), len(lat)).cpu()


def summarize(
    op: str, size_bytes: int, lat: list[float], wrong: int | None, device: torch.device
) -> HalfResult:
    """One mode's row cells from this rank's latencies (a collective: all ranks call it)."""
    everyone = gather_latencies(lat, device)
    slowest = everyone.amax(0).tolist()
    time_us = float(everyone.mean())
    algbw, busbw = bandwidths(op, size_bytes, time_us, everyone.shape[0])
    return HalfResult(
        time_us=time_us,
        algbw_GBps=algbw,
        busbw_GBps=busbw,
        wrong=wrong,
        p50_us=percentile(slowest, 50),
        p99_us=percentile(slowest, 99),
        max_us=max(slowest),
    )


def _sum_all(value: int, device: torch.device) -> int:
    t = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(t)
    return int(t.item())


def check_mode(mode: Mode, case: Case, rank: int, device: torch.device) -> int:
    """Wrong elements summed over ranks after one run on the pattern (collective)."""
    mode.fill()
    mode.run()
    got = mode.result()
    if os.environ.get(CORRUPT_ENV) == str(rank):
        got.add_(1)
    return _sum_all(count_wrong(got, case.expected()), device)


def check_same_config(config: BenchConfig, rank: int) -> None:
    """Every rank must run the same config; else one line naming the field (collective)."""
    mine = config.to_json()
    everyone: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    for other_rank, other in enumerate(everyone):
        if other != mine and other is not None:
            theirs = BenchConfig.from_json(other)
            field = next(
                f for f in config.__dataclass_fields__ if getattr(theirs, f) != getattr(config, f)
            )
            raise TierwiseError(
                f"ranks disagree on {field}: rank {rank} has {getattr(config, field)!r}, "
                f"rank {other_rank} has {getattr(theirs, field)!r}"
            )


def _fault_hook(rank: int) -> None:
    spec = os.environ.get(FAULT_ENV, "")
    kind, _, who = spec.partition(":")
    if who == str(rank) and kind in ("kill", "hang"):
        os.kill(os.getpid(), signal.SIGKILL if kind == "kill" else signal.SIGSTOP)


@contextmanager
def _progress(enabled: bool, total: int) -> Iterator[Callable[[str], None]]:
    """A rich progress bar on stderr; yields ``advance(description)``."""
    if not enabled:
        yield lambda _desc: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("bench", total=total)
        yield lambda desc: bar.update(task, advance=1, description=desc)


class BenchRunner:
    """Runs one config on an initialised process group; every rank builds one."""

    def __init__(self, config: BenchConfig, placement: Placement, device: torch.device) -> None:
        self.config = config
        self.placement = placement
        self.device = device
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        mesh = build_mesh(placement, device) if config.algo == "hierarchical" else None
        self.coll = collectives(config.algo, mesh)
        self.heartbeat = Heartbeat(self.rank, os.environ.get(HEARTBEAT_DIR_ENV))

    def _guard(self, what: str, fn: Callable[[], object]) -> object:
        try:
            return fn()
        except TierwiseError:
            raise
        except Exception as exc:  # torch.distributed raises RuntimeError subclasses
            raise RankFailure(
                f"rank {self.rank}: {_describe(exc, what, self.config.timeout_s)}"
            ) from None

    def _mode(self, mode: Mode, case: Case, size: int) -> HalfResult:
        cfg = self.config
        with self.heartbeat.during():
            for _ in range(cfg.warmup):
                mode.run()
            lat = time_iters(mode.run, cfg.iters, self.device)
            wrong = check_mode(mode, case, self.rank, self.device) if cfg.check else None
            return summarize(cfg.op, size, lat, wrong, self.device)

    def row(self, size: int, count: int) -> BenchRow:
        """Both modes at one size."""
        cfg = self.config
        case = build_case(cfg, count, self.coll, self.rank, self.world, self.device)
        what = f"{cfg.op} at {size} B"
        out = self._guard(what, lambda: self._mode(case.out_of_place, case, size))
        inp = self._guard(what + " (in place)", lambda: self._mode(case.in_place, case, size))
        assert isinstance(out, HalfResult) and isinstance(inp, HalfResult)
        return BenchRow(
            size_bytes=size,
            count=count,
            type=cfg.dtype,
            redop=cfg.redop if cfg.op in REDUCING_OPS else "none",
            root=cfg.root if cfg.op == "broadcast" else -1,
            out_of_place=out,
            in_place=inp,
        )

    def series(self, size: int, count: int, duration_s: float) -> Series:
        """Out-of-place iterations back to back for ``duration_s``; ranks stop together."""
        cfg = self.config
        case = build_case(cfg, count, self.coll, self.rank, self.world, self.device)
        run = case.out_of_place.run
        probe = torch.tensor(time_iters(run, max(cfg.warmup, 1), self.device), device=self.device)
        dist.all_reduce(probe, dist.ReduceOp.MAX)
        per_check = max(1, min(10_000, int(STOP_CHECK_S / max(float(probe.mean()) * 1e-6, 1e-9))))
        t_s: list[float] = []
        lat: list[float] = []
        start = time.perf_counter()
        stop = torch.zeros(1, dtype=torch.int64, device=self.device)
        with self.heartbeat.during():
            while not stop.item():
                t0 = time.perf_counter() - start
                chunk = time_iters(run, per_check, self.device)
                for dt in chunk:
                    t_s.append(t0)
                    t0 += dt * 1e-6
                lat += chunk
                stop.fill_(int(time.perf_counter() - start >= duration_s))
                dist.all_reduce(stop, dist.ReduceOp.MAX)
        slowest = gather_latencies(lat, self.device).amax(0).tolist()
        return Series.build(size, count, t_s, slowest, cfg.window_s)

    def run(self, progress: bool = False) -> BenchResult:
        """The sweep (and the sustained series with ``duration_s``)."""
        cfg = self.config
        plan = list(cfg.counts(self.world))
        if not plan:
            raise TierwiseError(
                f"sizes: no size from {cfg.min_bytes} to {cfg.max_bytes} B holds one "
                f"{cfg.dtype} element per rank ({self.world} ranks)"
            )
        rows: list[BenchRow] = []
        series = None
        with _progress(progress and self.rank == 0, len(plan) + bool(cfg.duration_s)) as advance:
            for size, count in plan:
                rows.append(self.row(size, count))
                advance(f"{cfg.op} {size} B")
                _fault_hook(self.rank)
            if cfg.duration_s is not None:
                size, count = plan[-1]
                result = self._guard(
                    f"{cfg.op} sustained at {size} B",
                    lambda: self.series(size, count, cfg.duration_s or 0.0),
                )
                assert isinstance(result, Series)
                series = result
                advance("sustained")
        return BenchResult(
            op=cfg.op,
            nranks=self.world,
            nodes=self.placement.nodes,
            gpus_per_node=self.placement.ranks_per_node,
            backend=dist.get_backend(),
            algo=cfg.algo,
            rows=tuple(rows),
            series=series,
        )


def run_bench(config: BenchConfig, env: RankEnv, progress: bool = False) -> BenchResult:
    """Join the job described by ``env``, run ``config`` and leave; every rank returns the
    same `BenchResult` (summaries are gathered on all ranks).

    On failure the process group is left as it is: the caller should exit the process
    (``os._exit``) after reporting, since tearing down gloo next to a dead peer can abort."""
    backend = resolve_backend(config.backend)
    config.check_world(env.world_size)
    device = init_distributed(env, backend, config.timeout_s)
    check_same_config(config, env.rank)
    if config.ranks_per_node is not None:
        placement = Placement.contiguous(env.world_size, config.ranks_per_node)
    else:
        placement = exchange_placement(env.node_rank, device)
    result = BenchRunner(config, placement, device).run(progress)
    shutdown()
    return result
