"""Inputs that used to crash or hang a reader: each ends as one TierwiseError line.

One test per defect of issue 18 ("Why"), each failing before its fix: non-UTF-8 files,
wrong types, non-finite or oversized numbers, deep nesting, long names, header-only traces,
superscript digits, dicts in bench JSON, quadratic regexes, the `show cluster --json` form.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import assert_user_error, run_cli
from tests.fuzz_targets import DATA, TARGETS
from tierwise.collectives.nccl_env import nccl_environment
from tierwise.errors import TierwiseError
from tierwise.hardware.cluster import dump_cluster, load_cluster
from tierwise.hardware.ingest import parse_nccl_topo, parse_topo_matrix, parse_topology_conf
from tierwise.hardware.summary import cluster_summary
from tierwise.schedule.jobs import read_trace
from tierwise.specio import parse_json, parse_yaml
from tierwise.textio import ascii_int, decode, read_text
from tierwise.verify.counters import parse_counters
from tierwise.workload.load import load_model

SPECS = DATA / "specs"
CLUSTER = (SPECS / "cluster_dgx_h100.yaml").read_text()


def _reads_as_user_error(target: str, path: Path, *needles: str) -> None:
    with pytest.raises(TierwiseError) as info:
        TARGETS[target].read(path)
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, (needle, message)


# -- decoding -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "suffix"),
    [
        ("cluster", ".yaml"),
        ("model", ".yaml"),
        ("hf_config", ".json"),
        ("contract", ".yaml"),
        ("nccl_log", ".txt"),
        ("nvidia_smi", ".txt"),
        ("nccl_xml", ".xml"),
        ("topology_conf", ".conf"),
        ("counters", ".txt"),
        ("job_trace", ".csv"),
        ("bench_json", ".json"),
    ],
)
def test_non_utf8_input_is_one_line_naming_byte_and_line(
    target: str, suffix: str, tmp_path: Path
) -> None:
    seed = TARGETS[target].seeds[0].read_bytes()
    path = tmp_path / f"latin1{suffix}"
    path.write_bytes(seed[:40] + b"\nna\xefve\n" + seed[40:])
    _reads_as_user_error(target, path, str(path), "byte 0xef", "UTF-8")


def test_utf16_with_bom_and_utf8_bom_are_read() -> None:
    text = "name: x\n"
    assert decode(text.encode("utf-16"), "f") == text
    assert decode(b"\xef\xbb\xbf" + text.encode(), "f") == text


def test_binary_file_and_directory_and_huge_file(tmp_path: Path) -> None:
    binary = tmp_path / "a.bin"
    binary.write_bytes(b"abc\n\x00\x01")
    with pytest.raises(TierwiseError, match=r"binary file, not text \(NUL byte on line 2"):
        read_text(binary)
    with pytest.raises(TierwiseError, match="cannot read"):
        read_text(tmp_path)
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(TierwiseError, match="larger than"):
        read_text(big, limit=1024)


# -- numbers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("9" * 5000, "more than 4300 digits"),  # int() refuses them: ValueError before
        ("1" + "0" * 400, "out of range"),  # too large for a float field
        (".inf", "not a finite number"),
        (".nan", "not a finite number"),
        ("Infinity", "'Infinity' is not a finite number"),  # text pydantic reads as inf: fuzz
        ("'-inf'", "'-inf' is not a finite number"),
    ],
)
def test_cluster_numbers_must_be_finite_and_in_range(
    value: str, needle: str, tmp_path: Path
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CLUSTER.replace("oversubscription: 1.0", f"oversubscription: {value}"))
    with pytest.raises(TierwiseError, match=needle):
        load_cluster(str(path))


@pytest.mark.parametrize(
    "text", ['{"n": ' + "9" * 5000 + "}", '{"n": NaN}', '{"n": Infinity}', '{"n": 1e999}']
)
def test_json_numbers_must_be_finite_and_in_range(text: str) -> None:
    with pytest.raises(TierwiseError):
        parse_json(text, "x.json")


@pytest.mark.parametrize("opener", ["[", '{"a": '])
def test_2000_nested_brackets_are_refused(opener: str) -> None:
    with pytest.raises(TierwiseError, match="nested deeper"):
        parse_yaml("a: " + opener * 2000, "x.yaml")
    with pytest.raises(TierwiseError, match="nested deeper"):
        parse_json(opener * 2000, "x.json")
    with pytest.raises(TierwiseError, match="nested deeper"):  # within the recursion limit
        parse_json(opener * 40 + "1" + opener[0].translate({91: 93, 123: 125}) * 40, "x.json")


def test_yaml_alias_bomb_is_refused() -> None:
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    with pytest.raises(TierwiseError, match="more than"):
        parse_yaml("\n".join(lines), "bomb.yaml")


@pytest.mark.parametrize("token", ["²", "٣", "1_000", "+", "9" * 30])
def test_ascii_int_takes_only_ascii_digits(token: str) -> None:
    with pytest.raises(ValueError):
        ascii_int(token)


# -- wrong types ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("inter:\n  nic: ndr400\n  nics_per_node: 8\n", "inter: 5\n", "field inter"),
        (
            "topology:\n  kind: rail-optimized\n  nodes_per_leaf: 16\n  oversubscription: 1.0\n",
            "topology: true\n",
            "field topology",
        ),
    ],
)
def test_cluster_sections_of_the_wrong_type(
    old: str, new: str, needle: str, tmp_path: Path
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(CLUSTER.replace(old, new))
    assert_user_error(run_cli("show", "cluster", "-c", str(path), check=False), needle)


def test_topology_kind_as_a_string_loads(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        CLUSTER.replace(
            "topology:\n  kind: rail-optimized\n  nodes_per_leaf: 16\n  oversubscription: 1.0\n",
            "topology: single-switch\n",
        )
    )
    assert load_cluster(str(path)).topology.kind == "single-switch"


def test_show_cluster_json_loads_back_as_the_same_cluster(tmp_path: Path) -> None:
    shown = run_cli("show", "cluster", "-c", "dgx-h100", "--json").stdout
    path = tmp_path / "shown.yaml"
    path.write_text(shown)
    loaded = load_cluster(str(path))
    nccl = {"nccl_env": nccl_environment(loaded)}
    assert {"spec": dump_cluster(loaded)} | cluster_summary(loaded) | nccl == json.loads(shown)


def test_model_type_list_and_wrong_field_types(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": ["llama"], "hidden_size": 4096}))
    assert_user_error(run_cli("show", "model", str(path), check=False), "model_type ['llama']")
    path.write_text(json.dumps({"model_type": "gpt2", "n_embd": {}, "n_layer": 2, "n_head": 2}))
    with pytest.raises(TierwiseError, match="wrong type"):
        load_model(str(path))


def test_300_character_model_and_cluster_names_are_names_not_found() -> None:
    with pytest.raises(TierwiseError, match="not a preset or a file"):
        load_model("m" * 300)  # Path.is_file raised OSError: File name too long
    with pytest.raises(TierwiseError, match="unknown preset"):
        load_cluster("c" * 300)
    proc = run_cli("show", "model", "m" * 300, check=False)
    assert_user_error(proc, "not a preset or a file")


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ({"a": 1}, "field rows.0.out_of_place.busbw_GBps"),
        ("fast", "field rows.0.out_of_place.busbw_GBps"),
        (-1.0, "field rows.0.out_of_place.busbw_GBps"),
    ],
)
def test_bench_json_with_dicts_or_strings_for_numbers(
    value: object, needle: str, tmp_path: Path
) -> None:
    data = json.loads((DATA / "verify" / "bench_sustained_drift.json").read_text())
    data["rows"][0]["busbw_GBps"] = value
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    _reads_as_user_error("bench_json", path, needle)


# -- traces, tool outputs, counters ---------------------------------------------------------


def test_header_only_trace_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("id,arrival_s,duration_s,model,tp,pp,dp,compute_s\n")
    with pytest.raises(TierwiseError, match="no jobs"):
        read_trace(path)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("tp", "9" * 30),
        ("arrival_s", "1e999"),
        ("model", "inf"),
        ("compute_s", "1e308"),  # finite, then inf in the step-time model: fuzz found it
        ("model", "1e300"),
    ],
)
def test_trace_numbers_too_large_or_infinite(column: str, value: str, tmp_path: Path) -> None:
    text = (SPECS / "trace_small.csv").read_text()
    header = text.splitlines()[1].split(",")
    row = text.splitlines()[3].split(",")
    row[header.index(column)] = value
    path = tmp_path / "t.csv"
    path.write_text("\n".join([text.splitlines()[1], ",".join(row)]) + "\n")
    with pytest.raises(TierwiseError):
        read_trace(path)


def test_superscript_digits_in_counters_and_nvidia_smi() -> None:
    with pytest.raises(TierwiseError):
        parse_counters("$ ethtool -S eth0\n     rx_discards_phy: ³²\n")
    with pytest.raises(TierwiseError):
        sysfs = "/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors:"
        parse_counters(sysfs + "9" * 5000)
    smi = (DATA / "ingest" / "nvidia_smi_dgx_h100.txt").read_text()
    topo = parse_topo_matrix(smi.replace("0-55,112-167\t0\t", "0-55,112-167\t²\t", 1))
    assert topo.gpus[0].numa_node is None and topo.gpus[1].numa_node == 0  # int('²') crashed


def test_nvidia_smi_name_line_with_long_space_runs_is_linear() -> None:
    smi = (DATA / "ingest" / "nvidia_smi_dgx_h100.txt").read_text()
    line = "GPU 0: NVIDIA" + " " * 200_000 + "H100 80GB HBM3 (UUID: GPU-x)\n"
    start = time.perf_counter()
    parse_topo_matrix(line + smi)
    assert time.perf_counter() - start < 5.0  # quadratic: 12 s at 20k spaces, hours at 200k


def test_nccl_xml_nested_deeper_than_python_recursion() -> None:
    xml = "<system>" + "<pci>" * 3000 + "</pci>" * 3000 + "</system>"
    with pytest.raises(TierwiseError, match="nested deeper"):
        parse_nccl_topo(xml)


def test_topology_conf_host_list_bomb_and_long_names() -> None:
    bomb = "\n".join(f"SwitchName=s{i} Nodes=n{i}x[1-99999]" for i in range(3))
    with pytest.raises(TierwiseError, match="more than 100000"):
        parse_topology_conf(bomb)
    with pytest.raises(TierwiseError, match="characters"):
        parse_topology_conf("SwitchName=" + "9" * 5000 + " Nodes=a\n")


def test_slurm_node_list_bomb_is_refused_before_expanding() -> None:
    from tierwise.schedule.slurm import node_indices

    bomb = ",".join(f"x{i}[1-99999]" for i in range(30))
    with pytest.raises(TierwiseError, match="allowed: at most 100000"):
        node_indices(load_cluster("dgx-h100"), bomb)
    with pytest.raises(TierwiseError):
        node_indices(load_cluster("dgx-h100"), "gpu[" + "9" * 5000 + "]")


@pytest.mark.parametrize(
    ("old", "new"),
    [('link_width="16"', 'link_width="1³²6"'), ('link_speed="32.0 GT/s', 'link_speed="3.2.0 GT/s')],
)
def test_nccl_xml_odd_pcie_attributes_are_ignored_not_crashed(old: str, new: str) -> None:
    xml = (DATA / "ingest" / "nccl_topo_dgx_h100.xml").read_text()
    topo = parse_nccl_topo(xml.replace(old, new))  # int('1³²6'), float('3.2.0'): found by fuzz
    assert len(topo.gpus) == 8


def test_lab_sizes_factor_with_superscript_digits() -> None:
    from tierwise.cli.commands.lab import parse_sizes

    with pytest.raises(TierwiseError, match="factor"):
        parse_sizes("1M:4M:²")
