"""Process groups for two-level collectives: a 2-D ``DeviceMesh`` with dims ("node", "local").

``local`` groups hold the ranks of one node (the fast tier); ``node`` groups (rails) hold the
ranks with the same local index on every node (the slow tier).
"""

from __future__ import annotations

import datetime
import gc
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from tierwise.errors import TierwiseError
from tierwise.runtime.dist_compat import all_gather_single
from tierwise.runtime.faults import RankFailure, describe_rendezvous_error
from tierwise.runtime.launch import RankEnv
from tierwise.runtime.placement import Placement


def resolve_backend(backend: str) -> str:
    """``auto`` -> ``nccl`` when CUDA is available, else ``gloo``; checks ``nccl`` is usable."""
    if backend == "auto":
        return "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    if backend == "nccl" and not (torch.cuda.is_available() and dist.is_nccl_available()):
        raise TierwiseError("backend: 'nccl' needs CUDA GPUs and an NCCL build of torch")
    if backend not in ("gloo", "nccl"):
        raise TierwiseError(f"backend: {backend!r} is not one of gloo, nccl, auto")
    return backend


def device_for(backend: str, local_rank: int) -> torch.device:
    """The device a rank's buffers live on: its GPU for NCCL, the CPU for gloo."""
    if backend == "nccl":
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def init_distributed(env: RankEnv, backend: str, timeout_s: float) -> torch.device:
    """Join the job (env:// rendezvous at ``env.master``); returns this rank's device.

    ``timeout_s`` bounds the rendezvous and every later collective (gloo and NCCL). Failures
    (unreachable master, missing ranks) raise `RankFailure` with one line.
    """
    os.environ.update(
        MASTER_ADDR=env.master_addr,
        MASTER_PORT=str(env.master_port),
        RANK=str(env.rank),
        WORLD_SIZE=str(env.world_size),
    )
    if env.master_addr.startswith("127.") or env.master_addr == "localhost":
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    device = device_for(backend, env.local_rank)
    try:
        dist.init_process_group(
            backend=backend,
            init_method="env://",
            rank=env.rank,
            world_size=env.world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
            device_id=device if backend == "nccl" else None,
        )
    except Exception as exc:
        raise RankFailure(
            describe_rendezvous_error(exc, env.master, env.world_size, timeout_s)
        ) from None
    return device


def exchange_placement(node_rank: int, device: torch.device) -> Placement:
    """Every rank's node id, gathered from all ranks (works for any launcher's rank order)."""
    mine = torch.tensor([node_rank], dtype=torch.int64, device=device)
    everyone = torch.empty(dist.get_world_size(), dtype=torch.int64, device=device)
    all_gather_single(everyone, mine)
    return Placement.from_node_ids(everyone.tolist())


@dataclass(frozen=True)
class HierarchicalMesh:
    """The 2-D mesh of one rank, its two groups and where it sits in them.

    ``local_ranks`` / ``rail_ranks`` are the global ranks of the ``local`` / ``node`` group in
    group-rank order; ``node_index`` / ``local_index`` index ``placement.mesh``.
    """

    placement: Placement
    device_mesh: DeviceMesh
    local_group: dist.ProcessGroup
    rail_group: dist.ProcessGroup
    local_ranks: tuple[int, ...]
    rail_ranks: tuple[int, ...]
    rank: int
    node_index: int
    local_index: int
    backend: str

    @property
    def nodes(self) -> int:
        """Number of nodes (size of the ``node`` dim)."""
        return self.placement.nodes

    @property
    def local_size(self) -> int:
        """Ranks per node (size of the ``local`` dim)."""
        return self.placement.ranks_per_node


def build_mesh(placement: Placement, device: torch.device) -> HierarchicalMesh:
    """The ("node", "local") ``DeviceMesh`` of ``placement``; a collective call on all ranks."""
    world = dist.get_world_size()
    if placement.world_size != world:
        raise TierwiseError(
            f"placement has {placement.world_size} ranks but the job has world size {world}"
        )
    mesh = DeviceMesh(
        device.type,
        torch.tensor(placement.mesh, dtype=torch.int64),
        mesh_dim_names=("node", "local"),
    )
    rank = dist.get_rank()
    node_index, local_index = placement.coords(rank)
    local_group, rail_group = mesh.get_group("local"), mesh.get_group("node")
    local_ranks = tuple(dist.get_process_group_ranks(local_group))
    if local_ranks != placement.mesh[node_index]:
        raise RuntimeError(f"local group {local_ranks} != node {placement.mesh[node_index]}")
    return HierarchicalMesh(
        placement=placement,
        device_mesh=mesh,
        local_group=local_group,
        rail_group=rail_group,
        local_ranks=local_ranks,
        rail_ranks=tuple(dist.get_process_group_ranks(rail_group)),
        rank=rank,
        node_index=node_index,
        local_index=local_index,
        backend=dist.get_backend(),
    )


def shutdown() -> None:
    """Leave the job: wait for every rank, free dropped meshes, destroy all process groups.

    Drop your references to meshes and collectives first: gloo groups that outlive
    ``destroy_process_group`` can abort the interpreter at exit ("terminate called ...")."""
    dist.barrier()
    gc.collect()
    dist.destroy_process_group()
