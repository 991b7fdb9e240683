"""A plan request, normalised once: model (with the routing its MoE flags choose), cluster,
batch, fixes, framework, behaviour flags and what to emit.

`estimate`, `plan`, `sweep` and `report` build their flags through `Behaviour.resolve` and the
planning commands their request through `plan_request`, so the four price a layout with the
same flags; the CLI only parses options and prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tierwise import frameworks
from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.perf.flags import Flags
from tierwise.perf.pipeline import SCHEDULE_VPP, schedule_for
from tierwise.perf.train_time import TrainRequest
from tierwise.plan.behaviour import DEFAULT_HEADROOM, Behaviour, headroom_gib
from tierwise.plan.search import OBJECTIVES
from tierwise.plan.space import parse_fix
from tierwise.workload.precision import check_supported, format_name
from tierwise.workload.spec import ModelSpec

SLURM = "slurm"
"""The ``--emit`` kind of the sbatch script (it launches the plan's framework)."""
EMIT_KINDS = (*(frameworks.TABLE[n].emitter for n in frameworks.LAUNCHED), SLURM)


@dataclass(frozen=True)
class PlanRequest:
    """What `plan` (and `sweep`, `report`) search: `framework` is ``any`` or a launched one
    (`tierwise.frameworks`); `flags` price every candidate; `emit` the kinds to write."""

    model: ModelSpec
    cluster: ClusterSpec
    gbs: int
    seq: int
    fixes: dict[str, str]
    framework: str
    flags: Flags
    objective: str = "step_time"
    top: int = 5
    emit: tuple[str, ...] = ()
    headroom_gib: float = 0.0
    """HBM each plan leaves free (``--mem-headroom``)."""
    train: TrainRequest = field(default_factory=TrainRequest)
    """``--train-tokens`` and its options: each plan's whole run (`perf.train_time`)."""
    given: Mapping[str, Any] = field(default_factory=dict)
    """The behaviour options as given (`Behaviour.given`): which to say change nothing."""

    @property
    def runner(self) -> frameworks.Framework:
        """The row whose launch is emitted (Megatron-LM for ``any``)."""
        return frameworks.launched(self.framework) or frameworks.DEFAULT_LAUNCHED


def plan_request(
    model: ModelSpec,
    cluster: ClusterSpec,
    behaviour: Behaviour,
    *,
    gbs: int | None,
    seq: int,
    fix: str | Sequence[str] | None = None,
    objective: str = "step_time",
    top: int = 5,
    emit: list[str] | tuple[str, ...] = (),
    dtype: str | None = None,
    fp8_recipe: str | None = None,
    mem_headroom: str = DEFAULT_HEADROOM,
    train: TrainRequest | None = None,
) -> PlanRequest:
    """Check and normalise a plan request; one-line SpecErrors naming the option."""
    if objective not in OBJECTIVES:
        raise SpecError(f"--objective: {objective!r}; allowed: {', '.join(OBJECTIVES)}")
    for kind in emit:
        if kind not in EMIT_KINDS:
            raise SpecError(f"--emit: {kind!r}; allowed: {', '.join(EMIT_KINDS)}")
    framework = behaviour.framework or frameworks.ANY
    frameworks.launched(framework)  # one line naming the choices
    framework = _framework_for(framework, emit)
    fixes = parse_fix(fix)
    schedule = behaviour.given.get("pipeline_schedule")
    if schedule is not None:
        framework = _schedule_fixes(schedule, framework, fixes)
    framework = _cp_comm_framework(behaviour.given.get("cp_comm"), framework)
    fw = frameworks.launched(framework)
    spec, flags = behaviour.resolve(model, None if fw is None else fw.name)
    if dtype is not None:
        if dtype != frameworks.ANY:
            check_supported(cluster.gpu, dtype, fp8_recipe)
        fixes["dtype"] = dtype
    if fp8_recipe is not None:
        format_name("fp8", fp8_recipe)  # one line naming --fp8-recipe and the recipes
        fixes["fp8_recipe"] = fp8_recipe
    kinds = tuple(emit)
    if SLURM in kinds and fw is not None and fw.launch_reads_file and fw.emitter not in kinds:
        kinds = (*kinds, fw.emitter)  # the config file the sbatch script reads
    return PlanRequest(
        model=spec,
        cluster=cluster,
        gbs=cluster.world if gbs is None else gbs,
        seq=seq,
        fixes=fixes,
        framework=framework,
        flags=flags,
        objective=objective,
        top=top,
        emit=kinds,
        headroom_gib=headroom_gib(mem_headroom, cluster.gpu.hbm_gib),
        train=train or TrainRequest(),
        given=behaviour.given,
    )


def _framework_for(framework: str, emit: list[str] | tuple[str, ...]) -> str:
    """The framework to search: the one given, else the one the emitted configs are for (a
    Slurm script alone launches `frameworks.DEFAULT_LAUNCHED`); one-line error if the configs
    need several."""
    if framework != frameworks.ANY:
        return framework
    implied = sorted({fw.name for kind in emit if (fw := frameworks.by_emitter(kind))})
    if len(implied) > 1:
        raise SpecError(
            f"--emit: {', '.join(implied)} need plans of different frameworks; give one "
            f"--framework ({', '.join(frameworks.LAUNCHED)}) and emit its config"
        )
    if implied:
        return implied[0]
    return frameworks.DEFAULT_LAUNCHED.name if emit else frameworks.ANY


def _cp_comm_framework(cp_comm: str | None, framework: str) -> str:
    """The framework to search: a --cp-comm-type only one framework runs narrows ``any`` to
    it (the ring, every framework's, leaves it)."""
    if cp_comm in (None, "p2p") or framework != frameworks.ANY:
        return framework
    only = frameworks.cp_comm_framework(cp_comm)
    return only.name if only is not None else framework


def _schedule_fixes(schedule: str, framework: str, fixes: dict[str, str]) -> str:
    """Pin the virtual stages `schedule` runs into `fixes` and return the framework to search:
    a schedule only one framework runs narrows ``any`` to it; a clash is a one-line error."""
    if framework == frameworks.ANY:
        only = frameworks.schedule_framework(schedule)
        framework = only.name if only is not None else framework
    need = SCHEDULE_VPP.get(schedule)
    schedule_for(schedule, 2, need or 2, None if framework == frameworks.ANY else framework)
    if need is not None and fixes.setdefault("vpp", str(need)) != str(need):
        raise SpecError(
            f"--pipeline-schedule {schedule} runs vpp {need}; --fix has vpp={fixes['vpp']}"
        )
    return framework
