"""Parameter counts: total, active per token, and the per-layer pieces memory shards.

Conventions: token embeddings are counted, and so is a separate output projection when the
embeddings are untied; a learned position table adds ``max_seq x hidden``. Biases are counted
when ``bias`` says so (GPT-2/NeoX/GPT-3: every linear layer; Qwen2: q/k/v only), and norms
are counted (two per layer plus the final one; LayerNorm = weight + bias, RMSNorm = weight).
A MoE token is active on its ``top_k`` routed experts, every shared expert and the router.
MLA counts its down/up projections and the two latent norms; QK-norm adds one head_dim weight
for Q and one for K per layer; attention sinks one logit per head per layer. Multi-token
prediction modules (DeepSeek-V3) each hold one more layer of the last layer's kind, two input
norms, the ``2h x h`` projection that joins embedding and hidden state, and a final norm; the
embedding and output head are shared with the main model. They are stored and trained, so
every part below includes them; ``main_*`` leave them out, as published totals do.
"""

from __future__ import annotations

from dataclasses import dataclass

from tierwise.workload.spec import ModelSpec

NORMS_PER_LAYER = 2
"""Pre-attention and pre-MLP norm; one more after the last layer."""
POST_NORMS_PER_LAYER = 2
"""With ``post_norms`` (Gemma 2/3): a norm after attention and one after the MLP as well."""
MTP_NORMS = 3
"""Per MTP module: norms of the embedding and of the hidden state, and its final norm."""
MTP_PROJ_INPUTS = 2
"""The MTP projection maps [embedding; hidden state] (2h) to h."""


def mla_params(m: ModelSpec) -> int:
    """MLA projections of one layer: Q (direct or via its latent + norm), the KV latent and
    the shared rotary key, the KV latent norm and up-projection, the output projection."""
    a, h, n = m.mla, m.hidden, m.heads
    if a is None:
        return 0
    q_out = n * a.qk_head_dim
    q = h * q_out if a.q_lora_rank is None else a.q_lora_rank * (h + 1 + q_out)
    kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank * (
        1 + n * (a.qk_nope_head_dim + a.v_head_dim)
    )
    return q + kv + m.v_dim * h


def mla_latent_params(m: ModelSpec) -> int:
    """MLA's down-projections and latent norms: Q (h -> q_lora_rank, + norm) and KV
    (h -> kv_lora_rank + the shared rotary key, + norm). Megatron keeps them whole on every
    TP rank; 0 without MLA."""
    a, h = m.mla, m.hidden
    if a is None:
        return 0
    q_down = 0 if a.q_lora_rank is None else a.q_lora_rank * (h + 1)
    return q_down + h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank


def attention_params(m: ModelSpec) -> int:
    """Q, K, V and output projection weights (and biases), QK-norm weights and attention
    sinks of one layer."""
    extra = 2 * m.hd * m.qk_norm + m.heads * m.attention_sinks
    if m.mla is not None:
        return mla_params(m) + extra
    weights = m.hidden * (m.q_dim + 2 * m.kv_dim + m.v_dim)
    biases = {"none": 0, "qkv": m.q_dim + 2 * m.kv_dim, "all": m.q_dim + 2 * m.kv_dim + m.hidden}
    return weights + biases[m.bias] + extra


def mlp_params(m: ModelSpec, ffn: int) -> int:
    """One MLP (dense or one expert) of hidden size ``ffn``."""
    weights = m.matmuls_per_mlp * m.hidden * ffn
    biases = (m.matmuls_per_mlp - 1) * ffn + m.hidden if m.bias == "all" else 0
    return weights + biases


def norms_per_layer(m: ModelSpec) -> int:
    """Norm layers in one decoder layer: the two pre-norms, and the two post-norms of
    ``post_norms`` models (``transformers``' Gemma2DecoderLayer has all four)."""
    return NORMS_PER_LAYER + POST_NORMS_PER_LAYER * m.post_norms


def norm_params(m: ModelSpec) -> int:
    """One norm layer."""
    return 2 * m.hidden if m.norm == "layernorm" else m.hidden


def router_params(m: ModelSpec) -> int:
    """The router of one MoE layer (hidden x experts; a bias per expert with ``bias: all``,
    GPT-OSS, or ``expert_bias``, DeepSeek-V3's load-balancing bias)."""
    if m.moe is None:
        return 0
    has_bias = m.bias == "all" or m.moe.expert_bias
    return (m.hidden + has_bias) * m.moe.experts


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


def mtp_proj_params(m: ModelSpec) -> int:
    """One MTP module's own parts: its three norms and the ``2h x h`` projection."""
    return MTP_NORMS * norm_params(m) + MTP_PROJ_INPUTS * m.hidden * m.hidden


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts of a whole model, by part (element counts), MTP modules included."""

    embedding: int
    output: int
    attention: int
    mlp: int
    router: int
    shared_experts: int
    experts: int
    active_experts: int
    norms: int
    mtp_proj: int
    mtp: int
    """All parameters of the MTP modules (already inside the parts above)."""
    mtp_active: int
    """Parameters of the MTP modules one token passes through."""

    @property
    def total(self) -> int:
        """Every parameter stored (MTP modules included)."""
        return (
            self.embedding
            + self.output
            + self.attention
            + self.mlp
            + self.router
            + self.shared_experts
            + self.experts
            + self.norms
            + self.mtp_proj
        )

    @property
    def active(self) -> int:
        """Parameters one token passes through (MoE: top_k routed + shared experts)."""
        return self.total - self.experts + self.active_experts

    @property
    def main_total(self) -> int:
        """Parameters without the MTP modules (how model cards state totals)."""
        return self.total - self.mtp

    @property
    def main_active(self) -> int:
        """Active parameters without the MTP modules."""
        return self.active - self.mtp_active

    @property
    def main_active_no_embedding(self) -> int:
        """Active parameters without MTP and without the input embedding table (a lookup, not
        a matmul; OpenAI's gpt-oss model card counts active parameters this way)."""
        return self.main_active - (0 if self.output == 0 else self.embedding)

    @property
    def non_expert(self) -> int:
        """Everything except routed experts (sharded over dp*cp, not by ep)."""
        return self.total - self.experts


def param_counts(m: ModelSpec) -> ParamCounts:
    """Count the parameters of ``m``."""
    moe = m.moe
    top_k = moe.top_k if moe else 0
    n_experts = moe.experts if moe else 0
    mtp_moe = m.mtp_layers * m.mtp_is_moe
    moe_layers = m.moe_layers + mtp_moe
    dense_layers = m.dense_layers + m.mtp_layers - mtp_moe
    layers = m.layers + m.mtp_layers
    moe_shared = router_params(m) + shared_expert_params(m)
    mtp_common = mtp_proj_params(m) + attention_params(m) + norms_per_layer(m) * norm_params(m)
    mtp_mlp = moe_shared if m.mtp_is_moe else mlp_params(m, m.ffn)
    routed = expert_params(m) * m.mtp_is_moe
    return ParamCounts(
        embedding=embedding_params(m),
        output=output_params(m),
        attention=layers * attention_params(m),
        mlp=dense_layers * mlp_params(m, m.ffn),
        router=moe_layers * router_params(m),
        shared_experts=moe_layers * shared_expert_params(m),
        experts=moe_layers * n_experts * expert_params(m),
        active_experts=moe_layers * top_k * expert_params(m),
        norms=(norms_per_layer(m) * layers + 1) * norm_params(m),
        mtp_proj=m.mtp_layers * mtp_proj_params(m),
        mtp=m.mtp_layers * (mtp_common + mtp_mlp + n_experts * routed),
        mtp_active=m.mtp_layers * (mtp_common + mtp_mlp + top_k * routed),
    )
