"""Launch configurations a user can paste, one module per launcher: Megatron-LM
(`megatron`), torchtitan 0.3 (`torchtitan`), DeepSpeed (`deepspeed`) and the Slurm script
that runs any of them (`slurm`). Each writes what its framework's current release accepts
and the environment it requires; which framework a kind is for comes from the framework
table (`tierwise.frameworks`)."""

from __future__ import annotations

from types import ModuleType

from tierwise import frameworks
from tierwise.hardware.cluster import ClusterSpec
from tierwise.perf.flags import Flags
from tierwise.plan.emit import deepspeed, megatron, slurm, torchtitan
from tierwise.plan.emit.common import Launch
from tierwise.plan.emit.deepspeed import deepspeed_config
from tierwise.plan.emit.megatron import megatron_args
from tierwise.plan.emit.slurm import slurm_script
from tierwise.plan.emit.torchtitan import torchtitan_args
from tierwise.workload.layout import Layout
from tierwise.workload.spec import ModelSpec

CONFIGS: dict[str, ModuleType] = {m.KIND: m for m in (megatron, torchtitan, deepspeed)}
"""Framework emitters by ``--emit`` kind (`Framework.emitter`)."""
EMITTERS = (*CONFIGS, slurm.KIND)
EMIT_FILES = {kind: module.FILE for kind, module in {**CONFIGS, slurm.KIND: slurm}.items()}
"""The file each kind is written to by ``plan --out``."""


def launch_of(framework: str, model: ModelSpec, layout: Layout, flags: Flags = Flags()) -> Launch:
    """What runs the plan under `framework` (``any``: the default launched framework)."""
    fw = frameworks.launched(framework) or frameworks.DEFAULT_LAUNCHED
    return CONFIGS[str(fw.emitter)].launch(model, layout, flags)


def emit(
    kind: str,
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    flags: Flags = Flags(),
    *,
    framework: str = frameworks.DEFAULT_LAUNCHED.name,
) -> str:
    """The text of one emitter (`EMITTERS`); `framework` picks what the Slurm script runs."""
    if kind in CONFIGS:
        return CONFIGS[kind].config_text(model, layout, flags)
    return slurm.slurm_script(cluster, layout, launch_of(framework, model, layout, flags))


__all__ = [
    "EMITTERS",
    "EMIT_FILES",
    "Launch",
    "deepspeed_config",
    "emit",
    "launch_of",
    "megatron_args",
    "slurm_script",
    "torchtitan_args",
]
