"""Jobs: what a job asks for, a CSV trace format, and a synthetic trace generator.

CSV trace (header required; one job per line; `#` lines are comments)::

    id,arrival_s,duration_s,model,tp,pp,dp,compute_s[,priority][,gpus]

- `duration_s`: run time at ideal placement (compact, alone on the fabric), seconds.
- `model`: a model preset name or model file (`tierwise.workload`), or a bare parameter count
  (`7e9`, `70B`); a named model's layout is checked against it (tp divides the heads...).
- `tp`, `pp`, `dp`: the layout; the job wants tp*pp*dp GPUs (`gpus`, if given, must match).
- `compute_s`: compute time of one training step per GPU at ideal placement, seconds.
- `priority`: higher starts first (default 0).

Jobs get whole nodes: ceil(gpus / gpus_per_node).

Synthetic traces (`synthetic()`), documented in docs/schedule.md: sizes in nodes from
`SIZE_MIX`, TP degree from `TP_MIX`, model by size from `MODEL_BY_NODES`, log-normal durations
(`DURATION_MEDIAN_S`, `DURATION_SIGMA`, clipped to `DURATION_RANGE_S`), Poisson arrivals at
offered load `load` of the cluster's node-seconds, and a step compute time from the model's
6*params*tokens FLOPs at `SYNTHETIC_MFU` of the GPU's bf16 peak.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from tierwise.errors import ParseError, SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.textio import ascii_int, read_text
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model
from tierwise.workload.params import param_counts
from tierwise.workload.spec import ModelSpec

#: Largest time (s) a trace may give: about 32 years.
MAX_SECONDS = 1e9
#: Largest tp/pp/dp/gpus/|priority| a trace may give (more GPUs than any cluster has).
MAX_COUNT = 10**9
#: Largest literal parameter count (1e15; the largest models have ~2e12).
MAX_PARAMS = 1e15
REQUIRED = ("id", "arrival_s", "duration_s", "model", "tp", "pp", "dp", "compute_s")
OPTIONAL = ("priority", "gpus")

SIZE_MIX = {1: 0.30, 2: 0.20, 4: 0.18, 8: 0.14, 16: 0.10, 32: 0.05, 64: 0.03}
"""Job size in nodes -> probability (sizes above half the cluster are dropped, the rest
renormalised)."""
TP_MIX = {8: 0.4, 4: 0.2, 2: 0.2, 1: 0.2}
"""Tensor-parallel degree -> probability (capped at GPUs per node); dp fills the rest."""
MODEL_BY_NODES = ((2, "llama3-8b"), (8, "llama2-13b"), (10**9, "llama3-70b"))
"""(largest size in nodes, model preset): small jobs train small models."""
PP_BY_NODES = ((16, 1), (10**9, 2))
"""(largest size in nodes, pipeline stages)."""
DURATION_MEDIAN_S = 3600.0
DURATION_SIGMA = 1.0
"""Log-normal shape of ideal run times (natural-log standard deviation)."""
DURATION_RANGE_S = (300.0, 86400.0)
TOKENS_PER_GPU_STEP = (2048, 4096, 8192)
"""Tokens per step per GPU of a model replica (a replica of tp*pp GPUs processes tp*pp times
this), drawn uniformly: with the gradient bytes it sets the compute:communication ratio."""
SYNTHETIC_MFU = 0.4
"""Assumed model-FLOPs utilisation that turns a synthetic job's FLOPs into compute_s. An input
of the synthetic workload only; a real trace gives compute_s."""
SEQ_TOKENS = 2048
"""Sequence length of a job's micro-batches when `tierwise.perf` prices its step (a trace gives
none; compute_s sets how many micro-batches a step has). The smallest of TOKENS_PER_GPU_STEP, so
a synthetic step is a whole number of micro-batches."""
TRAINING_FLOPS_PER_PARAM_TOKEN = 6
"""Forward + backward FLOPs per parameter per token (2 forward + 4 backward)."""


@dataclass(frozen=True)
class JobClass:
    """What determines a job's slowdown: model size and layout, compute per step (s)."""

    model: str
    params: float
    tp: int
    pp: int
    dp: int
    compute_s: float

    @property
    def gpus(self) -> int:
        """GPUs the layout needs."""
        return self.tp * self.pp * self.dp

    def nodes(self, gpus_per_node: int) -> int:
        """Whole nodes the job gets."""
        return -(-self.gpus // gpus_per_node)

    def layout(self, micro_batches: int = 1) -> Layout:
        """The layout `tierwise.perf` prices: micro-batches of one sequence of SEQ_TOKENS."""
        return Layout(
            tp=self.tp, pp=self.pp, dp=self.dp, seq=SEQ_TOKENS, gbs=micro_batches * self.dp
        )


@dataclass(frozen=True)
class Job:
    """One job of a trace; times in seconds."""

    id: str
    arrival_s: float
    duration_s: float
    cls: JobClass
    priority: int = 0


def _finite(text: str) -> float:
    """A finite float from ASCII text; raises ValueError (also for inf, nan, 1e999)."""
    if not text.isascii():
        raise ValueError(f"{text!r} is not ASCII")
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not finite")
    return value


def _count(model: str) -> float | None:
    """A literal parameter count (`7e9`, `70B`), or None for a model name."""
    text = model.strip()
    scale = 1e9 if text[-1:] in {"B", "b"} else 1.0
    try:
        count = _finite(text[:-1] if scale > 1 else text) * scale
    except ValueError:
        return None
    return count if math.isfinite(count) else None


@cache
def model_spec(model: str) -> ModelSpec | None:
    """The architecture of a preset name or model file; None for a bare parameter count."""
    return None if _count(model) is not None else load_model(model.strip())


@cache
def model_params(model: str) -> float:
    """Parameter count of a model (preset name or spec file) or a literal count (`7e9`, `70B`)."""
    count = _count(model)
    return count if count is not None else float(param_counts(model_spec(model)).total)


def read_trace(path: str | Path) -> list[Job]:
    """Jobs from a CSV trace (format in the module docstring); errors name the line."""
    source = str(path)
    text = read_text(path)
    lines = [
        (n, line)
        for n, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        raise ParseError("empty trace; expected a header " + ",".join(REQUIRED), source=source)
    header_no, header = lines[0]
    columns = _cells(header, header_no, source)
    missing = [c for c in REQUIRED if c not in columns]
    unknown = [c for c in columns if c not in REQUIRED + OPTIONAL]
    if missing or unknown:
        what = (
            f"missing column(s) {', '.join(missing)}"
            if missing
            else f"unknown column(s) {', '.join(unknown)}"
        )
        raise ParseError(f"{what}; columns: {', '.join(REQUIRED + OPTIONAL)}", header_no, source)
    jobs, seen = [], set()
    for number, line in lines[1:]:
        cells = _cells(line, number, source)
        if len(cells) != len(columns):
            raise ParseError(f"expected {len(columns)} fields, got {len(cells)}", number, source)
        job = _job(dict(zip(columns, cells, strict=True)), number, source)
        if job.id in seen:
            raise ParseError(f"duplicate job id {job.id!r}", number, source)
        seen.add(job.id)
        jobs.append(job)
    if not jobs:
        raise ParseError("no jobs: the trace has a header and no job lines", header_no, source)
    return jobs


def _cells(line: str, number: int, source: str) -> list[str]:
    try:
        return [c.strip() for c in next(csv.reader([line]))]
    except csv.Error as exc:
        raise ParseError(f"not a CSV line ({exc})", number, source) from None


def _job(row: dict[str, str], line: int, source: str) -> Job:
    def num(key: str, kind: type, low: float, default: str | None = None) -> float:
        raw = row.get(key) or default or ""
        high = MAX_COUNT if kind is int else MAX_SECONDS
        try:
            value = ascii_int(raw, 12) if kind is int else _finite(raw)
        except ValueError:
            what = "an integer of at most 12 digits" if kind is int else "a finite number"
            raise ParseError(f"{key}={raw[:40]!r} is not {what}", line, source) from None
        if not low <= value <= high:
            raise ParseError(f"{key}={raw!r}: allowed {low:g} to {high:g}", line, source)
        return value

    tp, pp, dp = (int(num(k, int, 1)) for k in ("tp", "pp", "dp"))
    try:
        params = model_params(row["model"])
    except (SpecError, IndexError) as exc:
        raise ParseError(f"model={row['model'][:80]!r}: {exc}", line, source) from None
    if not 0 < params <= MAX_PARAMS:
        raise ParseError(
            f"model={row['model']!r}: a parameter count must be > 0 and <= {MAX_PARAMS:g}",
            line,
            source,
        )
    cls = JobClass(row["model"], params, tp, pp, dp, num("compute_s", float, 1e-9))
    spec = model_spec(row["model"])
    if spec is not None:
        try:
            cls.layout().validate_for(spec)
        except SpecError as exc:
            raise ParseError(f"model={row['model']!r}: {exc}", line, source) from None
    if row.get("gpus") and int(num("gpus", int, 1)) != cls.gpus:
        raise ParseError(f"gpus={row['gpus']} does not match tp*pp*dp={cls.gpus}", line, source)
    if not row["id"]:
        raise ParseError("id is empty", line, source)
    return Job(
        row["id"],
        num("arrival_s", float, 0.0),
        num("duration_s", float, 1e-9),
        cls,
        int(num("priority", int, -MAX_COUNT, "0")),
    )


def write_trace(jobs: Iterable[Job], path: str | Path) -> None:
    """Write jobs as a CSV trace that `read_trace` reads back."""
    with Path(path).open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*REQUIRED, "priority", "gpus"])
        for j in jobs:
            c = j.cls
            w.writerow(
                [
                    j.id,
                    f"{j.arrival_s:.3f}",
                    f"{j.duration_s:.3f}",
                    c.model,
                    c.tp,
                    c.pp,
                    c.dp,
                    f"{c.compute_s:.6g}",
                    j.priority,
                    c.gpus,
                ]
            )


def check_fits(jobs: Iterable[Job], cluster: ClusterSpec, usable_nodes: int) -> None:
    """Every job must fit on the usable nodes; the error names the job."""
    for j in jobs:
        n = j.cls.nodes(cluster.gpus_per_node)
        if n > usable_nodes:
            raise SpecError(
                f"job {j.id!r}: needs {n} nodes ({j.cls.gpus} GPUs) but the cluster has "
                f"{usable_nodes} usable nodes of {cluster.gpus_per_node} GPUs"
            )


SYNTHETIC_READS = ("nodes", "gpus_per_node")
"""The cluster overrides a synthetic trace depends on (`synthetic`; the GPU too)."""


def synthetic(cluster: ClusterSpec, count: int, seed: int = 0, load: float = 0.9) -> list[Job]:
    """`count` jobs with the documented mix (module docstring), arriving at offered `load`."""
    if count < 1:
        raise SpecError(f"--synthetic: {count} jobs; need at least 1")
    rng = np.random.default_rng(seed)
    sizes = np.array([s for s in SIZE_MIX if s <= max(1, cluster.nodes // 2)])
    p = np.array([SIZE_MIX[s] for s in sizes])
    nodes = rng.choice(sizes, size=count, p=p / p.sum())
    tps = np.array([t for t in TP_MIX if cluster.gpus_per_node % t == 0])
    tp_p = np.array([TP_MIX[t] for t in tps])
    tp = rng.choice(tps, size=count, p=tp_p / tp_p.sum())
    lo, hi = DURATION_RANGE_S
    duration = np.clip(rng.lognormal(math.log(DURATION_MEDIAN_S), DURATION_SIGMA, count), lo, hi)
    tokens = rng.choice(TOKENS_PER_GPU_STEP, size=count)
    rate = load * cluster.nodes / float(np.mean(nodes * duration))  # jobs per second
    arrival = np.cumsum(rng.exponential(1.0 / rate, count))
    arrival -= arrival[0]
    peak = cluster.gpu.peak_bf16_tflops * 1e12
    jobs = []
    for i in range(count):
        n = int(nodes[i])
        model = next(m for limit, m in MODEL_BY_NODES if n <= limit)
        pp = next(s for limit, s in PP_BY_NODES if n <= limit)
        t = int(tp[i])
        gpus = n * cluster.gpus_per_node
        params = model_params(model)
        compute = TRAINING_FLOPS_PER_PARAM_TOKEN * params * int(tokens[i]) / (peak * SYNTHETIC_MFU)
        cls = JobClass(model, params, t, pp, gpus // (t * pp), round(compute, 4))
        jobs.append(Job(f"j{i:05d}", float(arrival[i]), float(duration[i]), cls))
    return jobs
