"""`read_run(log, configs)`: pick the readers by content, combine, derive, list the unknown."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Any

from tierwise.errors import ParseError
from tierwise.frameworks import TORCHTITAN
from tierwise.textio import MAX_SPEC_BYTES, read_text
from tierwise.verify.trainlog import cmdline, megatron, mlperf, nemo, torchtitan
from tierwise.verify.trainlog.args import apply_args
from tierwise.verify.trainlog.record import (
    EXPECTED,
    LAYOUT_KEYS,
    MEASURED_KEYS,
    MODEL_KEYS,
    Found,
    RunRecord,
)
from tierwise.verify.trainlog.text import (
    HEAD_CHARS,
    PROSE_CHARS,
    clean,
    gpu_count_in_prose,
    gpu_name,
)

# Words that start a launch command line worth reading (at most MAX_COMMANDS of each).
_LAUNCH_WORDS = ("torchrun ", "pretrain_", "python -m ", "python3 -m ", "srun ")
MAX_COMMANDS = 50
_SMI_GPU = re.compile(
    r"^\[(\d+)\] (NVIDIA [^|\n]+?|AMD [^|\n]+?) \|"  # gpustat
    r"|^\|\s+(\d+)\s+(NVIDIA [^|\n]+?)\s+(?:On|Off)\s+\|",  # nvidia-smi
    re.MULTILINE,
)
_HF_MODEL = re.compile(
    r"\b(?:Loading from|from_pretrained\(|hf_model_id[=:]\s*)['\"]?([\w.-]+/[\w.-]+)"
)
_MODEL_WORDS = (  # model names in prose / run names -> preset (first match wins)
    (r"llama[-_ ]?3\.?1?[-_ ]?405b", "llama3-405b"),
    (r"llama[-_ ]?3\.?[13]?[-_ ]?70b", "llama3-70b"),
    (r"llama[-_ ]?3\.?1?[-_ ]?8b", "llama3-8b"),
    (r"llama[-_ ]?2[-_ ]?70b", "llama2-70b"),
    (r"llama[-_ ]?2[-_ ]?13b", "llama2-13b"),
    (r"llama[-_ ]?2[-_ ]?7b", "llama2-7b"),
    (r"mixtral[-_ ]?8x7b", "mixtral-8x7b"),
    (r"mixtral[-_ ]?8x22b", "mixtral-8x22b"),
    (r"qwen3[-_ ]?32b", "qwen3-32b"),
    (r"qwen3[-_ ]?8b", "qwen3-8b"),
    (r"gpt[-_ ]?oss[-_ ]?20b", "gpt-oss-20b"),
    (r"gpt[-_ ]?oss[-_ ]?120b", "gpt-oss-120b"),
    (r"deepseek[-_ ]?v3", "deepseek-v3"),
)
NOT_A_RUN = (
    "not a training log: no Megatron-LM arguments or iteration lines, NeMo/Bridge lines, MLPerf "
    ":::MLLOG lines or torchtitan step lines"
)


def _readers(text: str) -> list[Any]:
    """The readers whose format ``text`` looks like, in reading order."""
    return [m.read for m in (mlperf, nemo, megatron, torchtitan) if m.looks_like(text)]


def read_run(log: str | Path, configs: Sequence[str | Path] = ()) -> RunRecord:
    """What the training log ``log`` (with its config files) states about the run."""
    source = str(log)
    text = clean(read_text(log))
    found = Found()
    readers = _readers(text)
    if not readers:
        raise ParseError(NOT_A_RUN, source=source)
    for reader in readers:
        reader(text, found, PurePath(source).name)
    if "megatron-arguments" in found.formats or "megatron-iterations" in found.formats:
        found.put("framework", "megatron-lm", "Megatron-LM arguments/iteration lines")
    for line in _command_lines(text):  # the first launch command is the run's
        if cmdline.read_command(line, found, PurePath(source).name):
            break
    _gpus_in_text(text, found, PurePath(source).name)
    _configs(configs, found)
    _prose(text, found, PurePath(source).name)
    _derive(found)
    return _record(source, configs, found)


def _command_lines(text: str) -> list[str]:
    """Lines near the start of the log that hold a launch word, in log order."""
    starts: set[int] = set()
    for word in _LAUNCH_WORDS:
        at = text.find(word, 0, HEAD_CHARS)
        for _ in range(MAX_COMMANDS):
            if at < 0:
                break
            starts.add(text.rfind("\n", 0, at) + 1)
            at = text.find(word, at + len(word), HEAD_CHARS)
    lines = []
    for start in sorted(starts):
        end = text.find("\n", start)
        lines.append(text[start : end if end >= 0 else len(text)])
    return lines


def _gpus_in_text(text: str, found: Found, source: str) -> None:
    """nvidia-smi / gpustat snapshots in the log: the GPU and how many one host has."""
    rows = _SMI_GPU.findall(text, 0, HEAD_CHARS)
    if not rows:
        return
    names = {(r[1] or r[3]).strip() for r in rows}
    indices = {int(r[0] or r[2]) for r in rows}
    if len(names) == 1:
        name = names.pop()
        found.put("gpu", name, f"{source} (nvidia-smi snapshot)")
        if (named := gpu_name(name)) is not None:
            found.put("gpu_key", named[0], f"{source} (nvidia-smi snapshot)")
    found.put("gpus_per_node", len(indices), f"{source} (nvidia-smi snapshot: GPUs of one host)")


def _prose(text: str, found: Found, source: str) -> None:
    """Last resort for GPUs and model: "8xb200", "16 x H100", a model name in a run name."""
    if found.get("gpus") is None and found.get("nodes") is None:
        said = gpu_count_in_prose(text[:PROSE_CHARS])
        if said is not None:
            found.put("gpus", said[0], f"{source} (text: {said[1]!r})")
    if found.get("gpu") is None:
        said = gpu_count_in_prose(text[:PROSE_CHARS])
        if said is not None and (named := gpu_name(said[1])) is not None:
            found.put("gpu_key", named[0], f"{source} (text: {said[1]!r})")
            found.put("gpu", named[1], f"{source} (text: {said[1]!r})")
    hf = _HF_MODEL.search(text, 0, PROSE_CHARS)
    if hf:
        found.put("model.hf_id", hf.group(1), f"{source} (Hugging Face model named)")
    named = found.get("model.preset") or found.get("titan.model") or found.get("model.layers")
    if named is None:
        low = text[:PROSE_CHARS].lower()
        hits = [(m.start(), p) for pat, p in _MODEL_WORDS if (m := re.search(pat, low))]
        if hits:
            found.put("model.preset", min(hits)[1], f"{source} (model named in the log)")


def _configs(configs: Sequence[str | Path], found: Found) -> None:
    """Each CONFIG by content: MLPerf config_*.sh (with the files they source), torchtitan
    TOML, NeMo/Megatron YAML, a Hugging Face config.json, else a script or command line."""
    shell: dict[str, str] = {}
    for path in configs:
        text = clean(read_text(path, limit=MAX_SPEC_BYTES))
        name = PurePath(str(path)).name
        if name.endswith(".toml") or re.search(
            r"^\[(job|training|parallelism|model)\]", text, re.M
        ):
            torchtitan.read_toml(text, found, name)
        elif name.endswith(".json"):
            _hf_config(text, found, name)
        elif name.endswith((".yaml", ".yml")):
            _yaml_config(text, found, name)
        elif name.endswith(".sh") or text.startswith("#!") or "export " in text:
            shell[name] = text
        else:
            cmdline.read_script(text, found, name)
    mlperf_names = [n for n in shell if n.startswith("config_")]
    if mlperf_names:
        mlperf.read_configs({n: shell[n] for n in sorted(shell, key=_mlperf_order)}, found)
    for name, text in shell.items():
        cmdline.read_script(text, found, name, {k: v for k, v in shell.items() if k != name})


def _mlperf_order(name: str) -> tuple[int, str]:
    """The system config (config_<SYSTEM>_...) first, the files it sources after."""
    common = name.startswith("config_common") or "_" not in name.removeprefix("config_")
    return (1 if common or name.count("_") < 2 else 0, name)


def _hf_config(text: str, found: Found, name: str) -> None:
    from tierwise.workload.hf import from_hf_config, is_hf_config

    try:
        data = json.loads(text)
    except ValueError:
        raise ParseError("not JSON", source=name) from None
    if isinstance(data, dict) and is_hf_config(data):
        spec = from_hf_config(data, default_name=PurePath(name).stem, source=name)
        found.put("model.spec", spec, f"{name} (Hugging Face config)")


def _yaml_config(text: str, found: Found, name: str) -> None:
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        raise ParseError("not YAML", source=name) from None
    flat: dict[str, Any] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if isinstance(v, dict | list):
                    walk(v)
                else:
                    flat.setdefault(str(k), v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(data)
    if "sequence_length" in flat:
        flat.setdefault("seq_length", flat["sequence_length"])
    found.format("yaml-config")
    apply_args(found, flat, f"{name}")


def _div(a: int | None, b: int | None) -> int | None:
    return a // b if a and b and a % b == 0 else None


def _derive(found: Found) -> None:
    """Fields that follow from stated ones (each says from what)."""
    v = found.get
    if v("gpus") is None and v("nodes") and v("gpus_per_node"):
        found.put("gpus", v("nodes") * v("gpus_per_node"), "derived: nodes x GPUs per node")
    if v("gpus_per_node") is None and v("gpus") and v("nodes"):
        found.put("gpus_per_node", _div(v("gpus"), v("nodes")), "derived: GPUs / nodes")
    if v("gpu") is None and v("gpu_key") is not None:
        found.put("gpu", v("gpu_key"), "derived")
    tp, pp, cp, world = v("layout.tp"), v("layout.pp"), v("layout.cp"), v("gpus")
    if pp == 1:
        found.put("layout.vpp", 1, "derived: no pipeline, no interleaving")
    if v("layout.dp") is None and v("minibs") and v("layout.gbs"):
        found.put("layout.dp", _div(v("layout.gbs"), v("minibs")), "derived: gbs / MINIBS")
    if v("layout.dp") is None and world and tp and pp and cp:
        found.put("layout.dp", _div(world, tp * pp * cp), "derived: GPUs / (tp x pp x cp)")
    dp = v("layout.dp")
    if v("layout.cp") is None and world and tp and pp and dp:
        found.put("layout.cp", _div(world, tp * pp * dp), "derived: GPUs / (tp x pp x dp)")
    if v("gpus") is None and tp and pp and dp and v("layout.cp"):
        found.put("gpus", tp * pp * dp * v("layout.cp"), "derived: tp x pp x cp x dp")
    per_rank = v("framework") == TORCHTITAN.name or found.sources.get("layout.mbs", "").endswith(
        "(batch_size)"
    )
    if v("layout.gbs") is None and v("layout.mbs") and dp and per_rank:
        found.put("layout.gbs", v("layout.mbs") * dp, "derived: per-rank batch x dp")
    _model(found)
    if v("model.experts") == 0:
        found.put("layout.ep", 1, "derived: dense model")
        found.put("layout.etp", v("layout.tp"), "derived: dense model")
        for key in ("model.top_k", "model.moe_ffn_hidden"):
            found.values.pop(key, None)
            found.sources.pop(key, None)
    if v("layout.etp") is None and v("layout.tp") and v("layout.ep") is not None:
        found.put("layout.etp", v("layout.tp"), "derived: expert TP defaults to tp")
    tps = v("measured.tps_for_step_time")
    gbs, seq, gpus = v("layout.gbs"), v("layout.seq"), v("gpus")
    if v("measured.step_time_s") is None and tps and gbs and seq and gpus:
        found.put("measured.step_time_s", gbs * seq / gpus / tps, "derived")
        found.put(
            "measured.step_time_method",
            "gbs x seq / GPUs / tokens per second per GPU (one logged throughput value)",
            "derived",
        )


def _model(found: Found) -> None:
    """Dims from a preset (MLPerf benchmark, torchtitan flavour, a name in the log) when the
    log states none; the log's own dims always win."""
    from tierwise.workload.load import preset, preset_names

    v = found.get
    spec = v("model.spec")
    titan = v("titan.model") or v("titan.module_config")
    name = v("model.preset")
    if name is None and titan:
        guess = f"{titan[0]}-{titan[1]}".lower().replace("_", "-")
        name = guess if guess in preset_names() else None
        if name:
            found.put("model.preset", name, f"torchtitan model {titan[0]} flavour {titan[1]}")
    if spec is None and name and name in preset_names() and v("model.layers") is None:
        spec = preset(name)
        found.put("model.name", name, f"preset {name}")
    if spec is None:
        found.put("model.name", v("model.hf_id"), found.sources.get("model.hf_id", ""))
        return
    found.values["model.spec"] = spec
    where = f"model {spec.name} ({found.sources.get('model.spec') or 'preset'})"
    for key, val in (
        ("model.name", spec.name),
        ("model.layers", spec.layers),
        ("model.hidden", spec.hidden),
        ("model.heads", spec.heads),
        ("model.kv_heads", spec.kv),
        ("model.head_dim", spec.head_dim),
        ("model.ffn_hidden", spec.ffn),
        ("model.vocab", spec.vocab),
        ("model.activation", spec.activation),
        ("model.tied_embeddings", spec.tied_embeddings),
        ("model.experts", spec.moe.experts if spec.moe else 0),
        ("model.top_k", spec.moe.top_k if spec.moe else None),
        ("model.moe_ffn_hidden", spec.moe.expert_ffn if spec.moe else None),
    ):
        found.put(key, val, where)


def _record(source: str, configs: Sequence[str | Path], found: Found) -> RunRecord:
    v = found.values
    model = {k: v.get(f"model.{k}") for k in MODEL_KEYS}
    model["preset"] = v.get("model.preset")
    for extra in ("activation", "tied_embeddings", "hf_id"):
        if f"model.{extra}" in v:
            model[extra] = v[f"model.{extra}"]
    layout = {k: v.get(f"layout.{k}") for k in LAYOUT_KEYS}
    run = {
        "gpus": v.get("gpus"),
        "gpu": v.get("gpu"),
        "gpu_key": v.get("gpu_key"),
        "nodes": v.get("nodes"),
        "gpus_per_node": v.get("gpus_per_node"),
    }
    measured: dict[str, Any] = {k: v.get(f"measured.{k}") for k in MEASURED_KEYS}
    measured["step_time_method"] = v.get("measured.step_time_method")
    for extra in ("peak_allocated_gib", "timers_ms", "samples_per_s"):
        if f"measured.{extra}" in v:
            measured[extra] = v[f"measured.{extra}"]
    estimates = {k.split(".", 1)[1]: x for k, x in v.items() if k.startswith("log_estimate.")}
    if estimates:
        measured["megatron_theoretical_memory"] = estimates
    if v.get("gpu_memory_gib"):
        run["gpu_memory_gib"] = round(v["gpu_memory_gib"], 1)
    dense = model.get("experts") == 0
    unknown = tuple(
        k
        for k in EXPECTED
        if _get(model, layout, run, measured, k) is None and not (dense and k == "model.top_k")
    )
    sources = {k: s for k, s in found.sources.items() if not k.startswith(("titan.", "model.spec"))}
    return RunRecord(
        source=source,
        configs=tuple(str(c) for c in configs),
        framework=v.get("framework"),
        formats=tuple(found.formats),
        model=model,
        layout=layout,
        run=run,
        measured=measured,
        settings=dict(found.settings),
        sources=sources,
        unknown=unknown,
        notes=tuple(found.notes),
        model_spec=v.get("model.spec"),
    )


def _get(model: dict, layout: dict, run: dict, measured: dict, key: str) -> Any:
    group, _, name = key.partition(".")
    if not name:
        return run.get(group)
    return {"model": model, "layout": layout, "measured": measured}[group].get(name)


def is_training_log(path: str | Path) -> bool:
    """Whether ``path`` reads as a training log (False for NCCL logs, tool output, configs;
    a file that cannot be read is left to the caller's reader to report)."""
    try:
        text = clean(read_text(path))
    except ParseError:
        return False
    return bool(_readers(text))
