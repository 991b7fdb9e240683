"""The framework table: one row per framework tierwise plans for and prices.

Each row states what the framework can run (sharding schemes, context parallelism, virtual
pipeline stages, uneven pipeline splits, precisions, ZeRO with pipelining, gradient reduce
precision, Megatron's recompute modules, CPU offloading, HSDP, pipeline schedules), the
one-line reason when it cannot (:func:`refusal`), how it runs data parallelism, recompute and
its schedules (what the cost terms read), its behaviour-flag defaults and its launcher. The
planner's space (`tierwise.plan.space`), the estimate's checks, the cost terms
(`tierwise.perf`) and the emitters (`tierwise.plan.emit`) read these rows; no other module
compares a framework's name (``tests/test_frameworks.py`` greps for it).

Rows: ``megatron`` (Megatron-LM / Megatron-core), ``torchtitan``, ``deepspeed`` and
``generic`` (no framework named: the textbook DP model, which runs every layout).

Adding a behaviour flag (an option that changes how a layout runs, priced by a cost term):

1. a field with its default on :class:`tierwise.perf.flags.Flags` (the one default);
2. where a framework runs it otherwise by default (or a release changed it), the value in that
   row's ``defaults`` here (``Framework.defaults``: Flags field -> value);
3. one entry in ``tierwise.cli.behaviour.BEHAVIOUR_OPTIONS`` (its option names, Megatron-LM's
   or torchtitan's spelling, and help): ``estimate``, ``plan``, ``sweep`` and ``report`` all
   take it from there, with the default shown from ``Flags``;
4. the cost term reads ``flags.<field>``, and the emitters write it
   (``tierwise.plan.emit.<framework>``);
5. where a framework runs it one way only, that row's ``fixed_flags``; where the framework
   refuses it with some layouts or other flags, a rule in :func:`flag_checks`, which
   ``estimate --framework``, the planner's search and the emitters all apply.

This module sits below every layer (it imports nothing of tierwise but errors), so workload,
perf, plan and cli may all read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from tierwise.errors import SpecError

if TYPE_CHECKING:
    from tierwise.workload.layout import Layout

SCHEDULES = (
    "1F1B",
    "Interleaved1F1B",
    "InterleavedZeroBubble",
    "ZBVZeroBubble",
    "DualPipe",
    "DualPipeV",
)
"""Pipeline schedules, torchtitan's names (`pipeline_parallel_schedule`) and DeepSeek's
DualPipe / DualPipeV. DualPipe itself runs in DeepSeek's own framework: only the generic
model (no framework named) prices it."""
PAIRED_SCHEDULE = "DualPipe"
"""Two model copies in opposite directions: rank r holds stages r and pp-1-r, half the
micro-batches each way (deepseek-ai/DualPipe dualpipe.py, ``modules=(stage r, stage pp-1-r)``)."""
DUAL_SCHEDULES = ("DualPipe", "DualPipeV")
"""The two-direction schedules: a forward and a backward chunk of two micro-batches paired."""
V_SCHEDULES = ("ZBVZeroBubble", "DualPipeV")
"""V-shaped schedules: 2*pp stages, rank r holds stage r and stage 2pp-1-r, so rank 0 holds
the embedding and the loss (torch.distributed.pipelining generate_stage_to_rank_mapping
style "v", which torchtitan 0.3.0 picks for ScheduleZBVZeroBubble and ScheduleDualPipeV)."""

CP_COMM_TYPES = ("p2p", "a2a", "allgather")
"""Megatron's --cp-comm-type values tierwise prices (perf/terms/cp.py; its a2a+p2p is not)."""

SHARDING: Mapping[str, tuple[int, bool]] = MappingProxyType(
    {
        "ddp": (0, False),
        "distopt": (0, True),
        "zero1": (1, False),
        "zero2": (2, False),
        "fsdp": (3, False),
    }
)
"""Sharding schemes as (ZeRO stage, Megatron distributed optimizer): plain data parallelism
(replicated optimizer), Megatron's distributed optimizer, ZeRO-1/2 and FSDP (ZeRO-3)."""
SHARDING_TEXT = {
    "ddp": "plain DDP (zero 0)",
    "distopt": "Megatron's distributed optimizer",
    "zero1": "ZeRO-1",
    "zero2": "ZeRO-2",
    "fsdp": "FSDP / ZeRO-3",
}

# How a framework's selective recompute runs (what `workload.recompute` prices).
RECOMPUTE_MODULES = "modules"  # Megatron's --recompute-modules (default core_attn)
RECOMPUTE_OP_SAC = "op_sac"  # torchtitan's op-level selective activation checkpointing
# How a framework runs sharded data parallelism per block (a `perf.terms.dp` term), if it does.
SHARDED_FSDP2 = "fsdp2"  # torchtitan: fully_shard per transformer block
SHARDED_ZERO3 = "zero3_per_module"  # DeepSpeed ZeRO-3: each module's parameters gathered
# What starts a framework's processes (`Framework.launcher`).
TORCHRUN = "torchrun"  # one torchrun per node, started by srun
DEEPSPEED_RUNNER = "deepspeed"  # DeepSpeed's launcher, which runs srun itself (--launcher slurm)


@dataclass(frozen=True)
class Framework:
    """One framework: what it runs, how, with which defaults, and how it is launched."""

    name: str
    title: str
    """How a message names it (Megatron-LM, torchtitan, DeepSpeed)."""
    sharding: tuple[str, ...]
    """`SHARDING` schemes searched by default (plain DDP is searched only when fixed)."""
    any_sharding: tuple[str, ...]
    """Schemes it is searched for under ``--framework any``: each scheme in every framework
    that runs it differently (torchtitan's plain DDP is Megatron's)."""
    cp_comm_types: tuple[str, ...]
    """How its context parallelism exchanges K and V (`CP_COMM_TYPES`; empty: no context
    parallelism)."""
    vpp: bool
    """Interleaved (virtual) pipeline stages."""
    uneven_pp: bool
    """A config that states a per-stage layer split (Megatron's first/last-stage counts)."""
    dtypes: tuple[str, ...] | None
    """Training precisions it runs (None: every one the GPU runs)."""
    fp8_recipes: tuple[str, ...] | None
    """FP8 scaling recipes it runs, Megatron's names (None: all)."""
    pp_zero: int
    """The highest ZeRO stage it runs with pp > 1."""
    grad_reduce_bf16: tuple[bool, ...]
    """Gradient reduce in 16 bits: (its default, other allowed)."""
    recompute_modules: bool
    """Megatron's ``--recompute-modules`` (and its light modules searched)."""
    partial_recompute: bool
    """Full recompute other than layer by layer: Megatron's ``--recompute-method`` block /
    uniform with ``--recompute-num-layers`` above 1."""
    cpu_offload: bool
    """CPU offloading of whole layers' activations (Megatron's)."""
    hsdp: bool
    """HSDP: FSDP over part of the dp ranks, replicated over the rest."""
    schedules: tuple[str, ...]
    """Pipeline schedules it runs (`SCHEDULES` names)."""
    dp_buckets: bool
    """Gradients reduced and weights gathered bucket by bucket (Megatron DDP)."""
    sharded_dp: str | None
    """Its own per-block sharded data parallelism (`SHARDED_*`), or None."""
    param_gather_overlap: bool
    """Weight all-gathers of a sharded optimizer overlap the next forward."""
    low_precision_param_gather: bool
    """``--fp8-param-gather`` is honoured (FP8/MXFP8 parameters gathered in their format)."""
    selective_recompute: str
    """How ``recompute selective`` runs: `RECOMPUTE_MODULES` or `RECOMPUTE_OP_SAC`."""
    rank_orders: tuple[tuple[str, ...], ...] = (("tp", "cp", "dp", "pp"),)
    """Rank orders (innermost first, `tierwise.perf.groups.ORDERS` values) its launch can
    ask for; the first is its default."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """Behaviour flags (`tierwise.perf.flags.Flags` fields) it runs with unless told."""
    emitter: str | None = None
    """The ``--emit`` kind writing its configuration (None: nothing to launch)."""
    launcher: str | None = None
    """What starts it on each node: ``torchrun`` or ``deepspeed``."""
    launch_reads_file: bool = False
    """Its launch command reads the emitted configuration from a file (else: arguments)."""
    grad_reduce_always_overlapped: bool = False
    """Its gradient reduce runs during backward with no flag to turn it off (FSDP2's hooks)."""
    dotted_options: bool = False
    """Its options are dotted config overrides (``--parallelism.x``), not Megatron's flags."""
    pipeline_fp32_grads: bool = False
    """With pipelining (16-bit training) its optimizer adds every micro-batch's 16-bit
    gradients into fp32 ones, all-reduces those after the last micro-batch and gathers the
    updated 16-bit weights after the step, nothing overlapped (`tierwise.perf.terms.dp`)."""
    legacy_zero3_before: str | None = None
    """The release from which its ZeRO-3 gathers overlap compute and skip the per-rank copies;
    ``Flags.legacy_zero3`` prices the releases before it (None: it has no such history)."""
    sharded_grad_bucket: int | None = None
    """ZeRO-1/2 (sharded optimizer, its own engine): gradients reduced in buckets of this many
    elements as backward fills them, the last one (flushed when backward ends) exposed; None:
    as the generic model or `dp_buckets` say."""
    sharded_grad_all_reduce: bool = False
    """ZeRO-1/2 reduce each gradient bucket with an all-reduce (each rank keeps its partition)
    rather than a reduce-scatter."""
    zero2_reduces_every_micro: bool = False
    """ZeRO-2 (partitioned gradients) reduces every micro-batch's gradients during its
    backward; ZeRO-1 only the last micro-batch's (the accumulation boundary)."""
    overlapped_f_b: bool = True
    """Its DualPipe / DualPipeV runtime runs each paired forward and backward chunk overlapped,
    so each hides the other's expert all-to-all (DeepSeek's DualPipe calls the module's
    ``overlapped_forward_backward``). False: run one after the other."""
    interleave_groups: bool = False
    """Its interleaved schedule runs the micro-batches in groups of
    --microbatch-group-size-per-virtual-pipeline-stage (default pp) and refuses a count that
    does not fill them (`interleave_runs`)."""
    async_tp_backward: bool = False
    """Its column-parallel linears launch their backward TP collectives asynchronously, each
    behind the next GEMM: with sequence parallelism the input's re-gather behind the
    input-gradient GEMM and the input gradient's reduce-scatter behind the weight-gradient
    GEMM, without it the input gradient's all-reduce behind the weight-gradient GEMM
    (`tierwise.perf.terms.tp`); ``Flags.async_tensor_model_parallel_allreduce`` off prices a
    release or fork without it."""
    fixed_flags: Mapping[str, tuple[Any, str]] = field(default_factory=dict)
    """Behaviour flags (`Flags` fields) its launch runs one way only: field -> (that value,
    why); another value is refused (`flag_checks`)."""
    tp_overlap_needs_sp: str | None = None
    """Why its TP communication overlap needs sequence parallelism (None: no such rule)."""
    tp_overlap_note: str | None = None
    """What its launch adds to run the TP overlap that the estimate does not price."""
    overlap_asserts: bool = False
    """Megatron-LM's checks of its overlap flags (`flag_checks`): --overlap-param-gather needs
    --overlap-grad-reduce; --delay-wgrad-compute and --overlap-moe-expert-parallel-comm as
    megatron-core's TransformerConfig asserts them."""
    unpriced_sharding: Mapping[str, str] = field(default_factory=dict)
    """Sharding schemes (`SHARDING` names) it has that tierwise neither prices nor emits for
    it: scheme -> how the framework names it."""

    @property
    def runs_any_dtype(self) -> bool:
        """Every precision the GPU runs."""
        return self.dtypes is None

    def runs_dtype(self, dtype: str) -> bool:
        """`dtype` is one of its training precisions."""
        return self.dtypes is None or dtype in self.dtypes


_MEGATRON_SCHEDULES = ("1F1B", "Interleaved1F1B")

MEGATRON = Framework(
    name="megatron",
    title="Megatron-LM",
    sharding=("distopt",),
    any_sharding=("distopt", "ddp"),
    cp_comm_types=CP_COMM_TYPES,
    vpp=True,
    uneven_pp=True,
    dtypes=None,
    fp8_recipes=None,
    pp_zero=3,
    # Megatron reduces fp32 main grads unless --grad-reduce-in-bf16.
    grad_reduce_bf16=(False, True),
    recompute_modules=True,
    partial_recompute=True,
    cpu_offload=True,
    hsdp=False,
    schedules=_MEGATRON_SCHEDULES,
    # Megatron DDP buckets: megatron/core/distributed (bucket_size = max(40M, 1M x dp)).
    dp_buckets=True,
    sharded_dp=None,
    param_gather_overlap=True,
    low_precision_param_gather=True,
    selective_recompute=RECOMPUTE_MODULES,
    # Megatron-core's default order tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp with
    # --use-tp-pp-dp-mapping (megatron/core/parallel_state.py initialize_model_parallel).
    rank_orders=(("tp", "cp", "dp", "pp"), ("tp", "cp", "pp", "dp")),
    emitter="megatron",
    launcher=TORCHRUN,
    interleave_groups=True,
    # LinearWithGradAccumulationAndAsyncCommunication.backward (megatron-core 0.16.1
    # tensor_parallel/layers.py; Transformer Engine's Linear, LayerNormLinear and LayerNormMLP
    # the same since its first release, 2022-09), ordered by CUDA_DEVICE_MAX_CONNECTIONS=1:
    # the all-reduce since NVIDIA/Megatron-LM 6e1bde1e0f (2021-09-02, after v2.6; on unless
    # --no-async-tensor-model-parallel-allreduce, ignored from 2024-04, removed 2026-01), the
    # sequence-parallel re-gather and reduce-scatter since sequence parallelism arrived
    # (02bb1f5c86, 2022-03).
    async_tp_backward=True,
    # megatron/training/arguments.py validate_args (NVIDIA/Megatron-LM@d98e8a64): "Tensor
    # parallel communication/GEMM overlap can happen only when sequence parallelism is enabled".
    tp_overlap_needs_sp="Megatron-LM asserts sequence parallelism with it (validate_args)",
    overlap_asserts=True,
    # megatron-core 0.16.1 has FSDP: its own (megatron/core/distributed/fsdp, --use-megatron-
    # fsdp) and torch's FSDP2 (torch_fully_sharded_data_parallel.py, --use-torch-fsdp2).
    unpriced_sharding=MappingProxyType(
        {"fsdp": "--use-megatron-fsdp / --use-torch-fsdp2 (megatron-core 0.16.1)"}
    ),
)
# torchtitan has no ZeRO-1 nor Megatron's distributed optimizer: FSDP2, resharding the
# parameters after forward (ZeRO-3) or not (ZeRO-2), or DDP. FSDP2 reduces in float32
# (mixed_precision_reduce). Float8 training (torchao) runs tensorwise (current) scaling;
# MX training mxfp8 (torchtitan/components/quantization).
TORCHTITAN = Framework(
    name="torchtitan",
    title="torchtitan",
    sharding=("fsdp", "zero2"),
    any_sharding=("zero2", "fsdp"),
    # torch's context_parallel, priced as ring attention.
    cp_comm_types=("p2p",),
    vpp=True,
    uneven_pp=True,
    dtypes=("bf16", "fp8", "mxfp8"),
    fp8_recipes=("tensorwise",),
    pp_zero=3,
    grad_reduce_bf16=(False,),
    recompute_modules=False,
    partial_recompute=False,
    cpu_offload=False,
    hsdp=True,
    # its own (DualPipeV: torchtitan's ScheduleDualPipeV, torch.distributed.pipelining)
    schedules=tuple(s for s in SCHEDULES if s != "DualPipe"),
    dp_buckets=False,
    sharded_dp=SHARDED_FSDP2,
    param_gather_overlap=True,
    # its float8 FSDP2 gathers per-tensor float8 whatever --fp8-param-gather says
    # (tierwise.workload.precision.FLOAT8_FSDP).
    low_precision_param_gather=False,
    selective_recompute=RECOMPUTE_OP_SAC,
    emitter="torchtitan",
    launcher=TORCHRUN,
    # FSDP2 reduce-scatters each block's gradients from its backward hook
    # (torch.distributed.fsdp.fully_shard); torchtitan has no option to defer them.
    grad_reduce_always_overlapped=True,
    # torchtitan 0.3's tyro-parsed JobConfig (torchtitan/config/job_config.py).
    dotted_options=True,
    # torchtitan 0.3.0 registers no OVERLAP_F_B function, so torch 2.13's
    # _PipelineScheduleRuntime runs ScheduleDualPipeV's overlapped forward and backward as its
    # two sub-actions one after the other (torch/distributed/pipelining/schedules.py,
    # _step_microbatches: "elif action.computation_type == OVERLAP_F_B").
    overlapped_f_b=False,
    # Its TP is DTensor's (ColwiseParallel / RowwiseParallel): eager, each gradient's
    # redistribution runs after the linear's backward, both GEMMs done; the collectives are
    # pipelined with the GEMMs only by async TP, which needs torch.compile
    # (config/configs.py CompileConfig.enable_async_tensor_parallel, off by default).
    async_tp_backward=False,
    fixed_flags=MappingProxyType(
        {
            "overlap_grad_reduce": (True, "FSDP2 and torch's DDP reduce from backward hooks"),
            "overlap_param_gather": (True, "FSDP2 prefetches every block's weights"),
            "delay_wgrad_compute": (False, "torchtitan has no delayed weight gradients"),
            "overlap_moe_expert_parallel_comm": (
                False,
                "torchtitan has no Megatron combined-1F1B expert all-to-all overlap",
            ),
            # torch.distributed.pipelining sends each stage's output tensor as it is (its
            # PipelineStage send/recv buffers), and its interleaved schedules run the
            # micro-batches in rounds of their own: torchtitan 0.3.0 has neither option.
            "scatter_gather_tensors_in_pipeline": (
                False,
                "torchtitan's pipeline sends each stage's output whole (no scatter-gather)",
            ),
            "microbatch_group_size_per_vp_stage": (
                None,
                "torchtitan's interleaved schedules (torch.distributed.pipelining) have no "
                "micro-batch group size",
            ),
        }
    ),
    # Its TP overlap is async TP (compile.enable_async_tensor_parallel, which needs
    # compile.enable with "model" in compile.components: torchtitan 0.3.0 CompileConfig): it
    # fuses the sequence-parallel all-gathers and reduce-scatters into the GEMMs; without SP
    # the TP all-reduces stay (torchtitan/models/common/dist_gemm.py says so).
    tp_overlap_note="torchtitan runs async TP only under torch.compile (the launch sets "
    "--compile.enable); compile's other speed-ups are not priced",
    tp_overlap_needs_sp="torchtitan's async TP fuses the sequence-parallel all-gathers and "
    "reduce-scatters into the GEMMs; without SP it has none to fuse",
)
# DeepSpeed's JSON config cannot state a per-stage layer split (its PipelineModule does) nor
# FP8; its pipeline engine runs plain 1F1B (deepspeed/runtime/pipe/schedule.py TrainSchedule)
# and rejects ZeRO stages 2 and 3; the ZeRO-1/2 weight all-gather runs at the end of the
# optimizer step, with nothing left to hide behind (tierwise.perf.terms.dp).
DEEPSPEED = Framework(
    name="deepspeed",
    title="DeepSpeed",
    sharding=("zero1", "zero2", "fsdp"),
    any_sharding=("zero1", "zero2", "fsdp", "ddp"),
    cp_comm_types=(),
    vpp=False,
    uneven_pp=False,
    dtypes=("bf16",),
    fp8_recipes=(),
    pp_zero=1,
    # DeepSpeed reduces in the training dtype unless communication_data_type says otherwise.
    grad_reduce_bf16=(True, False),
    recompute_modules=False,
    partial_recompute=False,
    cpu_offload=False,
    hsdp=False,
    schedules=("1F1B",),
    dp_buckets=False,
    sharded_dp=SHARDED_ZERO3,
    param_gather_overlap=False,
    low_precision_param_gather=False,
    selective_recompute=RECOMPUTE_MODULES,
    emitter="deepspeed",
    launcher=DEEPSPEED_RUNNER,
    launch_reads_file=True,
    # Its pipeline engine trains bf16 through the BF16 optimizer (its own ZeRO-1): after every
    # backward but the last stage's, update_hp_grads adds the bf16 gradients into fp32 ones
    # (deepspeed/runtime/pipe/engine.py _exec_backward_pass; runtime/bf16_optimizer.py); the
    # ReduceGrads instruction, after the last micro-batch, all-reduces those fp32 gradients
    # (_exec_reduce_grads -> _bf16_reduce_grads) and step() all-gathers the updated bf16
    # weights (all_gather_dp_groups): v0.6 (2022, BLOOM's) to current.
    pipeline_fp32_grads=True,
    # Its pipeline engine sends activations and gradients partitioned over the model-parallel
    # group and all-gathers them on arrival (deepspeed/runtime/pipe/engine.py
    # is_pipe_partitioned / is_grad_partitioned; runtime/config.py pipeline defaults
    # pipe_partitioned and grad_partitioned true; PartitionedTensor in runtime/utils.py).
    defaults=MappingProxyType({"scatter_gather_tensors_in_pipeline": True}),
    # Before 0.5.5 (2021-11-02) ZeRO-3 gathered each parameter synchronously through list
    # collectives, one tensor per rank (deepspeed/runtime/zero/partition_parameters.py
    # _allgather_param and _reduce_scatter_gradient, v0.3.14-v0.5.4: a torch.cuda.synchronize()
    # before every gather and after every module's fetch, so no gather ran asynchronously, and
    # torch's list all_gather copying its output once more, as commit c0eeb69d (#1188) states).
    legacy_zero3_before="0.5.5",
    # ZeRO-1/2 with overlap_comm (as the emitted config sets it; tierwise.plan.emit.deepspeed):
    # each gradient's hook adds it to a reduce_bucket_size (5e8 elements) bucket, reduced on
    # the reduction stream when full, the rest at the end of backward
    # (deepspeed/runtime/zero/stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads,
    # independent_gradient_partition_epilogue, 0.19.8). ZeRO-2 does so every micro-step
    # (reduce_ready_partitions_and_remove_grads: partition_gradients; runtime/engine.py
    # allreduce_gradients: "ZeRO stage >= 2 communicates during non gradient accumulation
    # boundaries as well"), ZeRO-1 at the accumulation boundary only. average_tensor reduces
    # each bucket with one all-reduce (use_multi_rank_bucket_allreduce, default true,
    # runtime/zero/config.py), not a reduce-scatter.
    sharded_grad_bucket=500_000_000,
    sharded_grad_all_reduce=True,
    zero2_reduces_every_micro=True,
    # Its TP layers are the training script's: DeepSpeed's own (deepspeed/module_inject/
    # layers.py AsyncColumnParallel, 0.19.8) and microsoft/Megatron-DeepSpeed's (Megatron-LM's
    # LinearWithGradAccumulationAndAsyncCommunication) all-reduce the input gradient behind the
    # weight-gradient GEMM; BigScience's Megatron-DeepSpeed fork (BLOOM) never did (its
    # megatron/mpu/layers.py waits on copy_to_tensor_model_parallel_region's all-reduce).
    async_tp_backward=True,
    fixed_flags=MappingProxyType(
        {
            # its config has no such key: the training script builds the TP layers
            "tp_comm_overlap": (False, "DeepSpeed has no TP communication overlap"),
            "delay_wgrad_compute": (False, "DeepSpeed has no delayed weight gradients"),
            "overlap_moe_expert_parallel_comm": (
                False,
                "DeepSpeed has no Megatron combined-1F1B expert all-to-all overlap",
            ),
        }
    ),
)
GENERIC = Framework(
    name="generic",
    title="the generic model",
    sharding=("distopt",),
    any_sharding=(),
    cp_comm_types=CP_COMM_TYPES,
    vpp=True,
    uneven_pp=True,
    dtypes=None,
    fp8_recipes=None,
    pp_zero=3,
    grad_reduce_bf16=(False, True),
    recompute_modules=True,
    partial_recompute=True,
    cpu_offload=True,
    hsdp=False,
    schedules=SCHEDULES,
    dp_buckets=False,
    sharded_dp=None,
    param_gather_overlap=True,
    low_precision_param_gather=True,
    selective_recompute=RECOMPUTE_MODULES,
    async_tp_backward=True,
)

TABLE: Mapping[str, Framework] = MappingProxyType(
    {row.name: row for row in (MEGATRON, TORCHTITAN, DEEPSPEED, GENERIC)}
)
MOE_ONLY_FLAGS = (
    "overlap_moe_expert_parallel_comm",
    "delay_wgrad_compute",
    "moe_token_dispatcher_type",
)
"""Behaviour flags (`Flags` fields) of MoE layers only: they change nothing for a dense model,
whose launch leaves them out, so no framework refuses them there."""
LAUNCHED = tuple(name for name, row in TABLE.items() if row.emitter is not None)


def legacy_zero3_rows() -> list[Framework]:
    """The rows whose older releases ran ZeRO-3 as ``Flags.legacy_zero3`` prices it."""
    return [r for r in TABLE.values() if r.legacy_zero3_before is not None]


"""The frameworks tierwise plans for and launches (``--framework``)."""
ANY = "any"
"""``--framework any``: the union of the launched frameworks' spaces."""
FRAMEWORK_CHOICES = (ANY, *LAUNCHED)
DEFAULT_LAUNCHED = MEGATRON
"""What a Slurm script alone launches, and what ``--framework any`` emits."""


@dataclass(frozen=True)
class Logged:
    """What a training log's framework (as `tierwise.verify.trainlog` names it) runs as."""

    row: Framework
    """The table row that prices it."""
    argument_defaults: Mapping[str, Any]
    """Settings it runs with when the log does not state them (`Flags` fields and
    ``use_distributed_optimizer``)."""
    whose: str
    """How an assumption names those defaults."""
    unstated: Mapping[str, tuple[Any, str]] = field(default_factory=dict)
    """Settings a log that does not state them ran otherwise than `argument_defaults` says:
    key -> (the value, why)."""


# Megatron-LM's argument defaults (megatron/training/arguments.py) for the settings tierwise
# prices: --overlap-grad-reduce, --overlap-param-gather and --tp-comm-overlap are off unless
# given; the MoE token dispatcher defaults to allgather.
_MEGATRON_ARGUMENTS: Mapping[str, Any] = MappingProxyType(
    {
        "overlap_grad_reduce": False,
        "overlap_param_gather": False,
        # --no-align-param-gather is store_false: aligned unless told (megatron/training/
        # arguments.py); a log that prints no align_param_gather predates the option
        # (`Logged.unstated`).
        "align_param_gather": True,
        "tp_comm_overlap": False,
        "moe_token_dispatcher_type": "allgather",
    }
)
MEGATRON_ARGUMENTS = _MEGATRON_ARGUMENTS
"""Megatron-LM's own argument defaults of the settings above (what `--help` compares with)."""
# Megatron-LM prints every argument it has; a log without align_param_gather ran a release
# before --no-align-param-gather, where each virtual stage's first weight bucket waited for
# its chunk's forward (what align_param_gather False prices).
_BEFORE_ALIGN: Mapping[str, tuple[Any, str]] = MappingProxyType(
    {"align_param_gather": (False, "a Megatron-LM release before --no-align-param-gather")}
)
# NeMo 2 recipes and Megatron-Bridge build their MegatronStrategy / ConfigContainer with the
# distributed optimizer and a DDP config that overlaps the gradient reduce-scatter and the
# parameter all-gather (nemo/collections/llm/recipes/*: DistributedDataParallelConfig(
# overlap_grad_reduce=True, overlap_param_gather=True), use_distributed_optimizer=True); TP
# overlap stays off unless the recipe's comm-overlap callback turns it on.
_NEMO_RECIPES: Mapping[str, Any] = MappingProxyType(
    {
        "use_distributed_optimizer": True,
        "overlap_grad_reduce": True,
        "overlap_param_gather": True,
        "tp_comm_overlap": False,
        "moe_token_dispatcher_type": "alltoall",
    }
)
LOGGED: Mapping[str, Logged] = MappingProxyType(
    {
        "megatron-lm": Logged(
            MEGATRON, _MEGATRON_ARGUMENTS, "Megatron-LM's default", _BEFORE_ALIGN
        ),
        # Megatron-DeepSpeed runs Megatron's model code under DeepSpeed's engine.
        "megatron-deepspeed": Logged(
            DEEPSPEED, _MEGATRON_ARGUMENTS, "Megatron-LM's default", _BEFORE_ALIGN
        ),
        # NeMo and Megatron-Bridge run Megatron-core.
        "nemo": Logged(MEGATRON, _NEMO_RECIPES, "NeMo 2 recipes' default"),
        "megatron-bridge": Logged(MEGATRON, _NEMO_RECIPES, "Megatron-Bridge recipes' default"),
        TORCHTITAN.name: Logged(TORCHTITAN, MappingProxyType({}), "torchtitan's default"),
    }
)
"""Training-log framework names (`RunRecord.framework`) -> how tierwise prices them."""


def logged(name: str | None) -> Logged | None:
    """How a log's framework is priced (None: not stated or not one tierwise knows)."""
    return LOGGED.get(name or "")


def row(name: str | None) -> Framework:
    """The row of `name` (None: the generic model); a one-line error naming the choices."""
    if name is None:
        return GENERIC
    if name not in TABLE:
        raise SpecError(f"--framework: {name!r}; allowed: {', '.join(LAUNCHED)}")
    return TABLE[name]


def launched(name: str) -> Framework | None:
    """The row `--framework name` plans for (None for ``any``); one-line error otherwise."""
    if name == ANY:
        return None
    if name not in LAUNCHED:
        raise SpecError(f"--framework: {name!r}; allowed: {', '.join(FRAMEWORK_CHOICES)}")
    return TABLE[name]


def by_emitter(kind: str) -> Framework | None:
    """The framework whose configuration the ``--emit`` kind writes (None: Slurm)."""
    return next((r for r in TABLE.values() if r.emitter == kind), None)


def sharding_name(layout: Layout) -> str:
    """The `SHARDING` scheme of `layout` ("distopt" with the distributed optimizer, whatever
    the zero field says)."""
    stage = (0, True) if layout.distributed_optimizer else (layout.zero, False)
    return next(name for name, sharding in SHARDING.items() if sharding == stage)


def interleave_runs(pp: Any, vpp: Any, micro: Any, group: Any = None) -> Any:
    """Whether Megatron's interleaved schedule runs `micro` micro-batches per pipeline (python
    or numpy values): megatron-core 0.16.1 forward_backward_pipelining_with_interleaving
    (pipeline_parallel/schedules.py) raises unless pp <= group <= micro and the last group,
    micro % group, is empty or holds pp or more; `group`: --microbatch-group-size-per-
    virtual-pipeline-stage (None: pp, its default). True where vpp is 1."""
    group = pp if group is None else group
    rest = micro % group
    return (vpp == 1) | ((pp <= group) & (group <= micro) & ((rest == 0) | (rest >= pp)))


_OPTION_NAMES = {
    "microbatch_group_size_per_vp_stage": "microbatch-group-size-per-virtual-pipeline-stage",
    "cuda_graphs": "enable-cuda-graph",
}
"""Behaviour flags whose option is not their field's name with dashes."""


def option_text(field_name: str, value: Any) -> str:
    """A behaviour flag as Megatron-LM spells it: ``--x`` or ``--no-x``, ``--x VALUE``."""
    name = _OPTION_NAMES.get(field_name, field_name.replace("_", "-"))
    if not isinstance(value, bool) and value is not None:
        return f"--{name} {value}"
    return f"--{'' if value else 'no-'}{name}"


def layout_values(layout: Layout) -> dict[str, Any]:
    """The layout fields `flag_checks` reads, as python values."""
    return {
        "tp": layout.tp,
        "sp": layout.sp_enabled,
        "pp": layout.pp,
        "vpp": layout.vpp,
        "ep": layout.ep,
        "full": layout.recompute == "full",
        "sharded": layout.distributed_optimizer or layout.zero >= 1,
        "zero": layout.zero,
    }


def flag_checks(
    fw: Framework, flags: Any, model: Any, v: Mapping[str, Any]
) -> list[tuple[Any, str]]:
    """(failed, one-line reason) of each rule `fw` puts on the behaviour flags `flags`
    (`tierwise.perf.flags.Flags`) of `model` (a ModelSpec; None: no MoE or MTP) for the layout
    fields `v` (`layout_values`; python values or numpy columns of a search space alike).
    Megatron-LM's (`Framework.overlap_asserts`): megatron/training/arguments.py validate_args
    asserts "Must use --overlap-param-gather with --overlap-grad-reduce"; megatron-core 0.16.1
    TransformerConfig.__post_init__ asserts --delay-wgrad-compute only with
    --overlap-moe-expert-parallel-comm, and that one only with ep > 1, virtual stages where
    pp > 1, the alltoall or flex dispatcher, no full recompute, at most one MTP layer (and then
    pp > 1) and no CUDA graph other than Transformer Engine's (--enable-cuda-graph is not)."""
    moe = model is not None and getattr(model, "moe", None) is not None
    checks: list[tuple[Any, str]] = [
        (getattr(flags, name) != value, f"{option_text(name, getattr(flags, name))}: {why}")
        for name, (value, why) in fw.fixed_flags.items()
        if moe or name not in MOE_ONLY_FLAGS  # a dense model's launch leaves those out
    ]
    schedule = flags.pipeline_schedule
    if schedule is not None and schedule not in fw.schedules:
        checks.append(
            (
                v["pp"] > 1,
                f"--pipeline-schedule: {schedule!r}; --framework {fw.name} runs "
                f"{', '.join(fw.schedules)}",
            )
        )
    if fw.tp_overlap_needs_sp is not None and flags.tp_comm_overlap:
        checks.append(
            (
                (v["tp"] > 1) & (v["sp"] == 0),
                f"--tp-comm-overlap without --sp: {fw.tp_overlap_needs_sp}",
            )
        )
    if fw.sharded_dp == SHARDED_ZERO3 and not flags.overlap_grad_reduce:
        checks.append(
            (
                v["zero"] >= 3,
                f"--no-overlap-grad-reduce at --zero 3: tierwise prices {fw.title}'s ZeRO-3 as "
                "it runs by default (overlap_comm true, its per-module prefetch and "
                "reduce-scatter)",
            )
        )
    if not fw.overlap_asserts:
        return checks
    if flags.overlap_param_gather and not flags.overlap_grad_reduce:
        checks.append(
            (
                v["sharded"] != 0,
                "--overlap-param-gather with --no-overlap-grad-reduce: Megatron-LM asserts "
                '"Must use --overlap-param-gather with --overlap-grad-reduce" (validate_args)',
            )
        )
    a2a = flags.overlap_moe_expert_parallel_comm
    if flags.delay_wgrad_compute and not a2a and moe:
        checks.append(
            (
                True,
                "--delay-wgrad-compute without --overlap-moe-expert-parallel-comm: megatron-core "
                "0.16.1's TransformerConfig asserts it",
            )
        )
    if not (a2a and moe):
        return checks
    mtp = getattr(model, "mtp_layers", 0) or 0
    head = "--overlap-moe-expert-parallel-comm"
    core = "(megatron-core 0.16.1 TransformerConfig)"
    dispatcher = flags.moe_token_dispatcher_type
    return [
        *checks,
        (v["ep"] == 1, f"{head} at --ep 1: it overlaps expert parallelism's all-to-alls {core}"),
        (
            (v["pp"] > 1) & (v["vpp"] == 1),
            f"{head} with pp > 1 needs virtual pipeline stages (--vpp > 1) {core}",
        ),
        (
            dispatcher not in ("alltoall", "flex"),
            f"{head} with the {dispatcher} dispatcher: it runs alltoall or flex {core}",
        ),
        (v["full"] != 0, f"{head} with full recompute: Megatron asserts none {core}"),
        (mtp > 1, f"{head} with {mtp} MTP layers: it runs at most one {core}"),
        ((mtp == 1) & (v["pp"] == 1), f"{head} with an MTP layer needs pp > 1 {core}"),
        (
            bool(flags.cuda_graphs),
            f"{head} with --enable-cuda-graph: it runs only Transformer Engine's CUDA graphs "
            f"outside the MoE layers {core}",
        ),
    ]


def refusal(
    fw: Framework,
    layout: Layout,
    group: int | None = None,
    flags: Any = None,
    model: Any = None,
) -> str | None:
    """Why `fw` cannot run `layout`, in one line (None: it can); `group`: the
    --microbatch-group-size-per-virtual-pipeline-stage it runs with (None: its default, or
    `flags`'); `flags` (`tierwise.perf.flags.Flags`; None: not checked): the behaviour flags
    it runs `layout` of `model` with (`flag_checks`)."""
    if flags is not None and group is None:
        group = flags.microbatch_group_size_per_vp_stage
    scheme = sharding_name(layout)
    if scheme in fw.unpriced_sharding:
        runs = ", ".join(SHARDING_TEXT[s] for s in ("ddp", *fw.sharding))
        return (
            f"tierwise neither prices nor emits {fw.title}'s {SHARDING_TEXT[scheme]} "
            f"({fw.unpriced_sharding[scheme]}); it plans {runs}"
        )
    if scheme != "ddp" and scheme not in fw.sharding:
        runs = ", ".join(SHARDING_TEXT[s] for s in ("ddp", *fw.sharding))
        return f"{fw.title} has no {SHARDING_TEXT[scheme]}; it runs {runs}"
    checks = (
        (
            layout.cp > 1 and not fw.cp_comm_types,
            f"cp={layout.cp}: {fw.title} has no context parallelism",
        ),
        (
            layout.vpp > 1 and not fw.vpp,
            f"vpp={layout.vpp}: {fw.title} has no interleaved pipeline (it runs "
            f"{', '.join(fw.schedules)})",
        ),
        (
            fw.interleave_groups
            and layout.pp > 1
            and not interleave_runs(layout.pp, layout.vpp, layout.num_microbatches, group),
            f"vpp={layout.vpp} with {layout.num_microbatches} micro-batches per pipeline: "
            f"{fw.title}'s interleaved schedule runs them in groups of {group or layout.pp} "
            f"(--microbatch-group-size-per-virtual-pipeline-stage, default pp), which must "
            f"lie between pp ({layout.pp}) and the micro-batches and leave a last group of 0 "
            f"or >= pp",
        ),
        (
            not fw.runs_dtype(layout.dtype),
            f"dtype={layout.dtype}: {fw.title} trains in {', '.join(fw.dtypes or ())}",
        ),
        (
            layout.fp8_recipe is not None
            and fw.fp8_recipes is not None
            and layout.fp8_recipe not in fw.fp8_recipes,
            f"fp8_recipe={layout.fp8_recipe}: {fw.title} runs "
            f"{', '.join(fw.fp8_recipes or ('no FP8',))} scaling",
        ),
        (
            layout.pp_layers is not None and layout.pp > 1 and not fw.uneven_pp,
            f"pp_layers={','.join(map(str, layout.pp_layers or ()))}: {fw.title}'s config "
            "cannot state a per-stage layer split",
        ),
        (
            layout.pp > 1 and layout.zero > fw.pp_zero,
            f"zero={layout.zero} with pp={layout.pp}: {fw.title} runs ZeRO stage "
            f"<= {fw.pp_zero} with pipelining",
        ),
        (
            layout.grad_reduce_bf16 not in fw.grad_reduce_bf16,
            f"grad_reduce_bf16={layout.grad_reduce_bf16}: {fw.title} reduces gradients in "
            f"{'16 bits' if fw.grad_reduce_bf16[0] else 'float32'} only",
        ),
        (
            layout.recompute_modules is not None and not fw.recompute_modules,
            f"recompute_modules={','.join(layout.recompute_modules or ())}: {fw.title} has "
            "no Megatron recompute modules (recompute none, selective or full)",
        ),
        (
            not fw.partial_recompute
            and (layout.recompute_method == "block" or (layout.recompute_num_layers or 1) > 1),
            f"recompute_method={layout.recompute_method}, recompute_num_layers="
            f"{layout.recompute_num_layers}: {fw.title} recomputes every layer or none",
        ),
        (
            layout.activation_offload_layers > 0 and not fw.cpu_offload,
            f"activation_offload_layers={layout.activation_offload_layers}: {fw.title} has "
            "no CPU offloading of whole layers' activations (Megatron's)",
        ),
        (
            layout.dp_shard_degree is not None and not fw.hsdp,
            f"dp_shard_degree={layout.dp_shard_degree}: {fw.title} has no HSDP "
            "(torchtitan's data_parallel_shard_degree)",
        ),
    )
    reason = next((reason for failed, reason in checks if failed), None)
    if reason is not None or flags is None:
        return reason
    found = flag_checks(fw, flags, model, layout_values(layout))
    return next((reason for failed, reason in found if failed), None)


def frameworks_for(
    layout: Layout, group: int | None = None, flags: Any = None, model: Any = None
) -> list[str]:
    """The launched frameworks that can run `layout` (`group`, `flags`, `model`: as
    `refusal`)."""
    return [name for name in LAUNCHED if refusal(TABLE[name], layout, group, flags, model) is None]


def check_runs(
    fw: Framework,
    layout: Layout,
    option: str = "--framework",
    group: int | None = None,
    flags: Any = None,
    model: Any = None,
) -> None:
    """A one-line SpecError (naming `option` and the frameworks that can, or where none can,
    why each other cannot) when `fw` cannot run `layout` (`group`, `flags`, `model`: as
    `refusal`)."""
    reason = refusal(fw, layout, group, flags, model)
    if reason is None:
        return
    can = frameworks_for(layout, group, flags, model)
    others = ", ".join(can)
    if not can:
        why = [
            f"{name}: {refusal(TABLE[name], layout, group, flags, model)}"
            for name in LAUNCHED
            if name != fw.name
        ]
        others = f"none ({'; '.join(why)})"
    raise SpecError(f"{option} {fw.name}: {reason}; frameworks that can: {others}")


def flags_mask(fw: Framework, flags: Any, model: Any, v: Mapping[str, Any]) -> Any:
    """Which layouts of a search space (`layout_values` columns) `fw` runs with `flags`, and
    the reason the first rule refusing them all gives (None where some remain)."""
    keep: Any = True
    for failed, reason in flag_checks(fw, flags, model, v):
        keep = keep & (failed == 0)
        if not (keep.any() if hasattr(keep, "any") else keep):
            return keep, reason
    return keep, None


def cp_comm_framework(kind: str) -> Framework | None:
    """The only launched framework whose context parallelism runs `kind` (a `CP_COMM_TYPES`
    value) when one alone does (None otherwise)."""
    runners = [TABLE[n] for n in LAUNCHED if kind in TABLE[n].cp_comm_types]
    return runners[0] if len(runners) == 1 else None


def schedule_framework(schedule: str) -> Framework | None:
    """The only launched framework running `schedule` when one alone does (None otherwise)."""
    runners = [TABLE[n] for n in LAUNCHED if schedule in TABLE[n].schedules]
    return runners[0] if len(runners) == 1 else None
