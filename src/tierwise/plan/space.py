"""The search space: every layout of a model on G GPUs for a fixed global batch and sequence.

Built as numpy arrays (one entry per candidate) from the cartesian product of per-degree
options, then pruned by the same divisibility rules `Layout.validate_for` states.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tierwise.errors import SpecError
from tierwise.frameworks import (
    ANY,
    FRAMEWORK_CHOICES,
    LAUNCHED,
    SHARDING,
    TABLE,
    Framework,
    interleave_runs,
    launched,
)
from tierwise.hardware.cluster import ClusterSpec
from tierwise.workload.pipeline import uneven_split
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
SPLITS = (0, 1)  # pipeline split: even, or uneven (`uneven_split`) where layers % pp != 0
RECOMPUTE = {"none": 0, "selective": 1, "full": 2}
BLOCK_LAYERS = (1, 2)
"""--recompute-num-layers searched with --recompute-method block (layers of each virtual stage
recomputed; the rest keep their activations)."""
FRAMEWORK_NAMES = FRAMEWORK_CHOICES
FIX_HELP = (
    "Pin KEY=VALUE pairs, comma-separated or one --fix each: tp, cp, ep, pp, vpp, dp, mbs "
    "(integers); "
    f"recompute={'|'.join(RECOMPUTE)}; recompute_method=uniform|block (full recompute of "
    "every layer, or of the first 1-2 of each virtual stage); zero=0|1|2|3 (1 includes "
    f"Megatron's distributed optimizer); sharding={'|'.join(SHARDING)}; "
    f"dtype={'|'.join(DTYPES)}|any (default bf16); fp8_recipe={'|'.join(FP8_RECIPES)}; "
    "sp, grad_reduce_bf16=true|false; dp_shard (HSDP: the dp ranks sharding one replica, "
    "dividing dp; torchtitan's data_parallel_shard_degree). E.g. tp=8,pp=4."
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
    "recompute_method",
    "zero",
    "dtype",
    "fp8_recipe",
    "sp",
    "grad_reduce_bf16",
    "sharding",
    "dp_shard",
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


def parse_fix(given: str | Sequence[str] | None) -> dict[str, str]:
    """`tp=8,pp=4` (or `--fix` given once per pair: ["tp=8", "pp=4"]) -> {"tp": "8", "pp":
    "4"}; unknown keys are an error."""
    if not given:
        return {}
    text = given if isinstance(given, str) else ",".join(given)
    out = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise SpecError(f"--fix: {item!r} is not KEY=VALUE; KEY one of {', '.join(FIXABLE)}")
        if key not in FIXABLE:
            raise SpecError(f"--fix: {key!r} (in {item!r}); allowed: {', '.join(FIXABLE)}")
        if key in out and out[key] != value.strip():  # which one was meant is not ours to pick
            raise SpecError(
                f"--fix: {key}={out[key]} and {key}={value.strip()}; allowed: one value per key"
            )
        out[key] = value.strip()
    recipe = out.get("fp8_recipe")
    if recipe is not None and recipe not in FP8_RECIPES:
        raise SpecError(f"--fix: fp8_recipe={recipe!r}; allowed: {', '.join(FP8_RECIPES)}")
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
    framework: str = ANY,
    shardings: tuple[str, ...] | None = None,
    group: int | None = None,
    hsdp: bool = True,
) -> Space:
    """All valid candidate layouts (arrays in the `*_batch` functions' keyword form) that
    `framework` can run (`shardings`: the schemes searched instead of its default ones;
    `group`: --microbatch-group-size-per-virtual-pipeline-stage, `interleave_runs`; `hsdp`:
    HSDP degrees searched where the framework runs it, `hsdp_degrees`)."""
    fix = dict(fix or {})
    fw = launched(framework)
    if fw is None:
        return _any_space(model, cluster, gpus, gbs, seq, fix, group)
    tp_opts, cp_opts, pp_opts, vpp_opts, mbs_opts, ep_opts = _degree_options(model, gpus, fix, fw)
    rc_codes, rc_masks, rc_block = _recompute_options(model, fix, fw)
    shard_opts = _shard_options(fix, fw, shardings)
    sharded = _hsdp_tiers(cluster, fix, fw, shard_opts) if hsdp else None
    codes = _precision_codes(cluster, fix, fw)
    grad16 = _flag(fix, "grad_reduce_bf16", fw.grad_reduce_bf16[0])
    if grad16 not in fw.grad_reduce_bf16:
        raise SpecError(
            f"--fix: grad_reduce_bf16={fix['grad_reduce_bf16']}; {framework} reduces gradients "
            f"in {'16 bits' if fw.grad_reduce_bf16[0] else 'float32'} only"
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
    if "dp_shard" in fix:  # HSDP's shard degree divides dp
        ok &= dp % _ints(fix, "dp_shard", ())[0] == 0
    if model.moe is not None:
        ok &= model.moe.expert_ffn_hidden % tp == 0
    rest = {
        "vpp": vpp_opts,
        "mbs": mbs_opts,
        "ep": ep_opts,
        "rc": range(len(rc_codes)),
        "shard": range(len(shard_opts)),
        "dtype": range(len(codes)),
        # The uneven split only where some kept pipeline depth does not divide the layers.
        "ends_short": SPLITS
        if fw.uneven_pp and any(model.layers % p for p in pp[ok])
        else SPLITS[:1],
    }
    if sharded is not None:  # full sharding (0), then HSDP within each tier (`hsdp_degrees`)
        rest["hsdp"] = range(sharded.options)
    product = len(ok) * math.prod(len(a) for a in rest.values())
    zero_of = np.array([s[0] for s in shard_opts])
    rules = _rules(
        model.layers, gbs, fw, "vpp" in fix, zero_of, (rc_masks, rc_block), np.array(codes), group
    )
    degrees = {"tp": tp[ok], "cp": cp[ok], "pp": pp[ok], "dp": dp[ok]}
    if sharded is not None:
        rules["hsdp"] = _hsdp_rule(sharded, zero_of)
    rows = _pruned_product(degrees, rest, rules)
    n = len(rows["tp"])
    first_u, last_u = uneven_split(model.layers, rows["pp"])
    uneven = rows["ends_short"] == 1
    even_layers = model.layers // rows["pp"]
    arrays = {
        **{k: rows[k] for k in ("tp", "cp", "ep", "pp", "vpp", "dp", "mbs")},
        "etp": rows["tp"],
        "gbs": np.full(n, gbs),
        "seq": np.full(n, seq),
        "sp": (rows["tp"] > 1) & _flag(fix, "sp", True),
        "recompute": rc_codes[rows["rc"]],
        "recompute_modules": rc_masks[rows["rc"]],
        "recompute_share": _recompute_share(model.layers, rows, rc_codes, rc_block),
        "zero": zero_of[rows["shard"]],
        "distributed_optimizer": np.array([s[1] for s in shard_opts])[rows["shard"]],
        "grad_reduce_bf16": np.full(n, grad16),
        "precision": np.array(codes)[rows["dtype"]],
        "first_stage_layers": np.where(uneven, first_u, even_layers),
        "last_stage_layers": np.where(uneven, last_u, even_layers),
    }
    if sharded is not None:
        arrays["dp_shard"] = _hsdp_column(sharded, rows)
    return Space(arrays, product)


Rule = Callable[[dict[str, np.ndarray]], np.ndarray]


def _pruned_product(
    rows: dict[str, np.ndarray], axes: Mapping[str, Sequence[int]], rules: Mapping[str, Rule]
) -> dict[str, np.ndarray]:
    """The rows of `rows` x each axis in turn (itertools.product order), pruned after each
    axis by its rule: the same candidates as pruning the full product, without building it."""
    for name, options in axes.items():
        index, column = _product(np.arange(len(rows["tp"])), options)
        rows = {k: v[index] for k, v in rows.items()} | {name: column}
        if name in rules:
            keep = rules[name](rows)
            rows = {k: v[keep] for k, v in rows.items()}
    return rows


def _rules(
    layers: int,
    gbs: int,
    fw: Framework,
    vpp_fixed: bool,
    zero_of: np.ndarray,
    recompute: tuple[np.ndarray, np.ndarray],
    codes: np.ndarray,
    group: int | None = None,
) -> dict[str, Rule]:
    """What each axis of the product must satisfy once it is added (`Layout.validate_for`'s
    rules and the framework's, vectorised); `recompute`: each option's module mask and block
    layers; `group`: the interleaved schedule's micro-batch group (`interleave_runs`)."""
    delayed_fp8 = precision_code("fp8", "delayed")
    rc_masks, rc_block = recompute

    def short(r: dict[str, np.ndarray]) -> np.ndarray:
        """An uneven split (`uneven_split`, Megatron's --decoder-first/last-pipeline-num-layers;
        Llama 3 405B's 126 layers over 16 stages 7/8.../7) at this vpp: one that splits the
        middle stages evenly into chunks of 2 layers or more (a --fix vpp= takes any that
        leaves the end stages a layer a chunk); a rank's chunks may then differ by one, which
        the Megatron emitter states as a --pipeline-model-parallel-layout string."""
        pp, vpp = r["pp"], r["vpp"]
        middle = -(-layers // np.maximum(pp, 1))
        searched = (middle % vpp == 0) & (middle >= 2 * vpp)
        first = uneven_split(layers, pp)[0]
        return (pp >= 2) & (layers % pp != 0) & (first >= vpp) & (searched | vpp_fixed)

    def even(r: dict[str, np.ndarray]) -> np.ndarray:
        return layers % (r["pp"] * r["vpp"]) == 0

    def interleaved(r: dict[str, np.ndarray]) -> np.ndarray:
        """The micro-batches per pipeline fill the framework's interleaved groups."""
        if not fw.interleave_groups:
            return np.ones(len(r["pp"]), dtype=bool)
        micro = gbs // (r["mbs"] * np.maximum(r["dp"], 1))
        return interleave_runs(r["pp"], r["vpp"], micro, group)

    return {
        "vpp": lambda r: ((r["vpp"] == 1) | (r["pp"] > 1)) & (even(r) | short(r)),
        "mbs": lambda r: (gbs % (r["mbs"] * np.maximum(r["dp"], 1)) == 0) & interleaved(r),
        # a block of fewer layers than a virtual stage holds (more is full recompute)
        "rc": lambda r: rc_block[r["rc"]] * r["pp"] * r["vpp"] < layers,
        "ep": lambda r: (r["cp"] * r["dp"]) % r["ep"] == 0,  # etp = tp: experts regroup cp*dp
        "shard": lambda r: (r["pp"] == 1) | (zero_of[r["shard"]] <= fw.pp_zero),
        "dtype": lambda r: (
            ~((rc_masks[r["rc"]] != DEFAULT_MASK) & (codes[r["dtype"]] == delayed_fp8))
        ),
        "ends_short": lambda r: np.where(r["ends_short"] == 1, short(r), even(r)),
    }


@dataclass(frozen=True)
class Hsdp:
    """HSDP searched: full sharding and the shard degree of each tier (`tiers`: the GPUs of
    one NVLink domain, leaf and pod), or the one `fixed` by ``--fix dp_shard``."""

    tiers: tuple[int, ...] = ()
    fixed: int | None = None

    @property
    def options(self) -> int:
        """Options on the product's ``hsdp`` axis: the fixed degree, or full sharding and
        one per tier."""
        return 1 if self.fixed is not None else len(self.tiers) + 1


def _hsdp_tiers(
    cluster: ClusterSpec,
    fix: Mapping[str, str],
    fw: Framework,
    shard_opts: tuple[tuple[int, bool], ...],
) -> Hsdp | None:
    """What HSDP a framework's space searches (None: it has none, and a fixed dp_shard is a
    one-line error naming what is allowed; so is one without FSDP among `shard_opts`): the
    fixed degree, or a degree per tier of the cluster, smallest first: one NVLink domain, one
    leaf and one pod where it has several (torchtitan's usual recipe: shard inside a fast
    tier, replicate across the slower)."""
    if not fw.hsdp:
        if "dp_shard" in fix:
            hsdp = ", ".join(TABLE[n].name for n in LAUNCHED if TABLE[n].hsdp)
            raise SpecError(
                f"--fix: dp_shard={fix['dp_shard']}; {fw.title} has no HSDP (it shards over "
                f"every dp rank): allowed: no dp_shard, or --framework {hsdp}"
            )
        return None
    if "dp_shard" in fix:
        shard = _ints(fix, "dp_shard", ())[0]
        if "dp" in fix and _ints(fix, "dp", ())[0] % shard:
            raise SpecError(f"--fix: dp_shard={shard} must divide dp ({fix['dp']})")
        if all(zero < 2 for zero, _ in shard_opts):
            schemes = ", ".join(n for n in SHARDING if SHARDING[n] in shard_opts)
            raise SpecError(
                f"--fix: dp_shard={shard} (HSDP) needs FSDP: zero 2 or 3 ({fw.name}'s "
                f"{schemes} is not)"
            )
        return Hsdp(fixed=shard)
    node = cluster.gpus_per_node
    leaf = cluster.nodes_per_leaf * node
    tiers = [cluster.domain_gpus]
    if cluster.leaves > 1:
        tiers.append(leaf)
    if cluster.pods > 1:
        tiers.append(cluster.leaves_per_pod * leaf)
    return Hsdp(tiers=tuple(sorted(set(tiers))))


def hsdp_degrees(tier_gpus: int, tp: np.ndarray, cp: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """The HSDP shard degree whose replica (the tp*cp*dp_shard consecutive ranks of one
    shard group: torchtitan's mesh is pp, dp_replicate, dp_shard, cp, tp, outermost first)
    spans at most `tier_gpus` GPUs: the largest power of two dividing dp with
    dp_shard*tp*cp <= tier_gpus (0 where tp*cp alone exceeds it). The groups lie inside one
    tier where its size is a multiple of theirs (not always in a 72-GPU NVL72 domain, which
    the estimate then prices as crossing)."""
    per = tier_gpus // (tp * cp)
    power = 2 ** np.floor(np.log2(np.maximum(per, 1))).astype(np.int64)
    return np.where(per >= 1, np.gcd(dp, power), 0)


def _hsdp_rule(hsdp: Hsdp, zero_of: np.ndarray) -> Rule:
    """Which ``hsdp`` options a row keeps: a fixed degree dividing dp (below dp only with
    FSDP); full sharding always; a tier's degree where FSDP runs (zero 2 or 3), it lies
    between 2 and dp - 1 and differs from the tier below's (1 is DDP, dp full sharding)."""

    def rule(r: dict[str, np.ndarray]) -> np.ndarray:
        dp, option, fsdp = r["dp"], r["hsdp"], zero_of[r["shard"]] >= 2
        if hsdp.fixed is not None:
            return (dp % hsdp.fixed == 0) & ((hsdp.fixed == dp) | fsdp)
        keep = option == 0
        below = np.zeros_like(dp)
        for i, tier in enumerate(hsdp.tiers, 1):
            degree = hsdp_degrees(tier, r["tp"], r["cp"], dp)
            keep |= (option == i) & fsdp & (degree >= 2) & (degree < dp) & (degree != below)
            below = degree
        return keep

    return rule


def _hsdp_column(hsdp: Hsdp, rows: dict[str, np.ndarray]) -> np.ndarray:
    """Each kept row's dp_shard: the fixed degree, dp (full sharding) or its tier's degree."""
    dp = rows["dp"]
    if hsdp.fixed is not None:
        return np.full(len(dp), hsdp.fixed, dtype=np.int64)
    out = dp.copy()
    for i, tier in enumerate(hsdp.tiers, 1):
        chosen = rows["hsdp"] == i
        out[chosen] = hsdp_degrees(tier, rows["tp"][chosen], rows["cp"][chosen], dp[chosen])
    return out


def _degree_options(
    model: ModelSpec, gpus: int, fix: dict[str, str], fw: Framework
) -> tuple[tuple[int, ...], ...]:
    """(tp, cp, pp, vpp, mbs, ep) values searched: the fixed ones, else every one the model
    and the GPUs admit; cp and vpp stay 1 where the framework has none (a fix otherwise is
    a one-line error); `fix` gets those 1s."""
    for key, cap, runs in (
        ("cp", "context parallelism", bool(fw.cp_comm_types)),
        ("vpp", "interleaved pipeline", fw.vpp),
    ):
        if runs:
            continue
        if _ints(fix, key, (1,)) != (1,):
            raise SpecError(f"--fix: {key}={fix[key]}; {fw.name} has no {cap}: allowed: 1")
        fix[key] = "1"
    tp_opts = _ints(fix, "tp", tuple(t for t in POWERS_OF_TWO if t <= min(gpus, model.heads)))
    cp_opts = _ints(fix, "cp", tuple(c for c in POWERS_OF_TWO[:6] if c <= gpus))
    pp_opts = _ints(fix, "pp", tuple(p for p in range(1, model.layers + 1) if gpus % p == 0))
    vpp_opts = _ints(fix, "vpp", VPP_OPTIONS)
    mbs_opts = _ints(fix, "mbs", MBS_OPTIONS)
    experts = model.moe.experts if model.moe else 1
    ep_opts = _ints(fix, "ep", tuple(e for e in POWERS_OF_TWO if e <= experts and experts % e == 0))
    return tp_opts, cp_opts, pp_opts, vpp_opts, mbs_opts, ep_opts


def _recompute_share(
    layers: int, rows: dict[str, np.ndarray], codes: np.ndarray, block: np.ndarray
) -> np.ndarray:
    """Share of the layers whose forward runs again (`layout.partial_recompute_fields`): all
    under full recompute, a block's layers of each virtual stage's layers/(pp*vpp)."""
    n = block[rows["rc"]]
    chunk = layers / (rows["pp"] * rows["vpp"])
    full = codes[rows["rc"]] == RECOMPUTE["full"]
    return np.where(n > 0, n / chunk, full * 1.0)


def _recompute_options(
    model: ModelSpec, fix: Mapping[str, str], fw: Framework
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(recompute codes, module masks, block layers) searched: the fixed kind or all three;
    where the framework has Megatron's modules, selective over its light modules (the norms
    TE keeps as modules, the experts' activation, MLA's up-projections), which frees memory
    at little cost (not with delayed FP8 scaling, which Megatron refuses for them:
    `build_space`); where it runs --recompute-method block, full recompute of the first
    `BLOCK_LAYERS` layers of each virtual stage only (block layers 0: every layer)."""
    names = (fix["recompute"],) if "recompute" in fix else tuple(RECOMPUTE)
    if "recompute" not in fix and fix.get("recompute_method") == "block":
        names = ("full",)  # block is a way of full recompute
    for name in names:
        if name not in RECOMPUTE:
            raise SpecError(f"--fix: recompute={name!r}; allowed: {', '.join(RECOMPUTE)}")
    method = _fixed_recompute_method(fix, fw, names)
    options = [(RECOMPUTE[n], DEFAULT_MASK, 0) for n in names if method != "block"]
    if fw.recompute_modules and "selective" in names:
        light = light_modules(model.moe is not None, model.mla is not None)
        if light:  # a dense model's norms are fused into its linear layers: nothing light
            options.append((RECOMPUTE["selective"], modules_mask(light), 0))
    if fw.partial_recompute and "full" in names and method != "uniform":
        options += [(RECOMPUTE["full"], DEFAULT_MASK, n) for n in BLOCK_LAYERS]
    codes, masks, block = np.array(options).reshape(-1, 3).T
    return codes, masks, block


def _fixed_recompute_method(
    fix: Mapping[str, str], fw: Framework, names: tuple[str, ...]
) -> str | None:
    """The fixed --recompute-method (uniform: every layer recomputes, Megatron's
    --recompute-num-layers 1; block: only the first `BLOCK_LAYERS` of each virtual stage),
    checked: block needs full recompute alone and a framework that runs it."""
    method = fix.get("recompute_method")
    if method not in (None, "uniform", "block"):
        raise SpecError(f"--fix: recompute_method={method!r}; allowed: uniform, block")
    if method == "block" and names != ("full",):
        raise SpecError(f"--fix: recompute_method=block needs recompute full, not {names[0]}")
    if method == "block" and not fw.partial_recompute:
        raise SpecError(f"--fix: recompute_method=block: {fw.title} recomputes every layer or none")
    return method


def _shard_options(
    fix: Mapping[str, str], fw: Framework, shardings: tuple[str, ...] | None
) -> tuple[tuple[int, bool], ...]:
    """The (ZeRO stage, distributed optimizer) schemes searched: `shardings`, the fixed one,
    or the framework's; a fixed ZeRO stage picks among every scheme it runs, DDP included."""
    names = shardings or (("ddp", *fw.sharding) if "zero" in fix else fw.sharding)
    if "sharding" in fix:
        allowed = ("ddp", *fw.sharding)
        if fix["sharding"] not in allowed:
            raise SpecError(
                f"--fix: sharding={fix['sharding']!r} for {fw.name}; allowed: {', '.join(allowed)}"
            )
        names = (fix["sharding"],)
    options = tuple(SHARDING[name] for name in names)
    if "zero" not in fix:
        return options
    stage = _ints(fix, "zero", ())[0]
    options = tuple(s for s in options if zero_stage(*s) == stage)
    if not options:
        stages = sorted({f"{zero_stage(*SHARDING[name])} ({name})" for name in names})
        raise SpecError(
            f"--fix: zero={stage} with {'/'.join(names)} ({fw.name}); allowed: {', '.join(stages)}"
        )
    return options


def _precision_codes(cluster: ClusterSpec, fix: Mapping[str, str], fw: Framework) -> list[int]:
    """Precision codes searched (`searched_dtypes`): a fixed one must be one the GPU and the
    framework run (MXFP8 and NVFP4 only on Blackwell)."""
    gpu = cluster.gpu
    allowed = tuple(d for d in supported_dtypes(gpu) if fw.runs_dtype(d))
    dtypes = searched_dtypes(fix, allowed)
    if dtypes[0] not in allowed:
        raise SpecError(
            f"--fix: dtype={dtypes[0]!r} on {gpu.key}; allowed: {', '.join(allowed)}"
            + ("" if fw.runs_any_dtype else f" ({fw.title} trains in {', '.join(fw.dtypes or ())})")
        )
    recipe = fix.get("fp8_recipe")
    return [precision_code(d, recipe if d == "fp8" else None) for d in dtypes]


def searched_dtypes(fix: Mapping[str, str], allowed: tuple[str, ...]) -> tuple[str, ...]:
    """The precisions a search covers: the one fixed, every one `allowed` (the GPU and the
    framework run) for ``dtype=any``, else bf16 (low precision only when asked for)."""
    if fix.get("dtype") == ANY:
        return allowed
    return (fix["dtype"],) if "dtype" in fix else ("bf16",)


def _any_space(
    model: ModelSpec,
    cluster: ClusterSpec,
    gpus: int,
    gbs: int,
    seq: int,
    fix: Mapping[str, str],
    group: int | None = None,
) -> Space:
    """`--framework any`: every framework's space over the sharding schemes it is searched for
    (`Framework.any_sharding`); a fix no framework can run is one error naming each one's
    reason."""
    schemes_any = {s for name in LAUNCHED for s in TABLE[name].any_sharding}
    # Plain DDP last, and only when a ZeRO stage is fixed (as build_space).
    searched = tuple(
        sorted(
            (s for s in SHARDING if s in schemes_any and (s != "ddp" or "zero" in fix)),
            key=lambda s: s == "ddp",
        )
    )
    if "dp_shard" in fix:  # priced by one framework's FSDP, not the generic model's
        hsdp = " or ".join(n for n in LAUNCHED if TABLE[n].hsdp)
        raise SpecError(
            f"--fix: dp_shard={fix['dp_shard']}: HSDP is a framework's (torchtitan's "
            f"data_parallel_shard_degree); add --framework {hsdp}"
        )
    names = (fix["sharding"],) if "sharding" in fix else searched
    if names[0] not in schemes_any:
        raise SpecError(f"--fix: sharding={names[0]!r}; allowed: {', '.join(SHARDING)}")
    spaces, errors = [], {}
    for name in LAUNCHED:
        fw: Framework = TABLE[name]
        schemes = tuple(n for n in names if n in fw.any_sharding)
        if not schemes:
            continue
        try:
            spaces.append(
                build_space(model, cluster, gpus, gbs, seq, fix, name, schemes, group, hsdp=False)
            )
        except SpecError as exc:  # a fix this framework cannot run: the others may
            errors[name] = str(exc).removeprefix("--fix: ")
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
