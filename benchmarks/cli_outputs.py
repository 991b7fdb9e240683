"""A digest of each command's `--json` output and exit code (JSON), to show that a change to
loading or start-up leaves every result byte-identical: run it before and after and diff.

    python benchmarks/cli_outputs.py > before.json   # on the old tree
    python benchmarks/cli_outputs.py | diff before.json -
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

CASES = (
    "estimate -m llama3-8b --nodes 1 --tp 8 --gbs 8",
    "estimate -m llama3-8b -c dgx-h100 --nodes 1",
    "estimate -m llama3-70b --nodes 4 --tp 8 --pp 2 --gbs 64",
    "estimate -m llama3-70b --nodes 8 --tp 4 --cp 2 --pp 4 --vpp 2 --gbs 128 --recompute full",
    "estimate -m mixtral-8x7b --nodes 4 --tp 2 --ep 8 --gbs 64 --dtype fp8",
    "estimate -m llama3-8b --nodes 2 --framework torchtitan --dp-shard 8 --zero 3 --gbs 32",
    "estimate -m llama3-8b --nodes 1 --tp 3",
    "estimate -m nosuchmodel --nodes 1",
    "estimate -m llama3-8b --nodes x",
    "estimate -m llama3-8b --nodes 1 --seq 1.5",
    "estimate -m llama3-8b --nodes 1 --recompute most",
    "show model llama3-70b",
    "show cluster -c dgx-h100 --nodes 4",
    "catalog",
    "collective -c dgx-h100 --nodes 4 --op all_reduce",
    "plan -m llama3-8b --nodes 2 --top 3",
    "plan -m llama3-70b -c dgx-h100 --nodes 16 --top 2",
)
VOLATILE = ("search_time_s",)
"""Keys whose value is a measured duration, left out of the digest."""


def stable(stdout: bytes) -> bytes:
    """`stdout` without the VOLATILE keys of its JSON object (as is when it is not JSON)."""
    try:
        data = json.loads(stdout)
    except ValueError:
        return stdout
    if isinstance(data, dict):
        for key in VOLATILE:
            data.pop(key, None)
    return json.dumps(data, sort_keys=True).encode()


def digest(args: str) -> dict[str, object]:
    """Exit code and the digests of stdout and stderr of `tierwise <args> --json`."""
    argv = [sys.executable, "-m", "tierwise.cli.main", *args.split(), "--json"]
    proc = subprocess.run(argv, capture_output=True, check=False)
    return {
        "exit_code": proc.returncode,
        "stdout_sha256": hashlib.sha256(stable(proc.stdout)).hexdigest()[:16],
        "stderr_sha256": hashlib.sha256(proc.stderr).hexdigest()[:16],
    }


if __name__ == "__main__":
    print(json.dumps({case: digest(case) for case in CASES}, indent=2))
