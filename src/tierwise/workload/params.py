"""Parameter counts: total, active per token, and the per-layer pieces memory shards.

Conventions: token embeddings are counted, and so is a separate output projection when the
embeddings are untied; a learned position table adds ``max_seq x hidden``. Biases are counted
when ``bias`` says so (GPT-2/NeoX/GPT-3: every linear layer; Qwen2: q/k/v only), and norms
are counted (two per layer plus the final one; LayerNorm = weight + bias, RMSNorm = weight).
A MoE token is active on its ``top_k`` routed experts, every shared expert and the router.
"""

from __future__ import annotations

from dataclasses import dataclass

from tierwise.workload.spec import ModelSpec

NORMS_PER_LAYER = 2
"""Pre-attention and pre-MLP norm; one more after the last layer."""


def attention_params(m: ModelSpec) -> int:
    """Q, K, V and output projection weights (and biases) of one layer."""
    weights = m.hidden * (2 * m.q_dim + 2 * m.kv_dim)
    biases = {"none": 0, "qkv": m.q_dim + 2 * m.kv_dim, "all": m.q_dim + 2 * m.kv_dim + m.hidden}
    return weights + biases[m.bias]


def mlp_params(m: ModelSpec, ffn: int) -> int:
    """One MLP (dense or one expert) of hidden size ``ffn``."""
    weights = m.matmuls_per_mlp * m.hidden * ffn
    biases = (m.matmuls_per_mlp - 1) * ffn + m.hidden if m.bias == "all" else 0
    return weights + biases


def norm_params(m: ModelSpec) -> int:
    """One norm layer."""
    return 2 * m.hidden if m.norm == "layernorm" else m.hidden


def router_params(m: ModelSpec) -> int:
    """The router of one MoE layer (hidden x experts, no bias)."""
    return 0 if m.moe is None else m.hidden * m.moe.experts


def shared_expert_params(m: ModelSpec) -> int:
    """All shared experts of one MoE layer."""
    return 0 if m.moe is None else m.moe.shared_experts * mlp_params(m, m.moe.shared_ffn)


def expert_params(m: ModelSpec) -> int:
    """One routed expert."""
    return 0 if m.moe is None else mlp_params(m, m.moe.expert_ffn_hidden)


def embedding_params(m: ModelSpec) -> int:
    """Token embedding table plus a learned position table if any."""
    positions = (m.max_seq or 0) * m.hidden if m.position == "learned" else 0
    return m.vocab * m.hidden + positions


def output_params(m: ModelSpec) -> int:
    """Separate output projection; 0 when tied to the embeddings."""
    return 0 if m.tied_embeddings else m.vocab * m.hidden


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts of a whole model, by part (element counts)."""

    embedding: int
    output: int
    attention: int
    mlp: int
    router: int
    shared_experts: int
    experts: int
    active_experts: int
    norms: int

    @property
    def total(self) -> int:
        """Every parameter stored."""
        return (
            self.embedding
            + self.output
            + self.attention
            + self.mlp
            + self.router
            + self.shared_experts
            + self.experts
            + self.norms
        )

    @property
    def active(self) -> int:
        """Parameters one token passes through (MoE: top_k routed + shared experts)."""
        return self.total - self.experts + self.active_experts

    @property
    def non_expert(self) -> int:
        """Everything except routed experts (sharded over dp*cp, not by ep)."""
        return self.total - self.experts


def param_counts(m: ModelSpec) -> ParamCounts:
    """Count the parameters of ``m``."""
    moe_layers = m.moe_layers
    top_k = m.moe.top_k if m.moe else 0
    experts = m.moe.experts if m.moe else 0
    return ParamCounts(
        embedding=embedding_params(m),
        output=output_params(m),
        attention=m.layers * attention_params(m),
        mlp=m.dense_layers * mlp_params(m, m.ffn),
        router=moe_layers * router_params(m),
        shared_experts=moe_layers * shared_expert_params(m),
        experts=moe_layers * experts * expert_params(m),
        active_experts=moe_layers * top_k * expert_params(m),
        norms=(NORMS_PER_LAYER * m.layers + 1) * norm_params(m),
    )
