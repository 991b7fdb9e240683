"""Data parallelism over the dp*cp ranks of a stage: gradient reduction, weight gathers,
and the optimizer step they shard.

Generic model (no framework named): replicated optimizer, one gradient all-reduce per step;
sharded optimizer (ZeRO-1/2, Megatron's distributed optimizer), a gradient reduce-scatter
and an all-gather of the updated 16-bit weights per step; ZeRO-3/FSDP, weights gathered
forward and backward and gradients reduce-scattered every micro-batch. Gradients hide
behind backward, gathers behind forward (FSDP: behind the whole micro-batch), up to the
compute time available.

As frameworks run it (their rows in `tierwise.frameworks`, read through `Flags.runner`):

- Megatron-LM (DDP and the distributed optimizer): gradients reduced in buckets of
  max(40M, 1M x dp) parameters as backward produces them (megatron/training/training.py,
  ``--ddp-bucket-size`` default; DistributedDataParallelConfig.bucket_size), weights gathered
  bucket by bucket ahead of the forward (``--overlap-param-gather``): each bucket pays its
  collective's latency, and the last gradient bucket and the first weight bucket stay exposed
  (interleaved: the first of every virtual stage, unless ``--align-param-gather``). Without
  the overlap flags (Megatron-LM before 2023-08) all of it is exposed.
- torchtitan FSDP2 (``fully_shard`` per transformer block, bf16 parameters, fp32 reduce
  ``mixed_precision_reduce``): each block's all-gather is prefetched one block ahead of its
  forward; zero 3 reshards after forward (``reshard_after_forward``) and gathers again ahead
  of backward, zero 2 keeps the weights; each block's gradient reduce-scatter overlaps the
  next block's backward, the last stays exposed. Without pipelining every micro-batch runs
  the whole cycle; with it (torch.distributed.pipelining), backwards keep the weights
  gathered and reduce nothing: zero 3 gathers m + 1 times a step per virtual stage, zero 2
  once, and all gradients are reduced after the last backward, the last stage's exposed.
- DeepSpeed ZeRO-1/2: gradients all-reduced in 5e8-element buckets behind backward, the last
  bucket exposed; ZeRO-2 every micro-step, ZeRO-1 at the accumulation boundary only
  (`Framework.sharded_grad_bucket`). The updated 16-bit weights are all-gathered at the end
  of the optimizer step (deepspeed/runtime/zero/stage_1_and_2.py, step():
  ``all_gather_dp_groups`` "ready for next round forward"), with no compute left in the step
  to hide behind: exposed.
- DeepSpeed ZeRO-3: parameters gathered module by module (each weight matrix and norm),
  prefetched while fewer than ``stage3_max_live_parameters`` are gathered, forward and again
  backward, each collective paying its latency, which dominates at scale; under full
  recompute the backward skips what the recompute forward left gathered
  (``stage3_max_reuse_distance``); gradients reduce-scattered every micro-step in
  ``reduce_bucket_size`` (5e8 elements) buckets. Before 0.5.5 (``--legacy-zero3``) every
  parameter and gradient had its own collective through per-rank lists, with a device
  synchronisation around every gather: nothing overlapped, and host time grew with dp.
- DeepSpeed's pipeline engine (bf16): each micro-batch's gradients added into fp32 ones, all-
  reduced after the last micro-batch, the updated weights gathered after the step: exposed.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

from tierwise.frameworks import GENERIC, SHARDED_FSDP2, SHARDED_ZERO3, Framework
from tierwise.memo import by_identity
from tierwise.perf import comm as C
from tierwise.perf.efficiency import hbm_bytes_per_s
from tierwise.perf.terms.stage import CommTerm, Stage, select
from tierwise.records import record
from tierwise.workload.flops import Array, maximum, minimum, pos
from tierwise.workload.memory import main_grad_bytes
from tierwise.workload.params import NORMS_PER_LAYER, ParamCounts, norm_params, param_counts
from tierwise.workload.precision import BF16_BYTES, FLOAT8_FSDP, gather_bytes
from tierwise.workload.spec import ModelSpec

# Share of the compute window that overlapped DP/FSDP communication can really use (the
# collectives steal SMs and memory bandwidth from the GEMMs they hide behind): assumed.
DP_OVERLAP_EFFICIENCY = 0.9
FORWARD_SHARE = 1.0 / 3.0  # forward / (forward + backward) compute of one micro-batch
# HBM bytes the Adam step touches per parameter it updates: fp32 master, m, v read and
# written (24), the gradient read (4), the 16-bit weight written (2).
OPTIMIZER_BYTES_PER_PARAM = 30
# Megatron DDP bucket: max(MEGATRON_BUCKET_PARAMS, MEGATRON_BUCKET_PARAMS_PER_RANK x dp)
# parameters (megatron/training/training.py: bucket_size = max(40000000, 1000000 * dp_size)).
MEGATRON_BUCKET_PARAMS = 40_000_000
MEGATRON_BUCKET_PARAMS_PER_RANK = 1_000_000
# torchtitan FSDP2 reduces gradients in float32 (mixed_precision_reduce default).
FSDP2_REDUCE_BYTES = 4
# DeepSpeed's reduce_bucket_size default, elements.
DEEPSPEED_REDUCE_BUCKET = 500_000_000
# DeepSpeed's stage3_param_persistence_threshold default (deepspeed/runtime/zero/config.py):
# parameters with fewer elements stay whole on every rank, never gathered.
DEEPSPEED_PERSISTENCE_THRESHOLD = 100_000
# DeepSpeed's stage3_max_live_parameters default, elements: gathered parameters resident
# before the coordinator releases them; the next module is prefetched only while the
# current one and it fit under it.
DEEPSPEED_MAX_LIVE_PARAMETERS = 1_000_000_000
# DeepSpeed's stage3_max_reuse_distance default, elements: a module released after its forward
# stays gathered when the trace uses it again before that many parameters are fetched
# (partitioned_param_coordinator.py __params_to_release; v0.3.14-v0.5.4 _keep_for_later).
DEEPSPEED_MAX_REUSE_DISTANCE = 1_000_000_000
# DeepSpeed's pipeline engine all-reduces fp32 gradients in buckets of this many elements
# (deepspeed/runtime/pipe/engine.py MEMORY_OPT_ALLREDUCE_SIZE).
DEEPSPEED_PIPE_ALLREDUCE_BUCKET = 500_000_000
# HBM bytes per parameter of adding one micro-batch's 16-bit gradient into the fp32 one
# (BF16 optimizer update_hp_grads: the bf16 gradient read and cast to a temporary fp32
# tensor, 2 + 4; the add reads it and the fp32 gradient and writes that, 4 + 4 + 4).
HP_GRAD_ACCUMULATE_BYTES = 18
FP32_BYTES = 4
# DeepSpeed's ZeRO-3 before 0.5.5 (`Flags.legacy_zero3`; deepspeed/runtime/zero/
# partition_parameters.py v0.3.14-v0.5.4): every parameter's all-gather builds a list of one
# narrowed view per rank and torch's list all_gather then copies each rank's piece out of its
# flat buffer (one copy launch per rank); every gradient's reduce-scatter narrows one view per
# rank and torch copies them into a flat buffer. Host seconds per rank per such collective
# (a Python narrow plus a copy launch, 2-30 us): the slope of the SC'21 ZeRO-3 runs' step
# time in dp (../shared/calibration; benchmarks/validate_estimate.py fit_legacy_zero3).
LEGACY_ZERO3_PER_RANK_S = 10e-6
# HBM bytes moved per byte gathered: the zeroed flat buffer written (torch.zeros), the copy
# out of torch's flattened output read and written.
LEGACY_GATHER_HBM_PASSES = 3
# ... per byte reduce-scattered: the per-rank inputs copied into torch's flat buffer.
LEGACY_REDUCE_HBM_PASSES = 2


class DataParallel(NamedTuple):
    """DP/FSDP communication per step (`comm`: a `CommTerm`), the compute window it may hide
    in (`window_s`), the collectives' buffer bytes per GPU (`buffer_bytes`: what a NIC must
    carry in that window) and the optimizer step's seconds (`optimizer_s`)."""

    comm: CommTerm
    window_s: Array
    buffer_bytes: Array
    optimizer_s: Array


@by_identity()
def _param_counts(m: ModelSpec) -> ParamCounts:
    return param_counts(m)


def stage_param_split(s: Stage, counts: ParamCounts | None = None) -> tuple[Array, Array]:
    """(dense, expert) parameters one GPU of the stage holds: dense ones split over tp*pp,
    experts over ep*etp*pp (`counts`: the model's `param_counts`, where the caller has them)."""
    f = s.f
    counts = _param_counts(s.model) if counts is None else counts
    experts = counts.experts / (f["ep"] * f["etp"] * f["pp"])
    return (counts.total - counts.experts) / (f["tp"] * f["pp"]), experts


def stage_params(s: Stage) -> Array:
    """Parameters one GPU of the stage holds (`stage_param_split`, summed)."""
    dense, experts = stage_param_split(s)
    return dense + experts


def _dp_groups(s: Stage) -> list[tuple[str, Array]]:
    """(group kind, parameters per GPU) whose gradients each DP group reduces: the dense
    weights over dp*cp, the expert weights over the expert-data-parallel group (one rank of
    each ep group: across nodes when an ep group fills them)."""
    counts = _param_counts(s.model)
    dense, experts = stage_param_split(s, counts)
    if not counts.experts:
        return [("dpcp", dense)]
    return [("dpcp", dense), ("edp", experts)]


def dp_comm(
    s: Stage,
    comm: C.CommFn,
    compute_s: Array,
    overlap_grad_reduce: bool = True,
    overlap_param_gather: bool = True,
    runner: Framework = GENERIC,
    fp8_param_gather: bool = True,
    align_param_gather: bool = False,
    legacy_zero3: bool = False,
) -> DataParallel:
    """DP/ZeRO/FSDP communication and optimizer step of the stage `s`, per step; `compute_s`:
    one micro-batch's compute, the window the collectives hide in; `runner`: the framework
    table's row of how it runs (module docstring); `fp8_param_gather`: Megatron's
    --fp8-param-gather (parameters gathered in an FP8/MXFP8 layout's format);
    `align_param_gather`: Megatron's --align-param-gather (module docstring); `legacy_zero3`:
    ZeRO-3 as DeepSpeed ran it before 0.5.5 (`deepspeed_zero3`)."""
    f, micro = s.f, s.micro
    groups = _dp_groups(s)
    params = groups[0][1] if len(groups) == 1 else groups[0][1] + groups[1][1]
    grad_bytes = main_grad_bytes(f["grad_reduce_bf16"])
    weight_bytes = gather_bytes(f["precision"], fp8_param_gather)
    grads, weights = params * grad_bytes, params * weight_bytes
    shard = (f["zero"] >= 1) | f["distributed_optimizer"]
    fsdp = f["zero"] >= 3
    bwd_window = compute_s * (1 - FORWARD_SHARE) * DP_OVERLAP_EFFICIENCY * overlap_grad_reduce
    overlap_param_gather = overlap_param_gather and runner.param_gather_overlap
    fwd_window = compute_s * FORWARD_SHARE * DP_OVERLAP_EFFICIENCY * overlap_param_gather
    ranks = f["dp"] * f["cp"]
    buckets = [1.0] * len(groups)
    if runner.dp_buckets:  # gradients and weights move bucket by bucket (Megatron)
        bucket = maximum(MEGATRON_BUCKET_PARAMS, MEGATRON_BUCKET_PARAMS_PER_RANK * ranks)
        buckets = [-(-n // bucket) for _, n in groups]
    # The sharded optimizer's gradient reduction: its op, buckets and how many per step.
    rs_op, rs_buckets, reductions = "reduce_scatter", buckets, 1
    if runner.sharded_grad_bucket:  # DeepSpeed ZeRO-1/2 (`Framework.sharded_grad_bucket`)
        rs_buckets = [-(-n // runner.sharded_grad_bucket) for _, n in groups]
        rs_op = "all_reduce" if runner.sharded_grad_all_reduce else rs_op
        if runner.zero2_reduces_every_micro:  # ZeRO-2 reduces every micro-step
            reductions = 1 + (micro - 1) * (f["zero"] == 2)
    if shard is True:  # one layout with a sharded optimizer: no all-reduce (as `select` gives)
        rs = _over(comm, rs_op, groups, rs_buckets, grad_bytes)
        ag = _over(comm, "all_gather", groups, buckets, weight_bytes)
        ar = 0.0
    else:
        rs = select(shard, lambda: _over(comm, rs_op, groups, rs_buckets, grad_bytes), _zero)
        ag = select(shard, lambda: _over(comm, "all_gather", groups, buckets, weight_bytes), _zero)
        ar = select(shard, _zero, lambda: _over(comm, "all_reduce", groups, buckets, grad_bytes))
    buckets = buckets[0] if len(buckets) == 1 else buckets[0] + buckets[1]
    # In buckets, the last gradient bucket (backward ends with it) and the first weight
    # bucket (forward starts with it) cannot hide.
    tail = (buckets > 1) / buckets
    rs_tail = tail
    if runner.sharded_grad_bucket:  # the last bucket, flushed as backward ends, even if alone
        rs_tail = 1 / (rs_buckets[0] if len(rs_buckets) == 1 else rs_buckets[0] + rs_buckets[1])
    # Interleaved, each virtual stage's first weight bucket waits as its chunk's forward
    # begins, unless --align-param-gather gathers them all at the start of the step.
    first_buckets = 1 + runner.dp_buckets * (not align_param_gather) * (f["vpp"] - 1)
    whole, unsharded = 1 - fsdp, 1 - shard  # weights whole on each rank; states unsharded
    fsdp_micro = fsdp * micro  # (FSDP gathers and reduces every micro-batch)
    # (each reduction hides behind its own micro-batch's backward, keeping its tail)
    once = shard * (
        maximum(pos(ag - fwd_window), minimum(ag * tail * first_buckets, ag))
        + reductions * maximum(pos(rs - bwd_window), rs * rs_tail)
    ) + unsharded * maximum(pos(ar - bwd_window), ar * tail)
    per_micro = micro * pos(2 * ag + rs - compute_s * DP_OVERLAP_EFFICIENCY)
    exposed = fsdp * per_micro + whole * once
    traffic = fsdp_micro * (2 * ag + rs) + whole * (shard * (reductions * rs + ag) + unsharded * ar)
    window = fsdp_micro * compute_s * DP_OVERLAP_EFFICIENCY + whole * (
        reductions * bwd_window + shard * fwd_window
    )
    # (an all-reduce sends its buffer twice: reduce-scatter, then all-gather phase)
    reduced = reductions * grads * (2 if rs_op == "all_reduce" else 1)
    fsdp_bytes = fsdp_micro * (2 * weights + grads)
    sharded_bytes = shard * (reduced + weights)
    sent = (ranks - 1) / ranks * (fsdp_bytes + whole * (sharded_bytes + unsharded * 2 * grads))
    buffers = fsdp_bytes + whole * (shard * (reductions * grads + weights) + unsharded * grads)
    group = "dpcp"
    if runner.sharded_dp is not None:
        per_block = SHARDED_PER_BLOCK[runner.sharded_dp]
        if legacy_zero3:
            per_block = partial(deepspeed_zero3, legacy=True)
        sharded = per_block(s, comm, compute_s, params)
        group = sharded.group
        keep = 1 - sharded.applies
        exposed = keep * exposed + sharded.applies * sharded.exposed_s
        traffic = keep * traffic + sharded.applies * sharded.total_s
        sent = keep * sent + sharded.applies * (ranks - 1) / ranks * sharded.bytes
        buffers = keep * buffers + sharded.applies * sharded.bytes
        window = keep * window + sharded.applies * micro * compute_s * DP_OVERLAP_EFFICIENCY
    accumulate = 0.0
    if runner.pipeline_fp32_grads:
        piped = f["pp"] > 1
        own = _pipeline_fp32_grads(s, comm, groups, params)
        keep = 1 - piped
        exposed = keep * exposed + piped * own.exposed_s
        traffic = keep * traffic + piped * own.total_s
        # The all-reduce sends twice its buffer (reduce-scatter, then all-gather phase).
        sent = keep * sent + piped * (ranks - 1) / ranks * (own.bytes + params * FP32_BYTES)
        buffers = keep * buffers + piped * own.bytes
        window = keep * window
        shard = shard | piped  # the BF16 optimizer shards its states (its own ZeRO-1)
        accumulate = piped * micro * params * HP_GRAD_ACCUMULATE_BYTES / hbm_bytes_per_s(s.gpu)
    if "dp_shard" in f:  # HSDP: optimizer states sharded over one replica's ranks
        ranks = f["dp_shard"] * f["cp"]
    opt_params = params / (1 + shard * (ranks - 1))
    optimizer = opt_params * OPTIMIZER_BYTES_PER_PARAM / hbm_bytes_per_s(s.gpu) + accumulate
    comm_term = record(CommTerm, (exposed, traffic, sent, group))
    return record(DataParallel, (comm_term, window, buffers, optimizer))


def _pipeline_fp32_grads(
    s: Stage, comm: C.CommFn, groups: list[tuple[str, Array]], params: Array
) -> Sharded:
    """DP of a framework whose pipeline engine reduces fp32 gradients
    (`Framework.pipeline_fp32_grads`), per step: their all-reduce after the last micro-batch
    and the 16-bit weights' all-gather after the step, both exposed; `bytes`: their buffers."""
    buckets = [-(-n // DEEPSPEED_PIPE_ALLREDUCE_BUCKET) for _, n in groups]
    ar = _over(comm, "all_reduce", groups, buckets, FP32_BYTES)
    ag = _over(comm, "all_gather", groups, [1.0] * len(groups), BF16_BYTES)
    return Sharded(ar + ag, ar + ag, params * (FP32_BYTES + BF16_BYTES), 1.0, "dpcp")


def _zero() -> float:
    return 0.0


def _over(
    comm: C.CommFn, op: str, groups: list[tuple[str, Array]], buckets: list, per_param: float
) -> Array:
    """Seconds of `op` on each DP group's parameters (`per_param` bytes each), bucket by
    bucket."""
    total = 0.0
    for i, (kind, n) in enumerate(groups):  # (zip's strict= costs a keyword parse per call)
        b = buckets[i]
        total = total + b * comm(kind, op, n * per_param / b)
    return total


class Sharded(NamedTuple):
    """A framework's own sharded data parallelism: exposed and total seconds per step, the
    bytes its collectives move per GPU (buffer sizes), where it applies (0/1 per layout: the
    zero stages it runs this way) and the group kind it mostly runs on."""

    exposed_s: Array
    total_s: Array
    bytes: Array
    applies: Array
    group: str


def _prefetched(first: Array, per_block: Array, window: Array, blocks: Array) -> Array:
    """Exposed seconds of `blocks` collectives of `per_block` each, each prefetched behind
    one block of `window` compute: the first cannot hide."""
    return first + (blocks - 1) * pos(per_block - window)


def fsdp2(s: Stage, comm: C.CommFn, compute_s: Array, params: Array) -> Sharded:
    """torchtitan FSDP2 (zero 2: weights kept after forward; zero 3: resharded), per step.
    HSDP (`dp_shard` in the fields): gathers and reduce-scatters within the shard group, then
    each block's gradient shard all-reduced over the replicas."""
    f, blocks, micro = s.f, s.layers, s.micro
    block = params / blocks
    group = "dpshard" if "dp_shard" in f else "dpcp"
    gathered = gather_bytes(f["precision"], FLOAT8_FSDP[f["precision"]])  # float8 all-gather
    ag = comm(group, "all_gather", block * gathered)
    rs = comm(group, "reduce_scatter", block * FSDP2_REDUCE_BYTES)
    if group == "dpshard":
        shard_ranks = f["dp_shard"] * f["cp"]
        rs = rs + comm("dprep", "all_reduce", block * FSDP2_REDUCE_BYTES / shard_ranks)
    reshard = f["zero"] >= 3
    fwd = compute_s * FORWARD_SHARE / blocks * DP_OVERLAP_EFFICIENCY
    bwd = compute_s * (1 - FORWARD_SHARE) / blocks * DP_OVERLAP_EFFICIENCY
    # Behind each block's backward: the next block's gather (resharded) and the previous
    # block's gradient reduce-scatter (when gradients sync).
    gather_fwd = _prefetched(ag, ag, fwd, blocks)
    bwd_sync = _prefetched(reshard * ag, reshard * ag + rs, bwd, blocks) + rs
    gather_bwd = _prefetched(ag, ag, bwd, blocks)
    piped = f["pp"] > 1
    unpiped = 1 - piped
    # Without PP every micro-batch gathers (forward, and backward when resharded) and
    # reduces. With PP (torch.distributed.pipelining, torch 2.13): every backward keeps the
    # weights gathered and its gradients unreduced (stage.py backward_maybe_with_nosync:
    # set_reshard_after_backward(False), set_requires_gradient_sync(False)); a forward after a
    # backward finds them gathered, and resharded (zero 3) after itself, so a backward after a
    # forward gathers again. Per virtual stage that is m + 1 gathers whatever the order: the
    # warmup forwards and the first steady one (min(pp, m) at the first stage), and every
    # backward that follows a forward; zero 2 gathers once. The gradients are reduced after
    # the last backward (perform_reduce_grad, REDUCE_GRAD): the last virtual stage's reduce
    # has no compute left to hide behind.
    warmup = minimum(f["pp"], micro)
    fwd_gathers = unpiped * micro + piped * (reshard * warmup + (1 - reshard))
    bwd_gathers = reshard * (unpiped * micro + piped * (micro + 1 - warmup))
    reduces = unpiped * micro + piped
    exposed = (
        fwd_gathers * gather_fwd
        + unpiped * micro * bwd_sync
        + piped * (bwd_gathers * gather_bwd + blocks / f["vpp"] * rs)
    )
    gathers = fwd_gathers + bwd_gathers
    total = blocks * (gathers * ag + reduces * rs)
    moved = params * (gathers * gathered + reduces * FSDP2_REDUCE_BYTES)
    return Sharded(exposed, total, moved, f["zero"] >= 2, group)


def layer_modules(m: ModelSpec) -> list[tuple[float, float]]:
    """(modules per layer, parameters each) of one average layer: every weight matrix and norm
    DeepSpeed ZeRO-3 fetches as one collective (MoE layers weighted by their share)."""
    h, moe_share = m.hidden, m.moe_layers / m.layers
    dense = [
        (1.0, h * m.q_dim),
        (2.0, h * m.kv_dim),
        (1.0, m.q_dim * h),
        (float(NORMS_PER_LAYER), float(norm_params(m))),
    ]
    mlp = [(float(m.matmuls_per_mlp), h * m.ffn)]
    if m.moe is None:
        return dense + mlp
    moe = m.moe
    experts = [
        (moe.experts * m.matmuls_per_mlp * moe_share, h * moe.expert_ffn_hidden),
        (moe_share, h * moe.experts),
        (moe.shared_experts * m.matmuls_per_mlp * moe_share, h * moe.shared_ffn),
    ]
    return dense + [(count * (1 - moe_share), size) for count, size in mlp] + experts


def deepspeed_zero3(
    s: Stage, comm: C.CommFn, compute_s: Array, params: Array, legacy: bool = False
) -> Sharded:
    """DeepSpeed ZeRO-3, per step: every micro-batch gathers each module's parameters before
    its forward, again before the recompute forward under full recompute (the module hooks
    fire again and the forward released them: deepspeed/runtime/zero/
    partitioned_param_coordinator.py) and again before its backward; modules under
    ``stage3_param_persistence_threshold`` (1e5 elements: the norms) stay whole. Each gather
    is prefetched (``stage3_prefetch_bucket_size`` 5e7 elements, and at least the next
    module), so a layer's gathers hide behind the previous layer's compute of that pass, the
    first one exposed; a module of ``stage3_max_live_parameters`` (1e9 elements) or more per
    GPU stops the prefetch, and the module after it waits for its gather (`_unprefetched`).
    Gradients are reduce-scattered every micro-step in ``reduce_bucket_size`` (5e8
    elements) buckets; the last, filled as backward ends, is exposed. None of it shrinks with
    dp: each GPU receives the whole model's weights per pass.

    `legacy` (releases before 0.5.5): nothing overlaps (a device synchronisation before every
    gather and after every module's fetch, which also waits for the reduction stream); each
    gradient is reduce-scattered on its own; every gather and reduce-scatter pays
    `LEGACY_ZERO3_PER_RANK_S` per rank and its buffers' extra HBM passes. That host time
    grows with dp while the bytes do not."""
    f, blocks, micro = s.f, s.layers, s.micro
    modules = _module_gathers(s, comm)
    ag = sum([count * seconds for count, _, seconds in modules])  # each its own collective
    grads = params * main_grad_bytes(f["grad_reduce_bf16"])
    buckets = -(-params // DEEPSPEED_REDUCE_BUCKET)
    rs = buckets * comm("dpcp", "reduce_scatter", grads / buckets)
    full = s.passes - 2  # 1 under full recompute: a second forward, gathering again
    units = 3 + full  # forward 1, recompute forward, backward 2
    kept = _kept_for_backward(s, modules)
    ag_back = ag - kept.seconds
    fwd_waits, again_waits, bwd_waits = _unprefetched(s, modules, kept)
    fwd = compute_s / units / blocks * DP_OVERLAP_EFFICIENCY
    bwd = 2 * compute_s / units / blocks * DP_OVERLAP_EFFICIENCY
    # Per pass: the first layer's gathers wait, then each layer's prefetched ones hide behind
    # the previous layer's compute, those that cannot be prefetched wait.
    fwd_pass = ag + (blocks - 1) * (pos(ag - fwd_waits - fwd) + fwd_waits)
    again_pass = ag + (blocks - 1) * (pos(ag - again_waits - fwd) + again_waits)
    bwd_pass = ag_back + (blocks - 1) * (pos(ag_back - bwd_waits + rs / blocks - bwd) + bwd_waits)
    per_micro = (
        fwd_pass + full * again_pass + bwd_pass + rs / buckets  # the last bucket: as backward ends
    )
    gathers = s.passes  # forward, recompute forward, backward
    total = micro * ((gathers * ag - kept.seconds) * blocks + rs)
    gathered = _gathered_share(s.model) * params * BF16_BYTES
    moved = micro * (gathers * gathered - blocks * kept.params * BF16_BYTES + grads)
    if legacy:
        total = micro * _legacy_zero3_s(s, comm, ag, gathered, grads, kept)
        per_micro = total / micro
    return Sharded(micro * per_micro, total, moved, f["zero"] >= 3, "dpcp")


class KeptModules(NamedTuple):
    """What one layer's backward finds still gathered from its recompute forward: seconds of
    the gathers it skips, their count and their parameters per GPU, and the count of each
    `_module_gathers` entry (`per_entry`, in its order)."""

    seconds: Array
    count: Array
    params: Array
    per_entry: tuple = ()


def _unprefetched(
    s: Stage, modules: list[tuple[float, float, Array]], kept: KeptModules
) -> tuple[Array, Array, Array]:
    """Seconds of one layer's gathers that DeepSpeed cannot prefetch, in forward, in the
    recompute forward (full recompute) and in backward (`modules`: `_module_gathers`;
    `kept`: what the backward skips). After fetching a module the coordinator prefetches the
    next ones in the trace only while fewer than ``stage3_max_live_parameters`` elements are
    gathered (partitioned_param_coordinator.py fetch_sub_module: max_params_to_prefetch =
    min(max live - available, prefetch bucket), then at least one parameter, 0.19.8): a
    module of 1e9 elements or more per GPU (a 530B model's MLP matrices) leaves the one after
    it to be fetched when it is needed. Modules under the persistence threshold (norms) stay
    whole and change nothing. Backward runs the trace in reverse; under full recompute a
    layer's backward follows its own recompute forward, whose last module is still
    gathered."""
    tp, full = s.f["tp"], s.passes - 2
    small = largest_module(s.model) / tp < DEEPSPEED_MAX_LIVE_PARAMETERS
    if small is True:  # one layout whose every module can be prefetched behind
        return 0.0, 0.0, 0.0
    gathered = [
        (i, n, gather_s, (size / tp) >= DEEPSPEED_MAX_LIVE_PARAMETERS)
        for i, (n, size, gather_s) in enumerate(modules)
        if size >= DEEPSPEED_PERSISTENCE_THRESHOLD and n > 0
    ]
    if not gathered:
        return 0.0, 0.0, 0.0
    fwd = again = bwd = 0.0
    last = len(gathered) - 1
    for j, (i, n, gather_s, big) in enumerate(gathered):
        within = big * max(n - 1, 0.0)  # each module of the entry after its like
        # Forward: after the previous entry (the first: after the previous layer's last; in
        # the recompute forward, after the backward of the layer above, which ends with its
        # first module).
        before = gathered[j - 1][3]
        first = min(n, 1.0)  # (a MoE model's dense MLP: in a share of its layers)
        fwd = fwd + gather_s * (within + first * before)
        again = again + gather_s * (within + first * (before if j else gathered[0][3]))
        after = gathered[j + 1][3] if j < last else full * big + (1 - full) * gathered[0][3]
        skipped = kept.per_entry[i] / n if kept.per_entry else 0.0
        bwd = bwd + gather_s * (within + first * after) * (1 - skipped)
    return fwd, again, bwd


def _module_gathers(s: Stage, comm: C.CommFn) -> list[tuple[float, float, Array]]:
    """(modules per layer, parameters each, seconds of one's all-gather) of `layer_modules`, in
    forward order; 0 s for the modules under ``stage3_param_persistence_threshold``, which
    stay whole. DeepSpeed gathers in 16 bits (no FP8)."""
    tp = s.f["tp"]
    return [
        (
            count,
            size,
            comm("dpcp", "all_gather", size / tp * BF16_BYTES)
            if size >= DEEPSPEED_PERSISTENCE_THRESHOLD
            else 0.0,
        )
        for count, size in layer_modules(s.model)
    ]


def _kept_for_backward(s: Stage, modules: list[tuple[float, float, Array]]) -> KeptModules:
    """Under full recompute each layer's forward runs again just before its backward, so the
    layer's last modules are used again within ``stage3_max_reuse_distance`` parameters
    (`DEEPSPEED_MAX_REUSE_DISTANCE`): DeepSpeed keeps them gathered and the backward does not
    gather them again. The distance of a module is what the trace fetches in between: every
    later module of the layer, forward and then backward (twice its parameters). `modules`:
    the layer's `_module_gathers`. Dense layers only (the experts' order in a MoE layer's
    trace is not modelled: nothing is kept)."""
    tp, full = s.f["tp"], s.passes - 2
    seconds = count = params = 0.0
    if s.model.moe is not None or (isinstance(full, int) and not full):
        return KeptModules(seconds, count, params)
    later = 0.0  # parameters per GPU of the layer's later modules
    per_entry: list[Array] = []
    for n, size, gather_s in reversed(modules):  # `_module_gathers`
        entry = 0.0
        for _ in range(int(n)):
            keep = full * (size >= DEEPSPEED_PERSISTENCE_THRESHOLD)
            keep = keep * (2 * later < DEEPSPEED_MAX_REUSE_DISTANCE)
            seconds = seconds + keep * gather_s
            count, params = count + keep, params + keep * size / tp
            entry = entry + keep
            later = later + size / tp
        per_entry.append(entry)
    return KeptModules(seconds, count, params, tuple(reversed(per_entry)))


def _legacy_zero3_s(
    s: Stage, comm: C.CommFn, ag: Array, gathered: Array, grads: Array, kept: KeptModules
) -> Array:
    """Seconds of one micro-batch's ZeRO-3 collectives as DeepSpeed ran them before 0.5.5, all
    on the critical path: `ag` (one layer's gathers), `gathered` and `grads` (bytes a pass
    gathers and backward reduces on one GPU), `kept` (what the backward does not gather
    again)."""
    f, tp = s.f, s.f["tp"]
    ranks = f["dp"] * f["cp"]
    modules = layer_modules(s.model)
    gathers = sum(c for c, n in modules if n >= DEEPSPEED_PERSISTENCE_THRESHOLD)
    grad_bytes = main_grad_bytes(f["grad_reduce_bf16"])
    rs = sum([c * comm("dpcp", "reduce_scatter", n / tp * grad_bytes) for c, n in modules])
    # What the layers leave (embeddings, final norm, output layer): one more reduce-scatter.
    rest = pos(grads / grad_bytes - s.layers * sum(c * n for c, n in modules) / tp)
    per_rank = ranks * LEGACY_ZERO3_PER_RANK_S
    hbm = hbm_bytes_per_s(s.gpu)
    skipped = s.layers * (kept.seconds + kept.count * per_rank)
    skipped = skipped + s.layers * kept.params * BF16_BYTES * LEGACY_GATHER_HBM_PASSES / hbm
    passes = (
        s.passes * (s.layers * (ag + gathers * per_rank))
        + s.passes * gathered * (LEGACY_GATHER_HBM_PASSES / hbm)
        - skipped
    )
    reduces = s.layers * (rs + sum(c for c, _ in modules) * per_rank)
    rest_rs = (rest > 0) * (comm("dpcp", "reduce_scatter", rest * grad_bytes) + per_rank)
    return passes + reduces + rest_rs + grads * LEGACY_REDUCE_HBM_PASSES / hbm


@by_identity()
def largest_module(m: ModelSpec) -> float:
    """Parameters of the largest module ZeRO-3 gathers as one (before TP)."""
    return max(size for _, size in layer_modules(m))


def deepspeed_live_bytes(m: ModelSpec, tp: Array, grad_bytes: Array) -> Array:
    """Bytes of DeepSpeed ZeRO-3's working buffers on a GPU: the gathered parameters it lets
    live (``stage3_max_live_parameters``, at least the largest module, 16-bit) and the
    gradient bucket it reduces from (``reduce_bucket_size`` elements)."""
    live = maximum(DEEPSPEED_MAX_LIVE_PARAMETERS, largest_module(m) / tp)
    return live * BF16_BYTES + DEEPSPEED_REDUCE_BUCKET * grad_bytes


@by_identity()
def _gathered_share(m: ModelSpec) -> float:
    """Share of a layer's parameters ZeRO-3 gathers (those at or over the persistence
    threshold; a module's size before TP, which splits only matrices)."""
    modules = layer_modules(m)
    gathered = sum(c * n for c, n in modules if n >= DEEPSPEED_PERSISTENCE_THRESHOLD)
    return gathered / sum(c * n for c, n in modules)


SHARDED_PER_BLOCK = {SHARDED_FSDP2: fsdp2, SHARDED_ZERO3: deepspeed_zero3}
"""The per-block sharded data parallelism of each `Framework.sharded_dp`."""
