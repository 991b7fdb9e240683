"""Fabric what-ifs: the best plan as one or two cluster parameters vary, and the inter-node
bandwidth per GPU a workload needs to stay within X% of its best."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

from tierwise.bounds import MAX_NICS_PER_NODE
from tierwise.errors import SpecError
from tierwise.hardware import catalog
from tierwise.hardware.catalog import NIC
from tierwise.hardware.cluster import (
    ClusterSpec,
    apply_overrides,
    dump_cluster,
    idle_override_reasons,
    override_path,
)
from tierwise.perf.step import Flags
from tierwise.perf.train_time import RUN_KEYS, estimate_train_time
from tierwise.plan.search import search
from tierwise.specio import build
from tierwise.workload.spec import ModelSpec

SWEEPABLE = {
    "nodes": int,
    "gpus_per_node": int,
    "nics_per_node": int,
    "nic": str,
    "intra": str,
    "oversubscription": float,
    "nvlink_domain_gpus": int,
    "nodes_per_leaf": int,
    "leaves_per_pod": int,
    "pod_oversubscription": float,
    "routing": str,
    "qps_per_connection": int,
    "slow_node_share": float,
    "slow_node_slowdown": float,
    "gpu_speed_spread": float,
}
CATALOG_KEYS = {"nic": catalog.nic, "intra": catalog.link}
"""Sweepable keys whose values are catalog keys."""
# Bisection bounds for the bandwidth search, Gb/s per NIC port.
MIN_RATE_GBPS, MAX_RATE_GBPS = 1.0, 12800.0
BISECTION_STEPS = 24


def parse_vary(text: str) -> tuple[str, list[Any]]:
    """`nics_per_node=1,2,4,8` -> ("nics_per_node", [1, 2, 4, 8]); an unknown catalog key
    (`nic=foo`) is the user's error here, a value whose cluster does not validate is a row."""
    key, sep, values = text.partition("=")
    key = key.strip().replace("-", "_")
    if sep and values.strip() and key not in SWEEPABLE:
        raise SpecError(f"--vary: {key!r} in {text!r}; allowed keys: {', '.join(SWEEPABLE)}")
    if not sep or not values.strip():
        raise SpecError(f"--vary: {text!r} is not KEY=V1,V2,... with KEY in {', '.join(SWEEPABLE)}")
    try:
        parsed = [SWEEPABLE[key](v.strip()) for v in values.split(",")]
    except ValueError:
        raise SpecError(
            f"--vary: {text!r}: values of {key} must be {SWEEPABLE[key].__name__}"
        ) from None
    for value in parsed if key in CATALOG_KEYS else []:
        CATALOG_KEYS[key](value, field=f"--vary {key}")
    twice = next((v for i, v in enumerate(parsed) if v in parsed[:i]), None)
    if twice is not None:  # the same search twice, a row that looks like a second result
        raise SpecError(f"--vary {key}: {twice} given twice; allowed: each value once")
    return key, parsed


def parse_varies(texts: Sequence[str]) -> list[tuple[str, list[Any]]]:
    """The one or two `--vary` options as (key, values); a key varied twice is an error (the
    rows would show two columns of one key, each the later value)."""
    varies = [parse_vary(text) for text in texts]
    if len(varies) > 2:
        raise SpecError("--vary: give at most two parameters")
    if len(varies) == 2 and varies[0][0] == varies[1][0]:
        raise SpecError(
            f"--vary {varies[0][0]}: given twice; allowed: two different keys, or one --vary "
            f"{varies[0][0]}=V1,V2,... with every value"
        )
    return varies


def with_params(cluster: ClusterSpec, params: Mapping[str, Any]) -> ClusterSpec:
    """The cluster with shape overrides applied (validated); a value out of its field's bounds
    is named by its `--vary KEY`, with what the field allows."""
    data = apply_overrides(dump_cluster(cluster), **params)
    label = ",".join(f"{k}={v}" for k, v in params.items())
    flags = {override_path(k): f"--vary {k}" for k in params}
    return build(ClusterSpec, {**data, "name": f"{cluster.name}[{label}]"}, f"sweep {label}", flags)


def sweep_clusters(
    cluster: ClusterSpec, varies: Sequence[tuple[str, list[Any]]]
) -> list[tuple[dict[str, Any], ClusterSpec | SpecError]]:
    """Each combination of the varied values with its cluster, or the error that says why it
    is none; when no combination is a valid cluster, the first error is the user's (one line
    naming the input, the value and what is allowed)."""
    keys = [k for k, _ in varies]
    out: list[tuple[dict[str, Any], ClusterSpec | SpecError]] = []
    for values in itertools.product(*(v for _, v in varies)):
        params = dict(zip(keys, values, strict=True))
        try:
            out.append((params, with_params(cluster, params)))
        except SpecError as exc:
            out.append((params, exc))
    errors = [c for _, c in out if isinstance(c, SpecError)]
    if out and len(errors) == len(out):
        raise errors[0]
    return out


# A slow node needs both a share and a slowdown (`FleetSpec.step_slowdown`): each of the two
# changes nothing while the other is 0.
_FLEET_PAIRS = {"slow_node_share": "slow_node_slowdown", "slow_node_slowdown": "slow_node_share"}


def idle_varies(cluster: ClusterSpec, varies: Sequence[tuple[str, list[Any]]]) -> list[str]:
    """One line for each varied key that changes nothing in any row: the slow-node share
    while the slowdown is 0 in every row, or the slowdown while the share is; a fabric key
    that changes nothing on any row's cluster, as the same option would say
    (`idle_overrides`: routing or queue pairs where no traffic crosses an uplink, queue pairs
    under adaptive routing, pods of one pod...)."""
    given = dict(varies)
    notes = []
    rows = [(p, c) for p, c in sweep_clusters(cluster, varies) if isinstance(c, ClusterSpec)]
    for key in given:
        reasons = [idle_override_reasons(c, {key: p[key]}).get(key) for p, c in rows]
        if rows and all(reasons):
            why = str(reasons[0]).replace(rows[0][1].name, cluster.name)
            notes.append(f"--vary {key} changes nothing: {why}")
    for key, other in _FLEET_PAIRS.items():
        if key not in given:
            continue
        others = given.get(other, [getattr(cluster.fleet, other)])
        if all(v == 0 for v in others):
            where, fix = (
                ("in every row", f"give {other} a value above 0")
                if other in given
                else (f"on {cluster.name}", f"vary {other} too, or set it in the cluster's fleet")
            )
            notes.append(
                f"--vary {key} changes nothing: {other} is 0 {where} (a slow node needs "
                f"both: {fix})"
            )
    return notes


def sweep(
    model: ModelSpec,
    cluster: ClusterSpec,
    gbs: int,
    seq: int,
    varies: Sequence[tuple[str, list[Any]]],
    flags: Flags = Flags(),
    framework: str = "any",
    fix: Mapping[str, str] | None = None,
    train_tokens: float | None = None,
    interval_min: float | None = None,
    headroom_gib: float = 0.0,
) -> list[dict[str, Any]]:
    """Best plan per combination of the varied parameters, each row with the nodes, GPUs,
    gbs and seq it ran; a combination that is no valid cluster, or where nothing divides or
    fits, is a row with ``error`` (and no numbers); when no combination is a valid cluster,
    the first one's error is raised (`sweep_clusters`). With `train_tokens`, each row's plan is
    the one of least expected time to train on all its GPUs, and the row carries its days,
    ETTR, GPU-hours, cost, energy and interruptions (`tierwise.perf.train_time`)."""
    objective = "step_time" if train_tokens is None else "time_to_train"
    rows = []
    for params, c in sweep_clusters(cluster, varies):
        row: dict[str, Any] = {**params, "gbs": gbs, "seq": seq}
        try:
            if isinstance(c, SpecError):
                raise c
            row |= {"nodes": c.nodes, "gpus": c.world}
            best = search(
                model,
                c,
                gbs,
                seq,
                top=1,
                fix=fix,
                flags=flags,
                framework=framework,
                objective=objective,
                all_gpus=True,
                interval_min=interval_min,
                headroom_gib=headroom_gib,
            ).plans[0]
        except SpecError as exc:
            rows.append({**row, "tokens_per_s": None, "mfu": None, "error": str(exc)})
            continue
        rows.append(
            {
                **row,
                "tokens_per_s": best["tokens_per_s"],
                "mfu": best["mfu"],
                "step_time_s": best["step_time_s"],
                "layout": layout_summary(best["layout"]),
                **(
                    {}
                    if train_tokens is None
                    else train_fields(c, best, train_tokens, interval_min)
                ),
            }
        )
    return rows


def train_fields(
    cluster: ClusterSpec, plan: dict[str, Any], tokens: float, interval_min: float | None
) -> dict[str, Any]:
    """The time-to-train numbers of a sweep row's plan."""
    out = estimate_train_time(cluster, plan, tokens, interval_min)
    return {key: out[key] for key in RUN_KEYS}


def fastest_run(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The sweep row whose run finishes first (fewest GPUs among ties), with whether adding
    GPUs beyond it lengthens the run; None when no row has a time to train."""
    timed = [r for r in rows if r.get("time_to_train_days") is not None]
    if not timed:
        return None
    best = min(timed, key=lambda r: (r["time_to_train_days"], r["gpus"]))
    # Rows that never finish (ETTR 0) are slower too.
    larger = [r for r in rows if "ettr" in r and r["gpus"] > best["gpus"]]
    return {
        "gpus": best["gpus"],
        "time_to_train_days": best["time_to_train_days"],
        "ettr": best["ettr"],
        "more_gpus_slower": bool(larger),
    }


def layout_summary(layout: Mapping[str, Any]) -> dict[str, Any]:
    """The degrees and per-step choices of a plan's layout, for sweep rows (Megatron's
    recompute modules and HSDP's shard degree where the plan has them)."""
    keys = ("tp", "cp", "ep", "pp", "vpp", "dp", "mbs", "recompute", "zero", "dtype")
    summary = {k: layout[k] for k in keys}
    if layout.get("recompute_modules"):
        summary["recompute_modules"] = list(layout["recompute_modules"])
    if layout.get("dp_shard_degree"):  # HSDP: the dp ranks sharding one replica
        summary["dp_shard"] = layout["dp_shard_degree"]
    return summary


def _with_nic_rate(cluster: ClusterSpec, rate_Gbps: float) -> ClusterSpec:
    """`cluster` with one NIC of `rate_Gbps` per GPU."""
    if cluster.gpus_per_node > MAX_NICS_PER_NODE:
        raise SpecError(
            f"sweep: {cluster.gpus_per_node} GPUs per node; the bandwidth what-if gives each "
            f"GPU a NIC of its own, and a node has at most {MAX_NICS_PER_NODE} "
            f"(allowed: --gpus-per-node <= {MAX_NICS_PER_NODE})"
        )
    nic = cluster.inter.nic
    data = dump_cluster(cluster)
    data["inter"]["nic"] = NIC(
        **{**nic.model_dump(), "key": "what-if", "rate_Gbps": rate_Gbps}
    ).model_dump()
    data["inter"]["nics_per_node"] = cluster.gpus_per_node
    data["calibration"] = {
        k: v for k, v in data.get("calibration", {}).items() if k in ("intra", "step")
    }
    return build(ClusterSpec, data, "bandwidth what-if")


def _check_within(within: float) -> None:
    if not 0 < within <= 1:
        raise SpecError(f"--within: {within * 100:g}%; allowed: more than 0 and at most 100")


def _needed_rate(step: Callable[[float], float], within: float) -> dict[str, float]:
    """Bisect (geometrically, to 2%) the smallest line rate, Gb/s, whose `step` time stays
    within `within` of the step time at MAX_RATE_GBPS; `step` must not grow with the rate."""
    step = cache(step)
    best = step(MAX_RATE_GBPS)
    lo, hi = MIN_RATE_GBPS, MAX_RATE_GBPS
    if step(lo) <= best * (1 + within):
        hi = lo
    for _ in range(BISECTION_STEPS):
        if hi / lo < 1.02:
            break
        mid = (lo * hi) ** 0.5
        if step(mid) <= best * (1 + within):
            hi = mid
        else:
            lo = mid
    return {
        "needed_Gbps_per_gpu": hi,
        "within_pct": within * 100,
        "best_step_time_s": best,
        "step_time_at_needed_s": step(hi),
    }


def workload_needed_bandwidth(
    model: ModelSpec,
    cluster: ClusterSpec,
    gbs: int,
    seq: int,
    within: float,
    flags: Flags = Flags(),
    framework: str = "any",
    fix: Mapping[str, str] | None = None,
    headroom_gib: float = 0.0,
) -> dict[str, Any]:
    """Smallest inter-node line rate per GPU at which the best plan (re-planned at each rate,
    among layouts `fix` allows) stays within `within` of the best plan on a very fast
    network, Gb/s per GPU; with the layout chosen at that rate."""
    _check_within(within)
    plans: dict[float, dict[str, Any]] = {}

    def step(rate: float) -> float:
        c = _with_nic_rate(cluster, rate)
        plans[rate] = search(
            model,
            c,
            gbs,
            seq,
            top=1,
            fix=fix,
            flags=flags,
            framework=framework,
            headroom_gib=headroom_gib,
        ).plans[0]
        return plans[rate]["step_time_s"]

    out = _needed_rate(step, within)
    return {
        **out,
        "best_layout": layout_summary(plans[MAX_RATE_GBPS]["layout"]),
        "layout_at_needed": layout_summary(plans[out["needed_Gbps_per_gpu"]]["layout"]),
    }
