"""Time to train: wall-clock days, GPU-hours, cost and energy of a whole run, with failures.

A synchronous job on N nodes is interrupted at rate ``lam = N r`` (r: node failures per
node-second, plus rack failures of the racks it spans); the mean time to failure is
``MTTF = 1 / lam``. It checkpoints every ``dt`` seconds of training, stalling ``w`` each time;
each failure costs a restart ``u0`` (detection, relaunch, NCCL initialisation growing with the
job, checkpoint load) and the work since the last durable checkpoint, ``dt/2`` on average (plus
the background write's lag when checkpoints are written asynchronously). The effective
training time ratio (Kokolis et al., HPCA'25, arXiv 2410.21680) is then, to first order,

    ETTR1 = (1 - lam (u0 + lag + dt/2)) / (1 + w/dt)

maximised near Young's interval ``dt = sqrt(2 w MTTF)`` (Young 1974; Daly 2006). ETTR1 reaches
0 once ``lam (u0 + dt/2) >= 1`` (131,072 GPUs at Meta's RSC-1 rate), although such a run still
progresses: a failure during a restart costs less than a restart and no work. With failures a
Poisson process in wall-clock time (restarts fail too), a cycle of ``tau = dt + w`` takes
``E[T] = exp(lam (u0 + lag)) (exp(lam tau) - 1) / lam`` on average (the classic result for
exponential failures with restart; Daly 2006, eq. 11 form), so

    ETTR = lam dt exp(-lam (u0 + lag)) / (exp(lam tau) - 1)

which equals ETTR1 to first order in ``lam``; the run takes ``tokens / (tokens_per_s x
ETTR)``. Correlated rack failures take spares in bulk and waits for repaired nodes are left
out here; `tierwise.perf.train_sim` simulates them (and checks both forms).

The arithmetic is branchless, so python scalars and numpy arrays (the planner's candidates)
both work. Seconds throughout unless a name says otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.reliability import NODE_DAYS
from tierwise.perf.terms.offload import host_GBps
from tierwise.workload.checkpoint import layout_checkpoint_bytes
from tierwise.workload.flops import Array, pos
from tierwise.workload.layout import Layout
from tierwise.workload.memory import GiB

DAY_S = 86_400.0
FIRST_ORDER_GAP = 0.95
"""Say so when the first-order ETTR is this far below the renewal model's."""
MIN_ETTR = 1e-6
"""Below this share of wall-clock time training, a run counts as never finishing."""
HOUR_S = 3_600.0


RUN_KEYS = (
    "time_to_train_days",
    "gpu_hours",
    "cost_usd",
    "energy_MWh",
    "interruptions",
    "mttf_h",
    "checkpoint_interval_min",
    "checkpoint_write_s",
    "ettr",
)
"""The stable JSON keys of a run's price (with more detail beside them in `train_time`)."""


@dataclass(frozen=True)
class Run:
    """A run to price: `tokens` at `tokens_per_s` on `gpus` GPUs, each writing `bytes_per_gpu`
    per checkpoint, every `interval_min` minutes of training (None: Young-Daly's interval)."""

    tokens: float
    tokens_per_s: float
    gpus: int
    bytes_per_gpu: float
    interval_min: float | None = None

    @property
    def work_s(self) -> float:
        """Failure-free training time."""
        return self.tokens / self.tokens_per_s


@dataclass(frozen=True)
class Timeline:
    """One run's failure and checkpoint timeline (what the closed form and the simulation
    share). Rates are events per second of the whole job."""

    work_s: float
    """Failure-free training time: tokens / tokens per second."""
    interval_s: float
    """Training seconds between checkpoints."""
    write_s: float
    """Stall of the step per checkpoint."""
    lag_s: float
    """Seconds after the stall until a checkpoint is durable (asynchronous writes)."""
    restart_s: float
    """Detection + relaunch + NCCL initialisation + checkpoint load."""
    node_rate: float
    """Single-node failures of the job per second."""
    rack_rate: float = 0.0
    """Whole-rack failures of the job's racks per second."""
    rack_nodes: int = 1
    spares: int | None = None
    """Spare nodes; None: a healthy one is always at hand."""
    repair_s: float = DAY_S

    @property
    def rate(self) -> float:
        """Interruptions per second."""
        return self.node_rate + self.rack_rate

    @property
    def ettr(self) -> float:
        """Closed-form expected effective training time ratio."""
        return float(ettr(self.rate, self.restart_s, self.interval_s, self.write_s, self.lag_s))


def _scalar(*values: Any) -> bool:
    return all(isinstance(v, int | float) for v in values)


def _maximum(a: Array, b: Array) -> Array:
    """Elementwise maximum; python floats stay python floats (an estimate loads no numpy)."""
    if _scalar(a, b):
        return max(a, b)
    import numpy as np

    return np.maximum(a, b)


def _minimum(a: Array, b: Array) -> Array:
    """Elementwise minimum, as `_maximum`."""
    if _scalar(a, b):
        return min(a, b)
    import numpy as np

    return np.minimum(a, b)


def _call(name: str, x: Array) -> Array:
    """math.`name`(x) for a python float, numpy's for arrays."""
    if _scalar(x):
        return getattr(math, name)(x)
    import numpy as np

    return getattr(np, name)(x)


def job_nodes(gpus: Array, gpus_per_node: int) -> Array:
    """Nodes a job of `gpus` GPUs occupies (a partly used node still fails)."""
    return -(-gpus // gpus_per_node)


def node_rate_per_s(cluster: ClusterSpec, nodes: Array) -> Array:
    """Single-node failures per second of a job on `nodes` nodes."""
    return nodes * cluster.reliability.node_failures_per_1000_node_days / NODE_DAYS / DAY_S


def rack_rate_per_s(cluster: ClusterSpec, nodes: Array) -> Array:
    """Whole-rack failures per second of the racks a job on `nodes` nodes spans."""
    rel = cluster.reliability
    racks = -(-nodes // rel.rack_nodes(cluster.nodes_per_domain))
    return racks * rel.rack_failures_per_1000_rack_days / NODE_DAYS / DAY_S


def mttf_s(rate_per_s: Array) -> Array:
    """Mean time to failure of a job interrupted `rate_per_s` times a second (finite, if
    astronomically long, without failures)."""
    return 1.0 / _maximum(rate_per_s, MIN_RATE)


def young_daly_interval_s(write_s: Array, mttf: Array) -> Array:
    """Young's optimal checkpoint interval sqrt(2 w MTTF), seconds of training."""
    return (2.0 * write_s * mttf) ** 0.5


def ettr_first_order(
    rate: Array, restart_s: Array, interval_s: Array, write_s: Array, lag_s: Array
) -> Array:
    """Kokolis et al.'s first-order expected ETTR, clipped at 0."""
    useful = pos(1.0 - rate * (restart_s + lag_s + interval_s / 2.0))
    return useful / (1.0 + write_s / interval_s)


def ettr(rate: Array, restart_s: Array, interval_s: Array, write_s: Array, lag_s: Array) -> Array:
    """Expected effective training time ratio of exponential failures with restarts that may
    fail too (the module docstring); ``interval / (interval + write)`` without failures."""
    rate = _maximum(rate, MIN_RATE)
    cycle = _minimum(rate * (interval_s + write_s), MAX_EXPONENT)
    return rate * interval_s * _call("exp", -rate * (restart_s + lag_s)) / _call("expm1", cycle)


MIN_RATE = 1e-300
"""Failures per second standing in for none (the limit without failures stays finite)."""
MAX_EXPONENT = 700.0
"""Largest ``lam tau`` evaluated (exp overflows float64 near 709); the ETTR there is ~0."""


def storage_io_s(cluster: ClusterSpec, bytes_per_gpu: Array, gpus: Array) -> Array:
    """Seconds to move one checkpoint between the job and storage: the slower of each node's
    storage link and the storage system's aggregate bandwidth."""
    rel = cluster.reliability
    per_node = bytes_per_gpu * cluster.gpus_per_node / (rel.node_storage_GBps * 1e9)
    aggregate = bytes_per_gpu * gpus / (rel.storage_GBps * 1e9)
    return _maximum(per_node, aggregate)


def snapshot_s(cluster: ClusterSpec, bytes_per_gpu: Array) -> Array:
    """Seconds to copy one GPU's checkpoint share to host memory over its host link."""
    return bytes_per_gpu / (host_GBps(cluster.gpu) * 1e9)


def nccl_init_s(cluster: ClusterSpec, gpus: Array) -> Array:
    """Communicator initialisation of a job of `gpus` GPUs."""
    rel = cluster.reliability
    return rel.nccl_init_s + rel.nccl_init_s_per_1000_gpus * gpus / 1000.0


def checkpoint_terms(
    cluster: ClusterSpec,
    bytes_per_gpu: Array,
    gpus: Array,
    interval_min: float | None = None,
    work_s: Array | None = None,
) -> dict[str, Array]:
    """Checkpoint and restart seconds of a job: write stall, lag, restart and its parts, the
    interval (Young's optimum when `interval_min` is None, at most the run's `work_s`; an
    asynchronous write cannot start before the last one is on storage, so the interval is at
    least its lag)."""
    rel = cluster.reliability
    io = storage_io_s(cluster, bytes_per_gpu, gpus)
    if rel.async_checkpoint:
        write, lag = snapshot_s(cluster, bytes_per_gpu), io
    else:
        write, lag = io, 0.0
    nodes = job_nodes(gpus, cluster.gpus_per_node)
    rate = node_rate_per_s(cluster, nodes) + rack_rate_per_s(cluster, nodes)
    init = nccl_init_s(cluster, gpus)
    restart = rel.detection_s + rel.relaunch_s + init + io
    if interval_min is None:
        interval = young_daly_interval_s(write, mttf_s(rate))
        if work_s is not None:
            interval = _minimum(interval, work_s)
    else:
        interval = interval_min * 60.0
    return {
        "rate": rate,
        "write_s": write,
        "lag_s": lag,
        "load_s": io,
        "nccl_init_s": init,
        "restart_s": restart,
        "interval_s": _maximum(interval, lag),
    }


def gpu_watts(cluster: ClusterSpec) -> float | None:
    """Watts per GPU: the cluster's power.gpu_w, else the catalog GPU's board power."""
    return cluster.power.gpu_w or cluster.gpu.board_power_w


def spare_shortfall_probability(cluster: ClusterSpec, node_rate: float) -> float | None:
    """Chance that more nodes are in repair than spares at a given moment (nodes out form a
    Poisson count of mean failures x repair time, an M/G/inf queue); None: unlimited spares."""
    rel = cluster.reliability
    if rel.spare_nodes is None:
        return None
    mean = node_rate * rel.repair_h * HOUR_S
    if mean == 0:
        return 0.0
    log_term, cdf = -mean, 0.0
    for k in range(rel.spare_nodes + 1):
        cdf += math.exp(log_term)
        log_term += math.log(mean) - math.log(k + 1)
    return max(0.0, 1.0 - cdf)


def timeline(cluster: ClusterSpec, run: Run) -> Timeline:
    """The run's failure and checkpoint timeline on `cluster`."""
    terms = checkpoint_terms(cluster, run.bytes_per_gpu, run.gpus, run.interval_min, run.work_s)
    nodes = job_nodes(run.gpus, cluster.gpus_per_node)
    rel = cluster.reliability
    return Timeline(
        work_s=run.work_s,
        interval_s=float(terms["interval_s"]),
        write_s=float(terms["write_s"]),
        lag_s=float(terms["lag_s"]),
        restart_s=float(terms["restart_s"]),
        node_rate=float(node_rate_per_s(cluster, nodes)),
        rack_rate=float(rack_rate_per_s(cluster, nodes)),
        rack_nodes=rel.rack_nodes(cluster.nodes_per_domain),
        spares=rel.spare_nodes,
        repair_s=rel.repair_h * HOUR_S,
    )


def train_time(cluster: ClusterSpec, run: Run) -> dict[str, Any]:
    """JSON-ready expected time, GPU-hours, cost, energy, interruptions and checkpoint plan of
    `run` (see the module docstring); `time_to_train_notes` says what was assumed or could not
    be priced."""
    tl = timeline(cluster, run)
    gpus, interval_min = run.gpus, run.interval_min
    costs = (tl.rate, tl.restart_s, tl.interval_s, tl.write_s, tl.lag_s)
    share, first_order = tl.ettr, float(ettr_first_order(*costs))
    notes = _notes(tl, share, first_order, interval_min)
    price = dict.fromkeys(("time_to_train_days", "gpu_hours", "cost_usd", "energy_MWh"))
    price["interruptions"] = None
    if share > MIN_ETTR:
        wall_s = tl.work_s / share
        price = _run_totals(cluster, gpus, wall_s) | {"interruptions": tl.rate * wall_s}
        if price["energy_MWh"] is None:
            notes.append(
                f"no energy: the catalog has no board power for {cluster.gpu.key}; set the "
                "cluster's power.gpu_w"
            )
    notes.extend(assumed_fields(cluster))
    rel = cluster.reliability
    return {
        "train_tokens": run.tokens,
        **price,
        "mttf_h": 1 / tl.rate / HOUR_S if tl.rate > 0 else None,
        "checkpoint_interval_min": tl.interval_s / 60.0,
        "checkpoint_interval": "given" if interval_min is not None else "young-daly",
        "checkpoint_write_s": tl.write_s,
        "checkpoint_persist_s": tl.lag_s,
        "checkpoint_gb_per_gpu": run.bytes_per_gpu / 1e9,
        "restart_s": tl.restart_s,
        "restart": {
            "detection_s": rel.detection_s,
            "relaunch_s": rel.relaunch_s,
            "nccl_init_s": float(nccl_init_s(cluster, gpus)),
            "checkpoint_load_s": float(storage_io_s(cluster, run.bytes_per_gpu, gpus)),
        },
        "ettr": share,
        "ettr_first_order": first_order,
        "job_nodes": int(job_nodes(gpus, cluster.gpus_per_node)),
        "node_failures_per_1000_node_days": rel.node_failures_per_1000_node_days,
        "price_per_gpu_hour": cluster.price_per_gpu_hour,
        "spare_shortfall_probability": spare_shortfall_probability(cluster, tl.node_rate),
        "time_to_train_notes": notes,
    }


def _run_totals(cluster: ClusterSpec, gpus: int, wall_s: float) -> dict[str, float | None]:
    """Days, GPU-hours, dollars and MWh of a run of `wall_s` wall-clock seconds."""
    gpu_hours = gpus * wall_s / HOUR_S
    watts, energy = gpu_watts(cluster), None
    if watts is not None:
        nodes = job_nodes(gpus, cluster.gpus_per_node)
        node_w = cluster.power.node_w(watts, cluster.gpus_per_node)
        energy = nodes * node_w * cluster.power.pue * wall_s / HOUR_S / 1e6
    return {
        "time_to_train_days": wall_s / DAY_S,
        "gpu_hours": gpu_hours,
        "cost_usd": gpu_hours * cluster.price_per_gpu_hour,
        "energy_MWh": energy,
    }


def _notes(tl: Timeline, share: float, first_order: float, interval_min: float | None) -> list[str]:
    """What a reader of the numbers should know: an interval raised to the write's lag, the
    two ETTR forms parting, a run that never finishes."""
    notes = []
    if interval_min is not None and tl.interval_s > interval_min * 60.0:
        notes.append(
            f"--checkpoint-interval {interval_min:g} min is shorter than one asynchronous write "
            f"to storage ({tl.interval_s / 60:.1f} min): checkpoints start when the last one "
            "is done"
        )
    pace = (
        f"an interruption every {1 / max(tl.rate, MIN_RATE) / 60:.1f} min against "
        f"{tl.restart_s / 60:.1f}-min restarts"
    )
    if first_order < FIRST_ORDER_GAP * share:
        notes.append(
            f"{pace}: many strike a restart, and the first-order ETTR (Kokolis et al.) falls "
            f"to {first_order:.1%} against {share:.1%} here; --simulate checks it"
        )
    if share <= MIN_ETTR:
        notes.append(
            f"the run never finishes: {pace} plus the work lost since the last checkpoint; "
            "use fewer GPUs, faster restarts or a lower failure rate"
        )
    return notes


def estimate_run(est: dict[str, Any], tokens: float, interval_min: float | None = None) -> Run:
    """The run of `tokens` with an `estimate` result's layout: its tokens/s, GPUs and the
    checkpoint share one GPU writes (from its layout and optimizer memory)."""
    layout = Layout(**est["layout"])
    saved = layout_checkpoint_bytes(layout, est["memory"]["optimizer_gib"] * GiB)
    return Run(tokens, est["tokens_per_s"], est["gpus"], saved, interval_min)


def estimate_train_time(
    cluster: ClusterSpec, est: dict[str, Any], tokens: float, interval_min: float | None = None
) -> dict[str, Any]:
    """`train_time` of an `estimate` result (its tokens/s, GPUs and checkpoint share)."""
    return train_time(cluster, estimate_run(est, tokens, interval_min))


PRICED_FIELDS = {
    "reliability": (
        "node_failures_per_1000_node_days",
        "detection_s",
        "relaunch_s",
        "nccl_init_s",
        "nccl_init_s_per_1000_gpus",
        "node_storage_GBps",
        "storage_GBps",
    ),
    "power": ("node_overhead_w", "pue"),
}
"""Cluster fields whose tierwise default prices a run when the spec leaves them out."""


def assumed_fields(cluster: ClusterSpec) -> list[str]:
    """One note naming the fields the run's price takes from tierwise's defaults, if any."""
    unset = [
        f"{block}.{name}"
        for block, names in PRICED_FIELDS.items()
        for name in names
        if name not in getattr(cluster, block).model_fields_set
    ]
    if "price_per_gpu_hour" not in cluster.model_fields_set:
        unset.append("price_per_gpu_hour")
    if not unset:
        return []
    return [
        f"assumed: tierwise's defaults for {', '.join(unset)} (set them in the cluster spec; "
        "docs/reference/cluster.md gives each default and its source)"
    ]


@dataclass(frozen=True)
class TrainRequest:
    """What a command was asked to price beyond the step: `tokens` to train (None: nothing),
    the checkpoint interval in minutes (None: Young-Daly), and the simulation's trials and
    seed when `simulate`."""

    tokens: float | None = None
    interval_min: float | None = None
    simulate: bool = False
    trials: int = 200
    seed: int = 0
    node_failure_rate: float | None = None
    """Replaces the cluster's reliability.node_failures_per_1000_node_days (None: keep)."""

    def on(self, cluster: ClusterSpec) -> ClusterSpec:
        """`cluster` with the request's node failure rate."""
        if self.node_failure_rate is None:
            return cluster
        rel = cluster.reliability
        given = rel.model_fields_set  # keeps telling the defaults from the given
        fields = {
            **rel.model_dump(include=given),
            "node_failures_per_1000_node_days": self.node_failure_rate,
        }
        reliability = type(rel)(**fields)
        return cluster.model_copy(update={"reliability": reliability})


def run_train_time(
    cluster: ClusterSpec, request: TrainRequest, est: dict[str, Any]
) -> dict[str, Any]:
    """The closed-form time to train of an `estimate` result (``{}`` when the request has no
    tokens), with the simulation of the same timeline under ``simulation`` when asked."""
    if request.tokens is None:
        return {}
    run = estimate_run(est, request.tokens, request.interval_min)
    result = train_time(cluster, run)
    if request.simulate:
        from tierwise.perf.train_sim import simulate

        result["simulation"] = simulate(timeline(cluster, run), request.trials, request.seed)
    return result
