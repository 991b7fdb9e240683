"""`tierwise ingest nvidia-smi|nccl-xml|slurm-topology FILE`: tool output -> cluster YAML;
`tierwise ingest training-log LOG [CONFIG...]`: what a training run's log states."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import hostlist
import typer

from tierwise.cli.options import JsonOpt
from tierwise.cli.output import console, line, print_json, styled, table, writable
from tierwise.errors import SpecError
from tierwise.hardware import catalog
from tierwise.hardware.ingest import (
    NodeTopology,
    SwitchTree,
    cluster_yaml,
    complete_cluster,
    parse_nccl_topo,
    parse_topo_matrix,
    parse_topology_conf,
)
from tierwise.textio import read_text

ingest_app = typer.Typer(
    help="Read nvidia-smi topo -m, NCCL's topology XML or Slurm topology.conf into a cluster "
    "spec, or a training log into its model, layout and measured step time.",
    no_args_is_help=True,
)

FileArg = Annotated[Path, typer.Argument(help="The tool's output file.", show_default=False)]
OutOpt = Annotated[Path | None, typer.Option("--out", "-o", help="Write the cluster YAML here.")]
GpuOpt = Annotated[
    str | None, typer.Option("--gpu", help="GPU catalog key (tierwise catalog gpus).")
]
NicOpt = Annotated[
    str | None, typer.Option("--nic", help="NIC catalog key (tierwise catalog nics).")
]
NodesOpt = Annotated[int | None, typer.Option("--nodes", help="Node count of the cluster.")]
GpnOpt = Annotated[int | None, typer.Option("--gpus-per-node", help="GPUs per node.")]
NpnOpt = Annotated[int | None, typer.Option("--nics-per-node", help="Compute NICs per node.")]
OverOpt = Annotated[
    float | None, typer.Option("--oversubscription", help="Leaf downlink:uplink ratio, e.g. 2.")
]
NameOpt = Annotated[str | None, typer.Option("--name", help="Cluster name (default: file name).")]


@dataclass(frozen=True)
class _Opts:
    """Spec options shared by the three ingest commands (None = take from the file or default)."""

    out: Path | None
    as_json: bool
    gpu: str | None
    nic: str | None
    nodes: int | None
    gpus_per_node: int | None
    nics_per_node: int | None
    oversubscription: float | None
    name: str | None

    def spec_kwargs(self, file: Path) -> dict[str, Any]:
        if self.gpu is not None:
            catalog.gpu(self.gpu, field="--gpu")
        if self.nic is not None:
            catalog.nic(self.nic, field="--nic")
        for flag, value in (("--nodes", self.nodes), ("--gpus-per-node", self.gpus_per_node)):
            if value is not None and value <= 0:
                raise SpecError(f"{flag}: must be a positive integer (got {value})")
        if self.nics_per_node is not None and self.nics_per_node < 0:
            raise SpecError(f"--nics-per-node: must be 0 or more (got {self.nics_per_node})")
        return {
            "name": self.name or file.stem.replace("_", "-"),
            "gpu": self.gpu,
            "nic": self.nic,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "nics_per_node": self.nics_per_node,
            "oversubscription": self.oversubscription,
        }


def _finish(
    tool: str,
    file: Path,
    found: dict[str, Any],
    data: dict[str, Any],
    notes: list[str],
    opts: _Opts,
    show: Callable[[], None],
) -> None:
    """Write the YAML if asked, then print the JSON object or the tables."""
    if opts.out is not None:
        writable(opts.out, "--out")
        header = [f"cluster spec from `tierwise ingest {tool} {file.name}`"]
        header += [f"assumed {n}" for n in notes]
        try:
            opts.out.write_text(cluster_yaml(data, header))
        except OSError as exc:
            raise SpecError(f"--out: cannot write {opts.out} ({exc.strerror})") from None
    if opts.as_json:
        out = str(opts.out) if opts.out else None
        print_json(
            {
                "tool": tool,
                "file": str(file),
                "found": found,
                "cluster": data,
                "assumed": notes,
                "out": out,
            }
        )
        return
    show()
    console.print(table("cluster spec", ["field", "value"], _flat(data)))
    for note in notes:
        console.print(line(styled("assumed", "yellow"), f" {note}"))
    console.print(f"wrote {opts.out}" if opts.out else "use --out spec.yaml to write this spec")


def _flat(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            rows += _flat(value, f"{prefix}{key}.")
        else:
            rows.append((f"{prefix}{key}", value))
    return rows


def _node(tool: str, parse: Callable[[str, str], NodeTopology], file: Path, opts: _Opts) -> None:
    kwargs = opts.spec_kwargs(file)
    topo = parse(read_text(file), str(file))
    data, defaults = complete_cluster(topo.cluster_fields(gpu=opts.gpu), **kwargs)
    notes = [*topo.assumptions(opts.gpu), *defaults]
    _finish(tool, file, topo.as_dict(opts.gpu), data, notes, opts, lambda: _show_node(topo, opts))


def _show_node(topo: NodeTopology, opts: _Opts) -> None:
    found = topo.as_dict(opts.gpu)
    intra = found["intra"] if isinstance(found["intra"], str) else found["intra"]["name"]
    switch = "NVSwitch" if topo.nvlink_switched else "no NVSwitch"
    console.print(
        line(
            styled(str(topo.source), "bold"),
            f" ({topo.tool}): {topo.gpus_per_node} GPUs "
            f"{topo.gpu_key or '(GPU not named)'}, {topo.nvlinks_per_gpu} NVLinks per GPU "
            f"({switch}) "
            f"-> intra {intra}, {found['intra_GBps_per_gpu']:g} GB/s per GPU per direction; "
            f"{len(topo.nics)} NICs, {len(topo.rails)} nearest to a GPU (rails)",
        )
    )
    gpu_rows = [
        (f"GPU{g.index}", g.numa_node, g.cpu_affinity, g.nvlinks, g.nearest_nic, g.nic_distance)
        for g in topo.gpus
    ]
    console.print(
        table(
            "GPUs", ["GPU", "NUMA", "CPU affinity", "NVLinks", "nearest NIC", "distance"], gpu_rows
        )
    )
    if topo.nics:
        nic_rows = [
            (n.name, n.kind, n.rate_Gbps, n.numa_node, ",".join(f"GPU{i}" for i in n.gpus) or "-")
            for n in topo.nics
        ]
        console.print(table("NICs", ["NIC", "kind", "Gb/s", "NUMA", "rail of"], nic_rows))


def _show_tree(tree: SwitchTree) -> None:
    console.print(
        line(
            styled(str(tree.source), "bold"),
            f": {len(tree.nodes)} nodes under {len(tree.leaves)} leaves, "
            f"{tree.levels} switch level(s), root {', '.join(tree.roots)}",
        )
    )
    rows = [
        (
            s.name,
            tree.level(s.name),
            len(s.nodes) or None,
            hostlist.collect_hostlist(list(s.nodes)) if s.nodes else None,
            hostlist.collect_hostlist(list(s.switches)) if s.switches else None,
            s.link_speed,
        )
        for s in tree.switches.values()
    ]
    console.print(
        table("switches", ["switch", "level", "nodes", "node list", "switches", "LinkSpeed"], rows)
    )


def _slurm(file: Path, opts: _Opts) -> None:
    """topology.conf -> switch tree, then the cluster spec around it."""
    kwargs = opts.spec_kwargs(file)
    tree = parse_topology_conf(read_text(file), str(file))
    partial, tree_notes = tree.cluster_fields()
    data, defaults = complete_cluster(partial, **kwargs)
    _finish(
        "slurm-topology",
        file,
        tree.as_dict(),
        data,
        [*tree_notes, *defaults],
        opts,
        lambda: _show_tree(tree),
    )


def _ingester(tool: str, doc: str, run: Callable[[Path, _Opts], None]) -> None:
    """Register `tierwise ingest TOOL FILE` with the shared spec-completion options."""

    def command(
        file: FileArg,
        out: OutOpt = None,
        as_json: JsonOpt = False,
        gpu: GpuOpt = None,
        nic: NicOpt = None,
        nodes: NodesOpt = None,
        gpus_per_node: GpnOpt = None,
        nics_per_node: NpnOpt = None,
        oversubscription: OverOpt = None,
        name: NameOpt = None,
    ) -> None:
        run(
            file,
            _Opts(
                out, as_json, gpu, nic, nodes, gpus_per_node, nics_per_node, oversubscription, name
            ),
        )

    command.__doc__ = doc
    ingest_app.command(tool)(command)


_ingester(
    "nvidia-smi",
    "`nvidia-smi topo -m` (optionally after `nvidia-smi -L`) -> intra tier, NICs, affinity.",
    lambda file, opts: _node("nvidia-smi", parse_topo_matrix, file, opts),
)
_ingester(
    "nccl-xml",
    "NCCL's topology dump (NCCL_TOPO_DUMP_FILE) -> intra tier, NICs with speeds, affinity.",
    lambda file, opts: _node("nccl-xml", parse_nccl_topo, file, opts),
)
_ingester(
    "slurm-topology",
    "Slurm topology.conf (topology/tree) -> switch tree, nodes per leaf, pods.",
    _slurm,
)


@ingest_app.command("training-log")
def training_log(
    log: Annotated[
        Path,
        typer.Argument(
            help="Training log: Megatron-LM / Megatron-DeepSpeed, Megatron-Bridge, NeMo, MLPerf "
            ":::MLLOG result, torchtitan (log, PR text or benchmarks/*.md).",
            show_default=False,
        ),
    ],
    configs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Config files of the run: MLPerf config_*.sh (and the files it sources), "
            "torchtitan TOML, NeMo/Megatron YAML, HF config.json, a launch script or command.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """What a training log states: framework, model, layout, GPUs, measured step time and
    memory; every field it does not state is listed as unknown (nothing is guessed)."""
    from tierwise.cli.trainlog_view import print_record
    from tierwise.verify.trainlog.read import read_run

    record = read_run(log, configs or [])
    if as_json:
        print_json(record.as_dict())
    else:
        print_record(record)


def register(app: typer.Typer) -> None:
    """Add the `ingest` command group."""
    app.add_typer(ingest_app, name="ingest")
