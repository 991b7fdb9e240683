"""An sbatch script that launches a plan with ranks where the placement put them: nodes in
the allocation's block order (or the given host order), consecutive ranks on one node and
consecutive nodes under one leaf switch; the environment the framework requires exported,
and the NCCL settings the plan's collective prices assumed (`collectives.nccl_env`).

torchrun-launched frameworks (Megatron-LM, torchtitan) get one torchrun per node from srun,
its static rendezvous node rank being the task's ``SLURM_PROCID``; DeepSpeed's launcher runs
srun itself (``--launcher slurm``: ``deepspeed/launcher/multinode_runner.py`` SlurmRunner,
one task per GPU) from a hostfile of the allocation in order.
"""

from __future__ import annotations

import shlex
from bisect import bisect_right

from tierwise import frameworks
from tierwise.collectives.nccl_env import nccl_environment
from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.plan.emit.common import Launch, refuse
from tierwise.workload.layout import Layout

KIND = "slurm"
FILE = "job.sbatch"
MASTER_PORT = 29500
HOSTFILE = "tierwise-hosts.$SLURM_JOB_ID"


def _nodes(cluster: ClusterSpec, layout: Layout) -> tuple[int, int]:
    """(nodes, GPUs used per node) of the job."""
    nodes = -(-layout.world // cluster.gpus_per_node)
    per_node = layout.world // nodes  # a job smaller than one node uses part of it
    if per_node * nodes != layout.world:
        raise refuse(
            KIND,
            f"{layout.world} GPUs do not fill whole {cluster.gpus_per_node}-GPU nodes; "
            "the launcher starts the same number of ranks on every node",
        )
    return nodes, per_node


def _header(cluster: ClusterSpec, layout: Layout, nodes: int, per_node: int) -> list[str]:
    leaves = bisect_right(cluster.leaf_starts, nodes - 1)  # leaves nodes 0..nodes-1 fill
    return [
        "#!/bin/bash",
        f"#SBATCH --job-name=tierwise-tp{layout.tp}-cp{layout.cp}-pp{layout.pp}-dp{layout.dp}",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={per_node}",
        "#SBATCH --exclusive",
        f"#SBATCH --switches={leaves}",
        f"# layout: tp={layout.tp} cp={layout.cp} ep={layout.ep} pp={layout.pp} "
        f"vpp={layout.vpp} dp={layout.dp}, rank order tp-cp-ep-dp-pp",
    ]


def _hosts(hostnames: list[str] | None, tasks: int) -> tuple[list[str], str]:
    """Lines writing the hostfile (nodes in rank order) and the srun distribution."""
    if not hostnames:
        return [
            "",
            "# Task i runs on node i of the allocation (block distribution): consecutive",
            "# ranks share a node and consecutive nodes share a leaf switch.",
            f'hostfile="{HOSTFILE}"',
            'scontrol show hostnames "$SLURM_JOB_NODELIST" > "$hostfile"',
            'export MASTER_ADDR=$(head -n 1 "$hostfile")',
        ], "block:block"
    per_task = " ".join(shlex.quote(h) for h in hostnames for _ in range(tasks))
    return [
        f"#SBATCH --nodelist={','.join(hostnames)}",
        "",
        "# Task i runs on line i of the task file (arbitrary distribution).",
        f'hostfile="{HOSTFILE}"',
        f"printf '%s\\n' {' '.join(map(shlex.quote, hostnames))} > \"$hostfile\"",
        f"printf '%s\\n' {per_task} > \"$hostfile.tasks\"",
        'export SLURM_HOSTFILE="$hostfile.tasks"',
        f"export MASTER_ADDR={shlex.quote(hostnames[0])}",
    ], "arbitrary"


def _torchrun(launch: Launch, nodes: int, per_node: int, distribution: str) -> list[str]:
    # Static rendezvous: the task's own SLURM_PROCID (expanded by each task's shell, hence
    # the single quotes) is its node rank, so node i of that order holds ranks i*G..i*G+G-1.
    torchrun = [
        f"exec torchrun --nnodes={nodes} --nproc-per-node={per_node}",
        '--node-rank="$SLURM_PROCID" --master-addr="$MASTER_ADDR" --master-port="$MASTER_PORT"',
        *launch.program,
    ]
    return [
        f"srun --ntasks={nodes} --distribution={distribution} bash -c "
        + shlex.quote("\n  " + " \\\n  ".join(torchrun)),
    ]


def _deepspeed(launch: Launch, nodes: int, per_node: int, distribution: str) -> list[str]:
    # DeepSpeed's hostfile ("host slots=G") in rank order; its Slurm runner starts G tasks
    # per node with srun, in the distribution passed through --launcher_args.
    runner = [
        'deepspeed --launcher slurm --hostfile "$hostfile.deepspeed" --no_ssh_check',
        f'--launcher_args "--distribution={distribution}"',
        f"--num_nodes {nodes} --num_gpus {per_node}",
        '--master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT"',
        *launch.program,
    ]
    return [
        f'sed "s/$/ slots={per_node}/" "$hostfile" > "$hostfile.deepspeed"',
        " \\\n  ".join(runner),
    ]


def slurm_script(
    cluster: ClusterSpec, layout: Layout, launch: Launch, hostnames: list[str] | None = None
) -> str:
    """The sbatch script running `launch` on the layout's nodes, in the allocation's block
    order or `hostnames` in the given order."""
    nodes, per_node = _nodes(cluster, layout)
    if hostnames is not None and len(hostnames) != nodes:
        raise SpecError(f"hostnames: {len(hostnames)} given, the layout needs {nodes} nodes")
    runner = launch.launcher == frameworks.DEEPSPEED_RUNNER
    hosts, distribution = _hosts(hostnames, per_node if runner else 1)
    lines = [*_header(cluster, layout, nodes, per_node), *hosts]
    lines.append(f"export MASTER_PORT={MASTER_PORT}")
    lines += [f"export {name}={shlex.quote(value)}" for name, value in sorted(launch.env.items())]
    nccl = nccl_environment(cluster)
    if nccl:
        lines.append("# NCCL as the plan's collectives were priced (the cluster spec's fabric)")
        lines += [f"export {name}={shlex.quote(value)}" for name, value in sorted(nccl.items())]
    start = _deepspeed if runner else _torchrun
    return "\n".join([*lines, *start(launch, nodes, per_node, distribution), ""])
