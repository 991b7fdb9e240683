"""`estimate(model, cluster, layout)`: one layout's step time, MFU, memory and bytes per tier."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec
from tierwise.perf import comm as C
from tierwise.perf.groups import Degrees, layout_groups
from tierwise.perf.pipeline import schedule_for
from tierwise.perf.step import Flags, step_terms
from tierwise.records import record
from tierwise.workload.layout import Layout, hsdp_fields, layout_fields
from tierwise.workload.pipeline import standard_split
from tierwise.workload.precision import check_supported
from tierwise.workload.spec import ModelSpec

if TYPE_CHECKING:
    import numpy as np

    from tierwise.workload.memory import MemoryBreakdown


def degrees(layout: Layout) -> Degrees:
    """The degrees that place the layout's groups."""
    f = {name: getattr(layout, name) for name in ("tp", "cp", "ep", "dp", "pp")}
    return fields_degrees(f | {"etp": layout.expert_tp} | hsdp_fields(layout))


def fields_degrees(f: dict[str, Any]) -> Degrees:
    """`degrees` of a layout's `layout_fields` (or any dict with their degree keys)."""
    tp, etp = f["tp"], f["etp"]
    etp = etp if etp != tp else 0
    return record(Degrees, (tp, f["cp"], f["ep"], f["dp"], f["pp"], f.get("dp_shard", 0), etp))


def check_cp_comm(model: ModelSpec, layout: Layout, cp_comm: str) -> None:
    """All-to-all CP splits each TP rank's heads over cp ranks, so cp must divide them."""
    if cp_comm == "a2a" and layout.cp > 1:
        heads = model.heads // layout.tp
        kv = max(1, model.kv // layout.tp)
        if heads % layout.cp or kv % layout.cp:
            raise SpecError(
                f"layout: cp {layout.cp} must divide the heads ({heads}) and kv_heads ({kv}) per "
                f"TP rank for --cp-comm-type a2a; use p2p (ring attention) or a smaller cp"
            )


def estimate(
    model: ModelSpec,
    cluster: ClusterSpec,
    layout: Layout,
    flags: Flags = Flags(),
    split_rule: str | None = None,
) -> dict[str, Any]:
    """JSON-ready estimate of one layout (validated against the model and the cluster).
    Layers that do not divide over pp*vpp without `pp_layers` get the standard uneven split
    (`tierwise.workload.pipeline.standard_split`); `split_rule` names a split chosen before."""
    if layout.pp_layers is None and model.layers % (layout.pp * layout.vpp):
        split = standard_split(model.layers, layout.pp, layout.vpp)
        layout, split_rule = layout.model_copy(update={"pp_layers": split.stage_layers}), split.rule
    gpus, cluster_gpus, gpu, moe = layout.world, cluster.world, cluster.gpu, model.moe
    layout.validate_for(model, cluster_gpus if gpus > cluster_gpus else None)
    check_supported(gpu, layout.dtype, layout.fp8_recipe)
    check_cp_comm(model, layout, flags.cp_comm)
    stages = layout.stage_layers(model)
    f = layout_fields(layout, model, stages)
    pp, tp = f["pp"], f["tp"]
    micro = layout.num_microbatches
    schedule = schedule_for(flags.pipeline_schedule, pp, f["vpp"], flags.framework, micro)
    groups = layout_groups(cluster, fields_degrees(f), flags.order, flags.scatter_nodes)
    terms = step_terms(
        model,
        cluster,
        f,
        groups.time_s,
        flags,
        max(stages[1:-1]) if len(stages) > 2 else 0,  # (a default= costs a keyword parse)
    )
    nbytes = terms["comm_bytes_per_gpu"]  # (the same kinds as comm_groups, in order)
    tiers, crossing = groups.tiers_of(terms["comm_groups"])
    tiers = dict(tiers)  # (a copy: the caller may change it)
    per_tier: dict[str, float] = {}
    for kind, tier in crossing:
        per_tier[tier] = per_tier.get(tier, 0.0) + nbytes[kind]
    if moe is not None:  # routed experts' grads and weights: the expert-DP group
        tiers["edp"] = groups.top_tiers["edp"]
    window = terms["dp_overlap_window_s"]
    needed = terms["dp_bytes_per_gpu"] / window / 1e9 if window > 0 else None
    mem = terms["memory"]
    return {
        "layout": layout.to_json(),
        "gpus": gpus,
        # One layout's terms are python floats already (products with the float micro-batch
        # count, or quotients): the step model's own values and dicts, no copies.
        "step_time_s": terms["step_time_s"],
        "tokens_per_s": terms["tokens_per_s"],
        "tflops_per_gpu": terms["tflops_per_gpu"],
        "hw_tflops_per_gpu": terms["hw_tflops_per_gpu"],
        "mfu": terms["mfu"],
        "mfu_at_dtype_peak": terms["mfu_at_dtype_peak"],
        "memory_gib_per_gpu": terms["memory_gib_per_gpu"],
        "hbm_gib": gpu.hbm_gib,
        "fits": terms["fits"],
        "breakdown": terms["breakdown"],
        "compute_parts_s": terms["compute_parts_s"],
        "memory": mem.to_gib_dict(),
        "comm_tiers": tiers,
        "comm_total_s": terms["comm_total_s"],
        "bytes_per_tier": per_tier,
        "nic_GBps_needed_per_gpu": needed,
        "pipeline": {
            "stage_layers": list(stages),
            "split": split_rule or ("given" if layout.pp_layers is not None else "even"),
            "schedule": schedule,
            "bubble_fraction": terms["pipeline_bubble_fraction"],
            "microbatch_group_size": flags.microbatch_group_size_per_vp_stage or pp,
            # --scatter-gather-tensors-in-pipeline in effect (or SP): each TP rank sends 1/tp
            "sends_split_over_tp": pp > 1
            and tp > 1
            and (f["sp"] or flags.scatter_gather_tensors_in_pipeline),
        },
        "framework": flags.framework,
        "legacy_zero3": flags.legacy_zero3,
        "overlap": flags.overlaps(),
        "moe": None
        if moe is None
        else {
            "dispatcher": flags.moe_token_dispatcher_type,
            "routing": terms["moe_routing"],
            "load_imbalance": float(terms["moe_load"]),
            "a2a_overlap": flags.overlap_moe_expert_parallel_comm,
            "etp": f["etp"],
        },
        "attention_backend": flags.attention_backend,
    }


def estimate_batch(
    model: ModelSpec,
    cluster: ClusterSpec,
    arrays: dict[str, np.ndarray],
    flags: Flags = Flags(),
    memory: MemoryBreakdown | None = None,
) -> dict[str, Any]:
    """Step time, tokens/s, MFU, memory and fit for many layouts at once (arrays in/out;
    `memory`: their `memory_terms` where the caller has them)."""
    comm = C.batch_comm(cluster, arrays, flags.order, flags.scatter_nodes)
    return step_terms(model, cluster, arrays, comm, flags, memory=memory)
