"""Flat and two-level (hierarchical) collectives on torch.distributed, same results either way.

Hierarchical schemes on a ("node", "local") mesh of ``N`` nodes x ``L`` ranks (see `mesh`):

- all_reduce: reduce-scatter inside the node (input padded to a multiple of ``L``) ->
  all-reduce across nodes on each rail (``1/L`` of the bytes) -> all-gather inside the node.
- reduce_scatter: reduce-scatter inside the node (each rank keeps the ``N`` chunks of its
  rail) -> reduce-scatter across nodes on the rail.
- all_gather: all-gather across nodes on the rail -> all-gather inside the node.
- all_to_all: exchange inside the node (each rank collects what its rail must carry) ->
  exchange across nodes on the rail; ``L*n`` elements per message across nodes.
- broadcast: across nodes on the root's rail -> inside each node.

Every rank crosses the slow tier with no more bytes than the flat ring needs, and messages
across nodes are ``L`` times fewer. Ops ``sum``, ``avg``, ``max``, ``min``: ``avg`` is a sum
divided by the world size (gloo has no native AVG) and needs a floating dtype — integer
tensors with ``avg`` raise `TierwiseError` (use ``sum`` and divide as you wish).
Tensors must be contiguous; any shape, dtype supported by the backend and size.
"""

from __future__ import annotations

from functools import cached_property
from typing import Protocol

import torch
import torch.distributed as dist

from tierwise.errors import TierwiseError
from tierwise.runtime.dist_compat import all_gather_single, reduce_scatter_single
from tierwise.runtime.mesh import HierarchicalMesh

REDUCE_OPS: dict[str, dist.ReduceOp.RedOpType] = {
    "sum": dist.ReduceOp.SUM,
    "avg": dist.ReduceOp.SUM,
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
}


class Collectives(Protocol):
    """The collectives `tierwise bench` times; ``out`` may alias the input (in-place)."""

    def all_reduce(
        self, tensor: torch.Tensor, op: str = "sum", out: torch.Tensor | None = None
    ) -> torch.Tensor: ...

    def all_gather(self, out: torch.Tensor, inp: torch.Tensor) -> torch.Tensor: ...

    def reduce_scatter(
        self, out: torch.Tensor, inp: torch.Tensor, op: str = "sum"
    ) -> torch.Tensor: ...

    def all_to_all(self, out: torch.Tensor, inp: torch.Tensor) -> torch.Tensor: ...

    def broadcast(
        self, tensor: torch.Tensor, src: int = 0, out: torch.Tensor | None = None
    ) -> torch.Tensor: ...


def reduce_op(op: str, dtype: torch.dtype) -> dist.ReduceOp.RedOpType:
    """The torch reduce op for ``sum|avg|max|min`` (``avg`` maps to SUM, divided after)."""
    if op not in REDUCE_OPS:
        raise TierwiseError(f"op: {op!r} is not one of {', '.join(REDUCE_OPS)}")
    if op == "avg" and not (dtype.is_floating_point or dtype.is_complex):
        raise TierwiseError(f"op 'avg' needs a floating dtype, got {dtype}; use 'sum'")
    return REDUCE_OPS[op]


def _flat(tensor: torch.Tensor, name: str) -> torch.Tensor:
    if not tensor.is_contiguous():
        raise TierwiseError(f"{name}: tensor must be contiguous")
    return tensor.view(-1)


def _check_split(out: torch.Tensor, inp: torch.Tensor, world: int, what: str) -> None:
    if out.numel() != world * inp.numel():
        raise TierwiseError(
            f"{what}: need {world} x {inp.numel()} = {world * inp.numel()} elements, "
            f"got {out.numel()}"
        )
    if out.dtype != inp.dtype:
        raise TierwiseError(f"{what}: dtypes differ ({inp.dtype} vs {out.dtype})")


def _aliases(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when the two tensors' storage ranges overlap."""
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


class FlatCollectives:
    """The plain torch.distributed collectives over ``group`` (the world by default)."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        self.group = group
        self.world = dist.get_world_size(group)
        self.rank = dist.get_rank(group)

    def all_reduce(
        self, tensor: torch.Tensor, op: str = "sum", out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``out = reduce over ranks of tensor`` (``out`` defaults to ``tensor``: in place).

        torch's all_reduce is in place only, so an out-of-place call copies first."""
        red = reduce_op(op, tensor.dtype)
        target = tensor if out is None else out.copy_(tensor)
        dist.all_reduce(target, red, group=self.group)
        if op == "avg":
            target.div_(self.world)
        return target

    def all_gather(self, out: torch.Tensor, inp: torch.Tensor) -> torch.Tensor:
        """``out[r*n:(r+1)*n] = inp of rank r``."""
        _check_split(out, inp, self.world, "all_gather")
        all_gather_single(_flat(out, "out"), _flat(inp, "inp"), group=self.group)
        return out

    def reduce_scatter(self, out: torch.Tensor, inp: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """``out on rank r = reduce over ranks of inp[r*n:(r+1)*n]``."""
        _check_split(inp, out, self.world, "reduce_scatter")
        red = reduce_op(op, inp.dtype)
        src = inp.clone() if _aliases(out, inp) else inp
        reduce_scatter_single(_flat(out, "out"), _flat(src, "inp"), red, group=self.group)
        if op == "avg":
            out.div_(self.world)
        return out

    def all_to_all(self, out: torch.Tensor, inp: torch.Tensor) -> torch.Tensor:
        """``out[s*n:(s+1)*n] on rank r = inp[r*n:(r+1)*n] of rank s`` (equal splits)."""
        _check_split(out, inp, 1, "all_to_all")
        if inp.numel() % self.world:
            raise TierwiseError(
                f"all_to_all: {inp.numel()} elements do not split over {self.world} ranks"
            )
        src = inp.clone() if _aliases(out, inp) else inp
        dist.all_to_all_single(_flat(out, "out"), _flat(src, "inp"), group=self.group)
        return out

    def broadcast(
        self, tensor: torch.Tensor, src: int = 0, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``out = tensor of rank src`` on every rank (global rank ``src``)."""
        target = tensor if out is None else out
        if out is not None and self.rank == src:
            target.copy_(tensor)
        dist.broadcast(target, src=src, group=self.group)
        return target

    def sendrecv(self, out: torch.Tensor, inp: torch.Tensor) -> torch.Tensor:
        """Ring exchange: send ``inp`` to rank r+1, receive rank r-1's into ``out``."""
        if self.world == 1:
            return out.copy_(inp)
        src = inp.clone() if _aliases(out, inp) else inp
        peer_to, peer_from = (self.rank + 1) % self.world, (self.rank - 1) % self.world
        ops = [
            dist.P2POp(dist.isend, src, peer_to, group=self.group),
            dist.P2POp(dist.irecv, out, peer_from, group=self.group),
        ]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        return out


class HierarchicalCollectives:
    """Two-level collectives on a `HierarchicalMesh`; results equal `FlatCollectives`'."""

    def __init__(self, mesh: HierarchicalMesh) -> None:
        self.mesh = mesh
        self.world = mesh.placement.world_size

    @cached_property
    def _rail_node(self) -> torch.Tensor:
        """``[q] -> node index`` of the rank at rail-group position ``q``."""
        nodes = [self.mesh.placement.coords(r)[0] for r in self.mesh.rail_ranks]
        return torch.tensor(nodes, dtype=torch.int64)

    @cached_property
    def _node_rail(self) -> torch.Tensor:
        """``[j] -> rail-group position`` of node ``j``'s member (inverse of `_rail_node`)."""
        return torch.argsort(self._rail_node)

    @cached_property
    def _local_node_ranks(self) -> torch.Tensor:
        """``[p*N + j] -> global rank mesh[j][p]`` (local-major order)."""
        return torch.tensor(self.mesh.placement.mesh, dtype=torch.int64).t().reshape(-1)

    @cached_property
    def _rail_local_ranks(self) -> torch.Tensor:
        """``[q*L + p] -> global rank`` with local index ``p`` on the node of rail position q."""
        rows = torch.tensor(self.mesh.placement.mesh, dtype=torch.int64)
        return rows.index_select(0, self._rail_node).reshape(-1)

    def _index(self, name: str, device: torch.device) -> torch.Tensor:
        return getattr(self, name).to(device)

    def all_reduce(
        self, tensor: torch.Tensor, op: str = "sum", out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Reduce-scatter in the node -> all-reduce per rail -> all-gather in the node."""
        red = reduce_op(op, tensor.dtype)
        m = self.mesh
        flat = _flat(tensor, "tensor")
        target = tensor if out is None else out
        dst = _flat(target, "out")
        n, local = flat.numel(), m.local_size
        if n == 0:
            return target
        chunk_len = -(-n // local)
        padded = chunk_len * local != n
        if padded:
            src = torch.zeros(chunk_len * local, dtype=flat.dtype, device=flat.device)
            src[:n].copy_(flat)
        else:
            src = flat
        chunk = torch.empty(chunk_len, dtype=flat.dtype, device=flat.device)
        if local > 1:
            reduce_scatter_single(chunk, src, red, group=m.local_group)
        else:
            chunk.copy_(src)
        if m.nodes > 1:
            dist.all_reduce(chunk, red, group=m.rail_group)
        if op == "avg":
            chunk.div_(self.world)
        gathered = src if padded else dst  # the reduce-scatter has consumed the input
        if local > 1:
            all_gather_single(gathered, chunk, group=m.local_group)
        else:
            gathered.copy_(chunk)
        if padded:
            dst.copy_(src[:n])
        return target

    def all_gather(self, out: torch.Tensor, inp: torch.Tensor) -> torch.Tensor:
        """All-gather across nodes on the rail -> all-gather inside the node."""
        _check_split(out, inp, self.world, "all_gather")
        m, src = self.mesh, _flat(inp, "inp")
        n = src.numel()
        if n == 0:
            return out
        rail = torch.empty(m.nodes * n, dtype=src.dtype, device=src.device)
        if m.nodes > 1:
            all_gather_single(rail, src, group=m.rail_group)
        else:
            rail.copy_(src)
        by_node = rail.view(m.nodes, n).index_select(0, self._index("_node_rail", src.device))
        both = torch.empty(self.world * n, dtype=src.dtype, device=src.device)
        if m.local_size > 1:
            all_gather_single(both, by_node.view(-1), group=m.local_group)
        else:
            both.copy_(by_node.view(-1))
        order = self._index("_local_node_ranks", src.device)
        _flat(out, "out").view(self.world, n).index_copy_(0, order, both.view(self.world, n))
        return out

    def reduce_scatter(self, out: torch.Tensor, inp: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """Reduce-scatter inside the node -> reduce-scatter across nodes on the rail."""
        _check_split(inp, out, self.world, "reduce_scatter")
        red = reduce_op(op, inp.dtype)
        m, dst = self.mesh, _flat(out, "out")
        n = dst.numel()
        if n == 0:
            return out
        rows = _flat(inp, "inp").view(self.world, n)
        by_local = rows.index_select(0, self._index("_local_node_ranks", rows.device))
        mine = torch.empty(m.nodes * n, dtype=rows.dtype, device=rows.device)
        if m.local_size > 1:
            reduce_scatter_single(mine, by_local.view(-1), red, group=m.local_group)
        else:
            mine.copy_(by_local.view(-1))
        by_rail = mine.view(m.nodes, n).index_select(0, self._index("_rail_node", rows.device))
        if m.nodes > 1:
            reduce_scatter_single(dst, by_rail.view(-1), red, group=m.rail_group)
        else:
            dst.copy_(by_rail.view(-1))
        if op == "avg":
            dst.div_(self.world)
        return out

    def all_to_all(self, out: torch.Tensor, inp: torch.Tensor) -> torch.Tensor:
        """Exchange inside the node -> exchange across nodes on the rail (equal splits)."""
        _check_split(out, inp, 1, "all_to_all")
        m, src = self.mesh, _flat(inp, "inp")
        if src.numel() % self.world:
            raise TierwiseError(
                f"all_to_all: {src.numel()} elements do not split over {self.world} ranks"
            )
        n = src.numel() // self.world
        if n == 0:
            return out
        send = src.view(self.world, n).index_select(0, self._index("_local_node_ranks", src.device))
        recv = torch.empty_like(send)
        if m.local_size > 1:
            dist.all_to_all_single(recv.view(-1), send.view(-1), group=m.local_group)
        else:
            recv.copy_(send)
        per_rail = (
            recv.view(m.local_size, m.nodes, n)
            .transpose(0, 1)
            .index_select(0, self._index("_rail_node", src.device))
            .contiguous()
        )
        got = torch.empty_like(per_rail)
        if m.nodes > 1:
            dist.all_to_all_single(got.view(-1), per_rail.view(-1), group=m.rail_group)
        else:
            got.copy_(per_rail)
        order = self._index("_rail_local_ranks", src.device)
        _flat(out, "out").view(self.world, n).index_copy_(0, order, got.view(self.world, n))
        return out

    def broadcast(
        self, tensor: torch.Tensor, src: int = 0, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Broadcast across nodes on the root's rail -> broadcast inside each node."""
        m = self.mesh
        target = tensor if out is None else out
        if out is not None and m.rank == src:
            target.copy_(tensor)
        _, root_local = m.placement.coords(src)
        if m.local_index == root_local and m.nodes > 1:
            dist.broadcast(target, group=m.rail_group, group_src=m.rail_ranks.index(src))
        if m.local_size > 1:
            dist.broadcast(target, group=m.local_group, group_src=root_local)
        return target


def collectives(algo: str, mesh: HierarchicalMesh | None = None) -> Collectives:
    """``flat`` (world group) or ``hierarchical`` (needs ``mesh``) collectives."""
    if algo == "flat":
        return FlatCollectives()
    if algo == "hierarchical":
        if mesh is None:
            raise TierwiseError("algo 'hierarchical' needs a mesh (build_mesh)")
        return HierarchicalCollectives(mesh)
    raise TierwiseError(f"algo: {algo!r} is not one of flat, hierarchical")
