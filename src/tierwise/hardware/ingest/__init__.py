"""Ingestion of what real machines print: `nvidia-smi topo -m`, NCCL's topology XML, Slurm's
topology.conf. Node ingesters give a `NodeTopology` (GPUs, NICs, affinity, NVLink) and the partial
cluster fields it implies; the Slurm parser gives a `SwitchTree`; `complete_cluster` fills the
rest with named defaults. See ../../../../tests/data/ingest/README.md for the samples.
"""

from tierwise.hardware.ingest.nccl_xml import parse_nccl_topo
from tierwise.hardware.ingest.node import GpuInfo, NicInfo, NodeTopology, assign_rails
from tierwise.hardware.ingest.nvidia_smi import parse_topo_matrix
from tierwise.hardware.ingest.slurm_topology import (
    Switch,
    SwitchTree,
    emit_slurm_nodes,
    emit_topology_conf,
    parse_topology_conf,
    tree_for,
)
from tierwise.hardware.ingest.spec import cluster_yaml, complete_cluster

__all__ = [
    "GpuInfo",
    "NicInfo",
    "NodeTopology",
    "Switch",
    "SwitchTree",
    "assign_rails",
    "cluster_yaml",
    "complete_cluster",
    "emit_slurm_nodes",
    "emit_topology_conf",
    "parse_nccl_topo",
    "parse_topo_matrix",
    "parse_topology_conf",
    "tree_for",
]
