"""Layout: the parallel degrees and batch/recompute/precision choices of one training run.

Modelled on torchtitan's ``ParallelDims``: a frozen value validated in one place
(:meth:`Layout.validate_for`) whose derived facts are properties. See README.md for the
mesh: world = tp*cp*pp*dp; ep and etp regroup the tp*cp*dp ranks for the expert layers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tierwise.errors import SpecError
from tierwise.specio import build
from tierwise.workload.flops import (
    RECOMPUTE_FULL,
    RECOMPUTE_NONE,
    RECOMPUTE_SELECTIVE,
    Array,
    maximum,
)
from tierwise.workload.precision import precision_code
from tierwise.workload.recompute import (
    DEFAULT_MODULES,
    MODULES,
    MOE_MODULES,
    RecomputeModule,
    modules_mask,
)
from tierwise.workload.spec import ModelSpec, model_dims

if TYPE_CHECKING:
    import numpy as np

Recompute = Literal["none", "selective", "full"]
RECOMPUTE_CODES: dict[str, int] = {
    "none": RECOMPUTE_NONE,
    "selective": RECOMPUTE_SELECTIVE,
    "full": RECOMPUTE_FULL,
}
"""Recompute names to the integer codes the vectorised functions take."""


class Layout(BaseModel):
    """Parallel degrees (tp, cp, ep, etp, pp, vpp, dp) and per-step choices; sizes in tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tp: int = Field(1, ge=1, description="tensor parallel")
    cp: int = Field(1, ge=1, description="context parallel")
    ep: int = Field(1, ge=1, description="expert parallel (carved out of tp*cp*dp)")
    etp: int | None = Field(None, ge=1, description="expert tensor parallel; default tp")
    pp: int = Field(1, ge=1, description="pipeline stages")
    vpp: int = Field(1, ge=1, description="virtual stages per pipeline rank (interleaved)")
    dp: int = Field(1, ge=1, description="data parallel (ZeRO/FSDP shards over dp*cp)")
    mbs: int = Field(1, ge=1, description="micro-batch, sequences")
    gbs: int | None = Field(None, ge=1, description="global batch, sequences; default mbs*dp")
    seq: int = Field(ge=1, description="sequence length, tokens")
    sp: bool | None = Field(None, description="sequence parallel; default tp > 1")
    recompute: Recompute = "none"
    recompute_modules: tuple[RecomputeModule, ...] | None = Field(
        None,
        description="Megatron's --recompute-modules, with recompute selective: "
        + ", ".join(MODULES)
        + "; default core_attn",
    )
    recompute_method: Literal["uniform", "block"] | None = Field(
        None,
        description="Megatron's --recompute-method, with recompute full: uniform (every "
        "layer, the input of each group of recompute_num_layers kept) or block (the first "
        "recompute_num_layers layers of each virtual stage, the others keep everything); "
        "default uniform",
    )
    recompute_num_layers: int | None = Field(
        None, ge=1, description="Megatron's --recompute-num-layers, with recompute full; default 1"
    )
    activation_offload_layers: int = Field(
        0,
        ge=0,
        description="layers whose activations wait in host memory between forward and "
        "backward (Megatron's --cpu-offloading-num-layers; pp 1, no recompute)",
    )
    zero: int = Field(0, ge=0, le=3, description="ZeRO stage; 3 = FSDP")
    distributed_optimizer: bool = Field(
        False, description="Megatron's: optimizer states sharded over dp*cp"
    )
    grad_reduce_bf16: bool = Field(
        False,
        description="16-bit main grads and DP reduce (Megatron's --grad-reduce-in-bf16, fp16 "
        "training, DeepSpeed's default); else fp32 (Megatron's bf16 default, torchtitan)",
    )
    dtype: Literal["bf16", "fp8", "mxfp8", "nvfp4"] = Field(
        "bf16", description="precision of the layers' weight GEMMs (workload/precision.py)"
    )
    fp8_recipe: Literal["delayed", "tensorwise", "blockwise"] | None = Field(
        None, description="FP8 scaling (Megatron's --fp8-recipe); default delayed"
    )
    pp_layers: tuple[int, ...] | None = Field(
        None, description="layers per pipeline stage (uneven split); default even"
    )
    mtp_rank: int | None = Field(
        None,
        ge=0,
        description="pipeline rank holding the MTP layers where a --pp-layout places them "
        "apart from the loss (Megatron's standalone MTP stage); default with the loss",
    )
    dp_shard_degree: int | None = Field(
        None,
        ge=1,
        description="torchtitan's data_parallel_shard_degree: HSDP shards each replica over "
        "this many of the dp ranks and replicates over dp / it; default all dp (FSDP)",
    )

    @field_validator("recompute_modules")
    @classmethod
    def _canonical_modules(
        cls, modules: tuple[RecomputeModule, ...] | None
    ) -> tuple[RecomputeModule, ...] | None:
        """Megatron's module order without repeats; Megatron's default (core_attn) is None."""
        if modules is None:
            return None
        ordered = tuple(name for name in MODULES if name in modules)
        return None if ordered == DEFAULT_MODULES else ordered  # type: ignore[return-value]

    @classmethod
    def parse(
        cls,
        data: Mapping[str, Any],
        source: str = "layout",
        flags: Mapping[str, str] | None = None,
    ) -> Layout:
        """Validate user input (e.g. CLI flags); a bad field is a one-line :class:`SpecError`
        naming its flag where `flags` (field -> option) has it.

        ``None`` values are dropped so unset flags take the defaults. The plain constructor
        raises pydantic's ``ValidationError``: use it for trusted data.
        """
        return build(cls, {k: v for k, v in data.items() if v is not None}, source, flags)

    def to_json(self) -> dict[str, Any]:
        """The fields as JSON values: ``model_dump(mode="json")`` without the serializer's cost."""
        out = dict(self.__dict__)
        if self.pp_layers is not None:
            out["pp_layers"] = list(self.pp_layers)
        return out

    # Derived facts -------------------------------------------------------------------------
    @property
    def world(self) -> int:
        """GPUs: tp*cp*pp*dp (ep does not multiply the world)."""
        return self.tp * self.cp * self.pp * self.dp

    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step."""
        return self.gbs or self.mbs * self.dp

    @property
    def num_microbatches(self) -> int:
        """Micro-batches per step per pipeline (gradient accumulation steps)."""
        return self.global_batch // (self.mbs * self.dp)

    @property
    def sp_enabled(self) -> bool:
        """Sequence parallelism in effect (needs tp > 1)."""
        return (self.tp > 1) if self.sp is None else (self.sp and self.tp > 1)

    @property
    def pipeline_sends_whole(self) -> bool:
        """Pipeline sends that every TP rank makes whole (pp > 1, tp > 1, no sequence
        parallelism): what --scatter-gather-tensors-in-pipeline splits; nothing else has a
        send for it to split."""
        return self.pp > 1 and self.tp > 1 and not self.sp_enabled

    @property
    def expert_tp(self) -> int:
        """Tensor-parallel degree of the expert MLPs."""
        return self.etp or self.tp

    @property
    def expert_dp(self) -> int:
        """Replicas of each expert shard: tp*cp*dp / (ep*etp)."""
        return self.tp * self.cp * self.dp // (self.ep * self.expert_tp)

    @property
    def dp_shard(self) -> int:
        """Ranks that share (and may shard) one copy of the non-expert model states: dp*cp."""
        return self.dp * self.cp

    @property
    def recompute_code(self) -> int:
        """:data:`RECOMPUTE_CODES` value of ``recompute``."""
        return RECOMPUTE_CODES[self.recompute]

    @property
    def tokens_per_step(self) -> int:
        """Tokens per optimizer step."""
        return self.global_batch * self.seq

    def stage_layers(self, model: ModelSpec) -> tuple[int, ...]:
        """Layers on each pipeline stage (``pp_layers`` or an even split, remainder first).
        With vpp > 1 a stage's layers need not divide into its virtual stages (Megatron's
        --pipeline-model-parallel-layout splits them unevenly)."""
        if self.pp_layers is not None:
            return self.pp_layers
        pp = self.pp
        base, extra = divmod(model.layers, pp)
        if not extra:
            return (base,) * pp
        return tuple([base + (i < extra) for i in range(pp)])

    # Validation -----------------------------------------------------------------------------
    def validate_for(self, model: ModelSpec, world_gpus: int | None = None) -> Layout:
        """Check the layout against ``model`` (and the GPU count); raise :class:`SpecError`.

        KV heads: tp must divide kv_heads, or kv_heads divide tp (each rank then holds one
        replicated KV head, as vLLM/TensorRT-LLM do; FLOPs and memory count the copies).
        """
        problem = self._problem(model, world_gpus)
        if problem is not None:
            raise SpecError(f"layout: {problem}")
        return self

    def _problem(self, m: ModelSpec, world_gpus: int | None) -> str | None:
        """What is wrong with the layout, the first problem only (None: nothing)."""
        v = self.__dict__  # the field values: a dict read costs a third of a model attribute's
        tp, cp, pp, dp, vpp = v["tp"], v["cp"], v["pp"], v["dp"], v["vpp"]
        seq, mbs = v["seq"], v["mbs"]
        dims = model_dims(m)  # (the spec's properties, computed once)
        kv, ffn = dims.kv, dims.ffn
        if m.heads % tp != 0:
            return f"tp {tp} must divide heads ({m.heads})"
        if not (kv % tp == 0 or tp % kv == 0):
            return f"tp {tp} must divide kv_heads ({kv}) or be a multiple of it"
        if ffn % tp != 0:
            return f"tp {tp} must divide ffn_hidden ({ffn})"
        if not (world_gpus is None or self.world == world_gpus):
            return (
                f"tp*cp*pp*dp = {tp}*{cp}*{pp}*{dp} = {self.world} must equal the GPUs "
                f"({world_gpus})"
            )
        if self.global_batch % (mbs * dp) != 0:
            return f"gbs {self.global_batch} must be divisible by mbs*dp = {mbs}*{dp}"
        if pp > m.layers:
            return f"pp {pp} must be <= layers ({m.layers})"
        if not (vpp == 1 or pp > 1):
            return f"vpp {vpp} needs pp > 1"
        if seq % cp != 0:
            return f"seq {seq} must be divisible by cp ({cp})"
        if not (cp == 1 or seq % (2 * cp) == 0):
            return f"seq {seq} must be divisible by 2*cp = {2 * cp} (load-balanced causal CP)"
        if self.sp_enabled and (seq // cp) % tp != 0:
            return f"seq/cp = {seq // cp} must be divisible by tp ({tp}) with sequence parallelism"
        method, recompute = v["recompute_method"], v["recompute"]
        partial = method is not None or v["recompute_num_layers"] is not None
        if partial and recompute != "full":
            return f"recompute_method / recompute_num_layers need recompute full, not {recompute}"
        if partial and method != "block":
            problem = self._uniform_problem(m)
            if problem is not None:
                return problem
        if v["recompute_modules"] is not None or v["activation_offload_layers"]:
            problem = self._recompute_problem(m)
            if problem is not None:
                return problem
        recipe, dtype = v["fp8_recipe"], v["dtype"]
        if recipe is not None and dtype != "fp8":
            return f"fp8_recipe {recipe} needs dtype fp8 (dtype is {dtype})"
        shard = v["dp_shard_degree"]
        if shard is not None and shard < dp:
            if dp % shard:
                return f"dp_shard_degree {shard} must divide dp ({dp})"
            if self.zero < 2:
                return f"dp_shard_degree {shard} (HSDP) needs FSDP: zero 2 or 3, not {self.zero}"
        return self._stage_problem(m) or self._expert_problem(m)

    def _uniform_problem(self, m: ModelSpec) -> str | None:
        """Megatron's uniform method runs groups of recompute_num_layers layers from each virtual
        stage's first and indexes past its last one where they do not divide its layers
        (IndexError; megatron-core 0.16.1 transformer_block.py `_checkpointed_forward`); its
        MTP modules assert recompute_num_layers 1 (multi_token_prediction.py)."""
        n = self.recompute_num_layers or 1
        if n == 1:
            return None
        chunks = {k // self.vpp for k in self.stage_layers(m) if k % self.vpp == 0}
        bad = sorted(c for c in chunks if c % n)
        if bad:
            return (
                f"recompute_num_layers {n} (uniform) must divide the layers of each virtual "
                f"stage ({', '.join(map(str, sorted(chunks)))}); Megatron's groups of {n} run "
                f"past a stage of {bad[0]}"
            )
        if m.mtp_layers:
            return f"recompute_num_layers {n} (uniform) with MTP modules: Megatron needs 1"
        return None

    def _recompute_problem(self, m: ModelSpec) -> str | None:
        modules = self.recompute_modules
        if modules is not None and self.recompute != "selective":
            return (
                f"recompute_modules {list(modules)} needs recompute selective, not {self.recompute}"
            )
        for name in modules or ():
            if name in MOE_MODULES and m.moe is None:
                return f"recompute module {name} needs a MoE model ({m.name} is dense)"
            if name == "mla_up_proj" and m.mla is None:
                return f"recompute module mla_up_proj needs MLA attention ({m.name} has none)"
            if (
                name in ("layernorm", "moe_act")
                and self.dtype == "fp8"
                and (self.fp8_recipe in (None, "delayed"))
            ):
                return f"recompute module {name} in fp8 needs fp8_recipe tensorwise or blockwise"
        offload = self.activation_offload_layers
        if offload:  # Megatron-core's TransformerConfig checks
            if offload >= m.layers:
                return f"activation_offload_layers {offload} must be below layers ({m.layers})"
            if self.pp > 1:
                return (
                    f"activation_offload_layers {offload} needs pp 1 (Megatron has no CPU "
                    "offloading with pipelines)"
                )
            if self.recompute != "none":
                return (
                    f"activation_offload_layers {offload} needs recompute none, not "
                    f"{self.recompute}"
                )
        return None

    def _stage_problem(self, m: ModelSpec) -> str | None:
        v = self.__dict__  # (the field values: see `_problem`)
        pp, vpp, split = v["pp"], v["vpp"], v["pp_layers"]
        mtp_rank = v["mtp_rank"]
        if mtp_rank is not None and (not m.mtp_layers or not 0 <= mtp_rank < pp - 1):
            return f"mtp_rank {mtp_rank}: needs MTP layers and a rank before the last ({pp - 1})"
        if split is None:
            if m.layers % (pp * vpp) != 0:
                return (
                    f"layers ({m.layers}) must be divisible by pp*vpp = {pp}*{vpp} "
                    "(or give pp_layers)"
                )
            return None
        if len(split) != pp:
            return f"pp_layers has {len(split)} stages, must have pp ({pp})"
        if sum(split) != m.layers:
            return f"pp_layers sum {sum(split)} must equal layers ({m.layers})"
        if min(split) < 1:
            return f"pp_layers {list(split)}: every stage needs >= 1 layer"
        return None

    def _expert_problem(self, m: ModelSpec) -> str | None:
        ep, etp = self.ep, self.expert_tp
        if m.moe is None:
            if ep != 1:
                return f"ep {ep} needs a MoE model ({m.name} is dense); use ep 1"
            return None
        ranks = self.tp * self.cp * self.dp
        if m.moe.experts % ep != 0:
            return f"ep {ep} must divide experts ({m.moe.experts})"
        if ranks % (ep * etp) != 0:
            return (
                f"ep*etp = {ep}*{etp} must divide tp*cp*dp = {ranks} (experts are carved out "
                "of the data-parallel ranks, not an extra factor)"
            )
        if m.moe.expert_ffn_hidden % etp != 0:
            return f"etp {etp} must divide expert_ffn_hidden ({m.moe.expert_ffn_hidden})"
        return None


def middle_stage_layers(layers: int, pp: Array, first: Array, last: Array) -> Array:
    """Layers on each stage between the first and the last, for the splits the batch functions
    take (the same count on every middle stage); 0 where pp <= 2 has no middle stage."""
    return (pp > 2) * (layers - first - last) / maximum(pp - 2, 1)


LAYOUT_ARRAY_FIELDS = (
    "tp",
    "cp",
    "ep",
    "etp",
    "pp",
    "vpp",
    "dp",
    "mbs",
    "gbs",
    "seq",
    "sp",
    "recompute",
    "recompute_modules",
    "activation_offload_layers",
    "zero",
    "distributed_optimizer",
    "grad_reduce_bf16",
    "precision",
    "first_stage_layers",
    "last_stage_layers",
)
"""Keys of :func:`layouts_to_arrays`, as the ``*_batch`` functions take them."""


def layout_fields(
    layout: Layout, model: ModelSpec, stages: tuple[int, ...] | None = None
) -> dict[str, Any]:
    """One layout as the scalar keyword arguments of the ``*_batch`` functions (`stages`:
    its `Layout.stage_layers`, where the caller has them)."""
    stages = stages or layout.stage_layers(model)
    v = layout.__dict__  # the field values: a dict read costs a third of a model attribute's
    fields = {
        "tp": v["tp"],
        "cp": v["cp"],
        "ep": v["ep"],
        "etp": layout.expert_tp,
        "pp": v["pp"],
        "vpp": v["vpp"],
        "dp": v["dp"],
        "mbs": v["mbs"],
        "gbs": layout.global_batch,
        "seq": v["seq"],
        "sp": layout.sp_enabled,
        "recompute": layout.recompute_code,
        "recompute_modules": modules_mask(v["recompute_modules"]),
        "activation_offload_layers": v["activation_offload_layers"],
        "zero": v["zero"],
        "distributed_optimizer": v["distributed_optimizer"],
        "grad_reduce_bf16": v["grad_reduce_bf16"],
        "precision": precision_code(v["dtype"], v["fp8_recipe"]),
        "first_stage_layers": stages[0],
        "last_stage_layers": stages[-1],
    }
    if v["mtp_rank"] is not None:  # MTP layers apart from the loss (a layout string's m)
        fields["mtp_rank"] = v["mtp_rank"]
        fields["mtp_rank_layers"] = stages[v["mtp_rank"]]
    if v["dp_shard_degree"] is not None:  # (the common layouts skip both calls)
        fields |= hsdp_fields(layout)
    if v["recompute"] == "full":
        fields |= partial_recompute_fields(layout, model)
    return fields


def partial_recompute_fields(layout: Layout, model: ModelSpec) -> dict[str, float]:
    """``{"recompute_share": r, "recompute_group": g}`` where full recompute runs other than
    layer by layer (Megatron's megatron/core/transformer/transformer_block.py
    `_checkpointed_forward`), else empty: `r` of the layers run their forward again (block:
    the first recompute_num_layers of each virtual stage's layers/(pp*vpp)), and the
    recomputed layers keep the input of every group of `g` (uniform: recompute_num_layers)
    and rematerialise a group at a time. The batch functions take them only where set."""
    n = layout.recompute_num_layers or 1
    if layout.recompute != "full" or (n == 1 and layout.recompute_method != "block"):
        return {}
    chunk = model.layers / (layout.pp * layout.vpp)
    if layout.recompute_method == "block":
        return {"recompute_share": min(n, chunk) / chunk, "recompute_group": 1}
    return {"recompute_share": 1.0, "recompute_group": min(n, chunk)}


def hsdp_fields(layout: Layout) -> dict[str, int]:
    """``{"dp_shard": n}`` for an HSDP layout (n < dp ranks shard a replica), else empty:
    the batch functions take it only where it is set."""
    shard = layout.dp_shard_degree
    return {"dp_shard": shard} if shard is not None and shard < layout.dp else {}


def layouts_to_arrays(layouts: Sequence[Layout], model: ModelSpec) -> dict[str, np.ndarray]:
    """Many layouts as numpy arrays (one entry per layout) for the ``*_batch`` functions;
    ``recompute_share`` and ``recompute_group`` too where one runs partial full recompute
    (`partial_recompute_fields`)."""
    import numpy as np

    rows = [layout_fields(layout, model) for layout in layouts]
    arrays = {key: np.array([row[key] for row in rows]) for key in LAYOUT_ARRAY_FIELDS}
    if any("recompute_share" in row for row in rows):  # partial full recompute: every row's
        arrays["recompute_share"] = np.array(
            [row.get("recompute_share", float(row["recompute"] == RECOMPUTE_FULL)) for row in rows]
        )
        arrays["recompute_group"] = np.array([row.get("recompute_group", 1) for row in rows])
    return arrays
