"""What a report shows, as plain typed data (`ReportInputs`), and how it is assembled.

The HTML renderer only reads `ReportInputs`; the engines feed it through small adapters:
`ReportPlan.of` (one layout through `tierwise.perf.estimate`), `naive_of` (the same layout
with the naive rank order), `fabric_sweep` (the best layout on what-if fabrics) and
`busbw_panels` (predicted busbw per tier/algorithm, with measured logs and contract limits)
and `plans_from_search` (the planner's top layouts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tierwise.errors import SpecError
from tierwise.formats.nccl_reader import parse_file
from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.placement import Placement
from tierwise.perf.estimate import degrees, estimate
from tierwise.perf.groups import DEFAULT_ORDER, ORDERS
from tierwise.perf.step import Flags
from tierwise.plan.search import search
from tierwise.report.figures import (
    BusbwCurve,
    BusbwData,
    BusbwLimit,
    SweepData,
    SweepSeries,
    busbw_figure_data,
)
from tierwise.report.mapping import MappingData, mapping_data
from tierwise.textio import MAX_SPEC_BYTES, read_text
from tierwise.units import size_sweep
from tierwise.verify.contract import Contract, load_contract
from tierwise.verify.doctor import Diagnosis, diagnose
from tierwise.verify.measured import measured
from tierwise.workload.layout import Layout
from tierwise.workload.spec import ModelSpec

NAIVE_ORDER = ORDERS["dp-cp-pp-tp"]
"""Rank order a placement-unaware launcher gives (data parallel innermost)."""
BUSBW_SIZES = size_sweep(1 << 10, 4 << 30, 2)
"""Message sizes of the predicted busbw figure, bytes (1 KiB to 4 GiB, x2)."""
SWEEP_NICS = (1, 2, 4, 8)
SWEEP_OVERSUBSCRIPTION = (1.0, 2.0, 4.0)
MAX_LOG_PANELS = 6
"""At most this many measured nccl-tests runs get their own busbw figure."""


@dataclass(frozen=True)
class ReportPlan:
    """One layout, its rank order and `tierwise.perf.estimate`'s result for it."""

    layout: Layout
    order: tuple[str, ...]
    estimate: dict[str, Any]

    @classmethod
    def of(
        cls,
        model: ModelSpec,
        cluster: ClusterSpec,
        layout: Layout,
        order: tuple[str, ...] = DEFAULT_ORDER,
        flags: Flags = Flags(),
    ) -> ReportPlan:
        """Estimate `layout` placed in `order` on `cluster`, run with `flags`."""
        return cls(layout, order, estimate(model, cluster, layout, replace(flags, order=order)))

    def mapping(self, cluster: ClusterSpec) -> MappingData:
        """Process groups of this layout on `cluster` (what the mapping figure draws)."""
        return mapping_data(cluster, degrees(self.layout), self.order)


@dataclass(frozen=True)
class ReportInputs:
    """Everything the HTML report renders. `plans` is best first (the first is mapped)."""

    model: ModelSpec
    cluster: ClusterSpec
    plans: tuple[ReportPlan, ...]
    naive: ReportPlan | None
    sweep: SweepData | None
    busbw: tuple[BusbwData, ...]
    command: str
    contract_text: str | None = None
    logs: tuple[str, ...] = field(default=())
    doctor: Diagnosis | None = None

    @property
    def best(self) -> ReportPlan | None:
        """The top plan, if any layout was found."""
        return self.plans[0] if self.plans else None


def plans_from_search(
    model: ModelSpec,
    cluster: ClusterSpec,
    gbs: int,
    seq: int,
    top: int = 5,
    flags: Flags = Flags(),
    framework: str = "any",
    headroom_gib: float = 0.0,
) -> tuple[ReportPlan, ...]:
    """The planner's top layouts (`tierwise.plan.search`) priced with `flags`, best first."""
    found = search(
        model,
        cluster,
        gbs,
        seq,
        top=top,
        flags=flags,
        framework=framework,
        headroom_gib=headroom_gib,
    )
    return tuple(ReportPlan(Layout(**est["layout"]), flags.order, est) for est in found.plans)


def naive_of(
    model: ModelSpec, cluster: ClusterSpec, best: ReportPlan, flags: Flags = Flags()
) -> ReportPlan:
    """The best layout with the naive rank order (`NAIVE_ORDER`)."""
    return ReportPlan.of(model, cluster, best.layout, NAIVE_ORDER, flags)


def _with_fabric(cluster: ClusterSpec, nics: int, over: float) -> ClusterSpec:
    inter = cluster.inter.model_copy(update={"nics_per_node": nics})
    topo = cluster.topology.model_copy(update={"oversubscription": over})
    return cluster.model_copy(update={"inter": inter, "topology": topo})


def fabric_sweep(
    model: ModelSpec, cluster: ClusterSpec, best: ReportPlan, flags: Flags = Flags()
) -> SweepData:
    """tokens/s of the best layout (kept fixed) for NICs per node x leaf oversubscription."""
    nics = [n for n in SWEEP_NICS if n <= cluster.gpus_per_node]
    series = []
    for over in SWEEP_OVERSUBSCRIPTION:
        ys = [
            ReportPlan.of(
                model, _with_fabric(cluster, n, over), best.layout, best.order, flags
            ).estimate["tokens_per_s"]
            for n in nics
        ]
        series.append(
            SweepSeries(f"oversubscription {over:g}:1", tuple(map(float, nics)), tuple(ys))
        )
    return SweepData(
        title=f"What-if: {model.name}, best layout fixed, on {cluster.name} with other fabrics",
        x_label=f"NICs per node ({cluster.inter.nic.key})",
        y_label="tokens/s",
        series=tuple(series),
    )


def _measured_panels(cluster: ClusterSpec, path: Path) -> list[BusbwData]:
    """Per nccl-tests run in `path`: the prediction for its group and the measured points."""
    out = []
    tests = parse_file(path)
    for index, test in enumerate(tests):
        m = measured(test, cluster, str(path))
        per_node = -(-m.nranks // m.nodes)
        if m.nodes > cluster.nodes:
            raise SpecError(
                f"--logs: {path} ran on {m.nodes} nodes; the cluster has "
                f"{cluster.nodes} (raise --nodes)"
            )
        sizes = [int(n) for n in m.size_bytes]
        data = busbw_figure_data(cluster, m.op, sizes, ranks_per_node=per_node, world=m.nranks)
        span = Placement.contiguous(cluster, m.nranks, ranks_per_node=per_node).span(
            range(m.nranks)
        )
        points = BusbwCurve(
            f"measured: {path.name}" + (f" #{index + 1}" if len(tests) > 1 else ""),
            "measured",
            "measured",
            span.top.name,
            m.nranks,
            m.nodes,
            tuple(sizes),
            tuple(float(b) for b in m.busbw_GBps),
        )
        out.append(BusbwData(data.op, data.cluster, (*data.curves, points)))
    return out


def contract_limits(contract: Contract, data: BusbwData) -> tuple[BusbwLimit, ...]:
    """The contract's busbw floors that apply to the panel's op and group tier.

    `min_GBps` is flat; `min_pct_of_model` is that share of the group's predicted busbw."""
    auto = data.curve("auto")
    out = []
    for check in contract.checks:
        if check.metric != "busbw" or check.op != data.op or check.tier not in (None, auto.tier):
            continue
        pts = [
            (n, b) for n, b in zip(auto.size_bytes, auto.busbw_GBps, strict=True) if check.covers(n)
        ]
        if not pts:
            continue
        floor = [
            check.min_GBps
            if check.min_GBps is not None
            else (check.min_pct_of_model or 0.0) / 100 * b
            for _, b in pts
        ]
        out.append(BusbwLimit(check.label, tuple(n for n, _ in pts), tuple(floor)))
    return tuple(out)


def busbw_panels(
    cluster: ClusterSpec, logs: Sequence[Path] = (), contract: Contract | None = None
) -> tuple[BusbwData, ...]:
    """all_reduce over the whole cluster, then one panel per measured run in `logs` (at most
    `MAX_LOG_PANELS`), each with the contract's busbw floors for its op and tier."""
    panels = [
        busbw_figure_data(
            cluster,
            "all_reduce",
            BUSBW_SIZES,
            ranks_per_node=cluster.gpus_per_node,
            world=cluster.world,
        )
    ]
    for path in logs:
        if not path.exists():
            raise SpecError(f"--logs: file {str(path)!r} does not exist")
        panels += _measured_panels(cluster, path)
    panels = panels[: 1 + MAX_LOG_PANELS]
    if contract is None:
        return tuple(panels)
    return tuple(replace(p, limits=contract_limits(contract, p)) for p in panels)


def build_inputs(
    model: ModelSpec,
    cluster: ClusterSpec,
    *,
    gbs: int,
    seq: int,
    command: str,
    logs: Sequence[Path] = (),
    contract_path: Path | None = None,
    top: int = 5,
    doctor_logs: Sequence[Path] = (),
    flags: Flags = Flags(),
    framework: str = "any",
    headroom_gib: float = 0.0,
) -> ReportInputs:
    """Plan, naive placement, what-if sweep and busbw panels for one model on one cluster;
    with logs, `tierwise doctor`'s findings on `logs` and `doctor_logs` read as one run."""
    contract = load_contract(contract_path) if contract_path is not None else None
    plans = plans_from_search(model, cluster, gbs, seq, top, flags, framework, headroom_gib)
    best = plans[0]
    return ReportInputs(
        model=model,
        cluster=cluster,
        plans=plans,
        naive=naive_of(model, cluster, best, flags),
        sweep=fabric_sweep(model, cluster, best, flags),
        busbw=busbw_panels(cluster, logs, contract),
        command=command,
        contract_text=read_text(contract_path, limit=MAX_SPEC_BYTES, error=SpecError)
        if contract_path is not None
        else None,
        logs=tuple(str(p) for p in [*logs, *doctor_logs]),
        doctor=diagnose([*logs, *doctor_logs], cluster) if (logs or doctor_logs) else None,
    )
