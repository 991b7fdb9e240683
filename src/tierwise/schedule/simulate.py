"""Event-driven simulation of a job trace on a cluster under one placement policy.

Events: arrivals (from the trace, in time order), and from a heapq completions and wake-ups
of jobs waiting for a better placement. After each batch of same-time events, one scheduling
pass walks the queue in (priority desc, arrival) order and starts every job the policy can
place (list scheduling with backfill, no reservations except `topo-frag`'s whole-leaf one). A
job's ideal work progresses at 1 / slowdown; a job inside one leaf is priced once, at its
start; when jobs that cross the spine start or end, every job sharing their leaves' uplinks
gets its slowdown re-evaluated and its completion re-scheduled.

`max_wait_s`: a job whose best placement now uses more leaves than its minimum
(ceil(nodes / nodes_per_leaf)) waits up to this long after arrival for a better one, then
starts on what it can get.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from tierwise.errors import SpecError
from tierwise.schedule.jobs import Job, check_fits
from tierwise.schedule.policies import Policy
from tierwise.schedule.slowdown import Signature, SlowdownModel, leaf_share, share_bucket
from tierwise.schedule.state import ClusterState

WAKE, FINISH = 1, 2
"""Kinds of heap events (arrivals come from the trace in time order)."""


class JobRecord(NamedTuple):
    """What happened to one job: times in s, its nodes, leaves, slowdown = run / ideal (a
    named tuple: a simulation makes one per job)."""

    id: str
    arrival_s: float
    start_s: float
    end_s: float
    duration_s: float
    gpus: int
    nodes: tuple[int, ...]
    leaves: int

    @property
    def jct_s(self) -> float:
        """Job completion time: queueing + run, s."""
        return self.end_s - self.arrival_s

    @property
    def slowdown(self) -> float:
        """Run time over run time at ideal placement."""
        return (self.end_s - self.start_s) / self.duration_s


@dataclass
class SimResult:
    """Per-job records and the summary metrics (`metrics()`), for one policy."""

    policy: str
    gpus_per_node: int
    usable_gpus: int
    records: list[JobRecord]
    busy_node_s: float
    fragmentation: float

    def metrics(self) -> dict[str, float | int | str]:
        """Summary with unit-suffixed keys."""
        r = self.records
        jct = np.array([x.jct_s for x in r])
        first = min(x.arrival_s for x in r)
        makespan = max(x.end_s for x in r) - first
        return {
            "policy": self.policy,
            "jobs": len(r),
            "mean_jct_s": float(jct.mean()),
            "p95_jct_s": float(np.percentile(jct, 95)),
            "mean_wait_s": float(np.mean([x.start_s - x.arrival_s for x in r])),
            "makespan_s": float(makespan),
            "utilization": self.busy_node_s * self.gpus_per_node / (self.usable_gpus * makespan)
            if makespan > 0
            else 0.0,
            "mean_slowdown": float(np.mean([x.slowdown for x in r])),
            "max_slowdown": float(max(x.slowdown for x in r)),
            "mean_leaves_per_job": float(np.mean([x.leaves for x in r])),
            "fragmentation": self.fragmentation,
        }


@dataclass(slots=True)
class _Running:
    job: int
    nodes: np.ndarray
    per_leaf: dict[int, int]  # node count in each leaf used, by ascending leaf
    start_s: float
    remaining_s: float  # ideal seconds of work left
    since_s: float
    signature: Signature
    slowdown: float = 0.0
    bucket: float = 0.0
    version: int = 0


@dataclass
class _Sim:
    state: ClusterState
    jobs: list[Job]
    policy: Policy
    model: SlowdownModel
    max_wait_s: float
    events: list[tuple[float, int, int, int]] = field(default_factory=list)
    queue: list[tuple[int, float, int]] = field(default_factory=list)
    running: dict[int, _Running] = field(default_factory=dict)
    records: dict[int, JobRecord] = field(default_factory=dict)
    crossing: list[int] = field(init=False)  # nodes per leaf of running multi-leaf jobs
    on_leaf: list[set[int]] = field(init=False)  # multi-leaf running jobs per leaf
    waking: set[int] = field(default_factory=set)
    queued: Counter[int] = field(default_factory=Counter)  # queued jobs by nodes wanted
    now: float = 0.0
    busy_node_s: float = 0.0
    frag_s: float = 0.0

    def __post_init__(self) -> None:
        self.crossing = [0] * self.state.leaves
        self.on_leaf = [set() for _ in range(self.state.leaves)]
        gpn = self.state.cluster.gpus_per_node
        self.need = [j.cls.nodes(gpn) for j in self.jobs]
        npl = self.state.nodes_per_leaf
        self.min_leaves = [-(-n // npl) for n in self.need]
        self.full_share = self.model.full_share

    def push(self, t: float, kind: int, job: int, version: int = 0) -> None:
        heapq.heappush(self.events, (t, kind, job, version))

    def run(self) -> None:
        """Arrivals in time order (ties by index) merged with the heap of wake-ups and
        completions; all events of one time are one batch, then one scheduling pass."""
        jobs, events, running, queue, queued, need = (
            self.jobs, self.events, self.running, self.queue, self.queued, self.need
        )  # fmt: skip
        state = self.state
        arrivals = sorted(range(len(jobs)), key=lambda i: jobs[i].arrival_s)
        times = [jobs[i].arrival_s for i in arrivals] + [math.inf]
        a = 0
        while a < len(arrivals) or events:
            t = min(times[a], events[0][0]) if events else times[a]
            self.advance(t)
            while times[a] == t:
                i = arrivals[a]
                bisect.insort(queue, (-jobs[i].priority, t, i))
                queued[need[i]] += 1
                a += 1
            changed: set[int] = set()
            while events and events[0][0] == t:
                _, kind, i, version = heapq.heappop(events)
                if kind == FINISH and i in running and running[i].version == version:
                    changed |= self.finish(i)
            if queued and min(queued) <= state.free_total:  # else no policy can start one
                changed |= self.schedule()
            if changed:
                self.reprice(changed)

    def advance(self, t: float) -> None:
        """Move the clock to `t`, adding busy node-seconds and fragmentation-seconds."""
        dt = t - self.now
        used = self.state.usable - self.state.free_total
        self.busy_node_s += used * dt
        self.frag_s += self.state.fragmentation() * dt
        self.now = t

    def schedule(self) -> set[int]:
        """One pass over the queue; returns the jobs whose uplink share may have changed.

        Every policy refuses a job larger than the free nodes, and one that could not place
        `n` nodes places no larger job in the same pass (nodes only get taken): jobs above
        `bound` are passed over without asking the policy. Called with a job queued that
        fits the free nodes."""
        changed: set[int] = set()
        npl, state, need = self.state.nodes_per_leaf, self.state, self.need
        reserve = 0
        if self.policy.reserves and max(self.queued) >= npl:
            big = next(need[i] for _, _, i in self.queue if need[i] >= npl)
            reserve = big // npl
        smallest_failed = math.inf
        bound = state.free_total
        started: list[int] = []
        for k, (_, _, i) in enumerate(self.queue):
            n = need[i]
            if n > bound:
                continue
            nodes = self.policy.place(state, n, 0 if n >= npl else reserve)
            if nodes is None:
                smallest_failed = n
            elif not (self.max_wait_s > 0 and self.should_wait(i, nodes)):
                changed |= self.start(i, nodes)
                started.append(k)
                self.queued[n] -= 1
                if not self.queued[n]:
                    del self.queued[n]
            bound = min(state.free_total, smallest_failed - 1)
            if not self.queued or min(self.queued) > bound:
                break
        for k in reversed(started):
            del self.queue[k]
        return changed

    def should_wait(self, i: int, nodes: np.ndarray) -> bool:
        """Whether job i waits for a placement in fewer leaves than `nodes` span."""
        leaves = len(np.unique(self.state.leaf_of[nodes]))
        deadline = self.jobs[i].arrival_s + self.max_wait_s
        if leaves <= self.min_leaves[i] or self.now >= deadline:
            return False
        if i not in self.waking:
            self.waking.add(i)
            self.push(deadline, WAKE, i)
        return True

    def start(self, i: int, nodes: np.ndarray) -> set[int]:
        """Start job i on `nodes`; returns the jobs to re-price. A job inside one leaf uses
        no uplink: its slowdown is priced once, here."""
        per_leaf = self.state.allocate(i, nodes)
        r = self.running[i] = _Running(
            i,
            nodes,
            per_leaf,
            self.now,
            self.jobs[i].duration_s,
            self.now,
            self.model.signature_of(per_leaf),
        )
        if len(per_leaf) > 1:
            return self.cross(i, 1) | {i}
        r.slowdown = self.model.slowdown(self.jobs[i].cls, nodes, self.full_share, r.signature)
        r.version = 1
        self.push(self.now + r.remaining_s * r.slowdown, FINISH, i, r.version)
        return set()

    def finish(self, i: int) -> set[int]:
        r = self.running.pop(i)
        self.state.release(i, r.nodes, r.per_leaf)
        j = self.jobs[i]
        self.records[i] = JobRecord(
            j.id,
            j.arrival_s,
            r.start_s,
            self.now,
            j.duration_s,
            j.cls.gpus,
            tuple(r.nodes.tolist()),
            len(r.per_leaf),
        )
        return self.cross(i, -1, r) if len(r.per_leaf) > 1 else set()

    def cross(self, i: int, sign: int, r: _Running | None = None) -> set[int]:
        """Add (+1) or remove (-1) job i's nodes from its leaves' uplink demand."""
        r = r or self.running[i]
        touched: set[int] = set()
        for leaf, count in r.per_leaf.items():
            self.crossing[leaf] += sign * count
            (self.on_leaf[leaf].add if sign > 0 else self.on_leaf[leaf].discard)(i)
            touched |= self.on_leaf[leaf]
        return touched

    def reprice(self, jobs: set[int]) -> None:
        """Re-evaluate slowdowns of `jobs`; re-schedule completions that moved."""
        over = self.state.cluster.topology.oversubscription
        npl = self.state.nodes_per_leaf
        for i in jobs:
            r = self.running.get(i)
            if r is None:
                continue
            busiest = max(self.crossing[leaf] for leaf in r.per_leaf)
            bucket = share_bucket(leaf_share(npl, over, busiest))
            if bucket == r.bucket:
                continue
            r.bucket = bucket
            s = self.model.slowdown(self.jobs[i].cls, r.nodes, bucket, r.signature)
            if s == r.slowdown:
                continue
            if r.slowdown:
                r.remaining_s -= (self.now - r.since_s) / r.slowdown
            r.since_s, r.slowdown, r.version = self.now, s, r.version + 1
            self.push(self.now + max(r.remaining_s, 0.0) * s, FINISH, i, r.version)


def simulate(
    state: ClusterState,
    jobs: list[Job],
    policy: Policy,
    model: SlowdownModel,
    max_wait_s: float = 0.0,
) -> SimResult:
    """Run `jobs` to completion on `state` (left as found: all nodes free again)."""
    check_fits(jobs, state.cluster, state.usable)
    sim = _Sim(state, jobs, policy, model, max_wait_s)
    sim.run()
    return SimResult(
        policy=policy.name,
        gpus_per_node=state.cluster.gpus_per_node,
        usable_gpus=state.usable * state.cluster.gpus_per_node,
        records=[sim.records[i] for i in range(len(jobs))],
        busy_node_s=sim.busy_node_s,
        fragmentation=sim.frag_s / sim.now if sim.now > 0 else 0.0,
    )


@dataclass(frozen=True)
class Priced:
    """A job on its nodes while all jobs of a set run at once: uplink share (None inside one
    leaf, where no uplink is used) and slowdown."""

    job: Job
    nodes: np.ndarray
    leaves: int
    uplink_share: float | None
    slowdown: float


def place_all(state: ClusterState, jobs: list[Job], policy: Policy) -> list[np.ndarray]:
    """Nodes each job gets when they start in order and none ends (a burst of submissions
    to an idle Slurm); a job that no longer fits is a user error naming it."""
    check_fits(jobs, state.cluster, state.usable)
    gpn, npl = state.cluster.gpus_per_node, state.nodes_per_leaf
    out = []
    for i, j in enumerate(jobs):
        n = j.cls.nodes(gpn)
        later = [k.cls.nodes(gpn) for k in jobs[i + 1 :] if k.cls.nodes(gpn) >= npl]
        nodes = policy.place(state, n, later[0] // npl if later and n < npl else 0)
        if nodes is None:
            raise SpecError(
                f"job {j.id!r}: {n} nodes do not fit on the {state.free_total} free "
                f"nodes left by the jobs before it ({policy.name})"
            )
        state.allocate(i, nodes)
        out.append(nodes)
    for i, nodes in enumerate(out):
        state.release(i, nodes)
    return out


def price(
    state: ClusterState, jobs: list[Job], allocations: list[np.ndarray], model: SlowdownModel
) -> list[Priced]:
    """Slowdown of each job on its allocation with all of them running at once."""
    crossing = np.zeros(state.leaves, dtype=np.int64)
    leaves = [np.unique(state.leaf_of[a], return_counts=True) for a in allocations]
    for ids, counts in leaves:
        if len(ids) > 1:
            crossing[ids] += counts
    over = state.cluster.topology.oversubscription
    out = []
    for j, nodes, (ids, _) in zip(jobs, allocations, leaves, strict=True):
        share = leaf_share(state.nodes_per_leaf, over, int(crossing[ids].max()))
        out.append(
            Priced(
                j,
                nodes,
                len(ids),
                share if len(ids) > 1 else None,
                model.slowdown(j.cls, nodes, share),
            )
        )
    return out
