"""Launch command lines (Megatron `pretrain_*.py`, torchrun, sbatch, torchtitan's
`--job.config_file` / `--module --config` with dotted overrides) -> record."""

from __future__ import annotations

import re
import shlex
from typing import Any

from tierwise.verify.trainlog.args import apply_args
from tierwise.verify.trainlog.record import Found
from tierwise.verify.trainlog.shell import ShellVars
from tierwise.verify.trainlog.text import gpu_name, positive_int, value

_LAUNCH = re.compile(
    r"(?:^|\s)(?:torchrun|python3?|srun|deepspeed|sbatch|mpirun)\b|pretrain_\w+\.py|\btrain\.py\b"
)
_SBATCH = re.compile(r"^#SBATCH\s+(--?[\w-]+)(?:[= ](\S+))?", re.MULTILINE)
# torchrun / launcher flags -> record key.
LAUNCHER_INTS = {
    "nproc_per_node": "gpus_per_node",
    "nnodes": "nodes",
    "nodes": "nodes",
    "N": "nodes",
    "gpus_per_node": "gpus_per_node",
    "ntasks_per_node": "gpus_per_node",
    "num_gpus": "gpus_per_node",
    "num_nodes": "nodes",
}
# torchtitan dotted overrides -> record key.
TITAN_OVERRIDES = {
    "parallelism.tensor_parallel_degree": "layout.tp",
    "parallelism.pipeline_parallel_degree": "layout.pp",
    "parallelism.context_parallel_degree": "layout.cp",
    "parallelism.expert_parallel_degree": "layout.ep",
    "training.local_batch_size": "layout.mbs",
    "training.batch_size": "layout.mbs",
    "training.global_batch_size": "layout.gbs",
    "training.seq_len": "layout.seq",
}


def flags(tokens: list[str]) -> dict[str, Any]:
    """``--name value`` / ``--name=value`` / ``--switch`` -> {name_with_underscores: value}."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("-") or tok in ("-", "--") or re.fullmatch(r"-[\d.]+", tok):
            continue
        name, eq, val = tok.lstrip("-").partition("=")
        name = name.replace("-", "_") if "." not in name else name
        if not eq:
            if i < len(tokens) and not tokens[i].startswith("-"):
                val = tokens[i]
                i += 1
            else:
                out[name] = True
                continue
        out[name] = value(val)
    return out


def read_command(line: str, found: Found, source: str) -> bool:
    """One command line; True when it was a launch command tierwise read."""
    launch = _LAUNCH.search(line)
    if launch is None:
        return False
    line = line[launch.start() :]  # drop a shell prompt or a log prefix before it
    try:
        tokens = shlex.split(line)
    except ValueError:
        tokens = line.split()
    args = flags(tokens)
    where = f"{source} command line"
    for name, key in LAUNCHER_INTS.items():
        if name in args:
            found.put(key, positive_int(args[name]), f"{where} (--{name})")
    if args.get("standalone") is True:
        found.put("nodes", 1, f"{where} (--standalone)")
    megatron = {k: v for k, v in args.items() if "." not in k}
    if "recompute_activations" in megatron and "recompute_granularity" not in megatron:
        megatron["recompute_granularity"] = "selective"
    if any(re.search(r"pretrain_\w+\.py$", t) for t in tokens) and not any(
        k in megatron for k in ("recompute_granularity", "checkpoint_activations")
    ):
        found.put("layout.recompute", "none", f"{where} (no recompute flag: Megatron's default)")
    apply_args(found, megatron, where)
    for key, rec in TITAN_OVERRIDES.items():
        if key in args:
            found.put(rec, positive_int(args[key]), f"{where} (--{key})")
    if "module" in args and "config" in args:
        found.put("titan.module_config", (str(args["module"]), str(args["config"])), where)
    if isinstance(args.get("g"), str) and (named := gpu_name(args["g"])):  # NeMo perf -g b200
        found.put("gpu_key", named[0], f"{where} (-g)")
        found.put("gpu", named[1], f"{where} (-g)")
    found.format("command-line")
    return True


def read_script(text: str, found: Found, source: str, files: dict[str, str] | None = None) -> None:
    """A launch script or a saved command line: variables expanded, then each command."""
    for opt, val in _SBATCH.findall(text):
        key = LAUNCHER_INTS.get(opt.lstrip("-").replace("-", "_"))
        if key:
            found.put(key, positive_int(val), f"{source} (#SBATCH {opt})")
    sh = ShellVars({source: text, **(files or {})})
    sh.run(source)
    for command in sh.commands:
        read_command(command, found, source)
