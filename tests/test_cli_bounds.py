"""Issue 31: nothing a user types crashes or hangs tierwise. Each defect of the issue, pinned:
bounded readers, bounds at the edge, and the small UX defects a new user found."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import REPO, assert_user_error, cli_json, run_cli
from tierwise.bounds import MAX_GPUS_PER_NODE, MAX_JOBS, MAX_LAYERS, MAX_NICS_PER_NODE
from tierwise.errors import TierwiseError
from tierwise.textio import read_bytes, read_text
from tierwise.units import parse_duration, parse_int_count, parse_size
from tierwise.workload.load import load_model

LOG = REPO / "tests" / "data" / "verify" / "h100_2x8_ndr_all_reduce.txt"
CONTRACT = REPO / "examples" / "contract-ib-multinode.yaml"
GEMMA2 = REPO / "tests" / "data" / "hf" / "gemma-2-9b.json"

# -- bounded readers --------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["doctor"], ["parse"], ["calibrate"]])
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_devices_are_refused_before_reading(command: list[str], device: str) -> None:
    assert_user_error(run_cli(*command, device, check=False, timeout=30), device, "device")


def test_fifo_and_folder_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "FIFO"), (tmp_path, "folder")):
        with pytest.raises(TierwiseError, match=f"cannot read a {kind}.*allowed: a regular file"):
            read_text(path)
        assert_user_error(run_cli("doctor", str(path), check=False, timeout=30), kind)


def test_read_bytes_stops_at_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_bytes(b"x" * 4096)
    assert read_bytes(path, limit=4096) == b"x" * 4096
    with pytest.raises(TierwiseError, match="larger than"):
        read_bytes(path, limit=4095)


# -- bounds at the edge -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["collective", "-e", "1" + "0" * 400], ["--max-bytes"]),
        (["collective", "-e", "99999999999999999999999"], ["--max-bytes"]),
        (["plan", "--gbs", "99999999999999999999", "--nodes", "2"], ["--gbs", "16777216"]),
        (["sweep", "--gbs", "99999999999999999999", "--nodes", "2"], ["--gbs", "16777216"]),
        (["show", "cluster", "--gpus-per-node", "2147483648"], [str(MAX_GPUS_PER_NODE)]),
        (["show", "cluster", "--nics-per-node", "2147483648"], [str(MAX_NICS_PER_NODE)]),
        (["estimate", "--pp", "2", "--pp-layout", "t*99999999999"], ["--pp-layout", "unrolls"]),
        (["schedule", "simulate", "--synthetic", "9223372036854775807"], [str(MAX_JOBS)]),
        (["schedule", "simulate", "--synthetic", "9", "--load", "5e-324"], ["--load", "0.01"]),
        (["schedule", "simulate", "--synthetic", "9", "--load", "1e-320"], ["--load", "0.01"]),
        (["schedule", "simulate", "--synthetic", "9", "--seed", "-1"], ["--seed", "'-1'"]),
        (
            [
                "schedule",
                "slurm",
                "hostfile",
                "--nodelist",
                "gpu[001-002]",
                "--gpus",
                "16",
                "--prefix",
                "[",
            ],
            ["--prefix '['", "allowed"],
        ),
        (
            [
                "verify",
                str(LOG),
                "--contract",
                str(CONTRACT),
                "--counters-before",
                str(REPO / "tests/data/verify/ib_before.txt"),
                "--counters-after",
                str(REPO / "tests/data/verify/ib_after_drops.txt"),
                "--interval",
                "0.0000000001",
            ],
            ["--interval", "allowed: 1 ms"],
        ),
    ],
)
def test_out_of_bound_values_are_one_line_errors(args: list[str], needles: list[str]) -> None:
    assert_user_error(run_cli(*args, check=False, timeout=60), *needles)


def test_model_layers_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("name: deep\nlayers: 1000000000\nhidden: 64\nheads: 4\nvocab: 100\n")
    assert_user_error(run_cli("plan", "-m", str(path), check=False), "layers", str(MAX_LAYERS))


def test_sizes_counts_and_durations_parse_strictly() -> None:
    assert parse_size("8G") == parse_size("8GB") == parse_size("8GiB") == 8 << 30
    for bits in ("8Gb", "8gb", "8b"):
        with pytest.raises(TierwiseError, match="bits"):
            parse_size(bits, "-e")
    assert (
        parse_int_count("8k", "--seq", 1 << 20) == parse_int_count("8K", "--seq", 1 << 20) == 8192
    )
    with pytest.raises(TierwiseError, match="allowed: 1 to 1024"):
        parse_int_count("2k", "--seq", 1024)
    with pytest.raises(TierwiseError, match="allowed"):
        parse_int_count("٣", "--seq", 1024)  # unicode digits are not ASCII digits
    with pytest.raises(TierwiseError, match="allowed: 1 ms"):
        parse_duration("0.0000000001", "--interval")


# -- the small defects ------------------------------------------------------------------------


def test_size_in_bits_is_said_not_read_as_bytes() -> None:
    assert_user_error(run_cli("collective", "-e", "8Gb", check=False), "'8Gb' is in bits", "8G")


def test_collective_size_is_bounded_by_one_gpus_memory() -> None:
    assert_user_error(run_cli("collective", "-e", "8T", check=False), "one GPU's memory")
    assert cli_json("collective", "-e", "64G", "--nodes", "2")["rows"][-1]["size_bytes"] == 64 << 30


def test_seq_takes_the_k_suffix_as_sizes_do() -> None:
    assert cli_json("estimate", "--nodes", "2", "--tp", "8", "--seq", "8k")["layout"]["seq"] == 8192


def test_show_cluster_names_the_domains_link_and_counts_in_the_singular() -> None:
    pcie = run_cli("show", "cluster", "pcie-h100", "--nodes", "1").stdout
    assert "1 node x" in pcie and "1 nodes" not in pcie
    assert "PCIe domain 8 GPUs" in pcie and "NVLink" not in pcie


def test_show_cluster_names_an_inline_nic(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: x\ngpu: h100-sxm\ngpus_per_node: 8\nnodes: 2\nintra: nvlink4\n"
        "inter:\n  nic: {name: my-cx7, rate_Gbps: 400}\n  nics_per_node: 8\n"
    )
    out = run_cli("show", "cluster", "-c", str(path)).stdout
    assert "my-cx7 (inline)" in out and "x inline" not in out
    assert cli_json("show", "cluster", "-c", str(path))["nic"] == "my-cx7 (inline)"


def test_estimate_says_distopt_as_plan_does() -> None:
    args = ("estimate", "--nodes", "2", "--tp", "8", "--gbs", "16")
    out = run_cli(*args, "--use-distributed-optimizer").stdout
    assert "sharding=distopt" in out and "zero=0" not in out
    assert "zero=0" in run_cli(*args).stdout


def test_lab_errors_are_percent_as_calibrate_prints_them(capsys: pytest.CaptureFixture) -> None:
    from tierwise.cli.commands.lab import print_report

    row = {"size_bytes": 1 << 20, "measured": {"time_us": 100.0, "busbw_GBps": 1.0},
           "predicted": {"time_us": 110.0, "busbw_GBps": 0.9}}  # fmt: skip
    report = {"flat": [row], "hierarchical": [row], "measured_ratio": 1.0,
              "predicted_ratio": 1.0, "step": None}  # fmt: skip
    print_report(report, "t")
    out = capsys.readouterr().out
    assert "+10.0%" in out and "0.1 " not in out and "predicted / measured - 1" in out


def test_schedule_table_says_which_sign_is_better() -> None:
    """The value is the mean-JCT gain over naive: > 0 is faster (the sign is checked against
    a trace where topo wins in tests/test_schedule_cli.py)."""
    out = run_cli("schedule", "simulate", "--synthetic", "20").stdout
    assert "(>0" in out and "faster)" in out


def test_collective_shows_the_runner_up_and_its_margin() -> None:
    rows = cli_json("collective", "--nodes", "2", "-b", "64K", "-e", "16M")["rows"]
    for row in rows:
        assert row["runner_up"] != f"{row['algo']}/{row['proto']}"
        assert row["margin_pct"] >= 0
    text = run_cli("collective", "--nodes", "2", "-b", "64K", "-e", "16M").stdout
    assert "next" in text and "margin" in text and "runner-up" in text


def test_gemma2_counts_its_post_attention_and_post_feed_forward_norms() -> None:
    model = load_model(str(GEMMA2))
    assert model.post_norms
    # transformers' Gemma2ForCausalLM(gemma-2-9b) has 9,241,705,984 parameters: 4 norms of 3584
    # per layer x 42 layers + the final norm; without the post-norms 301,056 fewer.
    assert cli_json("show", "model", str(GEMMA2))["params_total"] == 9_241_705_984


def test_every_bound_is_documented() -> None:
    import tierwise.bounds as bounds

    text = (REPO / "docs" / "limits.md").read_text()
    names = [n for n in dir(bounds) if n.startswith("MAX_")]
    assert names and all(f"`{n}`" in text for n in names), names


def test_calibrate_on_a_one_rank_log_is_one_line_without_numpy_warnings(tmp_path: Path) -> None:
    log = tmp_path / "one_rank_all_reduce.txt"
    log.write_text(
        "#  Rank  0 Group  0 Pid  1 on host-a device  0 [0x1b] NVIDIA H100 80GB HBM3\n"
        "     1048576   262144  float  sum  -1  10.00  104.86  0.00  0  10.00  104.86  0.00  0\n"
    )
    proc = run_cli("calibrate", str(log), check=False)
    assert_user_error(proc, "one rank moves no data", "allowed: logs of 2 or more ranks")
    assert "Warning" not in proc.stderr


# -- layout flags named as typed --------------------------------------------------------------


def test_every_layout_field_has_its_estimate_flag() -> None:
    from tierwise.cli.layout_options import LAYOUT_FLAGS
    from tierwise.workload.layout import Layout

    assert set(LAYOUT_FLAGS) == set(Layout.model_fields)
    assert LAYOUT_FLAGS["activation_offload_layers"] == "--cpu-offloading-num-layers"
    assert LAYOUT_FLAGS["sp"] == "--sp" and LAYOUT_FLAGS["dp_shard_degree"] == "--dp-shard"


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("recompute", "bad", "--recompute: 'bad'; allowed: 'none', 'selective' or 'full'"),
        ("zero", 7, "--zero: 7; allowed: 0 to 3"),
        ("zero", -1, "--zero: -1; allowed: 0 to 3"),
        ("vpp", 0, "--vpp: 0; allowed: >= 1"),
        ("etp", 0, "--etp: 0; allowed: >= 1"),
        ("activation_offload_layers", -1, "--cpu-offloading-num-layers: -1; allowed: >= 0"),
        ("dp_shard_degree", 0, "--dp-shard: 0; allowed: >= 1"),
        ("fp8_recipe", "zz", "--fp8-recipe: 'zz'; allowed: 'delayed', 'tensorwise' or"),
        ("recompute_modules", ["foo"], "--recompute-modules: 'foo'; allowed: 'core_attn'"),
    ],
)
def test_layout_field_errors_name_the_flag(field: str, value: object, expected: str) -> None:
    from tierwise.cli.layout_options import LAYOUT_FLAGS
    from tierwise.errors import SpecError
    from tierwise.workload.layout import Layout

    with pytest.raises(SpecError) as err:
        Layout.parse({"seq": 4096, field: value}, "layout", LAYOUT_FLAGS)
    assert str(err.value).startswith(expected), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["estimate", "--recompute", "bad"], ["--recompute: 'bad'", "'selective'"]),
        (["estimate", "--zero", "7"], ["--zero: 7", "0 to 3"]),
        (["estimate", "--pp-layers", "9" * 30], ["--pp-layers", f"0 to {MAX_LAYERS}"]),
        (["plan", "--fp8-recipe", "zz", "--nodes", "2"], ["--fp8-recipe: 'zz'", "tensorwise"]),
        (["sweep", "--fix", "fp8_recipe=zz", "--nodes", "2"], ["--fix: fp8_recipe='zz'"]),
    ],
)
def test_layout_flag_errors_end_to_end(args: list[str], needles: list[str]) -> None:
    """The one line names the flag typed, the value and what is allowed (a bad FP8 recipe was
    accepted by plan and sweep when no FP8 was searched)."""
    assert_user_error(run_cli(*args, "--model", "llama3-8b", check=False), *needles)


NODES_200 = "nodes=" + ",".join(map(str, range(1, 201)))


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["plan", "--nodes", "100000", "--gpus-per-node", "1024"], ["102400000 GPUs", "1048576"]),
        (["sweep", "--nodes", "100000", "--gpus-per-node", "1024"], ["--gpus-per-node"]),
        (["sweep", "--nodes", "2", "--gpus-per-node", "128"], ["NIC of its own", "<= 64"]),
        (
            ["sweep", "--vary", NODES_200, "--vary", "nics_per_node=1,2"],
            ["400 combinations", "at most 256"],
        ),
    ],
)
def test_cluster_and_sweep_sizes_are_bounded(args: list[str], needles: list[str]) -> None:
    """10^5 nodes of 1024 GPUs took minutes and 10 GB in plan; a sweep's what-if gave 128 GPUs
    128 NICs and failed on a field the user never typed; --vary lists multiply."""
    assert_user_error(run_cli(*args, "--model", "llama3-8b", check=False, timeout=60), *needles)


def test_largest_cluster_plans_and_sweeps() -> None:
    """The largest accepted cluster (10^5 nodes of 8 GPUs) plans and sweeps (times in
    docs/limits.md): a sweep's NIC rates share the groups' spans, and give the same answer
    as pricing each rate on its own cluster does."""
    from tierwise.hardware.cluster import load_cluster
    from tierwise.perf import groups
    from tierwise.perf.groups import Degrees, group_shape_of

    out = cli_json("sweep", "--nodes", "100000", "--model", "llama3-8b")
    assert out["needed_Gbps_per_gpu"] > 0 and out["best_layout"]["dp"] > 1
    slow = load_cluster("dgx-h100", nodes=64, nic="roce200")
    fast = load_cluster("dgx-h100", nodes=64)
    d = Degrees(8, 1, 1, 64, 1)
    shared = [group_shape_of(c, d, "dp") for c in (fast, slow)]
    groups._SPANS.clear()
    groups._cache_for.cache_clear()  # type: ignore[attr-defined]
    assert group_shape_of(slow, d, "dp") == shared[1] != shared[0]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"nodes": 200000}, "--nodes: 200000; allowed: > 0 and <= 100000"),
        ({"nics_per_node": 999}, "--nics-per-node: 999; allowed: 0 to 64"),
        ({"oversubscription": 0.5}, "--oversubscription: 0.5; allowed: >= 1.0"),
        ({"routing": "zz"}, "--routing: 'zz'; allowed: 'ecmp', 'adaptive' or 'static'"),
        ({"nic": "foo"}, "--nic: unknown nic 'foo'; allowed: hdr200"),
    ],
)
def test_cluster_overrides_are_named_by_their_flag(overrides: dict, expected: str) -> None:
    """A bad --nodes/--nics-per-node/... names the flag typed, not the spec field
    (`cluster dgx-h100: field inter.nics_per_node: ...`); the same value from a file or a
    log keeps naming its field."""
    from tierwise.cli.options import CLUSTER_FLAGS
    from tierwise.errors import SpecError
    from tierwise.hardware.cluster import load_cluster

    with pytest.raises(SpecError) as err:
        load_cluster("dgx-h100", CLUSTER_FLAGS, **overrides)
    assert str(err.value).startswith(expected), str(err.value)
    with pytest.raises(SpecError, match=r"field|inter\.nic"):
        load_cluster("dgx-h100", **overrides)


def test_cluster_flag_named_end_to_end() -> None:
    proc = run_cli("show", "cluster", "--nics-per-node", "999", "--json", check=False)
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"].endswith("--nics-per-node: 999; allowed: 0 to 64")
