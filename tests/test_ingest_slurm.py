"""Slurm topology.conf: parse into a switch tree, emit from a cluster spec, round trip, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.errors import ParseError, SpecError
from tierwise.hardware.cluster import ClusterSpec, load_cluster
from tierwise.hardware.ingest import (
    SwitchTree,
    emit_slurm_nodes,
    emit_topology_conf,
    parse_topology_conf,
)
from tierwise.specio import build

DATA = Path(__file__).parent / "data" / "ingest"


def _tree(name: str) -> SwitchTree:
    return parse_topology_conf((DATA / name).read_text(), name)


def _cluster(nodes: int, npl: int, per_pod: int | None = None) -> ClusterSpec:
    topo = {"kind": "fat-tree", "nodes_per_leaf": npl}
    if per_pod:
        topo["leaves_per_pod"] = per_pod
    data = {
        "name": "t",
        "gpu": "h100-sxm",
        "gpus_per_node": 8,
        "nodes": nodes,
        "intra": "nvlink4",
        "inter": {"nic": "ndr400", "nics_per_node": 8},
        "topology": topo,
    }
    return build(ClusterSpec, data, "test")


def test_two_level_tree() -> None:
    t = _tree("slurm_topology_2level.conf")
    assert (t.levels, t.leaf_sizes, t.roots) == (2, (8, 8, 8, 8), ("spine0",))
    assert t.leaf_of["gpu017"] == "leaf2" and t.switches["leaf0"].link_speed == "400"
    assert (
        t.common_level("gpu001", "gpu001"),
        t.common_level("gpu001", "gpu008"),
        t.common_level("gpu001", "gpu009"),
    ) == (0, 1, 2)
    fields, notes = t.cluster_fields()
    assert fields == {"nodes": 32, "topology": {"kind": "fat-tree", "nodes_per_leaf": 8}}
    assert any("oversubscription" in n for n in notes)


def test_three_level_tree_with_continuation_and_lowercase_keys() -> None:
    t = _tree("slurm_topology_3level.conf")
    assert (t.levels, len(t.leaves), len(t.nodes), [p.name for p in t.pods]) == (
        3,
        8,
        128,
        ["pod0", "pod1"],
    )
    assert t.switches["leaf07"].nodes[-1] == "dgx128" and t.switches["leaf07"].line == 17
    assert t.common_level("dgx001", "dgx050") == 2 and t.common_level("dgx001", "dgx100") == 3
    fields, _ = t.cluster_fields()
    assert fields["topology"] == {"kind": "fat-tree", "nodes_per_leaf": 16, "leaves_per_pod": 4}
    assert (
        build(
            ClusterSpec, {**load_cluster("dgx-h100").model_dump(mode="json"), **fields}, "x"
        ).nodes_per_leaf
        == 16
    )


def test_uneven_leaves_and_single_switch() -> None:
    t = parse_topology_conf(
        "SwitchName=a Nodes=n[1-8]\nSwitchName=b Nodes=n[9-14]\nSwitchName=top Switches=a,b\n"
    )
    fields, _ = t.cluster_fields()  # equal leaves but a partly filled last one
    assert fields == {"nodes": 14, "topology": {"kind": "fat-tree", "nodes_per_leaf": 8}}
    t = parse_topology_conf(
        "SwitchName=a Nodes=n[1-6]\nSwitchName=b Nodes=n[7-14]\nSwitchName=top Switches=a,b\n"
    )
    fields, _ = t.cluster_fields()
    topo = {"kind": "fat-tree", "nodes_per_leaf": 8, "leaf_sizes": [6, 8]}
    assert fields == {"nodes": 14, "topology": topo}
    one = parse_topology_conf("SwitchName=only Nodes=n[1-4]")
    assert one.levels == 1 and one.cluster_fields()[0]["topology"]["kind"] == "single-switch"
    apart = parse_topology_conf("SwitchName=a Nodes=x1\nSwitchName=b Nodes=y1")
    assert apart.common_level("x1", "y1") is None and len(apart.roots) == 2


@settings(max_examples=25, deadline=None)
@given(npl=st.integers(1, 6), leaves=st.integers(1, 9), per_pod=st.none() | st.integers(1, 4))
def test_emit_then_parse_round_trips(npl: int, leaves: int, per_pod: int | None) -> None:
    cluster = _cluster(npl * leaves, npl, per_pod)
    hosts = [f"node{i:03d}" for i in range(cluster.nodes)]
    t = parse_topology_conf(emit_topology_conf(cluster, hosts))
    assert t.leaf_sizes == (npl,) * leaves
    assert list(t.nodes) == hosts
    expected_levels = 1 if leaves == 1 else 3 if per_pod and leaves > per_pod else 2
    assert t.levels == expected_levels
    fields, _ = t.cluster_fields()
    assert fields["nodes"] == cluster.nodes and fields["topology"]["nodes_per_leaf"] == npl


def test_emit_three_levels_and_slurm_nodes() -> None:
    cluster = _cluster(64, 8, 2)
    hosts = [f"gpu{i:03d}" for i in range(1, 65)]
    conf = emit_topology_conf(cluster, hosts)
    assert "SwitchName=leaf1 Nodes=gpu[001-008]" in conf
    assert (
        "SwitchName=pod4 Switches=leaf[7-8]" in conf and "SwitchName=core Switches=pod[1-4]" in conf
    )
    nodes = emit_slurm_nodes(cluster, hosts, cpus=224, real_memory_mb=2_000_000)
    assert (
        "NodeName=gpu[001-064] Gres=gpu:h100_sxm:8 CPUs=224 RealMemory=2000000 State=UNKNOWN"
        in nodes
    )
    wide = emit_topology_conf(_cluster(96, 8), [f"n{i}" for i in range(96)])
    assert (
        "SwitchName=leaf01 Nodes=n[0-7]" in wide and "SwitchName=spine Switches=leaf[01-12]" in wide
    )
    emulated = emit_slurm_nodes(
        cluster, hosts, gres=False, node_addr_base="10.0.0.", port_base=6800, partition="p"
    )
    assert "NodeName=gpu064 NodeAddr=10.0.0.64 Port=6864 State=UNKNOWN" in emulated
    assert "Gres" not in emulated and "PartitionName=p Nodes=ALL" in emulated
    with pytest.raises(SpecError, match="63 names for nodes=64"):
        emit_topology_conf(cluster, hosts[:-1])
    with pytest.raises(SpecError, match="listed twice"):
        emit_slurm_nodes(cluster, [*hosts[:-1], hosts[0]])


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (
            "SwitchName=s0 Nodes=n[1-4]\n# spine\nSwitchName=s2 Switches=s[0-1]\n",
            ["<topology.conf>:3", "unknown switch 's1'", "defined: s[0,2]"],
        ),
        (
            "SwitchName=s0 Nodes=n1\nSwitchName=s0 Nodes=n2\n",
            [":2", "defined twice (first on line 1)"],
        ),
        (
            "SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=n[2-3]\n",
            [":2", "node 'n2' is under switch 's0' (line 1)"],
        ),
        ("SwitchName=a Switches=b\nSwitchName=b Switches=a\n", ["switch loop a -> b -> a"]),
        ("SwitchName=s0 Nodes=n1 Speed=10\n", [":1", "unknown parameter 'Speed'", "LinkSpeed"]),
        ("BlockName=b1 Nodes=n[1-4]\n", ["topology/block is not supported"]),
        ("SwitchName=s0 Nodes=n[1-\n", [":1", "Nodes='n[1-'", "bad host list"]),
        ("SwitchName=s0\n", ["neither Nodes= nor Switches="]),
        ("Nodes=n1\n", ["no SwitchName="]),
        ("SwitchName=s0 Nodes\n", ["'Nodes' is not Parameter=value"]),
        ("# nothing\n\n", ["no SwitchName= line"]),
    ],
)
def test_bad_topology_conf(text: str, needles: list[str]) -> None:
    with pytest.raises(ParseError) as err:
        parse_topology_conf(text)
    assert "\n" not in str(err.value)
    for needle in needles:
        assert needle in str(err.value)
