"""Event-driven simulation of a job trace on a cluster under one placement policy.

Events (a heapq): arrivals, completions, and wake-ups of jobs waiting for a better placement.
After each batch of same-time events, one scheduling pass walks the queue in (priority desc,
arrival) order and starts every job the policy can place (list scheduling with backfill, no
reservations except `topo-frag`'s whole-leaf one). A job's ideal work progresses at
1 / slowdown; when jobs that cross the spine start or end, every job sharing their leaves'
uplinks gets its slowdown re-evaluated and its completion re-scheduled.

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

import numpy as np

from tierwise.errors import SpecError
from tierwise.schedule.jobs import Job, check_fits
from tierwise.schedule.policies import Policy
from tierwise.schedule.slowdown import Signature, SlowdownModel, leaf_share, share_bucket
from tierwise.schedule.state import ClusterState

ARRIVE, WAKE, FINISH = 0, 1, 2
"""Event kinds; at equal times arrivals are handled first."""


@dataclass(frozen=True)
class JobRecord:
    """What happened to one job: times in s, its nodes, leaves, slowdown = run / ideal."""

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


@dataclass
class _Running:
    job: int
    nodes: np.ndarray
    leaf_list: list[int]
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
        for i, j in enumerate(self.jobs):
            self.push(j.arrival_s, ARRIVE, i)

    def push(self, t: float, kind: int, job: int, version: int = 0) -> None:
        heapq.heappush(self.events, (t, kind, job, version))

    def run(self) -> None:
        while self.events:
            t = self.events[0][0]
            self.advance(t)
            changed: set[int] = set()
            while self.events and self.events[0][0] == t:
                _, kind, i, version = heapq.heappop(self.events)
                if kind == ARRIVE:
                    j = self.jobs[i]
                    bisect.insort(self.queue, (-j.priority, j.arrival_s, i))
                elif kind == FINISH and i in self.running and self.running[i].version == version:
                    changed |= self.finish(i)
            changed |= self.schedule()
            self.reprice(changed)

    def advance(self, t: float) -> None:
        dt = t - self.now
        used = self.state.usable - self.state.free_total
        self.busy_node_s += used * dt
        self.frag_s += self.state.fragmentation() * dt
        self.now = t

    def schedule(self) -> set[int]:
        """One pass over the queue; returns the jobs whose uplink share may have changed."""
        changed: set[int] = set()
        npl, state = self.state.nodes_per_leaf, self.state
        reserve = 0
        if self.policy.reserves:
            big = next((self.need[i] for _, _, i in self.queue if self.need[i] >= npl), 0)
            reserve = big // npl
        smallest_failed = math.inf
        kept: list[tuple[int, float, int]] = []
        for k, entry in enumerate(self.queue):
            if state.free_total == 0 or smallest_failed <= 1:  # no later job can start
                kept += self.queue[k:]
                break
            i = entry[2]
            n = self.need[i]
            nodes = None
            if n < smallest_failed:
                nodes = self.policy.place(state, n, 0 if n >= npl else reserve)
                if nodes is None:
                    smallest_failed = n
                elif self.should_wait(i, nodes):
                    nodes = None
            if nodes is None:
                kept.append(entry)
            else:
                changed |= self.start(i, nodes)
        self.queue = kept
        return changed

    def should_wait(self, i: int, nodes: np.ndarray) -> bool:
        if self.max_wait_s <= 0:
            return False
        leaves = len(np.unique(self.state.leaf_of[nodes]))
        deadline = self.jobs[i].arrival_s + self.max_wait_s
        if leaves <= self.min_leaves[i] or self.now >= deadline:
            return False
        if i not in self.waking:
            self.waking.add(i)
            self.push(deadline, WAKE, i)
        return True

    def start(self, i: int, nodes: np.ndarray) -> set[int]:
        self.state.allocate(i, nodes)
        leaves = sorted(set(self.state.leaf_of[nodes].tolist()))
        self.running[i] = _Running(
            i,
            nodes,
            leaves,
            self.now,
            self.jobs[i].duration_s,
            self.now,
            self.model.signature(nodes),
        )
        if len(leaves) > 1:
            return self.cross(i, 1) | {i}
        return {i}

    def finish(self, i: int) -> set[int]:
        r = self.running.pop(i)
        self.state.release(i, r.nodes)
        j = self.jobs[i]
        self.records[i] = JobRecord(
            j.id,
            j.arrival_s,
            r.start_s,
            self.now,
            j.duration_s,
            j.cls.gpus,
            tuple(r.nodes.tolist()),
            len(r.leaf_list),
        )
        return self.cross(i, -1, r) if len(r.leaf_list) > 1 else set()

    def cross(self, i: int, sign: int, r: _Running | None = None) -> set[int]:
        """Add (+1) or remove (-1) job i's nodes from its leaves' uplink demand."""
        r = r or self.running[i]
        touched: set[int] = set()
        for leaf, count in sorted(Counter(self.state.leaf_of[r.nodes].tolist()).items()):
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
            busiest = max(self.crossing[leaf] for leaf in r.leaf_list)
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
