"""Small placements span groups with python ints (no numpy import), large ones with numpy arrays:
both paths give the same spans, NIC sharing and hierarchy on any cluster and any group."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tierwise.hardware.cluster import ClusterSpec, load_cluster
from tierwise.hardware.placement import SMALL_WORLD, Placement, hierarchy, nic_sharing
from tierwise.specio import build

PRESETS = ("dgx-h100", "pcie-h100", "gb200-nvl72", "mi300x-8")


def _unequal_leaves(nodes: int, leaf_sizes: list[int]) -> ClusterSpec:
    spec = {
        "gpu": "h100-sxm",
        "gpus_per_node": 8,
        "nodes": nodes,
        "intra": "nvlink4",
        "inter": {"nic": "ndr400", "nics_per_node": 4},
        "topology": {"kind": "rail-optimized", "leaf_sizes": leaf_sizes, "leaves_per_pod": 2},
    }
    return build(ClusterSpec, spec, "test")


@st.composite
def clusters(draw: st.DrawFn) -> ClusterSpec:
    if draw(st.booleans()):
        leaf_sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=8))
        return _unequal_leaves(max(1, sum(leaf_sizes) - draw(st.integers(0, 5))), leaf_sizes)
    preset = draw(st.sampled_from(PRESETS))
    nodes = draw(st.integers(1, 40))
    per_leaf = None if preset == "gb200-nvl72" else draw(st.sampled_from([None, 2, 3]))
    return load_cluster(preset, nodes=nodes, nodes_per_leaf=per_leaf)


def _as_arrays(p: Placement) -> Placement:
    """The same placement held as numpy arrays (the large-placement path)."""
    return Placement(p.cluster, np.asarray(p.node_of), np.asarray(p.local_of))


@settings(max_examples=60, deadline=None)
@given(cluster=clusters(), data=st.data())
def test_python_and_numpy_paths_agree(cluster: ClusterSpec, data: st.DataObject) -> None:
    small = Placement.contiguous(cluster)
    assert isinstance(small.node_of, tuple)
    big = _as_arrays(small)
    rank = st.integers(0, small.world - 1)
    group = st.lists(rank, min_size=1, max_size=48, unique=True)
    ranks = data.draw(group)
    assert small.span(ranks) == big.span(ranks)
    assert small.span(np.asarray(ranks)) == big.span(ranks)
    groups = data.draw(st.lists(group, min_size=1, max_size=6))
    assert nic_sharing(small, groups) == nic_sharing(big, groups)
    nodes = list(range(cluster.nodes))
    for as_list, as_array in zip(
        hierarchy(cluster, nodes), hierarchy(cluster, np.asarray(nodes)), strict=True
    ):
        assert as_list == as_array.tolist()
    assert small.nodes_used() == big.nodes_used() == sorted(set(small.node_of))


def test_large_placements_hold_arrays() -> None:
    c = load_cluster("dgx-h100", nodes=SMALL_WORLD // 8 + 1)
    p = Placement.contiguous(c)
    assert isinstance(p.node_of, np.ndarray) and p.world == SMALL_WORLD + 8
    small = Placement.contiguous(c, world=SMALL_WORLD)
    assert isinstance(small.node_of, tuple)
    ranks = list(range(0, SMALL_WORLD, 8))
    assert p.span(ranks) == small.span(ranks)


def test_small_estimate_imports_no_numpy() -> None:
    code = (
        "import sys\n"
        "from tierwise.cli.main import main\n"
        "sys.argv = ['tierwise', 'estimate', '-m', 'llama3-8b', '--nodes', '2', '--tp', '8',"
        " '--pp', '2', '--json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('numpy' in sys.modules, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert '"step_time_s"' in proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == "False"


def test_rail_fields_agree_on_both_paths() -> None:
    """The plain-Python rail fields (small placements) equal the numpy ones (large), for groups
    that change rail between nodes, mix rails, and keep one rail."""
    c = load_cluster("dgx-h100", nodes=SMALL_WORLD // 8 + 1)
    big = Placement.contiguous(c)
    small = Placement.contiguous(c, world=SMALL_WORLD)
    groups = [
        [n * 8 + n % 8 for n in range(64)],  # one GPU per node, a different rail each step
        [n * 8 + r for n in range(0, 32, 3) for r in (0, 5)],  # two rails per node
        [n * 8 + (n * 3) % 8 for n in range(5)] + [7, 6],  # uneven, back into node 0
        list(range(16)),  # two full nodes: no rail change
    ]
    for ranks in groups:
        span = small.span(ranks)
        assert span == big.span(ranks), ranks
        assert span.domains > 1
    assert small.span(groups[0]).rail_changes == 64
    assert small.span(groups[3]).rail_changes == 0
