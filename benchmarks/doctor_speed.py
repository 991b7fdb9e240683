"""Speed of `tierwise doctor`'s readers on a large NCCL_DEBUG=INFO log (JSON out).

Target (issue 29): a 50 MB log is read and diagnosed in under 3 s (one streaming pass). The
log is built from the real excerpts in tests/data/doctor (setup lines of 64 ranks on 8 hosts,
connection lines, warnings, an nccl-tests table) repeated to the size asked, with launcher
prefixes, and every tenth block pasted without its line breaks (records run together).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from tierwise.hardware.cluster import load_cluster
from tierwise.verify.doctor import diagnose

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "doctor"
SOURCES = (
    "healthy/nccl-tests-133-nvlink-ib.log",
    "healthy/nccl-tests-350-gdr-setup.log",
    "nccl-1412-no-gdrdma.log",
    "nccl-1050-sharp.log",
)
PREFIXES = ("", "[1,0]<stdout>:", "0: ", "[rank3]:")


def build_log(path: Path, megabytes: float) -> int:
    """Write a log of about `megabytes` MB; returns its size in bytes."""
    lines = [
        line
        for name in SOURCES
        for line in (DATA / name).read_text().splitlines()
        if not line.startswith("#")
    ]
    table = (DATA / "healthy" / "nccl-tests-252-table.log").read_text()
    block = "\n".join(f"{PREFIXES[i % len(PREFIXES)]}{line}" for i, line in enumerate(lines))
    joined = " ".join(lines)  # a paste that lost its line breaks
    repeats = max(1, int(megabytes * 1e6 / (len(block) + 1)))
    with path.open("w") as out:
        for i in range(repeats):
            out.write((joined if i % 10 == 9 else block) + "\n")
        out.write(table)
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=50.0, help="log size in MB")
    args = parser.parse_args()
    cluster = load_cluster("dgx-h100", nodes=2)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "big.log"
        size = build_log(log, args.mb)
        start, cpu = time.perf_counter(), time.process_time()
        diagnosis = diagnose([log], cluster)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    print(
        json.dumps(
            {
                "log_MB": round(size / 1e6, 1),
                "read_and_diagnose_s": round(seconds, 2),
                "cpu_s": round(cpu_seconds, 2),  # this process's CPU time: robust to a busy host
                "MB_per_s": round(size / 1e6 / seconds, 1),
                "findings": [f.id for f in diagnosis.findings],
                "target_s": 3,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
