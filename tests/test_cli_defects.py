"""CLI defects a new user hit (issue 18), each pinned by a test that failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, assert_user_error, cli_json, run_cli
from tierwise.cli.main import spread_values
from tierwise.plan.space import FIXABLE

DATA = REPO / "tests" / "data"
LOG_A = DATA / "nccl" / "h100_2x8_all_reduce_mpi.txt"
LOG_B = DATA / "verify" / "h100_2x8_ndr_all_reduce.txt"


OVERLAPS = "overlap flags not given"
"""How the estimate's `assumed` begins its note of the overlap flags it assumed."""


def said(out: dict) -> list[str]:
    """The estimate's `assumed` notes but the one of the overlap flags it assumed."""
    return [note for note in out["assumed"] if not note.startswith(OVERLAPS)]


def test_estimate_without_gbs_says_what_it_assumed() -> None:
    out = cli_json("estimate", "--tp", "8", "--pp", "4")  # the README's example
    lay = out["layout"]
    assert lay["gbs"] == 256 == out["gpus"]  # one sequence per GPU, not gbs=None (one micro-batch)
    assert out["breakdown"]["pipeline_bubble_s"] < 0.15 * out["step_time_s"]  # 3/32, not 3/4 of it
    assert len(said(out)) == 1 and "--gbs not given: 256" in out["assumed"][0]
    assert any(note.startswith(OVERLAPS) for note in out["assumed"])  # tp 8, dp 8: they matter
    human = run_cli("estimate", "--tp", "8", "--pp", "4").stdout
    assert "gbs=256" in human and "assumed --gbs not given" in human and "32 micro-batches" in human
    given = cli_json("estimate", "--tp", "8", "--pp", "4", "--gbs", "64")
    assert given["layout"]["gbs"] == 64 and said(given) == []


def test_fix_zero_1_selects_megatrons_distributed_optimizer() -> None:
    out = cli_json("plan", "--nodes", "4", "--top", "1", "--fix", "zero=1", "--emit", "megatron")
    best = out["plans"][0]
    assert best["sharding"] == "distopt" and best["distributed_optimizer"] is True
    assert "--use-distributed-optimizer" in out["emitted"]["megatron"]
    proc = run_cli(
        "plan", "--nodes", "4", "--fix", "zero=2", "--framework", "megatron", check=False
    )
    assert_user_error(proc, "zero=2", "allowed: 0 (ddp), 1 (distopt)")
    ddp = cli_json(
        "plan", "--nodes", "4", "--top", "1", "--fix", "zero=0", "--framework", "megatron"
    )
    assert ddp["plans"][0]["sharding"] == "ddp"


def test_fix_help_lists_its_keys() -> None:
    proc = run_cli("plan", "--help")
    text = " ".join(proc.stdout.replace("│", " ").split())
    for key in FIXABLE:
        assert key in text, key


@pytest.mark.parametrize(
    ("new", "old", "field"),
    [
        ("--use-distributed-optimizer", "--distributed-optimizer", "distributed_optimizer"),
        ("--grad-reduce-in-bf16", "--grad-reduce-bf16", "grad_reduce_bf16"),
    ],
)
def test_megatron_flag_names(new: str, old: str, field: str) -> None:
    base = ("estimate", "--nodes", "2", "--tp", "8", "--gbs", "16")
    assert cli_json(*base, new)["layout"][field] is True
    assert run_cli(*base, old, check=False).returncode == 2


def test_cp_comm_type_is_megatrons_name() -> None:
    base = ("estimate", "--nodes", "2", "--tp", "4", "--cp", "2", "--gbs", "16")
    a2a = cli_json(*base, "--cp-comm-type", "a2a")
    assert a2a["breakdown"]["cp_comm_s"] > 0
    assert run_cli(*base, "--cp-comm", "a2a", check=False).returncode == 2
    gather = cli_json(*base, "--cp-comm-type", "allgather")
    assert gather["breakdown"]["cp_comm_s"] > 0
    assert gather["step_time_s"] > cli_json(*base)["step_time_s"]  # exposed, the ring hidden
    refused = run_cli(
        *base, "--cp-comm-type", "allgather", "--framework", "torchtitan", check=False
    )
    assert_user_error(refused, "--cp-comm-type: 'allgather'", "torchtitan: p2p")
    idle = cli_json("estimate", "--nodes", "2", "--tp", "8", "--gbs", "16", "--cp-comm-type", "a2a")
    assert said(idle) == ["--cp-comm-type a2a changes nothing at --cp 1"]
    unknown = run_cli(*base, "--cp-comm-type", "a2a+p2p", check=False)
    assert_user_error(unknown, "--cp-comm-type: 'a2a+p2p'", "p2p, a2a, allgather")


def test_recompute_num_layers_over_a_virtual_stage_is_said_and_priced_as_all() -> None:
    # 80 layers on pp 4, vpp 1: 20 per virtual stage, so block 99 recomputes the 20
    base = ("estimate", "--nodes", "32", "--pp", "4", "--gbs", "256", "--recompute", "full")
    over = cli_json(*base, "--recompute-method", "block", "--recompute-num-layers", "99")
    whole = cli_json(*base, "--recompute-method", "block", "--recompute-num-layers", "20")
    assert over["step_time_s"] == whole["step_time_s"]
    assert said(over)[-1] == (
        "--recompute-num-layers 99 is over the 20 layers of each virtual stage "
        "(layers / (pp*vpp)): block recomputes them all, priced as 20"
    )
    assert not any("--recompute-num-layers" in note for note in whole["assumed"])
    shown = run_cli(*base, "--recompute-method", "uniform", "--recompute-num-layers", "4").stdout
    assert "recompute=full (uniform 4)" in shown


def test_recompute_num_layers_without_a_method_says_the_method_it_prices() -> None:
    """Block and uniform price differently; without --recompute-method the estimate took
    uniform and said nothing."""
    base = ("estimate", "-m", "llama3-8b", "--nodes", "4", "--recompute", "full")
    bare = cli_json(*base, "--recompute-num-layers", "2")
    uniform = cli_json(*base, "--recompute-num-layers", "2", "--recompute-method", "uniform")
    assert bare["step_time_s"] == uniform["step_time_s"]
    assert said(bare)[-1].startswith(
        "--recompute-method not given with --recompute-num-layers 2: priced as uniform"
    )
    assert not any("--recompute-method" in note for note in said(uniform))
    assert not any("--recompute-method" in note for note in said(cli_json(*base)))


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["bench", "--nproc", "0"], ["--nproc: 0"]),
        (["collective", "--gpus", "0"], ["--gpus: 0"]),
        (["collective", "--ranks-per-node", "0"], ["--ranks-per-node: 0"]),
        (["collective", "-e", "1K", "--plot", "{tmp}/no/such/busbw.png"], ["--plot", "no/such"]),
        (["sweep", "--nodes", "2", "--plot", "{tmp}/no/sweep.png"], ["--plot"]),
        (["bench", "--nproc", "1", "--out", "{tmp}/no/log.txt"], ["--out"]),
        (["calibrate", str(LOG_B), "--out", "{tmp}/no/c.yaml"], ["--out"]),
        (["schedule", "synth", "5", "--out", "{tmp}/no/jobs.csv"], ["--out"]),
        (["schedule", "simulate", "--synthetic", "5", "--plot", "{tmp}/no/j.png"], ["--plot"]),
        (["schedule", "slurm", "topology", "--out", "{tmp}/file/sub"], ["--out"]),
        (["plan", "--nodes", "4", "--out", "{tmp}/file/sub"], ["--out"]),
        (["report", "--nodes", "2", "--out", "{tmp}/dir.html"], ["--out", "is a folder"]),
        (["demo", "--out", "{tmp}/no/demo.html"], ["--out"]),
    ],
)
def test_bad_counts_and_unwritable_paths_are_one_line_errors(
    tmp_path: Path, args: list[str], needles: list[str]
) -> None:
    (tmp_path / "file").write_text("a file, not a folder")
    (tmp_path / "dir.html").mkdir()
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert_user_error(run_cli(*args, check=False), *needles)


def test_show_cluster_takes_a_positional_name() -> None:
    out = cli_json("show", "cluster", "gb200-nvl72", "--nodes", "18")
    assert out["cluster"] == "gb200-nvl72" and out["gpus"] == 72
    assert_user_error(
        run_cli("show", "cluster", "dgx-a100", "--cluster", "dgx-b200", check=False),
        "give the cluster once",
    )


def test_sweep_bad_variant_is_a_row_and_rows_record_what_ran() -> None:
    out = cli_json(
        "sweep", "-m", "llama3-8b", "--nodes", "4", "--vary", "nodes=2,0,3", "--fix", "pp=1"
    )
    rows = {r["nodes"]: r for r in out["rows"]}
    assert rows[0]["error"] and rows[0]["tokens_per_s"] is None  # no cluster: a row
    assert rows[3]["error"] and "gbs" in rows[3]["error"]  # no layout divides: a row
    assert rows[2]["tokens_per_s"] > 0 and rows[2]["gpus"] == 16
    assert all(r["gbs"] == 32 and r["seq"] == 4096 for r in out["rows"])


def test_plan_out_says_what_it_wrote(tmp_path: Path) -> None:
    args = ["plan", "--nodes", "2", "-m", "llama3-8b", "--top", "1", "--emit", "megatron"]
    out = cli_json(*args, "--out", str(tmp_path / "a"))
    assert sorted(Path(p).name for p in out["written"]) == ["mapping.json", "megatron_args.txt"]
    assert all(Path(p).is_file() for p in out["written"])
    human = run_cli(*args, "--out", str(tmp_path / "b")).stdout
    b = tmp_path / "b"
    assert f"wrote {b / 'megatron_args.txt'}, {b / 'mapping.json'}" in human


def test_plan_with_allgather_cp_searches_and_launches_megatron(tmp_path: Path) -> None:
    # Only Megatron-LM runs all-gather CP: `any` narrows to it, its launch says so.
    args = ["plan", "--nodes", "2", "-m", "llama3-8b", "--seq", "32768", "--gbs", "16"]
    args += ["--fix", "cp=2", "--top", "1", "--cp-comm-type", "allgather"]
    out = cli_json(*args, "--emit", "megatron", "--out", str(tmp_path))
    assert out["framework"] == "megatron" and out["plans"][0]["cp"] == 2
    assert "--cp-comm-type allgather" in (tmp_path / "megatron_args.txt").read_text()


def test_report_logs_take_several_values(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    base = ["report", "-m", "llama3-8b", "--nodes", "2", "--gbs", "32", "--out", str(out)]
    summary = json.loads(run_cli(*base, "--logs", str(LOG_A), str(LOG_B), "--json").stdout)
    html = out.read_text()
    assert summary["busbw_figures"] >= 2
    assert f"measured: {LOG_A.name}" in html and f"measured: {LOG_B.name}" in html
    assert run_cli(*base, str(LOG_A), check=False).returncode == 2  # a log needs its flag


def test_spread_values_repeats_the_flag_per_value() -> None:
    multi = ("--logs", "--doctor-logs")
    args = ["--logs", "a", "b", "--gbs", "8", "--doctor-logs", "c", "d", "--json", "--logs", "e"]
    assert spread_values(args, multi) == [
        "--logs", "a", "--logs", "b", "--gbs", "8",
        "--doctor-logs", "c", "--doctor-logs", "d", "--json", "--logs", "e",
    ]  # fmt: skip
    assert spread_values(["--out", "a", "b"], multi) == ["--out", "a", "b"]


def test_collective_explain_json_keeps_the_candidates() -> None:
    out = cli_json("collective", "--nodes", "2", "-e", "1K", "--explain")
    algos = {(c["algo"], c["proto"]) for c in out["candidates"]}
    assert ("ring", "LL") in algos and all(c["algbw_GBps"] > 0 for c in out["candidates"])
    assert "candidates" not in cli_json("collective", "--nodes", "2", "-e", "1K")


@pytest.mark.parametrize(
    ("args", "keys"),
    [
        (["schedule", "synth", "4", "--out", "{tmp}/t.csv"], {"jobs", "out"}),
        (["schedule", "slurm", "topology", "--nodes", "2"], {"files", "written"}),
        (
            ["schedule", "slurm", "hostfile", "--nodelist", "gpu[001-002]", "--gpus", "16"],
            {"rank_hosts", "text"},
        ),
    ],
)
def test_schedule_commands_have_json(tmp_path: Path, args: list[str], keys: set[str]) -> None:
    out = cli_json(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert keys <= set(out)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--qps-per-connection", "4"], "--qps-per-connection 4 changes nothing: no traffic"),
        (
            ["--nodes", "64", "--nodes-per-leaf", "8", "--qps-per-connection", "4"],
            "routes adaptively",
        ),
        (["--routing", "ecmp"], "--routing ecmp changes nothing"),
        (["--pod-oversubscription", "7"], "--pod-oversubscription 7 changes nothing"),
        (["--leaves-per-pod", "2"], "--leaves-per-pod 2 changes nothing: dgx-h100 has 1 leaf"),
        (
            ["--nodes", "64", "--nodes-per-leaf", "16", "--leaves-per-pod", "8"],
            "--leaves-per-pod 8 changes nothing: dgx-h100 has 4 leaf switch(es), all under one",
        ),
    ],
)
def test_fabric_options_that_change_nothing_are_said(options: list[str], said: str) -> None:
    proc = run_cli("collective", "-c", "dgx-h100", "-b", "1G", "-e", "1G", *options)
    assert said in proc.stderr


def test_pod_options_reach_the_collective() -> None:
    base = [
        "collective",
        "-c",
        "dgx-h100",
        "--nodes",
        "64",
        "--nodes-per-leaf",
        "8",
        "-b",
        "1G",
        "-e",
        "1G",
    ]
    flat = cli_json(*base)["rows"][-1]["busbw_GBps"]
    pods = cli_json(*base, "--leaves-per-pod", "4", "--pod-oversubscription", "7")
    assert pods["rows"][-1]["busbw_GBps"] < 0.8 * flat  # the job spans two pods at 1:7


@pytest.mark.parametrize(
    ("topology", "said"),
    [
        (
            "{kind: spine-leaf, nodes_per_leaf: 8, pod_sizes: [3, 5], leaves_per_pod: 4}",
            "disagrees",
        ),
        (
            "{kind: spine-leaf, nodes_per_leaf: 8, gpus_per_leaf: 64}",
            "not both",
        ),
        ("{kind: single-switch, pod_oversubscription: 7}", "single-switch has no uplinks"),
        ("{kind: single-switch, routing: ecmp}", "no uplinks; routing is allowed only"),
        ("{kind: single-switch, qps_per_connection: 4}", "no uplinks; qps_per_connection"),
        # 12 GPUs of 8-GPU nodes: used to be rounded down to one node per leaf, unsaid
        ("{kind: spine-leaf, gpus_per_leaf: 12}", "allowed: multiples of 8"),
        ("{kind: rail-optimized, gpus_per_leaf: 3, planes: 4}", "allowed: multiples of 2"),
    ],
)
def test_topology_fields_that_would_be_ignored_are_refused(
    tmp_path: Path, topology: str, said: str
) -> None:
    spec = tmp_path / "c.yaml"
    spec.write_text(
        "gpu: h100-sxm\ngpus_per_node: 8\nnodes: 64\nintra: nvlink4\n"
        f"inter: {{nic: roce400, nics_per_node: 8}}\ntopology: {topology}\n"
    )
    assert_user_error(run_cli("show", "cluster", "-c", str(spec), check=False), "topology", said)


def test_sweep_fleet_value_out_of_bounds_is_a_row_not_an_internal_error() -> None:
    """The first fleet override was validated before the second was applied: a pydantic error,
    exit 3, instead of the row naming `--vary slow_node_share`."""
    out = cli_json(
        "sweep", "-m", "llama3-8b", "--nodes", "2",
        "--vary", "slow_node_share=-0.1,0.1", "--vary", "slow_node_slowdown=0.1",
    )  # fmt: skip
    bad, good = out["rows"]
    assert "--vary slow_node_share: -0.1; allowed: >= 0.0" in bad["error"]
    assert bad["tokens_per_s"] is None and good["tokens_per_s"] > 0


def test_fleet_mapping_naming_a_fleet_takes_its_fields(tmp_path: Path) -> None:
    """`fleet: {name: megascale-nsdi24}` was a fleet of no slow nodes under MegaScale's name;
    a field that contradicts the named fleet is refused rather than mislabelled."""
    base = (REPO / "examples" / "cluster.yaml").read_text()
    stragglers = {}
    for tag, fleet in (("named", "megascale-nsdi24"), ("mapping", "{name: megascale-nsdi24}")):
        (tmp_path / f"{tag}.yaml").write_text(f"{base}fleet: {fleet}\n")
        out = cli_json("estimate", "-c", str(tmp_path / f"{tag}.yaml"), "--tp", "8")
        stragglers[tag] = out["breakdown"]["straggler_s"]
    assert stragglers["mapping"] == stragglers["named"] > 0
    (tmp_path / "both.yaml").write_text(
        f"{base}fleet: {{name: well-run, slow_node_share: 0.1, slow_node_slowdown: 0.1}}\n"
    )
    proc = run_cli("show", "cluster", str(tmp_path / "both.yaml"), check=False)
    assert_user_error(proc, "fleet 'well-run' has slow_node_share 0, not 0.1", "allowed:")


def test_show_cluster_states_the_fleet_and_an_idle_slow_node_field(tmp_path: Path) -> None:
    """`show cluster` said nothing of the fleet (stragglers priced by estimate), nor that a
    slow-node share without a slowdown adds nothing."""
    base = (REPO / "examples" / "cluster.yaml").read_text()
    named = tmp_path / "named.yaml"
    named.write_text(f"{base}fleet: megascale-nsdi24\n")
    out = cli_json("show", "cluster", str(named))
    assert (out["fleet"], out["slow_node_share"], out["slow_node_slowdown"]) == (
        "megascale-nsdi24", 0.005, 0.1,
    )  # fmt: skip
    assert out["gpu_speed_spread"] == 0.0 and out["notes"] == []
    assert (
        "fleet megascale-nsdi24: 0.50% of nodes run 10% slower"
        in run_cli("show", "cluster", str(named)).stdout
    )
    idle = tmp_path / "idle.yaml"
    idle.write_text(f"{base}fleet: {{slow_node_share: 0.1}}\n")
    said = "fleet.slow_node_share 0.1 changes nothing: fleet.slow_node_slowdown is 0"
    assert any(said in note for note in cli_json("show", "cluster", str(idle))["notes"])
    assert said in run_cli("show", "cluster", str(idle)).stdout
