"""`tierwise lab run`: bring a lab up, run flat and hierarchical collectives in it, compare them
with the collective model calibrated by the same run's probe, and take the lab down.

Ranks are started by the runtime's launcher (`tierwise.runtime.launch.launch`) through
``ip netns exec <node>``, K per namespace, gloo bound to the namespace's veth, the master on
node 0. The launcher stops every rank when one fails; the `Fabric` context removes the lab.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierwise.errors import TierwiseError
from tierwise.hardware.cluster import ClusterSpec, dump_cluster
from tierwise.lab import netns
from tierwise.lab.cluster import check_buffers_fit, lab_cluster
from tierwise.lab.fabric import Fabric, FabricConfig
from tierwise.lab.predict import LAB_OPS, predict_lab, rank_nodes
from tierwise.lab.probe import ProbeResult, TierFit
from tierwise.lab.worker import NODE_ENV, TASK_ENV, Task
from tierwise.perf.estimate import estimate
from tierwise.perf.step import Flags
from tierwise.runtime.launch import RankSpec, launch

#: Rendezvous port on node 0 (a fresh namespace has every port free).
MASTER_PORT = 29500
#: Most ranks per namespace (the machine's cores are shared by every rank).
MAX_RANKS_PER_NODE = 8


BUFFERS_PER_RANK = 3
"""Buffers of the largest size each bench rank holds: send, receive and the expected result
(`runtime.bench.build_case`)."""


@dataclass(frozen=True)
class LabRun:
    """One `tierwise lab run`: the fabric, K ranks per node, the op, sizes and placement."""

    fabric: FabricConfig
    ranks_per_node: int
    op: str
    sizes: tuple[int, ...]
    placement: str = "aware"
    warmup: int = 1
    iters: int = 3
    timeout_s: float = 300.0
    step: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.op not in LAB_OPS:
            raise TierwiseError(f"--op: {self.op!r} is not one of {', '.join(LAB_OPS)}")
        if not 1 <= self.ranks_per_node <= MAX_RANKS_PER_NODE:
            raise TierwiseError(
                f"--ranks-per-node: {self.ranks_per_node} must be between 1 and "
                f"{MAX_RANKS_PER_NODE}"
            )
        if self.fabric.nodes * self.ranks_per_node < 2:
            raise TierwiseError("--nodes x --ranks-per-node: need at least 2 ranks")
        if not self.sizes:
            raise TierwiseError("--sizes: give at least one size")
        if self.warmup < 0 or self.iters < 1:
            raise TierwiseError(
                f"need --warmup >= 0 and --iters >= 1, got {self.warmup}, {self.iters}"
            )
        rank_nodes(self.fabric.nodes, self.ranks_per_node, self.placement)
        check_buffers_fit(max(self.sizes), self.world, BUFFERS_PER_RANK, "--sizes")

    @property
    def world(self) -> int:
        """Ranks in the job."""
        return self.fabric.nodes * self.ranks_per_node


@dataclass(frozen=True)
class LabReport:
    """Measured and predicted rows per algorithm, the probe and the lab's cluster spec."""

    run: LabRun
    node_of: list[int]
    probe: ProbeResult
    cluster: ClusterSpec
    measured: dict[str, list[dict[str, Any]]]
    predicted: dict[str, list[dict[str, float]]]
    step: dict[str, Any] | None = None

    def ratio(self, rows: dict[str, list[dict[str, Any]]]) -> float:
        """flat time / hierarchical time at the largest size."""
        return rows["flat"][-1]["time_us"] / rows["hierarchical"][-1]["time_us"]

    @property
    def measured_ratio(self) -> float:
        """Measured flat / hierarchical time at the largest size."""
        return self.ratio(self.measured)

    @property
    def predicted_ratio(self) -> float:
        """Predicted flat / hierarchical time at the largest size."""
        return self.ratio(self.predicted)

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` object."""
        f = self.run.fabric
        return {
            "op": self.run.op,
            "nodes": f.nodes,
            "ranks_per_node": self.run.ranks_per_node,
            "nranks": self.run.world,
            "inter_rate_Gbps": f.rate_bit / 1e9,
            "oversubscription": f.oversubscription,
            "qdisc": f.qdisc,
            "placement": self.run.placement,
            "node_of": self.node_of,
            "measured_ratio": self.measured_ratio,
            "predicted_ratio": self.predicted_ratio,
            "flat": _merge(self.measured["flat"], self.predicted["flat"]),
            "hierarchical": _merge(self.measured["hierarchical"], self.predicted["hierarchical"]),
            "probe": self.probe.as_dict(),
            "cluster": dump_cluster(self.cluster),
            "step": self.step,
        }


def _merge(measured: list[dict[str, Any]], predicted: list[dict[str, float]]) -> list[dict]:
    keys = ("time_us", "algbw_GBps", "busbw_GBps")
    return [
        {
            "size_bytes": m["size_bytes"],
            "measured": {k: m[k] for k in (*keys, "p50_us", "max_us")},
            "predicted": {k: p[k] for k in keys},
        }
        for m, p in zip(measured, predicted, strict=True)
    ]


def _probe_from_dict(data: dict[str, Any]) -> ProbeResult:
    def tier(d: dict[str, Any] | None) -> TierFit | None:
        if d is None:
            return None
        return TierFit(
            **{**d, "size_bytes": tuple(d["size_bytes"]), "time_us": tuple(d["time_us"])}
        )

    return ProbeResult(
        intra=tier(data["intra"]), leaf=tier(data["leaf"]), matmul_tflops=data["matmul_tflops"]
    )


def run_lab(spec: LabRun, log_dir: Path | None = None) -> LabReport:
    """Run ``spec`` in a fresh lab (removed afterwards, whatever happens)."""
    netns.require_lab()
    f = spec.fabric
    nodes_of = rank_nodes(f.nodes, spec.ranks_per_node, spec.placement)
    work = Path(tempfile.mkdtemp(prefix="tierwise-lab-"))
    task = Task(
        op=spec.op,
        sizes=list(spec.sizes),
        ranks_per_node=spec.ranks_per_node,
        rate_bit=f.rate_bit,
        out=str(work / "result.json"),
        warmup=spec.warmup,
        iters=spec.iters,
        timeout_s=spec.timeout_s,
        step=spec.step,
    )
    (work / "task.json").write_text(task.to_json())

    def where(rank: RankSpec) -> int:
        return nodes_of[rank.rank]

    with Fabric(f):
        result = launch(
            [sys.executable, "-m", "tierwise.lab.worker"],
            spec.world,
            ranks_per_node=spec.ranks_per_node,
            master_addr=f.node_addr(nodes_of[0]),
            master_port=MASTER_PORT,
            env={TASK_ENV: str(work / "task.json"), "OMP_NUM_THREADS": "1"},
            env_for=lambda r: {"GLOO_SOCKET_IFNAME": f.node_dev(where(r)), NODE_ENV: str(where(r))},
            prefix=lambda r: netns.exec_prefix(f.node_ns(where(r))),
            deadline_s=spec.timeout_s,
            log_dir=log_dir or work / "logs",
        )
        result.raise_for_failure()
    data = json.loads((work / "result.json").read_text())
    probe = _probe_from_dict(data["probe"])
    cluster = lab_cluster(f, spec.ranks_per_node, probe)
    sizes = [r["size_bytes"] for r in data["rows"]["flat"]]
    predicted = predict_lab(cluster, spec.op, data["node_of"], sizes)
    step = data.get("step")
    if step is not None:
        step = {**step, **estimate_step(cluster, step)}
    return LabReport(spec, data["node_of"], probe, cluster, data["rows"], predicted, step)


def estimate_step(cluster: ClusterSpec, measured: dict[str, Any]) -> dict[str, float]:
    """`tierwise estimate` of the toy step on the lab's cluster spec, next to the measurement.

    The toy runs fp32 with plain SGD and one gradient all-reduce after backward (not
    overlapped); the estimate counts 16-bit activations and Adam, so expect it to under-count
    communication bytes by about 2x."""
    from tierwise.lab.step import StepConfig, layout, model_spec, step_vs_estimate

    cfg = StepConfig(**measured["config"])
    flags = Flags(overlap_grad_reduce=False, overlap_param_gather=False)
    est = estimate(model_spec(cfg), cluster, layout(cfg, measured["tp"], measured["dp"]), flags)
    return step_vs_estimate(measured["step_time_s"], est["step_time_s"])
