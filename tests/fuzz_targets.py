"""Every reader of a user's file, with real seed inputs and the CLI command that reads it.

Shared by the fuzz tests (tests/test_fuzz_readers.py) and ``benchmarks/fuzz.py``: each
``Target`` reads a file the way tierwise does (``read(path)``), names the seed files in
tests/data (or examples/) that mutations start from, and the command line that reads such a
file through the real CLI (``{}`` stands for the path).
"""

from __future__ import annotations

import json
import random
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


TRAINLOG = DATA / "trainlog"


def _trainlog(*configs: str, log: str | None = None) -> Callable[[Path], Any]:
    """Read a training log (or, with ``log``, a config of that log) as `ingest` does."""

    def read(path: Path) -> Any:
        from tierwise.verify.trainlog.read import read_run

        if log is None:
            return read_run(path, [TRAINLOG / c for c in configs])
        return read_run(TRAINLOG / log, [path, *(TRAINLOG / c for c in configs)])

    return read


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
        Target(
            "trainlog_megatron",
            ".log",
            _files("tests/data/trainlog/megatron_*.log", "tests/data/trainlog/deepspeed.log"),
            _trainlog(),
            ("ingest", "training-log", "{}", "--json"),
        ),
        Target(
            "trainlog_nemo",
            ".log",
            _files("tests/data/trainlog/nemo2_*.log"),
            _trainlog(),
            ("ingest", "training-log", "{}", "--json"),
        ),
        Target(
            "trainlog_mlperf",
            ".log",
            _files("tests/data/trainlog/mlperf_*.log"),
            _trainlog("config_DGXH100_2x8x16xtp2pp1cp1.sh", "config_common_8b.sh"),
            ("ingest", "training-log", "{}", "--json"),
        ),
        Target(
            "trainlog_mlperf_config",
            ".sh",
            _files("tests/data/trainlog/config_DGX*.sh"),
            _trainlog("config_common_8b.sh", log="mlperf_result.log"),
            ("ingest", "training-log", "tests/data/trainlog/mlperf_result.log", "{}", "--json"),
        ),
        Target(
            "trainlog_titan",
            ".log",
            _files("tests/data/trainlog/torchtitan_*.log"),
            _trainlog("llama3_8b_titan.toml"),
            ("ingest", "training-log", "{}", "--json"),
        ),
        Target(
            "trainlog_titan_toml",
            ".toml",
            _files("tests/data/trainlog/*.toml"),
            _trainlog(log="torchtitan_2025.log"),
            ("ingest", "training-log", "tests/data/trainlog/torchtitan_2025.log", "{}", "--json"),
        ),
    )
}

NASTY = (
    "",
    "0",
    "-1",
    "-0",
    "1e999",
    "-1e999",
    "inf",
    "nan",
    "NaN",
    ".inf",
    ".nan",
    "Infinity",
    "9" * 5000,
    "1" + "0" * 400,
    "1e308",
    "²",
    "³²",
    "٣",
    "１２",
    "true",
    "null",
    "~",
    "[]",
    "{}",
    "[" * 2000,
    "{" * 2000,
    "- " * 500,
    "[/]",
    "[bold]x",
    "\x00",
    " " * 20000,
    "x" * 300,
    "a/" * 200,
    "\t",
    "\r\n",
    "N/A",
    "-",
    "'",
    '"',
    "&a [1]",
    "*a",
    "!!python/object:os.system",
    "\\",
    "\u202e",
    "GPU0",
    "NV18",
    "SwitchName=",
    "Nodes=n[1-99999999]",
    "n[1-99999999]",
    "#",
    "1,2",
    ":",
    "=",
    "2024-13-45",
    "0x1f",
    "1_000",
    "# Collective test starting: all_reduce_perf",
    "#  size count type redop root time algbw busbw #wrong",
    "1024 256 float sum -1 10.0 0.1 0.2 0",
)
NASTY_VALUES: tuple[Any, ...] = (
    5,
    True,
    None,
    "rail-optimized",
    [],
    {},
    ["llama"],
    {"a": 1},
    -1,
    0,
    0.5,
    10**30,
    2**63,
    1e308,
    "x" * 300,
    "[/]",
    "9" * 30,
)
_BYTES = (*(s.encode() for s in NASTY), b"\xff\xfe", b"\xc3")


def _leaves(data: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(data, dict):
        out = [path] if path else []
        return out + [p for k, v in data.items() for p in _leaves(v, (*path, k))]
    if isinstance(data, list):
        out = [path] if path else []
        return out + [p for i, v in enumerate(data) for p in _leaves(v, (*path, i))]
    return [path]


def _structured(text: str, suffix: str, rng: random.Random) -> bytes | None:
    """One value of a YAML/JSON document replaced (or a key dropped); None if not parseable."""
    import yaml

    try:
        data = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
    except Exception:
        return None
    paths = [p for p in _leaves(data) if p]
    if not paths:
        return None
    path = rng.choice(paths)
    node = data
    for key in path[:-1]:
        node = node[key]
    if rng.random() < 0.15:
        del node[path[-1]]
    else:
        node[path[-1]] = rng.choice(NASTY_VALUES)
    if suffix == ".json":
        return json.dumps(data).encode()
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False).encode()


def _alias_bomb(depth: int) -> bytes:
    """YAML whose aliases expand to 9**depth values (a "billion laughs")."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, depth)]
    return "\n".join(lines).encode() + b"\n"


def _big_input(suffix: str, rng: random.Random) -> bytes:
    """Inputs of a kind no seed has: deep or aliased YAML/JSON, run-on and repeated lines,
    huge integers and unicode digits in place of numbers."""
    kind = rng.randrange(6)
    if kind == 0:
        return _alias_bomb(rng.choice((3, 6, 9)))
    if kind == 1:
        depth = rng.choice((20, 40, 200, 5000))
        if suffix == ".json":
            return b'{"a": ' * depth + b"1" + b"}" * depth
        return "".join(f"{'  ' * i}k{i}:\n" for i in range(depth)).encode() + b"  " * depth + b"x\n"
    if kind == 2:  # one run-on line (no newline), 256 kB-1 MB
        return rng.choice((b"x", b"9", b"# ", b"NCCL INFO ", b"[")) * rng.choice((1 << 18, 1 << 20))
    if kind == 3:  # a real-looking line repeated 2x10^4 times
        line = rng.choice((b"gpu0 NV18 NV18\n", b"SwitchName=s Nodes=n[1-2]\n", b"a,1,2,3\n"))
        return line * 20_000
    if kind == 4:
        return ("n: " + "9" * rng.choice((19, 20, 400, 5000)) + "\n").encode()
    return rng.choice(("n: ١٢٣\n", "n: ２\n", "n: ²\n", "n: 1_000\n")).encode()


def mutate(seed: bytes, suffix: str, rng: random.Random) -> bytes:
    """One to three random mutations of ``seed`` (1 in 100: an input of its own, see
    ``_big_input``)."""
    if rng.random() < 0.01:
        return _big_input(suffix, rng)
    data = seed
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        kind = rng.randrange(9)
        lines = data.split(b"\n")
        pos = rng.randrange(len(data) + 1)
        if kind == 0 and suffix in (".yaml", ".json"):
            data = _structured(data.decode("utf-8", "replace"), suffix, rng) or data
        elif kind <= 2:  # replace a word with a nasty token
            words = [i for i in range(1, len(data)) if data[i - 1 : i] in (b" ", b":", b"=", b",")]
            at = rng.choice(words) if words else pos
            end = at
            while end < len(data) and data[end : end + 1] not in b" \n,\t":
                end += 1
            data = data[:at] + rng.choice(_BYTES) + data[end:]
        elif kind == 3:
            data = data[:pos] + rng.choice(_BYTES) + data[pos:]
        elif kind == 4:
            data = data[: rng.randrange(len(data) + 1)]
        elif kind == 5 and len(lines) > 1:
            i = rng.randrange(len(lines))
            lines.insert(rng.randrange(len(lines)), lines[i] * rng.choice((1, 1, 2, 50)))
            data = b"\n".join(lines)
        elif kind == 6 and len(lines) > 1:
            del lines[rng.randrange(len(lines))]
            data = b"\n".join(lines)
        elif kind == 7 and data:
            i = rng.randrange(len(data))
            data = data[:i] + bytes([rng.randrange(256)]) + data[i + 1 :]
        elif len(lines) > 2:
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            data = b"\n".join(lines)
    return data


def read_case(target: Target, path: Path) -> str:
    """'ok', 'user_error' or 'traceback' of reading ``path`` with the target's reader: a
    TierwiseError of one line is a user error, any other exception a traceback."""
    from tierwise.errors import TierwiseError

    try:
        target.read(path)
    except TierwiseError as exc:
        return "user_error" if "\n" not in str(exc).strip() else "traceback"
    except Exception:
        return "traceback"
    return "ok"
