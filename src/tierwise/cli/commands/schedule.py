"""`tierwise schedule`: job placement on a shared cluster — simulate policies on a trace, place a
burst of jobs (and price Slurm's placement of it), emit and read Slurm topology files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import hostlist
import numpy as np
import typer

from tierwise.bounds import MAX_JOBS, MAX_SEED
from tierwise.cli.options import JsonOpt, cluster_options, count_option
from tierwise.cli.output import console, print_json, say_notes, table, writable, write_files
from tierwise.errors import ParseError, SpecError
from tierwise.hardware.cluster import ClusterSpec, unread_overrides
from tierwise.hardware.ingest.slurm_topology import (
    TOPOLOGY_CONF_READS,
    emit_slurm_nodes,
    emit_topology_conf,
    parse_topology_conf,
)
from tierwise.schedule import slurm
from tierwise.schedule.jobs import SYNTHETIC_READS, Job, read_trace, synthetic, write_trace
from tierwise.schedule.policies import POLICIES, policy
from tierwise.schedule.simulate import SimResult, place_all, price, simulate
from tierwise.schedule.slowdown import DEFAULT_STEP_TIME, SlowdownModel
from tierwise.schedule.state import ClusterState
from tierwise.schedule.step_time import STEP_TIMES, step_time_fn
from tierwise.textio import read_text
from tierwise.units import parse_duration

app = typer.Typer(
    help="Topology-aware job placement: simulate policies, Slurm files.", no_args_is_help=True
)
slurm_app = typer.Typer(help="Slurm topology.conf / slurm.conf / hostfiles.", no_args_is_help=True)
app.add_typer(slurm_app, name="slurm")

TraceOpt = Annotated[Path | None, typer.Option("--trace", help="CSV trace (docs/schedule.md).")]
SyntheticOpt = Annotated[
    int | None, count_option("--synthetic", help="Generate N jobs instead.", high=MAX_JOBS)
]
SeedOpt = Annotated[int, count_option("--seed", help="Synthetic trace seed.", low=0, high=MAX_SEED)]
MIN_LOAD, MAX_LOAD = 0.01, 1.5
"""Synthetic offered load (busy GPU-hours over cluster GPU-hours): below 1% a trace of N jobs
spans N/0.01 mean durations (smaller loads only stretch time and underflow arrivals)."""
LoadOpt = Annotated[
    float,
    typer.Option("--load", help="Synthetic offered load, 0.01-1.5.", min=MIN_LOAD, max=MAX_LOAD),
]
PrefixOpt = Annotated[str, typer.Option("--prefix", help="Node name prefix (gpu -> gpu001).")]
SlowdownOpt = Annotated[
    str,
    typer.Option("--slowdown", help=f"Step-time model of a placement: {' or '.join(STEP_TIMES)}."),
]
SUMMARY_COLUMNS = {
    "mean_jct_s": "mean JCT s",
    "p95_jct_s": "p95 JCT s",
    "mean_wait_s": "wait s",
    "makespan_s": "makespan s",
    "utilization": "util",
    "mean_slowdown": "slowdown",
    "max_slowdown": "max sd",
    "mean_leaves_per_job": "leaves/job",
    "fragmentation": "frag",
    "jct_vs_naive_pct": "JCT vs naive % (>0 faster)",
}


def _jobs(
    cluster: ClusterSpec, trace: Path | None, count: int | None, seed: int, load: float
) -> list[Job]:
    if (trace is None) == (count is None):
        raise SpecError("give exactly one of --trace FILE or --synthetic N")
    if trace is not None:
        return read_trace(trace)
    if not MIN_LOAD <= load <= MAX_LOAD:  # a library call; the CLI option is bounded too
        raise SpecError(f"--load: {load}; allowed: {MIN_LOAD} to {MAX_LOAD}")
    return synthetic(cluster, count, seed, load)


def _nodes(cluster: ClusterSpec, expr: str | None, what: str, prefix: str) -> list[int]:
    if not expr:
        return []
    try:
        return slurm.node_indices(cluster, expr, prefix)
    except SpecError as exc:
        raise SpecError(f"--{what}: {exc}") from None


@cluster_options
def simulate_cmd(
    cluster_spec: ClusterSpec,
    trace: TraceOpt = None,
    synthetic_jobs: SyntheticOpt = None,
    seed: SeedOpt = 0,
    load: LoadOpt = 0.9,
    policies: Annotated[
        str, typer.Option("--policy", help="naive, topo, topo-frag, or a comma list to compare.")
    ] = "naive,topo,topo-frag",
    max_wait: Annotated[
        str | None,
        typer.Option(
            "--max-wait", help="Wait up to this long (e.g. 10m) for a placement in fewest leaves."
        ),
    ] = None,
    down: Annotated[
        str | None, typer.Option("--down", help="Down nodes, hostlist (gpu[003-004]).")
    ] = None,
    drained: Annotated[
        str | None, typer.Option("--drained", help="Drained nodes, hostlist.")
    ] = None,
    prefix: PrefixOpt = "gpu",
    slowdown: SlowdownOpt = DEFAULT_STEP_TIME,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a JCT comparison (PNG/SVG).")
    ] = None,
    trace_out: Annotated[
        Path | None, typer.Option("--trace-out", help="Also write the trace used as CSV.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a job trace under each placement policy; print JCT, utilisation and slowdowns."""
    writable(plot, "--plot")
    writable(trace_out, "--trace-out")
    jobs = _jobs(cluster_spec, trace, synthetic_jobs, seed, load)
    if trace_out is not None:
        write_trace(jobs, trace_out)
    wait_s = parse_duration(max_wait, "--max-wait") if max_wait else 0.0
    names = [p.strip() for p in policies.split(",") if p.strip()]
    chosen = [policy(p) for p in names]
    down_nodes = _nodes(cluster_spec, down, "down", prefix)
    drained_nodes = _nodes(cluster_spec, drained, "drained", prefix)
    model = SlowdownModel(cluster_spec, step_time_fn(slowdown))
    results = [
        simulate(ClusterState(cluster_spec, down_nodes, drained_nodes), jobs, p, model, wait_s)
        for p in chosen
    ]
    rows = _summaries(results)
    if plot is not None:
        _plot(results, plot)
    if as_json:
        out = {
            "cluster": cluster_spec.name,
            "nodes": cluster_spec.nodes,
            "oversubscription": cluster_spec.topology.oversubscription,
            "jobs": len(jobs),
            "max_wait_s": wait_s,
            "slowdown_model": slowdown,
            "results": rows,
        }
        print_json({**out, **rows[0]} if len(rows) == 1 else out)
        return
    console.print(
        table(
            f"{cluster_spec.name}: {cluster_spec.nodes} nodes, "
            f"{cluster_spec.topology.oversubscription:g}:1, {len(jobs)} jobs",
            ["policy", *SUMMARY_COLUMNS.values()],
            [[r["policy"], *(r[k] for k in SUMMARY_COLUMNS)] for r in rows],
        )
    )


def _summaries(results: list[SimResult]) -> list[dict[str, object]]:
    """Metrics of each result plus the mean-JCT improvement over naive (positive = faster),
    when it ran."""
    rows = [r.metrics() for r in results]
    naive = next((m for m in rows if m["policy"] == "naive"), None)
    for m in rows:
        m["jct_vs_naive_pct"] = (
            100.0 * (naive["mean_jct_s"] - m["mean_jct_s"]) / naive["mean_jct_s"] if naive else None
        )
    return rows


def _plot(results: list[SimResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for r in results:
        jct = np.sort([x.jct_s for x in r.records]) / 3600
        a.plot(jct, np.linspace(0, 1, len(jct)), label=r.policy)
        b.bar(r.policy, r.metrics()["mean_jct_s"] / 3600)
    a.set(
        xscale="log", xlabel="job completion time (h)", ylabel="fraction of jobs", title="JCT CDF"
    )
    a.legend()
    b.set(ylabel="mean JCT (h)", title="mean job completion time")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


@cluster_options
def synth_cmd(
    cluster_spec: ClusterSpec,
    cluster_overrides: dict[str, Any],
    count: Annotated[int, typer.Argument(help="Jobs to generate.", min=1, max=MAX_JOBS)],
    out: Annotated[Path, typer.Option("--out", "-o", help="CSV file to write.")],
    seed: SeedOpt = 0,
    load: LoadOpt = 0.9,
    as_json: JsonOpt = False,
) -> None:
    """Write a synthetic trace (documented size/TP mix) as CSV."""
    writable(out, "--out")
    say_notes(
        unread_overrides(cluster_spec, cluster_overrides, SYNTHETIC_READS, "a synthetic trace")
    )
    jobs = _jobs(cluster_spec, None, count, seed, load)
    write_trace(jobs, out)
    if as_json:
        print_json({"cluster": cluster_spec.name, "jobs": len(jobs), "seed": seed, "out": str(out)})
        return
    typer.echo(f"wrote {len(jobs)} jobs to {out}")


def read_allocations(path: Path, cluster: ClusterSpec, prefix: str) -> dict[str, list[int]]:
    """`job nodelist` per line, as `squeue -h -o '%j %N'` prints; errors name the line."""
    out: dict[str, list[int]] = {}
    text = read_text(path)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ParseError(f"expected 'job nodelist', got {line.strip()!r}", number, str(path))
        try:
            out[parts[0]] = slurm.node_indices(cluster, parts[1], prefix)
        except SpecError as exc:
            raise ParseError(str(exc), number, str(path)) from None
    return out


def _hostlist(cluster: ClusterSpec, nodes: np.ndarray, prefix: str) -> str:
    return hostlist.collect_hostlist(slurm.node_names(cluster, nodes, prefix))


@cluster_options
def place_cmd(
    cluster_spec: ClusterSpec,
    trace: Annotated[Path, typer.Option("--trace", help="CSV trace; jobs start in file order.")],
    policy_name: Annotated[str, typer.Option("--policy", help="naive, topo, topo-frag.")] = "topo",
    allocations: Annotated[
        Path | None,
        typer.Option(
            "--allocations",
            help="Compare with these placements: 'job nodelist' lines (squeue -h -o '%j %N').",
        ),
    ] = None,
    prefix: PrefixOpt = "gpu",
    slowdown: SlowdownOpt = DEFAULT_STEP_TIME,
    as_json: JsonOpt = False,
) -> None:
    """Place a burst of jobs at once (none ends) and predict each job's slowdown; with
    --allocations also price Slurm's placements and say where they differ."""
    jobs = read_trace(trace)
    state = ClusterState(cluster_spec)
    model = SlowdownModel(cluster_spec, step_time_fn(slowdown))
    ours = price(state, jobs, place_all(state, jobs, policy(policy_name)), model)
    theirs = None
    if allocations is not None:
        given = read_allocations(allocations, cluster_spec, prefix)
        missing = [j.id for j in jobs if j.id not in given]
        if missing:
            raise SpecError(f"--allocations: no placement for job(s) {', '.join(missing)}")
        theirs = price(state, jobs, [np.array(given[j.id]) for j in jobs], model)
    rows = []
    for k, p in enumerate(ours):
        row = {
            "id": p.job.id,
            "nodes": len(p.nodes),
            "nodelist": _hostlist(cluster_spec, p.nodes, prefix),
            "leaves": p.leaves,
            "uplink_share": p.uplink_share,
            "slowdown": p.slowdown,
        }
        if theirs is not None:
            t = theirs[k]
            row |= {
                "given_nodelist": _hostlist(cluster_spec, t.nodes, prefix),
                "given_leaves": t.leaves,
                "given_slowdown": t.slowdown,
                "match": sorted(t.nodes.tolist()) == sorted(p.nodes.tolist()),
            }
        rows.append(row)
    if as_json:
        out: dict[str, object] = {
            "cluster": cluster_spec.name,
            "policy": policy_name,
            "slowdown_model": slowdown,
            "jobs": rows,
        }
        if theirs is not None:
            out["matches"] = sum(bool(r["match"]) for r in rows)
        print_json(out)
        return
    cols = list(rows[0])
    console.print(
        table(
            f"{policy_name} placement on {cluster_spec.name}",
            cols,
            [[r[c] for c in cols] for r in rows],
        )
    )


@cluster_options
def topology_cmd(
    cluster_spec: ClusterSpec,
    cluster_overrides: dict[str, Any],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Directory for topology.conf and slurm-nodes.conf (default: print)."
        ),
    ] = None,
    prefix: PrefixOpt = "gpu",
    cpus: Annotated[int | None, typer.Option("--cpus", help="CPUs= per node.")] = None,
    gres: Annotated[
        bool, typer.Option("--gres/--no-gres", help="Gres=gpu:TYPE:N per node (needs gres.conf).")
    ] = True,
    addr_base: Annotated[
        str | None,
        typer.Option("--node-addr-base", help="Emulation: NodeAddr=BASE+N, e.g. 127.0.1."),
    ] = None,
    port_base: Annotated[
        int | None, typer.Option("--port-base", help="Emulation: Port=BASE+N per node.")
    ] = None,
    partition: Annotated[
        str, typer.Option("--partition", help="Partition of all nodes, node-exclusive.")
    ] = "gpus",
    as_json: JsonOpt = False,
) -> None:
    """Emit topology.conf (topology/tree) and the matching slurm.conf node section."""
    what = "topology.conf"
    say_notes(unread_overrides(cluster_spec, cluster_overrides, TOPOLOGY_CONF_READS, what))
    hosts = slurm.node_names(cluster_spec, range(cluster_spec.nodes), prefix)
    topo = emit_topology_conf(cluster_spec, hosts)
    nodes = emit_slurm_nodes(
        cluster_spec,
        hosts,
        cpus=cpus,
        gres=gres,
        node_addr_base=addr_base,
        port_base=port_base,
        partition=partition,
    )
    files = {"topology.conf": topo, "slurm-nodes.conf": nodes}
    written = [] if out is None else write_files(out, files, "--out")
    if as_json:
        print_json({"cluster": cluster_spec.name, "files": files, "written": written})
    elif out is None:
        typer.echo(topo + "\n# slurm.conf node section\n" + nodes, nl=False)
    else:
        typer.echo(f"wrote {out / 'topology.conf'} and {out / 'slurm-nodes.conf'}")


def parse_cmd(
    path: Annotated[Path, typer.Argument(help="topology.conf to read.")],
    as_json: JsonOpt = False,
) -> None:
    """Read a topology.conf: switches, levels, nodes per leaf; errors name the line."""
    text = read_text(path)
    tree = parse_topology_conf(text, str(path))
    view = tree.as_dict()
    if as_json:
        print_json(view)
        return
    console.print(
        table(
            f"{path}: {tree.levels} levels, {len(tree.leaves)} leaves, {len(tree.nodes)} nodes",
            ["switch", "level", "nodes", "below"],
            [
                [
                    s["name"],
                    s["level"],
                    len(s["nodes"]),
                    hostlist.collect_hostlist(s["nodes"] or s["switches"]),
                ]
                for s in view["switches"]
            ],
        )
    )


@cluster_options
def hostfile_cmd(
    cluster_spec: ClusterSpec,
    cluster_overrides: dict[str, Any],
    nodelist: Annotated[
        str, typer.Option("--nodelist", help="Allocation, e.g. gpu[001-004] ($SLURM_JOB_NODELIST).")
    ],
    gpus: Annotated[int, typer.Option("--gpus", help="Ranks (tp*pp*dp).")],
    fmt: Annotated[
        str, typer.Option("--format", help="hostfile (SLURM_HOSTFILE) or rankfile (Open MPI).")
    ] = "hostfile",
    prefix: PrefixOpt = "gpu",
    as_json: JsonOpt = False,
) -> None:
    """Print the SLURM_HOSTFILE or rankfile for an allocation, leaf by leaf."""
    writers = {"hostfile": slurm.hostfile, "rankfile": slurm.rankfile}
    say_notes(unread_overrides(cluster_spec, cluster_overrides, slurm.HOSTFILE_READS, f"a {fmt}"))
    if fmt not in writers:
        raise SpecError(f"--format: {fmt!r}; allowed: {', '.join(writers)}")
    hosts = slurm.node_names(
        cluster_spec, sorted(slurm.node_indices(cluster_spec, nodelist, prefix)), prefix
    )
    text = writers[fmt](gpus, hosts, cluster_spec.gpus_per_node)
    if as_json:
        ranks = slurm.rank_hosts(gpus, hosts, cluster_spec.gpus_per_node)
        print_json({"format": fmt, "gpus": gpus, "nodes": hosts, "rank_hosts": ranks, "text": text})
        return
    typer.echo(text, nl=False)


# Registered once, at import: `register` runs on every in-process `main()` (a library user's,
# the fuzz harness's), and registering again grew the group with every call.
app.command("simulate")(simulate_cmd)
app.command("synth")(synth_cmd)
app.command("place")(place_cmd)
slurm_app.command("topology")(topology_cmd)
slurm_app.command("parse")(parse_cmd)
slurm_app.command("hostfile")(hostfile_cmd)


def register(root: typer.Typer) -> None:
    """Add `tierwise schedule ...`."""
    root.add_typer(app, name="schedule")


__all__ = ["POLICIES", "register"]
