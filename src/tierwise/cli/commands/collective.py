"""`tierwise collective`: predicted cost of one collective over message sizes, nccl-tests style."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from tierwise.cli.options import JsonOpt, cluster_options
from tierwise.cli.output import console, print_json, say_notes, table, writable
from tierwise.collectives.as_nccl_tests import element_bytes, prediction_test
from tierwise.collectives.model import auto_candidates, candidates, link_patterns
from tierwise.collectives.predict import Prediction, group_shape, idle_for_group, predict
from tierwise.collectives.shape import Shape
from tierwise.collectives.sizes import ranks_sharing, whole_element_sizes
from tierwise.errors import SpecError
from tierwise.formats.nccl_writer import format_test
from tierwise.formats.ops import canonical_op
from tierwise.hardware.cluster import ClusterSpec
from tierwise.hardware.placement import Placement
from tierwise.units import parse_size, size_sweep


@cluster_options
def collective(
    cluster_spec: ClusterSpec,
    cluster_overrides: dict[str, Any],
    op: Annotated[
        str,
        typer.Option(
            "--op",
            help="all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv",
        ),
    ] = "all_reduce",
    gpus: Annotated[
        int | None, typer.Option("--gpus", help="Ranks in the group (default all).")
    ] = None,
    ranks_per_node: Annotated[
        int | None, typer.Option("--ranks-per-node", help="Ranks per node (default GPUs per node).")
    ] = None,
    min_bytes: Annotated[str, typer.Option("--min-bytes", "-b")] = "8",
    max_bytes: Annotated[str, typer.Option("--max-bytes", "-e")] = "8G",
    factor: Annotated[int, typer.Option("--factor", "-f")] = 2,
    datatype: Annotated[
        str,
        typer.Option(
            "--datatype",
            "-d",
            help="Element type, as nccl-tests' -d: the count and type columns (time depends "
            "on bytes only).",
        ),
    ] = "float",
    algo: Annotated[
        str,
        typer.Option(
            "--algo",
            help="auto (NCCL's choice), ring, tree, nvls, nvls_tree, collnet_direct, "
            "collnet_chain (sharp = either), pat, hierarchical (tierwise runtime), pairwise",
        ),
    ] = "auto",
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Print every candidate's latency and bandwidth, and the busiest link each "
            "chosen algorithm loads.",
        ),
    ] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write busbw vs size (PNG/SVG).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Predict time, algbw and busbw of a collective per message size, as nccl-tests prints."""
    op = canonical_op(op)
    for flag, value in (("--gpus", gpus), ("--ranks-per-node", ranks_per_node)):
        if value is not None and value < 1:
            raise SpecError(f"{flag}: {value}; allowed: 1 or more ranks")
    writable(plot, "--plot")
    k = ranks_per_node or cluster_spec.gpus_per_node
    world = gpus if gpus is not None else cluster_spec.nodes * k
    placement = Placement.contiguous(cluster_spec, world, ranks_per_node=k, world_name="--gpus")
    shape = group_shape(cluster_spec, placement=placement)
    say_notes(idle_for_group(cluster_spec, shape, cluster_overrides))  # --json: its notes
    memory = int(cluster_spec.gpu.hbm_gib * (1 << 30))
    requested = size_sweep(
        parse_size(min_bytes, "--min-bytes", memory),
        parse_size(max_bytes, "--max-bytes", memory),
        factor,
    )
    elem = element_bytes(datatype)
    sizes = [size for size, _ in whole_element_sizes(op, requested, world, elem)]
    if not sizes:
        raise SpecError(
            f"--max-bytes: {max_bytes}; allowed: at least one {datatype} element per rank "
            f"({elem * ranks_sharing(op, world)} B for {op} on {world} ranks)"
        )
    if len(sizes) < len(requested):
        say_notes(
            [
                f"{len(requested) - len(sizes)} of {len(requested)} sizes left out: they hold no "
                f"whole {datatype} element per rank, or the same elements as a smaller size "
                "(nccl-tests cuts each size to whole elements)"
            ]
        )
    pred = predict(op, shape, sizes, algo)
    nodes = len(placement.nodes_used())
    if plot is not None:
        from tierwise.report.figures import busbw_figure_file

        busbw_figure_file(cluster_spec, op, sizes, plot, ranks_per_node=k, world=world)
    _report(op, shape, pred, (world, nodes, k), datatype, cluster_spec.name, algo, explain, as_json)


def _report(
    op: str,
    shape: Shape,
    pred: Prediction,
    ranks: tuple[int, int, int],
    datatype: str,
    cluster: str,
    algo: str,
    explain: bool,
    as_json: bool,
) -> None:
    """Print the prediction (`ranks`: world, nodes, ranks per node) as nccl-tests does, or as
    JSON; with `explain`, every candidate and the busiest links of the chosen algorithms."""
    world, nodes, k = ranks
    explained = _explained(op, shape) if explain else []
    priced = list(dict.fromkeys(pred.algo))  # the algorithms chosen at some size
    links = _busiest_links(op, priced, shape) if explain else []
    if as_json:
        print_json(
            {
                "op": op,
                "nranks": world,
                "nodes": nodes,
                "ranks_per_node": k,
                "datatype": datatype,
                "cluster": cluster,
                "rows": pred.rows(),
                **(
                    {"candidates": explained, "priced_algos": priced, "busiest_links": links}
                    if explain
                    else {}
                ),
            }
        )
        return
    typer.echo(
        format_test(
            prediction_test(pred, nodes, k, datatype),
            extra_columns=("algo", "proto", "next", "margin"),
        ),
        nl=False,
    )
    if algo == "auto":
        typer.echo("# next: the runner-up candidate; margin: how much slower it is than the choice")
    if explain:
        _print_explained(explained, priced, links)


def register(app: typer.Typer) -> None:
    """Add `tierwise collective`."""
    app.command("collective")(collective)


def _explained(op: str, shape: Shape) -> list[dict[str, Any]]:
    """Every candidate's latency and bandwidth, its NVLS pipeline, and whether NCCL's tuner
    would consider it."""
    auto = set(auto_candidates(op, shape))
    return [
        {
            "algo": c.algo,
            "proto": c.proto,
            "lat_us": c.lat_us,
            "algbw_GBps": c.algbw_GBps,
            "tree_corrected": c.corrected,
            "nvls_pipeline": {
                "chunks_in_flight": c.pipeline.ops,
                "max_chunk_bytes": c.pipeline.chunk,
                "fill_loops": c.pipeline.loops,
            }
            if c.pipeline
            else None,
            "auto": c in auto,
        }
        for c in candidates(op, shape)
    ]


def _busiest_links(op: str, algos: list[str], shape: Shape) -> list[dict[str, Any]]:
    """The busiest link of each level (and stage) that each algorithm in `algos` loads, as
    priced (`link_patterns`); an algorithm that climbs above no leaf has no row."""
    return [
        {"algo": algo, "stage_ranks": g.p, **g.link_load(level, crossings, connections)}
        for algo in algos
        for g, level, crossings, connections in link_patterns(op, algo, shape)
    ]


def _pipeline_cell(p: dict[str, Any] | None) -> str:
    """`loops x chunks x chunk` of an NVLS pipeline's fill, or `-`."""
    if p is None:
        return "-"
    return f"{p['fill_loops']:g} x {p['chunks_in_flight']} x <= {p['max_chunk_bytes'] >> 10} KiB"


def _print_explained(
    explained: list[dict[str, Any]], priced: list[str], links: list[dict[str, Any]]
) -> None:
    """The candidates' table and the busiest link per level of each chosen algorithm."""
    rows = [
        (
            c["algo"],
            c["proto"],
            c["lat_us"],
            c["algbw_GBps"],
            "yes" if c["tree_corrected"] else "-",
            _pipeline_cell(c["nvls_pipeline"]),
            "yes" if c["auto"] else "forced only",
        )
        for c in explained
    ]
    console.print(
        table(
            "candidates (time = lat + (bytes + pipeline fill) / (algbw x tree correction))",
            ["algo", "proto", "lat us", "algbw GB/s", "tree corr.", "pipeline fill", "auto"],
            rows,
        )
    )
    if links:
        console.print(
            table(
                "busiest link per level of the chosen algorithms (connections x queue pairs as "
                "flows; every switch crossed hashes its own uplinks, and its downlinks too)",
                ["algo", "stage ranks", "level", "routing", "flows/switch", "uplinks",
                 "switches", "busiest link flows", "one switch's", "share", "per flow GB/s"],
                [
                    (
                        x["algo"], x["stage_ranks"], x["level"], x["routing"], x["flows"],
                        x["uplinks"], x["switches"], x["busiest_link_flows"],
                        x["one_switch_busiest_flows"], f"{x['busiest_link_share']:.1%}",
                        "fluid" if x["per_flow_GBps"] is None else x["per_flow_GBps"],
                    )
                    for x in links
                ],
            )
        )  # fmt: skip
    loaded = {x["algo"] for x in links}
    for algo in priced:
        if algo not in loaded:
            console.print(f"{algo}: sends nothing through a leaf's uplinks (busiest link: none)")
