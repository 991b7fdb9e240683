"""Cluster shapes as they are built: any node count, unequal leaves, pods, NVLink domains larger
than a node (GB200 NVL72), zero NICs, the size limit, and every command on every preset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.conftest import assert_user_error, run_cli
from tierwise.cli.main import app
from tierwise.collectives.predict import group_shape, predict
from tierwise.errors import SpecError, TierwiseError
from tierwise.hardware.cluster import MAX_NODES, ClusterSpec, load_cluster, presets
from tierwise.hardware.ingest.slurm_topology import emit_topology_conf, parse_topology_conf
from tierwise.hardware.placement import Placement, hierarchy
from tierwise.hardware.tiers import tiers
from tierwise.perf.groups import scattered_nodes
from tierwise.plan.sweep import with_params
from tierwise.schedule.state import ClusterState
from tierwise.specio import build

DATA = Path(__file__).parent / "data" / "ingest"
GiB8 = 8 << 30


RUNNER = CliRunner()


def _invoke(args: list[str]) -> tuple[int, str]:
    """Run the CLI in this process: (exit code, output); a user error is exit 2 and its line."""
    res = RUNNER.invoke(app, args)
    if isinstance(res.exception, TierwiseError):
        return 2, str(res.exception)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, res.output


def _json(args: list[str]) -> Any:
    """`tierwise ARGS --json` in this process, parsed."""
    code, out = _invoke([*args, "--json"])
    assert code == 0, out
    return json.loads(out)


def _spec(**topology: object) -> dict[str, object]:
    return {
        "gpu": "h100-sxm",
        "gpus_per_node": 8,
        "nodes": 20,
        "intra": "nvlink4",
        "inter": {"nic": "ndr400", "nics_per_node": 8},
        "topology": {"kind": "rail-optimized", **topology},
    }


# --- any node count, unequal leaves, pods -----------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "sizes"),
    [(48, (32, 16)), (100, (32, 32, 32, 4)), (248, (32,) * 7 + (24,)), (32, (32,)), (1, (1,))],
)
def test_last_leaf_is_partly_filled(nodes: int, sizes: tuple[int, ...]) -> None:
    c = load_cluster("dgx-h100", nodes=nodes)
    assert c.leaf_sizes == sizes and c.nodes_per_leaf == sizes[0]
    names = [t.name for t in tiers(c)]
    assert names == (["intra"] if nodes == 1 else ["intra", "leaf", "spine"][: 2 + (nodes > 32)])
    _, leaf, _ = hierarchy(c, np.arange(nodes))
    assert np.bincount(leaf).tolist() == list(sizes)


def test_listed_leaf_sizes_map_nodes_and_cut_at_nodes() -> None:
    c = build(ClusterSpec, _spec(leaf_sizes=[4, 8, 8]), "test")
    assert c.leaf_sizes == (4, 8, 8) and c.leaf_starts == (0, 4, 12) and c.nodes_per_leaf == 8
    _, leaf, _ = hierarchy(c, np.array([0, 3, 4, 11, 12, 19]))
    assert leaf.tolist() == [0, 0, 1, 1, 2, 2]
    fewer = build(ClusterSpec, {**_spec(leaf_sizes=[4, 8, 8]), "nodes": 10}, "test")
    assert fewer.leaf_sizes == (4, 6)
    # 16 nodes over leaves of 4, 8 and 8 nodes span 3 leaves, not 2 as 8-node leaves would.
    span = Placement.contiguous(c).span(range(0, 16 * 8, 8))
    assert (span.leaves, span.leaf_crossings) == (3, 3)
    assert Placement.contiguous(c).span(range(0, 20 * 8, 8)).leaves == 3


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=12),
    cut=st.integers(0, 20),
    pods=st.none() | st.integers(1, 4) | st.lists(st.integers(1, 4), min_size=1, max_size=5),
)
def test_hierarchy_matches_the_tree_written_out(
    sizes: list[int], cut: int, pods: int | list[int] | None
) -> None:
    nodes = max(1, sum(sizes) - cut)
    if isinstance(pods, list):
        pods = [*pods, len(sizes)]  # cover every leaf
        topo = {"leaf_sizes": sizes, "pod_sizes": pods}
        pod_list = pods
    else:
        topo = {"leaf_sizes": sizes, "leaves_per_pod": pods}
        pod_list = [pods or len(sizes)] * len(sizes)
    c = build(ClusterSpec, {**_spec(**topo), "nodes": nodes}, "test")
    leaf_of = [leaf for leaf, n in enumerate(sizes) for _ in range(n)][:nodes]
    pod_of = [pod for pod, n in enumerate(pod_list) for _ in range(n)]
    domain, leaf, pod = hierarchy(c, np.arange(nodes))
    assert leaf.tolist() == leaf_of and domain.tolist() == list(range(nodes))
    assert pod.tolist() == [pod_of[x] for x in leaf_of]
    assert sum(c.leaf_sizes) == nodes and c.leaves == leaf_of[-1] + 1
    assert sum(c.pod_sizes) == c.leaves and c.pods == pod_of[leaf_of[-1]] + 1
    span = Placement.contiguous(c).span(range(0, nodes * 8, 8))
    assert (span.leaves, span.pods) == (c.leaves, c.pods)
    names = [t.name for t in tiers(c)]
    assert ("spine" in names) == (c.leaves > 1) and ("core" in names) == (c.pods > 1)
    state = ClusterState(c)
    assert state.pod_of_leaf.tolist() == [pod_of[x] for x in range(c.leaves)]


def test_pods_of_leaves_with_a_partial_last_pod() -> None:
    c = build(ClusterSpec, {**_spec(nodes_per_leaf=16, leaves_per_pod=2), "nodes": 100}, "test")
    assert (c.leaves, c.pods) == (7, 4)  # 6 x 16 + 4 nodes; pods of 2 leaves, the last of 1
    assert [t.name for t in tiers(c)] == ["intra", "leaf", "spine", "core"]
    _, leaf, pod = hierarchy(c, np.array([0, 31, 32, 99]))
    assert (leaf.tolist(), pod.tolist()) == ([0, 1, 2, 6], [0, 0, 1, 3])
    assert {t.name: t.gpus_in_scope for t in tiers(c)}["spine"] == 32 * 8


def test_schedule_and_scattered_order_follow_unequal_leaves() -> None:
    c = build(ClusterSpec, _spec(leaf_sizes=[4, 8, 8]), "test")
    state = ClusterState(c)
    assert state.leaf_size.tolist() == [4, 8, 8]
    assert state.free_nodes(1).tolist() == list(range(4, 12))
    order = scattered_nodes(c)
    assert sorted(order) == list(range(20)) and order[:3] == [0, 4, 12]


def test_nodes_per_leaf_override_on_the_cli() -> None:
    out = _json(["show", "cluster", "-c", "dgx-h100", "--nodes", "100", "--nodes-per-leaf", "16"])
    assert out["nodes"] == 100 and out["nodes_per_leaf"] == 16
    assert (out["leaves"], out["smallest_leaf_nodes"], out["pods"]) == (7, 4, 1)
    pods = ["--nodes-per-leaf", "8", "--leaves-per-pod", "5"]
    split = _json(["show", "cluster", "-c", "dgx-h100", "--nodes", "64", *pods])
    assert (split["leaves_per_pod"], split["smallest_pod_leaves"], split["pods"]) == (5, 3, 2)
    assert [t["name"] for t in out["tiers"]] == ["intra", "leaf", "spine"]
    assert with_params(load_cluster("dgx-h100"), {"nodes_per_leaf": 8}).leaves == 4


def test_slurm_topology_of_248_nodes_ingests_as_248(tmp_path: Path) -> None:
    out = tmp_path / "c.yaml"
    assert (
        _invoke(
            ["ingest", "slurm-topology", str(DATA / "slurm_topology_248.conf"), "-o", str(out)]
        )[0]
        == 0
    )
    c = load_cluster(out)
    assert c.nodes == 248 and c.leaf_sizes == (32,) * 7 + (24,)
    # Leaves of different sizes in the middle of the file keep their sizes.
    conf = tmp_path / "mixed.conf"
    conf.write_text(
        "SwitchName=a Nodes=n[1-16]\nSwitchName=b Nodes=n[17-48]\n"
        "SwitchName=c Nodes=n[49-56]\nSwitchName=s Switches=a,b,c\n"
    )
    mixed = tmp_path / "mixed.yaml"
    assert _invoke(["ingest", "slurm-topology", str(conf), "--out", str(mixed)])[0] == 0
    assert load_cluster(mixed).leaf_sizes == (16, 32, 8)


def test_slurm_three_levels_with_partial_and_unequal_pods(tmp_path: Path) -> None:
    leaves = [f"SwitchName=l{i} Nodes=n[{4 * i + 1}-{4 * i + 4}]" for i in range(9)]
    leaves.append("SwitchName=l9 Nodes=n[37-38]")  # a leaf of 2
    pods = ["SwitchName=p0 Switches=l[0-3]", "SwitchName=p1 Switches=l[4-7]"]
    conf = tmp_path / "pods.conf"
    top = "SwitchName=top Switches=p[0-2]"
    conf.write_text("\n".join([*leaves, *pods, "SwitchName=p2 Switches=l[8-9]", top]))
    out = tmp_path / "pods.yaml"
    assert _invoke(["ingest", "slurm-topology", str(conf), "--out", str(out)])[0] == 0
    c = load_cluster(out)
    assert (c.nodes, c.leaves, c.pod_sizes) == (38, 10, (4, 4, 2))
    assert c.topology.pod_sizes is None and c.topology.leaf_sizes is None  # partly built last
    # Unequal pods, and leaves listed out of pod order: nodes follow the pods.
    pods = ["SwitchName=p0 Switches=l[0-1],l9", "SwitchName=p1 Switches=l[2-8]"]
    conf.write_text("\n".join([*leaves, *pods, "SwitchName=top Switches=p[0-1]"]))
    assert _invoke(["ingest", "slurm-topology", str(conf), "--out", str(out)])[0] == 0
    c = load_cluster(out)
    assert (c.nodes, c.pod_sizes, c.leaves_per_pod) == (38, (3, 7), 7)
    assert c.leaf_sizes == (4, 4, 2, *(4,) * 7)
    # A leaf two pods list counts once, in the first.
    pods = ["SwitchName=p0 Switches=l[0-5]", "SwitchName=p1 Switches=l[5-9]"]
    conf.write_text("\n".join([*leaves, *pods, "SwitchName=top Switches=p[0-1]"]))
    assert _invoke(["ingest", "slurm-topology", str(conf), "--out", str(out)])[0] == 0
    assert load_cluster(out).pod_sizes == (6, 4)
    assert [t.name for t in tiers(c)] == ["intra", "leaf", "spine", "core"]


def test_emitted_topology_conf_keeps_unequal_leaves_and_pods() -> None:
    topo = {"leaf_sizes": [4, 8, 2, 8], "pod_sizes": [1, 3]}
    c = build(ClusterSpec, {**_spec(**topo), "nodes": 22}, "test")
    hosts = [f"gpu{i:02d}" for i in range(22)]
    fields, _ = parse_topology_conf(emit_topology_conf(c, hosts)).cluster_fields()
    assert fields["nodes"] == 22
    assert fields["topology"]["leaf_sizes"] == [4, 8, 2, 8]
    assert fields["topology"]["pod_sizes"] == [1, 3]


# --- NVLink domains larger than a node ----------------------------------------------------------


def test_two_nvl72_racks_ring_and_alltoall() -> None:
    """Two GB200 NVL72 racks (144 GPUs, 36 trays of 4 GPUs, one 400G NIC per GPU).

    What the model predicts for 8 GiB, and why:
    - ring all_reduce ~ 707 GB/s busbw, bound by NVLink: each rack's 72 NICs carry the ring's
      crossings out of the rack (NCCL's multi-node-NVLink rings use all of them), 72 x ~46 GB/s
      = 3.3 TB/s per crossing, far above one GPU's NVLink, so 2 racks run as fast as 1 (the
      earlier model counted one tray's 4 NICs: 187 GB/s; CoreWeave's nccl-tests show ~810).
    - alltoall ~ 93 GB/s busbw, bound by each GPU's own NIC: half of every GPU's bytes go to the
      other rack over its NIC (~46 GB/s effective), the other half over NVLink at the same time,
      so algbw = 2 x 46 GB/s (the earlier model shared 4 NICs among 72 GPUs: 5 GB/s).
    """
    one, two = (load_cluster("gb200-nvl72", nodes=n) for n in (18, 36))
    s1, s2 = group_shape(one), group_shape(two)
    assert (s2.p, s2.k, s2.n_dom, s2.rails) == (144, 72, 2, 72)
    ring1 = predict("all_reduce", s1, [GiB8], algo="ring").busbw_GBps[0]
    ring2 = predict("all_reduce", s2, [GiB8], algo="ring").busbw_GBps[0]
    nic_bound = s2.n_dom * s2.rails * s2.port_GBps / s2.dom_crossings
    assert nic_bound > 3000 and ring2 == pytest.approx(ring1, rel=0.05)  # NVLink-bound
    assert 600 < ring2 < 900
    a2a = predict("alltoall", s2, [GiB8])
    assert a2a.algbw_GBps[0] == pytest.approx(2 * s2.port_GBps, rel=0.03)  # own NIC, half the bytes
    assert 80 < a2a.busbw_GBps[0] < 100


def test_domain_traffic_spreads_over_the_domain_nics() -> None:
    c = load_cluster("gb200-nvl72", nodes=36)
    out = _json(["show", "cluster", "-c", "gb200-nvl72", "--nodes", "36"])
    assert (out["nvlink_domains"], out["nics_per_nvlink_domain"]) == (2, 72)
    p = Placement.contiguous(c)
    assert p.span(range(144)).rails == 72
    assert p.span([0, 72]).rails == 1  # one GPU per rack: its own NIC
    assert p.span([0, 4, 72, 76]).rails == 2  # two trays per rack: two NICs
    partial = load_cluster("gb200-nvl72", nodes=19)  # a full rack and one tray
    assert Placement.contiguous(partial).span(range(76)).rails == 4  # the tray's 4 NICs bound it
    dgx = Placement.contiguous(load_cluster("dgx-h100", nodes=4))
    assert dgx.span(range(32)).rails == 8 and dgx.span(range(0, 32, 8)).rails == 1


def test_larger_domains_use_the_same_fields() -> None:
    """A 144-GPU NVLink domain (36 trays of 4, as a rack pair joined by NVLink cables)."""
    c = load_cluster("gb200-nvl72", nodes=72, nvlink_domain_gpus=144, nodes_per_leaf=72)
    assert (c.domains, c.nics_per_domain) == (2, 144)
    span = Placement.contiguous(c).span(range(288))
    assert (span.domains, span.ranks_per_domain, span.rails, span.top.name) == (2, 144, 144, "leaf")
    assert Placement.contiguous(c).span(range(144)).tiers_spanned == ["intra"]


def test_nvl72_leaves_must_hold_whole_racks() -> None:
    with pytest.raises(SpecError, match="multiples of 18"):
        load_cluster("gb200-nvl72", nodes=72, nodes_per_leaf=20)
    assert load_cluster("gb200-nvl72", nodes=72, nodes_per_leaf=36).leaves == 2


# --- impossible requests are one line ---------------------------------------------------------


def test_zero_nics_across_domains_is_a_user_error() -> None:
    assert_user_error(
        run_cli("collective", "--nodes", "2", "--nics-per-node", "0", check=False),
        "nics_per_node=0",
        "nodes=2",
    )
    with pytest.raises(SpecError, match="nics_per_node=0"):
        with_params(load_cluster("dgx-h100", nodes=4), {"nics_per_node": 0})
    # One NVLink domain needs no NICs: a single node, or up to 18 NVL72 trays.
    assert [t.name for t in tiers(load_cluster("gb200-nvl72", nodes=18, nics_per_node=0))] == [
        "intra"
    ]


def test_cluster_size_limit_is_one_line() -> None:
    assert_user_error(
        run_cli("plan", "-m", "llama3-8b", "--nodes", "10000000", check=False),
        "nodes",
        str(MAX_NODES),
    )
    assert load_cluster("dgx-h100", nodes=MAX_NODES).leaves == -(-MAX_NODES // 32)


# --- every command on every preset at every node count ---------------------------------------

COMMANDS = (
    ("show", "cluster"),
    ("collective", "--op", "all_reduce"),
    ("collective", "--op", "alltoall"),
    ("estimate", "-m", "llama3-8b"),
    ("plan", "-m", "llama3-8b", "--top", "1"),
)


@settings(max_examples=10, deadline=None)
@given(preset=st.sampled_from(sorted(presets())), nodes=st.integers(1, 512))
@example(preset="dgx-h100", nodes=248)
@example(preset="gb200-nvl72", nodes=37)
@example(preset="dgx-a100", nodes=512)
def test_every_command_works_at_every_node_count(preset: str, nodes: int) -> None:
    for command in COMMANDS:
        code, out = _invoke([*command, "-c", preset, "--nodes", str(nodes), "--json"])
        assert code == 0, (command, preset, nodes, out)
