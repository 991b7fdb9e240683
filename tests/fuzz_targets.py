"""Every reader of a user's file, with real seed inputs and the CLI command that reads it.

Shared by the fuzz tests (tests/test_fuzz_readers.py) and ``benchmarks/fuzz.py``: each
``Target`` reads a file the way tierwise does (``read(path)``), names the seed files in
tests/data (or examples/) that mutations start from, and the command line that reads such a
file through the real CLI (``{}`` stands for the path).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
CORPUS = DATA / "fuzz"


@dataclass(frozen=True)
class Target:
    """One input format: its reader, seeds and a CLI command reading it."""

    name: str
    suffix: str
    seeds: tuple[Path, ...]
    read: Callable[[Path], Any]
    cli: tuple[str, ...]


def _cluster(path: Path) -> Any:
    from tierwise.hardware.cluster import load_cluster

    return load_cluster(str(path))


def _model(path: Path) -> Any:
    from tierwise.workload.load import load_model

    return load_model(str(path))


def _contract(path: Path) -> Any:
    from tierwise.verify.contract import load_contract

    return load_contract(path)


def _nccl(path: Path) -> Any:
    from tierwise.formats import parse_file

    return parse_file(path)


def _node(parse: str) -> Callable[[Path], Any]:
    def read(path: Path) -> Any:
        from tierwise.hardware import ingest
        from tierwise.textio import read_text

        topo = getattr(ingest, parse)(read_text(path), str(path))
        return ingest.complete_cluster(topo.cluster_fields(gpu=None), name="fuzz")

    return read


def _slurm(path: Path) -> Any:
    from tierwise.hardware.ingest import complete_cluster, parse_topology_conf
    from tierwise.textio import read_text

    tree = parse_topology_conf(read_text(path), str(path))
    tree.as_dict()
    return complete_cluster(tree.cluster_fields()[0], name="fuzz")


def _counters(path: Path) -> Any:
    from tierwise.verify.counters import deltas, read_snapshot

    snap = read_snapshot(path)
    return deltas(snap, snap, None)


def _trace(path: Path) -> Any:
    from tierwise.schedule.jobs import read_trace

    return read_trace(path)


@cache
def _h100() -> Any:
    from tierwise.hardware.cluster import load_cluster

    return load_cluster("dgx-h100")


def _runs(path: Path) -> Any:
    from tierwise.verify.runs import load_runs

    return load_runs(path, _h100())


def _files(*patterns: str) -> tuple[Path, ...]:
    return tuple(sorted(p for pat in patterns for p in REPO.glob(pat)))


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            "cluster",
            ".yaml",
            _files("tests/data/specs/cluster*.yaml"),
            _cluster,
            ("show", "cluster", "-c", "{}", "--json"),
        ),
        Target(
            "model",
            ".yaml",
            _files("tests/data/specs/model*.yaml"),
            _model,
            ("show", "model", "{}", "--json"),
        ),
        Target(
            "hf_config",
            ".json",
            _files("tests/data/hf/*.json"),
            _model,
            ("show", "model", "{}", "--json"),
        ),
        Target(
            "contract",
            ".yaml",
            _files("examples/contract*.yaml"),
            _contract,
            ("verify", "tests/data/verify/h100_2x8_ndr_all_reduce.txt", "--contract", "{}"),
        ),
        Target(
            "nccl_log",
            ".txt",
            _files("tests/data/nccl/*.txt", "tests/data/verify/*_all_reduce.txt"),
            _nccl,
            ("parse", "{}", "--json"),
        ),
        Target(
            "nvidia_smi",
            ".txt",
            _files("tests/data/ingest/nvidia_smi_*.txt"),
            _node("parse_topo_matrix"),
            ("ingest", "nvidia-smi", "{}", "--json"),
        ),
        Target(
            "nccl_xml",
            ".xml",
            _files("tests/data/ingest/*.xml"),
            _node("parse_nccl_topo"),
            ("ingest", "nccl-xml", "{}", "--json"),
        ),
        Target(
            "topology_conf",
            ".conf",
            _files("tests/data/ingest/*.conf"),
            _slurm,
            ("ingest", "slurm-topology", "{}", "--json"),
        ),
        Target(
            "counters",
            ".txt",
            _files("tests/data/verify/*_before.txt", "tests/data/verify/*_after*.txt"),
            _counters,
            (
                "verify",
                "tests/data/verify/h100_2x8_ndr_all_reduce.txt",
                "--contract",
                "examples/contract-ib-multinode.yaml",
                "--counters-before",
                "{}",
                "--counters-after",
                "{}",
            ),
        ),
        Target(
            "job_trace",
            ".csv",
            _files("tests/data/specs/trace*.csv"),
            _trace,
            ("schedule", "place", "-c", "dgx-h100", "--trace", "{}", "--json"),
        ),
        Target(
            "bench_json",
            ".json",
            _files("tests/data/verify/*.json"),
            _runs,
            (
                "verify",
                "{}",
                "--contract",
                "examples/contract.yaml",
                "-c",
                "dgx-h100",
                "--nodes",
                "1",
            ),
        ),
    )
}
