"""Speed of `tierwise ingest training-log` on large logs (JSON out).

Target (issue 30): a 50 MB log reads in under 3 s. `cpu_s` is the CPU time of the read, what
`read_s` (wall) is on an idle core; a shared machine's wall time is longer. The logs are built
from the small logs in tests/data/trainlog (Megatron-LM with its arguments block, iteration and
memory lines; torchtitan step lines printed by 8 ranks), their iteration lines repeated with
rising iteration numbers, interleaved with warnings, to the size asked.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

from tierwise.verify.trainlog.read import read_run

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "trainlog"
NOISE = "[rank3]:[W1203 10:00:00.000 ProcessGroupNCCL.cpp:1234] Warning: some GLOO noise\n"


def build_megatron(path: Path, megabytes: float) -> int:
    head, *_ = (DATA / "megatron_2024_llama8b.log").read_text().partition(" [2025-12-03")
    line = next(
        x
        for x in (DATA / "megatron_2024_llama8b.log").read_text().splitlines()
        if "elapsed time per iteration (ms): 5001.9" in x
    )
    with path.open("w") as out:
        out.write(head)
        i = 0
        while out.tell() < megabytes * 1e6:
            i += 1
            out.write(re.sub(r"iteration\s+\d+/", f"iteration {i:8d}/", line) + "\n" + NOISE)
    return path.stat().st_size


def build_titan(path: Path, megabytes: float) -> int:
    line = next(x for x in (DATA / "torchtitan_2025.log").read_text().splitlines() if "step:" in x)
    with path.open("w") as out:
        i = 0
        while out.tell() < megabytes * 1e6:
            i += 1
            stamp = f"2025-06-01 {10 + i // 3600 % 10:02d}:{i // 60 % 60:02d}:{i % 60:02d},000"
            row = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", stamp, line)
            row = re.sub(r"step:\s+\d+", f"step: {i}", row)
            out.write("".join(row.replace("[rank0]", f"[rank{r}]") + "\n" for r in range(8)))
            out.write(NOISE)
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=50.0, help="log size in MB")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in (("megatron", build_megatron), ("torchtitan", build_titan)):
            path = Path(tmp) / f"{name}.log"
            size = build(path, args.mb)
            read_run(DATA / "megatron_2020.log")  # imports done before timing
            start, cpu = time.perf_counter(), time.process_time()
            record = read_run(path)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            results.append(
                {
                    "format": name,
                    "size_MB": round(size / 1e6, 1),
                    "read_s": round(seconds, 3),
                    "cpu_s": round(cpu, 3),
                    "step_time_s": record.measured["step_time_s"],
                    "under_3_s": seconds < 3.0,
                    "cpu_under_3_s": cpu < 3.0,
                }
            )
    print(json.dumps({"benchmark": "trainlog_speed", "results": results}, indent=2))


if __name__ == "__main__":
    main()
