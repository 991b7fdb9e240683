"""Speed of the collective cost model (JSON out).

- one cost query and a 30-size sweep on a group whose shape is built once (issue 4 targets:
  <= 20 us and <= 200 us), as NCCL builds its tables once per communicator;
- `tierwise collective` for every op over 64 sizes after the cluster is built (issue 19
  target: <= 10 ms per call): placement, group shape, candidates (tables cleared first, so
  each call builds them) and the nccl-tests table, per op on the largest preset shapes;
- the same on 16,384 GPUs (2,048 DGX H100 nodes, leaves of 32, pods of 8 leaves at 1:7, ECMP
  with 4 queue pairs; issue 27 target: < 50 ms per call), the ECMP tables cleared too; in
  CPU time as well (a shared machine's wall clock is mostly waiting), and the whole in-process
  command (`tierwise collective --nodes 2048 --routing ecmp`, with and without --explain);
- the same on 16,384 GPUs in two leaves of 1,024 nodes with 64 queue pairs per connection
  (many uplinks per switch: the busiest-link tables' cost must not grow with them).
"""

from __future__ import annotations

import json
import time
import timeit
from functools import partial
from typing import Any

import numpy as np

from tierwise.collectives import links
from tierwise.collectives.as_nccl_tests import prediction_test
from tierwise.collectives.model import OPS, auto_candidates, candidates
from tierwise.collectives.predict import group_shape, predict, time_us
from tierwise.formats.nccl_writer import format_test
from tierwise.hardware.cluster import ClusterSpec, load_cluster
from tierwise.hardware.placement import Placement

SIZES_64 = np.unique(np.geomspace(8, 16 << 30, 64).astype(np.int64))
CALL_TARGET_MS = 10.0
LARGE_CALL_TARGET_MS = 50.0


def collective_call(cluster: ClusterSpec, op: str) -> str:
    """What `tierwise collective --op OP` computes after loading the cluster."""
    candidates.cache_clear()
    auto_candidates.cache_clear()
    for table in (links.expected_max_load, links.max_load_cdf, links._poisson_max):
        table.cache_clear()
    placement = Placement.contiguous(cluster)
    shape = group_shape(cluster, placement=placement)
    pred = predict(op, shape, SIZES_64)
    return format_test(prediction_test(pred, cluster.nodes, cluster.gpus_per_node))


def per_call_ms(cluster: ClusterSpec, timer: Any = time.perf_counter) -> dict[str, float]:
    """Best-of-5 milliseconds of one `collective` call per op (wall clock, or `timer`)."""
    out = {}
    for op in OPS:
        call = partial(collective_call, cluster, op)
        best = min(timeit.repeat(call, number=5, repeat=5, timer=timer))
        out[op] = round(best / 5 * 1e3, 3)
    return out


def cli_cpu_ms(args: list[str], calls: int = 5) -> float:
    """CPU milliseconds of one in-process `tierwise` command (option parsing, cluster load,
    the model and the printed table), mean of `calls` after one warm-up."""
    from typer.testing import CliRunner

    from tierwise.cli.main import app

    runner = CliRunner()
    assert runner.invoke(app, args).exit_code == 0
    start = time.process_time()
    for _ in range(calls):
        runner.invoke(app, args)
    return round((time.process_time() - start) / calls * 1e3, 2)


def large_fabric() -> ClusterSpec:
    """16,384 GPUs in pods of 8 leaves at 1:7 above them, ECMP with 4 queue pairs."""
    base = load_cluster("dgx-h100", nodes=2048, routing="ecmp", qps_per_connection=4)
    topology = base.topology.model_copy(update={"leaves_per_pod": 8, "pod_oversubscription": 7.0})
    return base.model_copy(update={"topology": topology})


def wide_leaves() -> ClusterSpec:
    """16,384 GPUs in two leaves of 1,024 nodes, ECMP with 64 queue pairs per connection."""
    base = load_cluster("dgx-h100", nodes=2048, routing="ecmp", qps_per_connection=64)
    topology = base.topology.model_copy(update={"nodes_per_leaf": 1024})
    return base.model_copy(update={"topology": topology})


def main() -> None:
    cluster = load_cluster("dgx-h100", nodes=16)
    shape = group_shape(cluster)
    sizes = 2 ** np.arange(4, 34)
    time_us("all_reduce", shape, 1 << 20)  # warm the per-shape tables
    n = 20000
    query = (
        min(timeit.repeat(lambda: time_us("all_reduce", shape, 1 << 20), number=n, repeat=5)) / n
    )
    sweep = (
        min(timeit.repeat(lambda: predict("all_reduce", shape, sizes), number=2000, repeat=5))
        / 2000
    )
    build = min(timeit.repeat(lambda: group_shape(cluster), number=200, repeat=3)) / 200
    calls = {
        name: per_call_ms(load_cluster(name, nodes=nodes))
        for name, nodes in (("dgx-h100", 512), ("gb200-nvl72", 18), ("pcie-h100", 64))
    }
    worst = max(ms for per_op in calls.values() for ms in per_op.values())
    large = per_call_ms(large_fabric())
    large_cpu = per_call_ms(large_fabric(), time.process_time)
    wide_cpu = per_call_ms(wide_leaves(), time.process_time)
    cli = ["collective", "--cluster", "dgx-h100", "--nodes", "2048", "--routing", "ecmp"]
    cli_ms = {"table": cli_cpu_ms(cli), "explain": cli_cpu_ms([*cli, "--explain"])}
    print(
        json.dumps(
            {
                "query_us": round(query * 1e6, 2),
                "sweep_30_sizes_us": round(sweep * 1e6, 2),
                "group_shape_build_us": round(build * 1e6, 2),
                "collective_call_ms": calls,
                "collective_call_sizes": len(SIZES_64),
                "collective_call_worst_ms": worst,
                "targets": {
                    "query_us": 20,
                    "sweep_30_sizes_us": 200,
                    "collective_call_ms": CALL_TARGET_MS,
                },
                "meets_call_target": worst <= CALL_TARGET_MS,
                "collective_call_16384_gpus_ms": large,
                "collective_call_16384_gpus_cpu_ms": large_cpu,
                "cli_collective_16384_gpus_cpu_ms": cli_ms,
                "collective_call_16384_gpus_1024_node_leaves_64_qps_cpu_ms": wide_cpu,
                "meets_16384_gpu_target": max(*large_cpu.values(), *wide_cpu.values())
                < LARGE_CALL_TARGET_MS
                and max(cli_ms.values()) < LARGE_CALL_TARGET_MS,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
