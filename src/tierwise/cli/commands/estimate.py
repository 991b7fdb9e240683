"""`tierwise estimate`: step time, MFU, memory and bytes per tier of one layout."""

from __future__ import annotations

from typing import Any

import typer

from tierwise import frameworks
from tierwise.bounds import MAX_LAYERS, check_count
from tierwise.cli import layout_options as L
from tierwise.cli import train_options as T
from tierwise.cli.behaviour import behaviour_options
from tierwise.cli.options import JsonOpt, ModelOpt, cluster_options
from tierwise.cli.output import console, line, print_json, recompute_label, styled, table
from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.perf.estimate import estimate
from tierwise.perf.flags import PARAM_GATHER_FOLLOWS, Flags
from tierwise.perf.train_time import TrainRequest
from tierwise.plan.behaviour import DEFAULT_HEADROOM, Behaviour, headroom_gib, idle_options
from tierwise.workload.layout import Layout
from tierwise.workload.load import load_model
from tierwise.workload.pipeline import split_text, with_split
from tierwise.workload.precision import check_supported
from tierwise.workload.spec import ModelSpec


@cluster_options
@behaviour_options
@T.train_options
def estimate_command(
    cluster_spec: ClusterSpec,
    behaviour: Behaviour,
    train: TrainRequest,
    model: ModelOpt = "llama3-70b",
    tp: L.TpOpt = None,
    cp: L.CpOpt = None,
    ep: L.EpOpt = None,
    etp: L.EtpOpt = None,
    pp: L.PpOpt = None,
    vpp: L.VppOpt = None,
    pp_layers: L.PpLayersOpt = None,
    pp_layout: L.PpLayoutOpt = None,
    account_for_embedding_in_pipeline_split: L.AccountEmbeddingOpt = False,
    account_for_loss_in_pipeline_split: L.AccountLossOpt = False,
    dp: L.DpOpt = None,
    dp_shard: L.DpShardOpt = None,
    mbs: L.MbsOpt = None,
    gbs: L.GbsOpt = None,
    seq: L.SeqOpt = 4096,
    sp: L.SpOpt = None,
    recompute: L.RecomputeOpt = None,
    recompute_modules: L.RecomputeModulesOpt = None,
    recompute_method: L.RecomputeMethodOpt = None,
    recompute_num_layers: L.RecomputeNumLayersOpt = None,
    cpu_offloading_num_layers: L.CpuOffloadLayersOpt = None,
    zero: L.ZeroOpt = None,
    dtype: L.DtypeOpt = None,
    fp8_recipe: L.Fp8RecipeOpt = None,
    mem_headroom: L.MemHeadroomOpt = DEFAULT_HEADROOM,
    distributed_optimizer: L.DistOptOpt = None,
    grad_reduce_bf16: L.GradBf16Opt = None,
    as_json: JsonOpt = False,
) -> None:
    """Predict one layout: step time, tokens/s, TFLOP/s and MFU, memory per GPU, bytes per tier;
    with --train-tokens, the whole run's days, cost, energy and failures."""
    cluster_spec = train.on(cluster_spec)
    framework = behaviour.framework
    runner = None if framework is None else frameworks.row(framework)  # one line if unknown
    spec, flags = behaviour.resolve(load_model(model), framework)
    if dtype is not None:  # one line naming the flag before the layout's own check
        check_supported(cluster_spec.gpu, dtype, fp8_recipe)
    dp = dp if dp is not None else default_dp(cluster_spec.world, tp, cp, pp)
    fields = {
        "tp": tp,
        "cp": cp,
        "ep": ep,
        "etp": etp,
        "pp": pp,
        "vpp": vpp,
        "dp": dp,
        "mbs": mbs,
        "gbs": gbs,
        "seq": seq,
        "sp": sp,
        "recompute": recompute,
        "recompute_modules": module_list(recompute_modules),
        "recompute_method": recompute_method,
        "recompute_num_layers": recompute_num_layers,
        "activation_offload_layers": cpu_offloading_num_layers,
        "zero": zero,
        "dtype": dtype,
        "fp8_recipe": fp8_recipe,
        "distributed_optimizer": distributed_optimizer,
        "grad_reduce_bf16": grad_reduce_bf16,
        "pp_layers": parse_stage_layers(pp_layers),
        "dp_shard_degree": dp_shard,
    }
    layout = Layout.parse(fields, "layout", L.LAYOUT_FLAGS)
    assumed = []
    if gbs is None:
        layout = Layout.parse({**fields, "gbs": default_global_batch(layout)}, "layout")
        assumed.append(
            f"--gbs not given: {layout.global_batch} sequences, one per GPU as plan and sweep "
            f"take it ({layout.num_microbatches} micro-batch"
            f"{'' if layout.num_microbatches == 1 else 'es'} of {layout.mbs})"
        )
    layout, rule = with_split(
        spec,
        layout,
        pp_layout,
        account_for_embedding_in_pipeline_split,
        account_for_loss_in_pipeline_split,
        flags.pipeline_schedule,
    )
    # The layout's own rules (the world it misses, a batch that does not divide) before a
    # framework's, which read them as met (micro-batches per pipeline, say).
    layout.validate_for(spec, cluster_spec.world)
    check_framework(runner, layout, dp_shard, flags, spec)
    assumed += idle_options(behaviour.given, flags, layout, spec) + recompute_cap(layout, spec)
    assumed += overlap_assumed(behaviour, flags, layout, spec)
    result = estimate(spec, cluster_spec, layout, flags, rule)
    result["assumed"] = assumed
    add_run_facts(result, cluster_spec, mem_headroom, train)
    if as_json:
        print_json({"model": spec.name, "cluster": cluster_spec.name, **result})
        return
    print_estimate(spec.name, cluster_spec, result)


def overlap_assumed(
    behaviour: Behaviour, flags: Flags, layout: Layout, model: ModelSpec
) -> list[str]:
    """What the estimate assumed of the overlap flags that matter for `layout` and were not
    given (each framework's own default beside tierwise's where they differ), and what a
    framework's way of running a given one implies."""
    given, runner = behaviour.given, flags.runner
    dp = layout.dp * layout.cp > 1
    sharded = dp and (layout.distributed_optimizer or layout.zero >= 1)
    gather = sharded and runner.param_gather_overlap
    relevant = {
        "overlap_grad_reduce": dp,
        "overlap_param_gather": gather,
        "tp_comm_overlap": layout.tp > 1,
        "overlap_p2p_communication": layout.vpp > 1,
        "align_param_gather": gather and layout.vpp > 1 and runner.dp_buckets,
        "delay_wgrad_compute": model.moe is not None and flags.overlap_moe_expert_parallel_comm,
    }
    notes = []
    if given.get("overlap_grad_reduce") is False and given.get("overlap_param_gather") is None:
        notes += [PARAM_GATHER_FOLLOWS] if gather else []
    picked = [
        name
        for name, matters in relevant.items()
        if matters and given.get(name) is None and name not in runner.fixed_flags
        and not (name == "overlap_param_gather" and given.get("overlap_grad_reduce") is False)
    ]  # fmt: skip
    if picked:
        megatron_like = runner.overlap_asserts or runner is frameworks.GENERIC
        own = frameworks.MEGATRON_ARGUMENTS if megatron_like else {}
        differ = [n for n in picked if n in own and own[n] != getattr(flags, n)]
        text = ", ".join(frameworks.option_text(n, getattr(flags, n)) for n in picked)
        note = f"overlap flags not given, priced as {text}"
        if differ:
            theirs = ", ".join(frameworks.option_text(n, own[n]) for n in differ)
            note += f" (Megatron-LM's own defaults: {theirs}; --emit writes what is priced)"
        notes.append(note)
    if runner.tp_overlap_note and flags.tp_comm_overlap and layout.tp > 1:
        notes.append(f"--tp-comm-overlap: {runner.tp_overlap_note}")
    if runner is frameworks.GENERIC:
        group = flags.microbatch_group_size_per_vp_stage
        if frameworks.frameworks_for(layout, group) and not frameworks.frameworks_for(
            layout, group, flags, model
        ):
            why = "; ".join(
                f"{n}: {frameworks.refusal(frameworks.TABLE[n], layout, group, flags, model)}"
                for n in frameworks.LAUNCHED
            )
            notes.append(f"the generic model prices flags no launched framework runs here ({why})")
    return notes


def recompute_cap(layout: Layout, model: ModelSpec) -> list[str]:
    """One line where a block's --recompute-num-layers is over the layers a virtual stage
    holds: Megatron's block method stops at the stage's last layer, so more changes nothing
    (uniform groups that overrun a stage are refused: `Layout`); or where it was given
    without --recompute-method, which Megatron requires and tierwise takes as uniform."""
    n, chunk = layout.recompute_num_layers, model.layers / (layout.pp * layout.vpp)
    if n is not None and layout.recompute_method is None:  # block prices otherwise: say which
        return [
            f"--recompute-method not given with --recompute-num-layers {n}: priced as uniform "
            "(groups of that many layers, every layer recomputed), as --emit writes it"
        ]
    if n is None or n <= chunk or layout.recompute_method != "block":
        return []
    return [
        f"--recompute-num-layers {n} is over the {chunk:g} layers of each virtual stage "
        f"(layers / (pp*vpp)): block recomputes them all, priced as {chunk:g}"
    ]


def check_framework(
    runner: frameworks.Framework | None,
    layout: Layout,
    dp_shard: int | None,
    flags: Flags | None = None,
    model: ModelSpec | None = None,
) -> None:
    """One-line errors: HSDP without a framework that runs it, a layout the framework
    cannot run, or cannot run with `flags` (its table row's reason, `frameworks.refusal`)."""
    if runner is None and dp_shard is not None:
        hsdp = [n for n in frameworks.LAUNCHED if frameworks.TABLE[n].hsdp]
        raise SpecError(
            f"--dp-shard {dp_shard}: HSDP is a framework's (torchtitan's "
            f"data_parallel_shard_degree); add --framework {' or '.join(hsdp)}"
        )
    if runner is not None:
        frameworks.check_runs(runner, layout, flags=flags, model=model)


def add_run_facts(result: dict, cluster: ClusterSpec, mem_headroom: str, train: Any) -> None:
    """The headroom the plan would leave and, with --train-tokens, the whole run's numbers."""
    headroom = headroom_gib(mem_headroom, cluster.gpu.hbm_gib)
    result["mem_headroom_gib"] = headroom
    result["fits_with_headroom"] = result["memory_gib_per_gpu"] <= result["hbm_gib"] - headroom
    if train.tokens is not None:
        from tierwise.perf.train_time import run_train_time

        result |= run_train_time(cluster, train, result)


def default_dp(world: int, tp: int | None, cp: int | None, pp: int | None) -> int:
    """The data-parallel size that fills the cluster; one-line error where tp*cp*pp does not
    divide it."""
    fixed = (tp or 1) * (cp or 1) * (pp or 1)
    if world % fixed:
        raise SpecError(
            f"--tp*--cp*--pp = {fixed} does not divide the cluster's {world} GPUs; give --dp "
            "or change --nodes"
        )
    return world // fixed


def default_global_batch(layout: Layout) -> int:
    """One sequence per GPU of the layout (plan's and sweep's default), rounded up to a
    multiple of mbs*dp. Megatron's own default, mbs*dp, is a single micro-batch: with pp > 1
    that is a (pp-1)/pp pipeline bubble, a run nobody launches."""
    step = layout.mbs * layout.dp
    return -(-layout.world // step) * step


def module_list(text: str | None) -> list[str] | None:
    """``--recompute-modules``: names separated by commas or spaces (None: Megatron's
    default); the Layout checks each name."""
    if text is None:
        return None
    names = text.replace(",", " ").split()
    if not names:
        raise SpecError("--recompute-modules: empty; give module names, e.g. layernorm,moe_act")
    return names


def parse_stage_layers(text: str | None) -> list[int] | None:
    """`19,21,21,19` -> [19, 21, 21, 19]; anything else is a one-line error (a stage holds
    at most MAX_LAYERS)."""
    if text is None:
        return None
    try:
        layers = [int(part) for part in text.split(",")]
    except ValueError:
        raise SpecError(
            f"--pp-layers: {text[:80]!r} is not a comma-separated list of integers"
        ) from None
    return [check_count("--pp-layers", n, 0, MAX_LAYERS) for n in layers]


def print_estimate(model: str, cluster: ClusterSpec, r: dict) -> None:
    """Human summary and the time and memory breakdown tables."""
    lay = r["layout"]
    console.print(
        line(
            styled(str(model), "bold"),
            f" on {r['gpus']} x {cluster.gpu.key} ({cluster.name}): "
            f"tp={lay['tp']} cp={lay['cp']} ep={lay['ep']} pp={lay['pp']} vpp={lay['vpp']} "
            f"dp={lay['dp']} mbs={lay['mbs']} gbs={lay['gbs']} seq={lay['seq']} "
            f"recompute={recompute_label(lay)}"
            + (
                f" cpu-offload={lay['activation_offload_layers']} layers"
                if lay["activation_offload_layers"]
                else ""
            )
            + (" sharding=distopt" if lay["distributed_optimizer"] else f" zero={lay['zero']}")
            + f" dtype={lay['dtype']}"
            + (f" ({lay['fp8_recipe']})" if lay["fp8_recipe"] else "")
            + f" grads={'bf16' if lay['grad_reduce_bf16'] else 'fp32'} "
            f"attention={r['attention_backend']} framework={frameworks.row(r['framework']).name}",
        )
    )
    for note in r.get("assumed", []):
        console.print(line(styled("assumed", "yellow"), f" {note}"))
    if r["moe"] is not None:
        moe = r["moe"]
        console.print(
            f"experts: {moe['dispatcher']} dispatch, {moe['routing']} routing (busiest rank "
            f"{moe['load_imbalance']:.2f}x the mean), etp={moe['etp']}"
            + (", all-to-alls overlapped" if moe["a2a_overlap"] else "")
        )
    pipe = r["pipeline"]
    if lay["pp"] > 1:
        console.print(
            f"pipeline: {split_text(pipe['stage_layers'])} layers ({pipe['split']}), "
            f"{pipe['schedule']}, bubble {pipe['bubble_fraction']:.1%} of the step"
        )
    fits = "fits" if r["fits"] else styled("does NOT fit", "red")
    if r["fits"] and not r["fits_with_headroom"]:
        fits = styled(f"fits, inside the {r['mem_headroom_gib']:.1f} GiB headroom", "yellow")
    console.print(
        line(
            f"step {r['step_time_s']:.3f} s, {r['tokens_per_s']:,.0f} tokens/s, "
            f"{r['tflops_per_gpu']:.0f} TFLOP/s per GPU (hardware {r['hw_tflops_per_gpu']:.0f}), "
            f"MFU {r['mfu']:.1%} of the BF16 dense peak (NeMo/Megatron convention; "
            f"{r['mfu_at_dtype_peak']:.1%} of the {lay['dtype']} peak), "
            f"{r['memory_gib_per_gpu']:.1f} GiB per GPU of {r['hbm_gib']:g} "
            "(",
            fits,
            ")",
        )
    )
    tiers = r["comm_tiers"]
    step = r["step_time_s"]
    rows = []
    for key, seconds in r["breakdown"].items():
        kind = key.split("_")[0]
        tier = tiers.get(kind, "-")
        if kind == "dp" and tiers.get("edp", tier) != tier:
            edp = tiers["edp"] if tiers["edp"] != "none" else "no DP"
            tier = f"{tier}, experts {edp}"
        rows.append(
            (
                key.removesuffix("_s"),
                seconds,
                f"{seconds / step:.1%}",
                tier if tier != "none" else "-",
            )
        )
    console.print(table("time per step (exposed)", ["component", "seconds", "share", "tier"], rows))
    mem = [(k.removesuffix("_gib"), v) for k, v in r["memory"].items() if k.endswith("_gib")]
    console.print(table("memory per GPU (GiB)", ["term", "GiB"], mem))
    per_tier = [(t, b / 1e9) for t, b in r["bytes_per_tier"].items()]
    console.print(table("bytes sent per GPU per step", ["tier", "GB"], per_tier))
    if r["nic_GBps_needed_per_gpu"] is not None:
        console.print(
            f"DP/FSDP stays hidden with >= {r['nic_GBps_needed_per_gpu']:.1f} GB/s "
            "per GPU on its tier"
        )
    if "train_tokens" in r:
        T.print_train(r)


def register(app: typer.Typer) -> None:
    """Add `tierwise estimate`."""
    app.command("estimate")(estimate_command)
