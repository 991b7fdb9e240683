"""The search space: every layout of a model on G GPUs for a fixed global batch and sequence.

Built as numpy arrays (one entry per candidate) from the cartesian product of per-degree
options, then pruned by the same divisibility rules `Layout.validate_for` states.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.workload.layout import Layout
from tierwise.workload.precision import (
    DTYPES,
    FP8_RECIPES,
    precision_code,
    supported_dtypes,
)
from tierwise.workload.recompute import DEFAULT_MASK, light_modules, modules_mask
from tierwise.workload.spec import ModelSpec

POWERS_OF_TWO = tuple(2**i for i in range(11))
MBS_OPTIONS = (1, 2, 3, 4, 6, 8, 12, 16)
VPP_OPTIONS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16)
SPLITS = (0, 1)  # pipeline split: even, or first and last stage one layer short
RECOMPUTE = {"none": 0, "selective": 1, "full": 2}
# (ZeRO stage, Megatron distributed optimizer): plain data parallelism (replicated optimizer),
# Megatron's distributed optimizer, ZeRO-1/2 and FSDP.
SHARDING = {
    "ddp": (0, False),
    "distopt": (0, True),
    "zero1": (1, False),
    "zero2": (2, False),
    "fsdp": (3, False),
}
# What each framework can run: the sharding schemes searched by default, whether it has
# context parallelism, an interleaved (virtual) pipeline, a config that can shorten the first
# and last pipeline stage, FP8, the highest ZeRO stage it runs with pipelining (pp > 1), and
# whether it reduces gradients in 16 bits: (default, other allowed). Megatron reduces fp32
# main grads unless --grad-reduce-in-bf16; torchtitan's FSDP2 reduces in float32
# (mixed_precision_reduce); DeepSpeed in the training dtype unless communication_data_type.
# Plain DDP runs everywhere but is only searched when fixed (`--fix sharding=ddp`): it costs
# the same time as a sharded optimizer and more memory.
FRAMEWORKS = {
    "megatron": {
        "sharding": ("distopt",),
        "cp": True,
        "vpp": True,
        "short_ends": True,
        "fp8": True,
        "pp_zero": 3,
        "grad_reduce_bf16": (False, True),
    },
    # torchtitan has no ZeRO-1 nor Megatron's distributed optimizer: FSDP2, resharding the
    # parameters after forward (ZeRO-3) or not (ZeRO-2), or DDP.
    "torchtitan": {
        "sharding": ("fsdp", "zero2"),
        "cp": True,
        "vpp": True,
        "short_ends": True,
        "fp8": True,
        "pp_zero": 3,
        "grad_reduce_bf16": (False,),
    },
    # DeepSpeed's JSON config cannot state a per-stage layer split (its PipelineModule does)
    # nor FP8; its pipeline engine runs plain 1F1B and rejects ZeRO stages 2 and 3.
    "deepspeed": {
        "sharding": ("zero1", "zero2", "fsdp"),
        "cp": False,
        "vpp": False,
        "short_ends": False,
        "fp8": False,
        "pp_zero": 1,
        "grad_reduce_bf16": (True, False),
    },
}
# `--framework any`: the union of what the frameworks run. Each sharding scheme is searched in
# every framework that runs it differently (torchtitan's FSDP2 reduces in float32, DeepSpeed's
# ZeRO in 16 bits); torchtitan's plain DDP is Megatron's. DDP only when fixed, as above.
ANY_SCHEMES = {
    "distopt": ("megatron",),
    "zero1": ("deepspeed",),
    "zero2": ("torchtitan", "deepspeed"),
    "fsdp": ("torchtitan", "deepspeed"),
    "ddp": ("megatron", "deepspeed"),
}
FRAMEWORK_NAMES = ("any", *FRAMEWORKS)
FIX_HELP = (
    "Pin KEY=VALUE pairs, comma-separated: tp, cp, ep, pp, vpp, dp, mbs (integers); "
    f"recompute={'|'.join(RECOMPUTE)}; zero=0|1|2|3 (1 includes Megatron's distributed "
    f"optimizer); sharding={'|'.join(SHARDING)}; dtype={'|'.join(DTYPES)}; "
    f"fp8_recipe={'|'.join(FP8_RECIPES)}; sp, grad_reduce_bf16=true|false. "
    "E.g. tp=8,pp=4."
)
"""The `--fix` help of plan and sweep: the keys of `FIXABLE` and their values."""
FIXABLE = (
    "tp",
    "cp",
    "ep",
    "pp",
    "vpp",
    "dp",
    "mbs",
    "recompute",
    "zero",
    "dtype",
    "fp8_recipe",
    "sp",
    "grad_reduce_bf16",
    "sharding",
)


@dataclass(frozen=True)
class Space:
    """Candidate layouts as arrays, and how many the product had before pruning."""

    arrays: dict[str, np.ndarray]
    product: int

    @property
    def size(self) -> int:
        """Candidates left after pruning."""
        return len(self.arrays["tp"])

    @classmethod
    def join(cls, spaces: Sequence[Space]) -> Space:
        """One space holding the candidates of several (frameworks, job sizes)."""
        kept = [s for s in spaces if s.size] or list(spaces[-1:])
        arrays = {k: np.concatenate([s.arrays[k] for s in kept]) for k in kept[0].arrays}
        return cls(arrays, sum(s.product for s in spaces))


def parse_fix(text: str | None) -> dict[str, str]:
    """`tp=8,pp=4` -> {"tp": "8", "pp": "4"}; unknown keys are an error."""
    if not text:
        return {}
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in FIXABLE:
            raise SpecError(f"--fix: {item!r} is not KEY=VALUE with KEY in {', '.join(FIXABLE)}")
        out[key] = value.strip()
    return out


def _flag(fix: Mapping[str, str], key: str, default: bool) -> bool:
    if key not in fix:
        return default
    value = fix[key].lower()
    if value not in {"true", "false", "1", "0", "yes", "no"}:
        raise SpecError(f"--fix: {key}={fix[key]!r} is not true/false")
    return value in {"true", "1", "yes"}


def _ints(fix: Mapping[str, str], key: str, default: tuple[int, ...]) -> tuple[int, ...]:
    if key not in fix:
        return default
    lowest, highest = (0, 3) if key == "zero" else (1, None)
    try:
        value = int(fix[key])
    except ValueError:
        raise SpecError(f"--fix: {key}={fix[key]!r} is not an integer") from None
    if value < lowest or (highest is not None and value > highest):
        span = f"{lowest}-{highest}" if highest is not None else f">= {lowest}"
        raise SpecError(f"--fix: {key}={value}; allowed: an integer {span}")
    return (value,)


def _product(*axes: Sequence[int] | np.ndarray) -> list[np.ndarray]:
    """Columns of the cartesian product of `axes`, in itertools.product order."""
    grids = np.meshgrid(*[np.asarray(a, dtype=np.int64) for a in axes], indexing="ij")
    return [g.ravel() for g in grids]


def build_space(
    model: ModelSpec,
    cluster: ClusterSpec,
    gpus: int,
    gbs: int,
    seq: int,
    fix: Mapping[str, str] | None = None,
    framework: str = "any",
    shardings: tuple[str, ...] | None = None,
) -> Space:
    """All valid candidate layouts (arrays in the `*_batch` functions' keyword form) that
    `framework` can run (`shardings`: the schemes searched instead of its default ones)."""
    fix = dict(fix or {})
    if framework == "any":
        return _any_space(model, cluster, gpus, gbs, seq, fix)
    if framework not in FRAMEWORKS:
        raise SpecError(f"--framework: {framework!r}; allowed: {', '.join(FRAMEWORK_NAMES)}")
    caps = FRAMEWORKS[framework]
    for key, cap in (("cp", "context parallelism"), ("vpp", "interleaved pipeline")):
        if caps[key]:
            continue
        if _ints(fix, key, (1,)) != (1,):
            raise SpecError(f"--fix: {key}={fix[key]}; {framework} has no {cap}: allowed: 1")
        fix[key] = "1"
    tp_opts = _ints(fix, "tp", tuple(t for t in POWERS_OF_TWO if t <= min(gpus, model.heads)))
    cp_opts = _ints(fix, "cp", tuple(c for c in POWERS_OF_TWO[:6] if c <= gpus))
    pp_opts = _ints(fix, "pp", tuple(p for p in range(1, model.layers + 1) if gpus % p == 0))
    vpp_opts = _ints(fix, "vpp", VPP_OPTIONS)
    mbs_opts = _ints(fix, "mbs", MBS_OPTIONS)
    experts = model.moe.experts if model.moe else 1
    ep_opts = _ints(fix, "ep", tuple(e for e in POWERS_OF_TWO if e <= experts and experts % e == 0))
    rc_names = (fix["recompute"],) if "recompute" in fix else tuple(RECOMPUTE)
    for name in rc_names:
        if name not in RECOMPUTE:
            raise SpecError(f"--fix: recompute={name!r}; allowed: {', '.join(RECOMPUTE)}")
    # A fixed ZeRO stage picks among every scheme the framework runs, plain DDP included.
    shard_names = shardings or (("ddp", *caps["sharding"]) if "zero" in fix else caps["sharding"])
    if "sharding" in fix:
        allowed = ("ddp", *caps["sharding"])
        if fix["sharding"] not in allowed:
            raise SpecError(
                f"--fix: sharding={fix['sharding']!r} for {framework}; "
                f"allowed: {', '.join(allowed)}"
            )
        shard_names = (fix["sharding"],)
    shard_opts = tuple(SHARDING[name] for name in shard_names)
    if "zero" in fix:
        stage = _ints(fix, "zero", ())[0]
        shard_opts = tuple(s for s in shard_opts if zero_stage(*s) == stage)
        if not shard_opts:
            stages = sorted({f"{zero_stage(*SHARDING[name])} ({name})" for name in shard_names})
            raise SpecError(
                f"--fix: zero={stage} with {'/'.join(shard_names)} ({framework}); "
                f"allowed: {', '.join(stages)}"
            )
    # FP8 (the default recipe) is searched where the GPU has FP8 tensor cores and the framework
    # runs it; --fix dtype= pins any format the GPU runs (MXFP8, NVFP4: Blackwell).
    gpu = cluster.gpu
    runs_low = caps["fp8"] and bool(gpu.peak_fp8_tflops)
    allowed_dtypes = supported_dtypes(gpu) if caps["fp8"] else ("bf16",)
    dtypes = (fix["dtype"],) if "dtype" in fix else ("bf16", "fp8") if runs_low else ("bf16",)
    if dtypes[0] not in allowed_dtypes:
        raise SpecError(
            f"--fix: dtype={dtypes[0]!r} on {gpu.key}; allowed: {', '.join(allowed_dtypes)}"
            + ("" if caps["fp8"] else f" ({framework} has no FP8)")
        )
    recipe = fix.get("fp8_recipe")
    codes = [precision_code(d, recipe if d == "fp8" else None) for d in dtypes]
    grad16 = _flag(fix, "grad_reduce_bf16", caps["grad_reduce_bf16"][0])
    if grad16 not in caps["grad_reduce_bf16"]:
        raise SpecError(
            f"--fix: grad_reduce_bf16={fix['grad_reduce_bf16']}; {framework} reduces gradients "
            f"in {'16 bits' if caps['grad_reduce_bf16'][0] else 'float32'} only"
        )
    # Degrees (tp, cp, pp) first: most triples do not divide the GPUs or the model's shape.
    tp, cp, pp = _product(tp_opts, cp_opts, pp_opts)
    dp = gpus // (tp * cp * pp)
    kv = model.kv
    ok = (
        (tp * cp * pp * dp == gpus)
        & (model.heads % tp == 0)
        & ((kv % tp == 0) | (tp % kv == 0))
        & (model.ffn % tp == 0)
        & (seq % np.where(cp > 1, 2 * cp, 1) == 0)
        & ((tp == 1) | ((seq // cp) % tp == 0))
        & (pp <= model.layers)
    )
    if "dp" in fix:
        ok &= dp == _ints(fix, "dp", ())[0]
    if model.moe is not None:
        ok &= model.moe.expert_ffn_hidden % tp == 0
    # Megatron also runs selective recompute of its light modules (the norms, the experts'
    # activation, MLA's up-projections), which frees memory at little cost; not with delayed
    # FP8 scaling, which Megatron refuses for them.
    rc_opts = [(RECOMPUTE[n], DEFAULT_MASK) for n in rc_names]
    if framework == "megatron" and "selective" in rc_names:
        light = light_modules(model.moe is not None, model.mla is not None)
        rc_opts.append((RECOMPUTE["selective"], modules_mask(light)))
    rc_codes, rc_masks = np.array(rc_opts).reshape(-1, 2).T
    delayed_fp8 = precision_code("fp8", "delayed")
    rest = (
        vpp_opts,
        mbs_opts,
        ep_opts,
        range(len(rc_opts)),
        range(len(shard_opts)),
        range(len(dtypes)),
        # The ends-short split only where some kept pipeline depth admits it.
        SPLITS
        if caps["short_ends"] and any(p >= 3 and (model.layers + 2) % p == 0 for p in pp[ok])
        else SPLITS[:1],
    )
    degree, vpp, mbs, ep, rc, shard, dtype, ends_short = _product(np.nonzero(ok)[0], *rest)
    tp, cp, pp, dp = tp[degree], cp[degree], pp[degree], dp[degree]
    zero = np.array([s[0] for s in shard_opts])[shard]
    product = len(ok) * math.prod(len(a) for a in rest)
    layers = model.layers
    even = (ends_short == 0) & (layers % (pp * vpp) == 0)
    # Megatron's --decoder-first/last-pipeline-num-layers: the embedding and logits stages
    # one layer short of the rest (how Llama 3 405B splits 126 layers over 16 stages), at a
    # vpp that splits the middle stages evenly into chunks of 2 layers or more (a --fix vpp=
    # takes any that leaves the end stages a layer a chunk); the end stages' chunks then
    # differ by one, which the emitter states as a --pipeline-model-parallel-layout string.
    per_stage = (layers + 2) // np.maximum(pp, 1)
    searched = (per_stage % vpp == 0) & (per_stage >= 2 * vpp)
    fits_chunks = (per_stage - 1 >= vpp) & (searched | ("vpp" in fix))
    short = (ends_short == 1) & (pp >= 3) & fits_chunks & ((layers + 2) % pp == 0)
    ok = (
        (gbs % (mbs * np.maximum(dp, 1)) == 0)
        & (even | short)
        & ((vpp == 1) | (pp > 1))
        & ((cp * dp) % ep == 0)  # etp = tp: experts regroup the cp*dp ranks
        & ((pp == 1) | (zero <= caps["pp_zero"]))
        & ~((rc_masks[rc] != DEFAULT_MASK) & (np.array(codes)[dtype] == delayed_fp8))
    )
    sel = {
        k: v[ok]
        for k, v in dict(
            tp=tp,
            cp=cp,
            pp=pp,
            vpp=vpp,
            mbs=mbs,
            ep=ep,
            rc=rc,
            shard=shard,
            dp=dp,
            dtype=dtype,
            ends_short=ends_short,
        ).items()
    }
    zero = zero[ok]
    distopt = np.array([s[1] for s in shard_opts])[sel["shard"]]
    n = len(sel["tp"])
    end_layers = np.where(
        sel["ends_short"] == 1, (model.layers + 2) // sel["pp"] - 1, model.layers // sel["pp"]
    )
    arrays = {
        "tp": sel["tp"],
        "cp": sel["cp"],
        "ep": sel["ep"],
        "etp": sel["tp"],
        "pp": sel["pp"],
        "vpp": sel["vpp"],
        "dp": sel["dp"],
        "mbs": sel["mbs"],
        "gbs": np.full(n, gbs),
        "seq": np.full(n, seq),
        "sp": (sel["tp"] > 1) & _flag(fix, "sp", True),
        "recompute": rc_codes[sel["rc"]],
        "recompute_modules": rc_masks[sel["rc"]],
        "zero": zero,
        "distributed_optimizer": distopt,
        "grad_reduce_bf16": np.full(n, grad16),
        "precision": np.array(codes)[sel["dtype"]],
        "first_stage_layers": end_layers,
        "last_stage_layers": end_layers,
    }
    return Space(arrays, product)


def _any_space(
    model: ModelSpec,
    cluster: ClusterSpec,
    gpus: int,
    gbs: int,
    seq: int,
    fix: Mapping[str, str],
) -> Space:
    """`--framework any`: every framework's space over the sharding schemes it runs
    (`ANY_SCHEMES`); a fix no framework can run is one error naming each one's reason."""
    searched = tuple(s for s in ANY_SCHEMES if s != "ddp" or "zero" in fix)  # as build_space
    names = (fix["sharding"],) if "sharding" in fix else searched
    if names[0] not in ANY_SCHEMES:
        raise SpecError(f"--fix: sharding={names[0]!r}; allowed: {', '.join(SHARDING)}")
    spaces, errors = [], {}
    for framework in FRAMEWORKS:
        schemes = tuple(n for n in names if framework in ANY_SCHEMES[n])
        if not schemes:
            continue
        try:
            spaces.append(build_space(model, cluster, gpus, gbs, seq, fix, framework, schemes))
        except SpecError as exc:  # a fix this framework cannot run: the others may
            errors[framework] = str(exc).removeprefix("--fix: ")
    if spaces:
        return Space.join(spaces)
    reasons = set(errors.values())
    if len(reasons) == 1:  # the same for every framework (e.g. FP8 on a GPU without it)
        raise SpecError(f"--fix: {reasons.pop()}")
    pins = ",".join(f"{k}={v}" for k, v in fix.items())
    each = "; ".join(f"{name}: {reason}" for name, reason in errors.items())
    raise SpecError(f"--fix {pins}: no framework runs it ({each})")


def zero_stage(zero: int, distributed_optimizer: bool) -> int:
    """The ZeRO stage a sharding matches: Megatron's distributed optimizer shards the optimizer
    states over data parallel ranks as ZeRO-1 does, so `--fix zero=1` selects it."""
    return 1 if distributed_optimizer else zero


def sharding_name(layout: Layout) -> str:
    """The SHARDING scheme of `layout`: "distopt" with the distributed optimizer, whatever the
    zero field says."""
    stage = (0, True) if layout.distributed_optimizer else (layout.zero, False)
    return next(name for name, sharding in SHARDING.items() if sharding == stage)


def frameworks_for(layout: Layout) -> list[str]:
    """The frameworks whose search space holds `layout` (`FRAMEWORKS` capabilities)."""
    scheme = sharding_name(layout)
    return [
        name
        for name, caps in FRAMEWORKS.items()
        if (scheme == "ddp" or scheme in caps["sharding"])
        and (layout.cp == 1 or caps["cp"])
        and (layout.vpp == 1 or caps["vpp"])
        and (layout.dtype == "bf16" or caps["fp8"])
        and (layout.pp_layers is None or caps["short_ends"])
        and (layout.pp == 1 or layout.zero <= caps["pp_zero"])
        and layout.grad_reduce_bf16 in caps["grad_reduce_bf16"]
        and (name == "megatron" or not megatron_only(layout))
    ]


def megatron_only(layout: Layout) -> bool:
    """The layout names Megatron's recompute modules or CPU activation offloading."""
    return layout.recompute_modules is not None or layout.activation_offload_layers > 0
