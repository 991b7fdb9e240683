"""Model spec: the transformer shape tierwise reasons about, and how to load one.

Loading (presets, YAML, Hugging Face ``config.json``) lives in ``load.py`` and ``hf.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tierwise.bounds import MAX_EXPERTS, MAX_LAYERS
from tierwise.memo import by_identity
from tierwise.specio import build

Activation = Literal["swiglu", "geglu", "gelu", "squared-relu"]
Norm = Literal["rmsnorm", "layernorm"]
Bias = Literal["none", "qkv", "all"]
Position = Literal["rope", "learned"]
Router = Literal["softmax", "sigmoid"]
LocalKind = Literal["sliding", "chunked"]

MATMULS_PER_MLP: dict[str, int] = {"swiglu": 3, "geglu": 3, "gelu": 2, "squared-relu": 2}
"""Weight matrices in one MLP (or expert): gated SwiGLU/GeGLU (Gemma) have gate, up, down."""

DEFAULT_FFN_MULTIPLE = 4
"""ffn_hidden defaults to 4 x hidden (GPT-2/3, Megatron GPT)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MoESpec(_Frozen):
    """Mixture-of-experts shape of the MoE layers (all layers but ``dense_layers`` leading ones)."""

    experts: int = Field(ge=1, le=MAX_EXPERTS, description="routed experts per MoE layer")
    top_k: int = Field(ge=1, description="routed experts each token visits")
    expert_ffn_hidden: int = Field(ge=1, description="hidden size of one routed expert's MLP")
    shared_experts: int = Field(
        0, ge=0, le=MAX_EXPERTS, description="always-active experts per MoE layer"
    )
    shared_expert_ffn_hidden: int | None = Field(
        None, ge=1, description="hidden size of one shared expert; default expert_ffn_hidden"
    )
    dense_layers: int = Field(0, ge=0, description="leading layers with a dense MLP")
    every: int = Field(
        1, ge=1, description="after the dense layers, every Nth layer is MoE (Llama 4 Maverick: 2)"
    )
    router: Router = Field("softmax", description="softmax (Mixtral, Qwen); sigmoid (DeepSeek-V3)")
    expert_bias: bool = Field(
        False, description="per-expert routing bias (DeepSeek-V3's aux-loss-free balancing)"
    )
    capacity_factor: float | None = Field(
        None, gt=0, description="expert capacity / (tokens*top_k/experts); None = dropless"
    )
    renormalize: bool = Field(
        True,
        description="top-k routing weights renormalised to sum to 1 (config.json "
        "norm_topk_prob; false: softmax over all experts, DeepSeek-MoE, Qwen1.5-MoE)",
    )
    score_scale: float | None = Field(
        None, gt=0, description="routing weights scaled by this (routed_scaling_factor)"
    )
    groups: int | None = Field(
        None, ge=1, description="expert groups of group-limited routing (n_group)"
    )
    group_top_k: int | None = Field(
        None, ge=1, description="groups a token may route to (topk_group)"
    )

    @model_validator(mode="after")
    def _check(self) -> MoESpec:
        if self.top_k > self.experts:
            raise ValueError(f"top_k {self.top_k} must be <= experts ({self.experts})")
        return self

    def moe_layers(self, layers: int) -> int:
        """MoE layers among ``layers``: every ``every``-th layer after the dense ones."""
        return (layers - self.dense_layers) // self.every

    def is_moe(self, index: int) -> bool:
        """Whether layer ``index`` (0-based) is a MoE layer."""
        after = index - self.dense_layers
        return after >= 0 and (after + 1) % self.every == 0

    @property
    def shared_ffn(self) -> int:
        """Hidden size of one shared expert."""
        return self.shared_expert_ffn_hidden or self.expert_ffn_hidden


class MLASpec(_Frozen):
    """Multi-head latent attention (DeepSeek-V2/V3): Q and KV go through low-rank latents.

    Per layer: Q = h -> q_lora_rank -> heads x (nope + rope) (or h -> heads x (nope + rope)
    directly without q_lora_rank); KV = h -> kv_lora_rank + rope (the rope key is shared by
    all heads), kv_lora_rank -> heads x (nope + v); output heads x v -> h.
    """

    q_lora_rank: int | None = Field(None, ge=1, description="None: Q projected directly")
    kv_lora_rank: int = Field(ge=1)
    qk_nope_head_dim: int = Field(ge=1)
    qk_rope_head_dim: int = Field(ge=1)
    v_head_dim: int = Field(ge=1)

    @property
    def qk_head_dim(self) -> int:
        """Width of one query/key head (no-position part + rotary part)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim


class LocalAttention(_Frozen):
    """Layers that attend to a local span instead of the whole sequence.

    ``sliding``: each query sees the last ``window`` tokens (itself included: GPT-OSS 128,
    Gemma 2 4096, Gemma 3 1024). ``chunked``: the sequence is cut into ``window``-token chunks
    and a query sees its chunk up to itself (Llama 4, 8192). With ``global_every`` = N, the
    N-th, 2N-th, ... layers (1-based) attend globally, as Megatron's ``window_attn_skip_freq``
    and Hugging Face's ``layer_types`` say; None = every layer is local.
    """

    window: int = Field(ge=1, description="tokens a query sees (sliding) or chunk size")
    kind: LocalKind = "sliding"
    global_every: int | None = Field(None, ge=1)
    global_nope: bool = Field(False, description="global layers use no position embedding")

    def global_layers(self, layers: int) -> int:
        """Layers among ``layers`` that attend to the whole sequence."""
        return 0 if self.global_every is None else layers // self.global_every

    def is_global(self, index: int) -> bool:
        """Whether layer ``index`` (0-based) attends globally."""
        return self.global_every is not None and (index + 1) % self.global_every == 0


RopeKind = Literal["llama3", "yarn", "linear"]


class RopeScaling(_Frozen):
    """Rotary context extension as the config.json's ``rope_scaling`` states it: Llama 3.1's
    frequency-band scaling (``llama3``), YaRN (DeepSeek-V3, GPT-OSS, Kimi K2) or linear
    position interpolation (Gemma 3)."""

    kind: RopeKind = Field(description="llama3 | yarn | linear (rope_type / type)")
    factor: float = Field(gt=0, description="context extension factor")
    original_max_seq: int | None = Field(
        None, ge=1, description="context the model was pre-trained at"
    )
    low_freq_factor: float | None = Field(None, gt=0, description="llama3 only")
    high_freq_factor: float | None = Field(None, gt=0, description="llama3 only")
    beta_fast: float | None = Field(None, gt=0, description="yarn only")
    beta_slow: float | None = Field(None, gt=0, description="yarn only")
    mscale: float | None = Field(None, ge=0, description="yarn only")
    mscale_all_dim: float | None = Field(None, ge=0, description="yarn only")


class ModelSpec(_Frozen):
    """A decoder-only transformer; sizes are element counts, not bytes."""

    name: str = Field(min_length=1)
    layers: int = Field(ge=1, le=MAX_LAYERS)
    hidden: int = Field(ge=1)
    heads: int = Field(ge=1)
    kv_heads: int | None = Field(None, ge=1, description="GQA groups; default heads (MHA)")
    head_dim: int | None = Field(None, ge=1, description="default hidden / heads")
    ffn_hidden: int | None = Field(None, ge=1, description="dense MLP hidden; default 4 x hidden")
    vocab: int = Field(ge=1)
    activation: Activation = "gelu"
    tied_embeddings: bool = False
    moe: MoESpec | None = None
    max_seq: int | None = Field(None, ge=1, description="longest trained context, tokens")
    norm: Norm = "rmsnorm"
    bias: Bias = Field("none", description="linear biases: none, q/k/v only, or all + norms")
    position: Position = Field("rope", description="learned adds a max_seq x hidden table")
    rope_theta: float | None = Field(None, gt=0, description="rotary base")
    rope_scaling: RopeScaling | None = Field(
        None, description="rotary context extension as the config.json states it; None: none"
    )
    norm_eps: float | None = Field(
        None, gt=0, description="epsilon of the norms (rms_norm_eps / layer_norm_eps)"
    )
    hf_path: str | None = Field(
        None,
        description="Hugging Face Hub repository or directory holding the config.json and "
        "tokenizer (what a launch loads); a config.json sets its own directory",
    )
    qk_norm: bool = Field(False, description="RMSNorm over each query and key head (Qwen3)")
    attention_sinks: bool = Field(False, description="a learned sink logit per head (GPT-OSS)")
    post_norms: bool = Field(
        False,
        description="a norm after attention and after the MLP as well as before (Gemma 2/3: "
        "post_attention_layernorm, post_feedforward_layernorm): four norms per layer",
    )
    mla: MLASpec | None = None
    local_attention: LocalAttention | None = None
    mtp_layers: int = Field(
        0, ge=0, le=MAX_LAYERS, description="multi-token-prediction modules (DeepSeek-V3)"
    )

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        heads, hidden = data.get("heads"), data.get("hidden")
        if data.get("kv_heads") is None:
            data["kv_heads"] = heads
        mla = data.get("mla")
        if data.get("head_dim") is None and isinstance(mla, Mapping):
            nope, rope = mla.get("qk_nope_head_dim"), mla.get("qk_rope_head_dim")
            if isinstance(nope, int) and isinstance(rope, int):
                data["head_dim"] = nope + rope
        if data.get("head_dim") is None and isinstance(heads, int) and isinstance(hidden, int):
            if heads > 0 and hidden % heads:
                raise ValueError(
                    f"head_dim is required: hidden {hidden} is not divisible by heads {heads}"
                )
            data["head_dim"] = hidden // heads if heads > 0 else None
        if data.get("ffn_hidden") is None and isinstance(hidden, int):
            data["ffn_hidden"] = DEFAULT_FFN_MULTIPLE * hidden
        return data

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.heads % self.kv:
            raise ValueError(f"heads {self.heads} must be a multiple of kv_heads {self.kv}")
        if self.moe is not None and self.moe.dense_layers >= self.layers:
            raise ValueError(
                f"moe.dense_layers {self.moe.dense_layers} must be < layers ({self.layers})"
            )
        if self.position == "learned" and self.max_seq is None:
            raise ValueError("position 'learned' needs max_seq (rows of the position table)")
        if self.moe is not None and self.moe.moe_layers(self.layers) < 1:
            raise ValueError(f"moe.every {self.moe.every} leaves no MoE layer in {self.layers}")
        return self

    # Non-optional views of the defaulted fields (filled in by the validator).
    @property
    def kv(self) -> int:
        """KV heads (GQA groups)."""
        return self.kv_heads or self.heads

    @property
    def hd(self) -> int:
        """Head dimension."""
        return self.head_dim or self.hidden // self.heads

    @property
    def ffn(self) -> int:
        """Dense MLP hidden size."""
        return self.ffn_hidden or DEFAULT_FFN_MULTIPLE * self.hidden

    @property
    def q_dim(self) -> int:
        """Width of Q: heads x head_dim (MLA: heads x (nope + rope))."""
        return self.heads * (self.mla.qk_head_dim if self.mla else self.hd)

    @property
    def v_dim(self) -> int:
        """Width of the attention output (context): heads x head_dim (MLA: heads x v)."""
        return self.heads * (self.mla.v_head_dim if self.mla else self.hd)

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V): kv_heads x head_dim (MLA: the heads' up-projected K)."""
        return self.kv * (self.mla.qk_head_dim if self.mla else self.hd)

    @property
    def matmuls_per_mlp(self) -> int:
        """Weight matrices per MLP: 3 for SwiGLU, 2 for GELU / squared ReLU."""
        return MATMULS_PER_MLP[self.activation]

    @property
    def moe_layers(self) -> int:
        """Layers with routed experts."""
        return 0 if self.moe is None else self.moe.moe_layers(self.layers)

    def dense_layers_in(self, start: Any, n: Any) -> Any:
        """Dense-MLP layers among the ``n`` layers from index ``start`` (python scalars or
        numpy arrays)."""
        if self.moe is None:
            return n
        return n - (self._moe_before(start + n) - self._moe_before(start))

    def _moe_before(self, index: Any) -> Any:
        """MoE layers with an index below ``index`` (they sit at dense_layers + every*j +
        every - 1)."""
        assert self.moe is not None
        count = (index - self.moe.dense_layers) // self.moe.every
        return count * (count > 0)

    @property
    def local_layers(self) -> int:
        """Layers with local (sliding-window or chunked) attention."""
        local = self.local_attention
        return 0 if local is None else self.layers - local.global_layers(self.layers)

    @property
    def mtp_is_moe(self) -> bool:
        """MTP modules repeat the last layer's kind (Megatron): MoE when that layer is."""
        return self.moe is not None and self.moe.is_moe(self.layers - 1)

    @property
    def dense_layers(self) -> int:
        """Layers with a dense MLP."""
        return self.layers - self.moe_layers

    @classmethod
    def parse(cls, data: Any, source: str = "model spec") -> ModelSpec:
        """Validate user input; any problem becomes one-line :class:`SpecError`.

        (The plain constructor raises pydantic's ``ValidationError``: use it for trusted data.)
        """
        return build(cls, dict(data) if isinstance(data, Mapping) else data, source)

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any], **defaults: Any) -> ModelSpec:
        """Build from a record that mixes model and other fields (e.g. a training-run row).

        Keeps only model fields, takes ``id`` as the name when ``name`` is absent, reads an
        activation such as ``"squared-relu (2 matmuls)"`` by its first word, and fills
        ``defaults`` (e.g. ``vocab=51200, activation="gelu"``) under the record.
        """
        merged = {**defaults, **fields}
        data = {k: v for k, v in merged.items() if k in cls.model_fields}
        if "name" not in data and "id" in merged:
            data["name"] = str(merged["id"])
        if isinstance(data.get("activation"), str):
            data["activation"] = data["activation"].split()[0]
        return cls.parse(data, source=f"model {data.get('name', '?')!r}")


class Dims(NamedTuple):
    """A spec's derived sizes as plain values (`model_dims`): the per-layout hot paths read
    them many times, and a property recomputes its value on every read."""

    kv: int
    hd: int
    ffn: int
    q_dim: int
    v_dim: int
    kv_dim: int
    matmuls_per_mlp: int
    moe_layers: int
    dense_layers: int
    local_layers: int
    mtp_is_moe: bool


@by_identity()
def model_dims(m: ModelSpec) -> Dims:
    """`m`'s derived sizes (its properties of the same names), computed once per spec."""
    return Dims(
        m.kv,
        m.hd,
        m.ffn,
        m.q_dim,
        m.v_dim,
        m.kv_dim,
        m.matmuls_per_mlp,
        m.moe_layers,
        m.dense_layers,
        m.local_layers,
        m.mtp_is_moe,
    )
