"""MLPerf training result logs (`:::MLLOG {json}`) with the submission's `config_*.sh`."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import PurePath
from statistics import median
from typing import Any

from tierwise.verify.trainlog.record import Found
from tierwise.verify.trainlog.shell import ShellVars
from tierwise.verify.trainlog.steps import from_values
from tierwise.verify.trainlog.text import gpu_name, positive_int, truthy

_MLLOG = re.compile(r":::MLLOG (\{.*\})[ \t]*$", re.MULTILINE)
_SYSJSON = re.compile(r":::SYSJSON (\{.*\})[ \t]*$", re.MULTILINE)
_PLATFORM = re.compile(r"^(\d{1,12})x(.*)$")
# MLPerf benchmark names -> tierwise model preset (the reference model of each benchmark).
BENCHMARK_PRESETS = {
    "gpt3": "gpt3-175b",
    "llama2_70b_lora": "llama2-70b",
    "llama31_405b": "llama3-405b",
    "llama31_8b": "llama3-8b",
    "llama3_8b": "llama3-8b",
    "mixtral_8x7b": "mixtral-8x7b",
}
# Config variables (NVIDIA's and AMD's MLPerf scripts) -> record key.
CONFIG_INTS = {
    "DGXNNODES": "nodes",
    "NNODES": "nodes",
    "DGXNGPU": "gpus_per_node",
    "GPUS_PER_NODE": "gpus_per_node",
    "TENSOR_MODEL_PARALLEL": "layout.tp",
    "TP": "layout.tp",
    "PIPELINE_MODEL_PARALLEL": "layout.pp",
    "PP": "layout.pp",
    "INTERLEAVED_PIPELINE": "layout.vpp",
    "VIRTUAL_PIPELINE": "layout.vpp",
    "VP": "layout.vpp",
    "CONTEXT_PARALLEL": "layout.cp",
    "CP": "layout.cp",
    "EXPERT_MODEL_PARALLEL": "layout.ep",
    "EP": "layout.ep",
    "MICRO_BATCH_SIZE": "layout.mbs",
    "MBS": "layout.mbs",
    "GBS": "layout.gbs",
    "GLOBAL_BATCH_SIZE": "layout.gbs",
    "SEQ_LEN": "layout.seq",
    "MAX_SEQLEN": "layout.seq",
    "MINIBS": "minibs",
}
CONFIG_SETTINGS = {
    "TP_COMM_OVERLAP": "tp_comm_overlap",
    "OVERLAP_GRAD_REDUCE": "overlap_grad_reduce",
    "OVERLAP_PARAM_GATHER": "overlap_param_gather",
    "USE_DIST_OPTIMIZER": "use_distributed_optimizer",
    "SP": "sequence_parallel",
    "DEFER_EMBEDDING_WGRAD_COMPUTE": "defer_embedding_wgrad_compute",
    "FP8_PARAMS": "fp8_param_gather",
    "FP8_DPA": "fp8_dot_product_attention",
}
# config_<SYSTEM>_<nodes>x<gpus>x<minibs>[x<tp>x<pp> | xtp<tp>pp<pp>cp<cp>]...sh
_CONFIG_NAME = re.compile(
    r"config_([A-Za-z0-9]+)_(\d{1,12})x(\d{1,12})x(\d{1,12})(?:x(\d{1,12})x(\d{1,12})|xtp(\d{1,12})pp(\d{1,12})(?:cp(\d{1,12}))?)?"
)


def looks_like(text: str) -> bool:
    return ":::MLLOG" in text


def _json(text: str) -> Any:
    """The JSON object of one MLLOG/SYSJSON line, or None (bad JSON, nesting too deep)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def events(text: str) -> list[dict[str, Any]]:
    """The MLLOG events that parse as JSON objects (others are skipped)."""
    out = []
    for m in _MLLOG.finditer(text):
        e = _json(m.group(1))
        if isinstance(e, dict) and isinstance(e.get("key"), str):
            out.append(e)
    return out


def read(text: str, found: Found, source: str) -> None:
    found.format("mlperf-mllog")
    found.put("framework", "nemo", f"{source} (MLPerf NeMo/Megatron result log)")
    evs = events(text)
    first: dict[str, Any] = {}
    for e in evs:
        first.setdefault(e["key"], e.get("value"))
    bench = first.get("submission_benchmark")
    if isinstance(bench, str):
        found.put("mlperf.benchmark", bench, source)
        preset = BENCHMARK_PRESETS.get(bench)
        if preset:
            found.put("model.preset", preset, f"{source} (submission_benchmark {bench!r})")
    found.put("layout.gbs", positive_int(first.get("global_batch_size")), f"{source} MLLOG")
    found.put("layout.seq", positive_int(first.get("max_sequence_length")), f"{source} MLLOG")
    found.put("grad_accum", positive_int(first.get("gradient_accumulation_steps")), source)
    _platform(first.get("submission_platform"), found, source)
    _sysjson(text, found, source)
    _step_time(evs, found, source)


def _platform(platform: Any, found: Found, source: str) -> None:
    if not isinstance(platform, str):
        return
    where = f"{source} (submission_platform {platform!r})"
    m = _PLATFORM.match(platform.strip())
    if m:
        found.put("nodes", int(m.group(1)), where)
    named = gpu_name(platform)
    if named:
        found.put("gpu_key", named[0], where)
        found.put("gpu", named[1], where)


def _sysjson(text: str, found: Found, source: str) -> None:
    m = _SYSJSON.search(text)
    if m is None:
        return
    sys = _json(m.group(1))
    if not isinstance(sys, dict):
        return
    where = f"{source} SYSJSON"
    found.put("nodes", positive_int(sys.get("number_of_nodes")), where)
    found.put("gpus_per_node", positive_int(sys.get("accelerators_per_node")), where)
    model = sys.get("accelerator_model_name")
    if isinstance(model, str) and (named := gpu_name(model)):
        found.put("gpu_key", named[0], where)
        found.put("gpu", model, where)


def _step_time(evs: list[dict[str, Any]], found: Found, source: str) -> None:
    per_step: list[float] = []
    throughput: list[float] = []
    for e in evs:
        if e["key"] != "tracked_stats" or not isinstance(e.get("value"), dict):
            continue
        v = e["value"]
        for name in ("train_step_time", "train_step_timing in s"):
            if _positive(v.get(name)):
                per_step.append(float(v[name]))
        if _positive(v.get("throughput")):
            throughput.append(float(v["throughput"]))
    step = from_values(per_step, "MLLOG tracked_stats step times")
    if step is not None:
        found.put("measured.step_time_s", step.seconds, source)
        found.put("measured.step_time_method", step.method, source)
        return
    if throughput:
        gbs = found.get("layout.gbs")
        used = throughput[1:] or throughput
        if gbs:
            found.put("measured.step_time_s", gbs / median(used), source)
            found.put(
                "measured.step_time_method",
                f"global_batch_size / median of {len(used)} block throughputs (samples/s)"
                + ("; first block left out as warm-up" if len(throughput) > 1 else ""),
                source,
            )
        found.put("measured.samples_per_s", float(median(used)), source)


def _positive(x: Any) -> bool:
    """A finite positive number (JSON's Infinity, NaN and booleans are not)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and 0 < x < math.inf


def read_configs(files: Mapping[str, str], found: Found) -> None:
    """The submission's config scripts: the first given is run, the others are what it
    sources (matched by file name)."""
    names = list(files)
    if not names:
        return
    main = names[0]
    sh = ShellVars(files)
    sh.run(main)
    wanted = set(CONFIG_INTS) | set(CONFIG_SETTINGS) | {"FP8"}
    for skipped in sh.skipped:
        if skipped.split(": ", 1)[1].split(" ")[0] in wanted or "sources" in skipped:
            found.note(f"config: {skipped} (not evaluated)")
    found.format("mlperf-config")
    env = sh.env
    where = f"{main}"
    for var, key in CONFIG_INTS.items():
        if var in env:
            found.put(key, positive_int(env[var]), f"{where} ({var})")
    for var, name in CONFIG_SETTINGS.items():
        if var in env and (b := truthy(env[var])) is not None:
            found.setting(name, b)
    if truthy(env.get("FP8", "")) or truthy(env.get("FP8_PARAMS", "")):
        found.put("layout.dtype", "fp8", f"{where} (FP8)")
    for var in ("MODEL_SIZE", "SIZE"):
        if var in env:
            found.put("mlperf.model_size", env[var], where)
    m = _CONFIG_NAME.search(PurePath(main).name)
    if m:
        system, nodes, gpn, minibs, tp1, pp1, tp2, pp2, cp = m.groups()
        if not system.upper().startswith(("DGX", "HGX", "GB")):
            return  # only NVIDIA names put nodes x GPUs x MINIBS there
        name = f"{main} (file name)"
        found.put("nodes", int(nodes), name)
        found.put("gpus_per_node", int(gpn), name)
        found.put("minibs", int(minibs), name)
        found.put("layout.tp", positive_int(tp1 or tp2), name)
        found.put("layout.pp", positive_int(pp1 or pp2), name)
        found.put("layout.cp", positive_int(cp), name)
        named = gpu_name(system)
        if named:
            found.put("gpu_key", named[0], name)
            found.put("gpu", named[1], name)
