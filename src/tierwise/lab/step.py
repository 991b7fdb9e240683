"""Training-step check: a toy TP x DP transformer step (torch, CPU, gloo) timed in the lab.

Megatron-style tensor parallelism inside the job's "node" groups (column-parallel QKV and
MLP-in, row-parallel attention-out and MLP-out, one all-reduce each in forward and in
backward), data parallelism across them (one gradient all-reduce per step), plain SGD.
`model_spec` and `layout` describe the same step to `tierwise estimate`; `step_vs_estimate`
compares the two step times. The toy runs in fp32 on CPU ranks, so the estimate should use
the lab cluster spec (`tierwise.lab.cluster.lab_cluster`), whose "GPU" peak is the probed
per-rank matmul rate.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from tierwise.runtime.mesh import HierarchicalMesh
from tierwise.workload.layout import Layout
from tierwise.workload.spec import ModelSpec


@dataclass(frozen=True)
class StepConfig:
    """Toy model shape (elements) and timing; sequence and batch in tokens / sequences."""

    layers: int = 2
    hidden: int = 256
    heads: int = 4
    ffn_hidden: int = 1024
    vocab: int = 512
    seq: int = 128
    mbs: int = 2
    warmup: int = 1
    iters: int = 3

    def to_dict(self) -> dict[str, int]:
        """Plain data (travels in the worker task)."""
        return asdict(self)


def model_spec(cfg: StepConfig) -> ModelSpec:
    """The toy model as a tierwise `ModelSpec` (for `tierwise estimate`)."""
    return ModelSpec(
        name="lab-toy",
        layers=cfg.layers,
        hidden=cfg.hidden,
        heads=cfg.heads,
        ffn_hidden=cfg.ffn_hidden,
        vocab=cfg.vocab,
        activation="gelu",
        norm="layernorm",
    )


def layout(cfg: StepConfig, tp: int, dp: int) -> Layout:
    """The toy step's layout (no sequence parallelism, no recompute, ZeRO 0)."""
    return Layout(tp=tp, dp=dp, mbs=cfg.mbs, gbs=cfg.mbs * dp, seq=cfg.seq, sp=False)


def step_vs_estimate(measured_step_time_s: float, estimated_step_time_s: float) -> dict[str, float]:
    """Measured toy step vs `tierwise estimate`'s ``step_time_s`` for `model_spec`/`layout`
    on the lab's cluster spec: both times and the relative error of the estimate."""
    return {
        "measured_step_time_s": measured_step_time_s,
        "estimated_step_time_s": estimated_step_time_s,
        "error": estimated_step_time_s / measured_step_time_s - 1.0,
    }


class _CopyToTP(torch.autograd.Function):
    """Identity forward; all-reduce of the gradient over the TP group backward (Megatron f)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    """All-reduce over the TP group forward; identity backward (Megatron g)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        x = x.contiguous()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


class ToyTPModel(torch.nn.Module):
    """Pre-norm transformer layers sharded over ``tp`` ranks; replicated norms and head."""

    def __init__(self, cfg: StepConfig, tp: int, tp_rank: int, group: dist.ProcessGroup) -> None:
        super().__init__()
        self.cfg, self.tp, self.group = cfg, tp, group
        gen = torch.Generator().manual_seed(1 + tp_rank)
        h, f = cfg.hidden, cfg.ffn_hidden

        def shard(*shape: int) -> torch.nn.Parameter:
            return torch.nn.Parameter(torch.randn(*shape, generator=gen) * shape[0] ** -0.5)

        self.qkv = torch.nn.ParameterList([shard(h, 3 * h // tp) for _ in range(cfg.layers)])
        self.out = torch.nn.ParameterList([shard(h // tp, h) for _ in range(cfg.layers)])
        self.fc1 = torch.nn.ParameterList([shard(h, f // tp) for _ in range(cfg.layers)])
        self.fc2 = torch.nn.ParameterList([shard(f // tp, h) for _ in range(cfg.layers)])
        torch.manual_seed(0)
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(h) for _ in range(2 * cfg.layers))
        self.head = torch.nn.Linear(h, cfg.vocab, bias=False)

    def _attention(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        b, s, _ = x.shape
        heads = self.cfg.heads // self.tp
        qkv = (x @ self.qkv[layer]).view(b, s, 3, heads, -1).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
        return y.transpose(1, 2).reshape(b, s, -1) @ self.out[layer]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Hidden states ``[mbs, seq, hidden]`` -> logits ``[mbs, seq, vocab]``."""
        for layer in range(self.cfg.layers):
            a = _CopyToTP.apply(self.norms[2 * layer](x), self.group)
            x = x + _ReduceFromTP.apply(self._attention(a, layer), self.group)
            m = _CopyToTP.apply(self.norms[2 * layer + 1](x), self.group)
            x = x + _ReduceFromTP.apply(F.gelu(m @ self.fc1[layer]) @ self.fc2[layer], self.group)
        return self.head(x)


def measure_step(step: dict[str, Any], mesh: HierarchicalMesh, rank: int) -> dict[str, Any]:
    """Mean training-step time (s, slowest rank) with TP over the mesh's node groups and DP
    over its rails; a collective call on every rank."""
    cfg = StepConfig(**step)
    tp, dp = mesh.local_size, mesh.nodes
    model = ToyTPModel(cfg, tp, mesh.local_index, mesh.local_group)
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=1e-3)
    gen = torch.Generator().manual_seed(100 + mesh.node_index)
    x = torch.randn(cfg.mbs, cfg.seq, cfg.hidden, generator=gen)
    target = torch.randint(0, cfg.vocab, (cfg.mbs, cfg.seq), generator=gen)

    def one_step() -> None:
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x).view(-1, cfg.vocab), target.view(-1))
        loss.backward()
        if dp > 1:
            flat = torch.cat([p.grad.view(-1) for p in params])  # type: ignore[union-attr]
            dist.all_reduce(flat, group=mesh.rail_group)
            flat.div_(dp)
            torch.nn.utils.vector_to_parameters(flat, [p.grad for p in params])  # type: ignore[misc]
        opt.step()

    for _ in range(cfg.warmup):
        one_step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(cfg.iters):
        one_step()
    took = torch.tensor([(time.perf_counter() - t0) / cfg.iters], dtype=torch.float64)
    dist.all_reduce(took, op=dist.ReduceOp.MAX)
    grad_bytes = sum(p.numel() for p in params) * 4
    return {
        "tp": tp,
        "dp": dp,
        "step_time_s": float(took),
        "grad_bytes": grad_bytes,
        "config": cfg.to_dict(),
    }
