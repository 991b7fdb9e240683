"""tierwise's Slurm files against a real Slurm (Debian slurmctld/slurmd/munge), started here.

Eight emulated nodes (one slurmd each on 127.0.1.N, own port) under two leaves of four. The
emitted topology.conf must be accepted and shown by `scontrol show topology`; a burst of
jobs must land where tierwise's Slurm-like `topo` policy puts them, job for job.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.slurm

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
NODES = 8
HEADER = """ClusterName=tierwise
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
TopologyPlugin=topology/tree
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmctldTimeout=10
SlurmdTimeout=10
MinJobAge=300
"""
CLUSTER = """name: slurm-lab
gpu: h100-sxm
gpus_per_node: 8
nodes: 8
intra: nvlink4
inter: {nic: roce200, nics_per_node: 2}
topology: {kind: spine-leaf, nodes_per_leaf: 4, oversubscription: 4.0}
"""
# Sizes 1, 4, 2, 1 nodes: the 4-node DP job takes the empty leaf (naive first-fit splits it
# over both), the 2-node job best-fits next to the first, the last one fills the hole.
TRACE = """id,arrival_s,duration_s,model,tp,pp,dp,compute_s
a,0,60,llama3-8b,8,1,1,0.3
b,0,60,llama3-8b,1,1,32,0.3
c,0,60,llama2-13b,4,1,4,0.5
d,0,60,llama3-8b,8,1,1,0.3
"""


def _free_port_base(count: int) -> int:
    """A base such that base+1..base+count are free on 127.0.1.1..count (checked by bind)."""
    for base in range(21000, 40000, 97):
        try:
            for i in range(1, count + 1):
                with socket.socket() as s:
                    s.bind((f"127.0.1.{i}", base + i))
            with socket.socket() as s:
                s.bind(("127.0.0.1", base))
            return base
        except OSError:
            continue
    raise RuntimeError("no free port range")


def _wait(what: str, check, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _slurm(env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        args, env=env, capture_output=True, text=True, timeout=30, check=True
    ).stdout


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """munged + slurmctld + 8 slurmd on loopback; every daemon is stopped afterwards."""
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        pytest.skip(
            f"Debian packages slurmctld/slurmd/munge not installed (missing "
            f"{', '.join(missing)}; scripts/install-system-deps.sh installs them)"
        )
    if os.geteuid() != 0:
        pytest.skip("emulated Slurm needs root (slurmd runs as SlurmdUser=root)")
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (d / sub).mkdir()
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    cluster = d / "cluster.yaml"
    cluster.write_text(CLUSTER)
    base = _free_port_base(NODES)
    run_cli(
        "schedule",
        "slurm",
        "topology",
        "--cluster",
        str(cluster),
        "--out",
        str(d),
        "--cpus",
        "2",
        "--no-gres",
        "--node-addr-base",
        "127.0.1.",
        "--port-base",
        str(base),
    )
    conf = d / "slurm.conf"
    conf.write_text(HEADER.format(ctld_port=base, d=d) + (d / "slurm-nodes.conf").read_text())
    env = {**os.environ, "SLURM_CONF": str(conf)}
    procs: list[subprocess.Popen] = []

    def start(*cmd: str, log: str) -> None:
        with (d / log).open("w") as out:
            procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT))

    try:
        start(
            "munged",
            "-F",
            "-f",
            f"--key-file={key}",
            f"--socket={d}/munge.sock",
            f"--pid-file={d}/munged.pid",
            f"--log-file={d}/munged.log",
            f"--seed-file={d}/munged.seed",
            log="munged.out",
        )
        _wait("munge socket", lambda: (d / "munge.sock").exists(), 10)
        start("slurmctld", "-D", "-f", str(conf), log="slurmctld.out")
        for i in range(1, NODES + 1):
            start("slurmd", "-D", "-f", str(conf), "-N", f"gpu{i:03d}", log=f"slurmd{i}.out")
        _wait("8 idle nodes", lambda: _idle(env) == NODES, 40)
        yield {"dir": d, "env": env, "cluster": cluster}
    finally:
        if shutil.which("scancel"):
            subprocess.run(["scancel", "--user", "root"], env=env, capture_output=True, timeout=15)
            with contextlib.suppress(AssertionError, subprocess.SubprocessError):
                _wait("jobs to end", lambda: not _slurm(env, "squeue", "-h").strip(), 15)
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)


def _idle(env: dict[str, str]) -> int:
    try:
        out = _slurm(env, "sinfo", "-h", "-N", "-o", "%N %t")
    except subprocess.SubprocessError:
        return 0
    return sum(1 for line in out.splitlines() if line.split()[-1] == "idle")


def test_topology_is_accepted(slurm_cluster: dict) -> None:
    out = _slurm(slurm_cluster["env"], "scontrol", "show", "topology")
    assert "SwitchName=leaf1 Level=0" in out and "Nodes=gpu[001-004]" in out, out
    assert "SwitchName=leaf2 Level=0" in out and "Nodes=gpu[005-008]" in out, out
    assert "SwitchName=spine Level=1" in out and "Switches=leaf[1-2]" in out, out


def test_slurm_placements_match_topo_policy(slurm_cluster: dict) -> None:
    env, d = slurm_cluster["env"], slurm_cluster["dir"]
    trace = d / "burst.csv"
    trace.write_text(TRACE)
    sizes = {"a": 1, "b": 4, "c": 2, "d": 1}
    for job, nodes in sizes.items():
        _slurm(
            env,
            "sbatch",
            "-Q",
            "--exclusive",
            "-N",
            str(nodes),
            "-J",
            job,
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 120",
        )
        _wait(f"job {job} to start", lambda job=job: _running(env).get(job), 20)
    alloc = d / "alloc.txt"
    alloc.write_text("".join(f"{j} {n}\n" for j, n in _running(env).items()))
    out = json.loads(
        run_cli(
            "schedule",
            "place",
            "--cluster",
            str(slurm_cluster["cluster"]),
            "--trace",
            str(trace),
            "--policy",
            "topo",
            "--allocations",
            str(alloc),
            "--json",
        ).stdout
    )
    by_id = {r["id"]: r for r in out["jobs"]}
    assert by_id["b"]["given_nodelist"] == "gpu[005-008]", by_id
    assert by_id["c"]["given_nodelist"] == "gpu[002-003]", by_id
    assert out["matches"] == len(sizes), out
    # Slurm's placement keeps every job in one leaf: all run at their ideal speed.
    assert all(r["given_slowdown"] == pytest.approx(1.0) for r in out["jobs"]), out
    table = run_cli(
        "schedule",
        "place",
        "--cluster",
        str(slurm_cluster["cluster"]),
        "--trace",
        str(trace),
        "--allocations",
        str(alloc),
    ).stdout
    print(table)
    naive = json.loads(
        run_cli(
            "schedule",
            "place",
            "--cluster",
            str(slurm_cluster["cluster"]),
            "--trace",
            str(trace),
            "--policy",
            "naive",
            "--allocations",
            str(alloc),
            "--json",
        ).stdout
    )
    split = {r["id"]: r for r in naive["jobs"]}["b"]
    assert split["nodelist"] == "gpu[002-005]" and split["leaves"] == 2, naive
    assert split["slowdown"] > 1.05, naive  # the DP all-reduce now crosses the 4:1 spine


def _running(env: dict[str, str]) -> dict[str, str]:
    out = _slurm(env, "squeue", "-h", "-t", "R", "-o", "%j %N")
    return dict(line.split() for line in out.splitlines() if line.strip())
