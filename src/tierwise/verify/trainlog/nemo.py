"""NeMo 2 / Lightning progress lines, Megatron-Bridge's printed ConfigContainer, NeMo perf
scripts' run names, and `key: value` config lines with Megatron names."""

from __future__ import annotations

import re
from typing import Any

from tierwise.verify.trainlog.args import INT_FIELDS, SETTINGS, apply_args
from tierwise.verify.trainlog.record import Found
from tierwise.verify.trainlog.steps import Window, from_windows
from tierwise.verify.trainlog.text import HEAD_CHARS, number, positive_int, value

GIB = float(1 << 30)

_TASK_START = re.compile(r"^-+ Task Configuration -+[ \t]*$", re.MULTILINE)
_TASK_END = re.compile(r"^-{10,}[ \t]*$", re.MULTILINE)
_SECTION = re.compile(r"^([A-Za-z_][\w]*):[ \t]*(.*?)[ \t]*$")
_KEY = re.compile(r"^  ([A-Za-z_][\w]*):[ \t]*(.*?)[ \t]*$")
_LIGHTNING = re.compile(r"iteration (\d{1,12})/(\d{1,12}) \|([^\n]*train_step_timing in s:[^\n]*)")
_BRIDGE_STEP = re.compile(r"Step Time : ([\d.]+)s")
# NeMo's perf scripts name runs <task>_<model>_<size>_<dtype>_<N>nodes_tp_pp_cp_vp[_ep]_mbs_gbs
# (scripts/performance/helpers.py, get_user_configs / exp name).
_RUN_NAME = re.compile(
    r"_(bf16|fp8|fp16|mxfp8|nvfp4)?_?(\d{1,12})nodes_tp(\d{1,12})_pp(\d{1,12})_cp(\d{1,12})_vp(\d{1,12}|None)"
    r"(?:_ep(\d{1,12}))?(?:_etp(\d{1,12}|None))?_(\d{1,12})mbs_(\d{1,12})gbs"
)
_YAML_LINE = re.compile(r"^[ \t]*([a-z_]+):[ \t]*([^\s#][^#]*?)[ \t]*$", re.MULTILINE)
# Bridge sections whose keys are Megatron arguments, most specific first: the dataset's
# sequence_length is what is trained (the model's seq_length is the provider's default).
_BRIDGE_SECTIONS = ("dataset", "train", "ddp", "mixed_precision", "optimizer", "model")
_RENAMES = {"sequence_length": "seq_length"}


def looks_like(text: str) -> bool:
    return bool(
        "train_step_timing in s" in text
        or _TASK_START.search(text, 0, HEAD_CHARS)
        or _RUN_NAME.search(text, 0, HEAD_CHARS)
    )


def bridge_config(text: str) -> dict[str, dict[str, Any]]:
    """Megatron-Bridge's `Task Configuration` YAML: section -> {key: value} (top level only)."""
    start = _TASK_START.search(text, 0, HEAD_CHARS)
    if start is None:
        return {}
    end = _TASK_END.search(text, start.end())
    block = text[start.end() : end.start() if end else len(text)]
    sections: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for raw in block.splitlines():
        if (m := _SECTION.match(raw)) is not None:
            current = sections.setdefault(m.group(1), {}) if not m.group(2) else None
        elif current is not None and (m := _KEY.match(raw)) is not None:
            current[m.group(1)] = value(m.group(2)) if m.group(2) else None
    return sections


def read(text: str, found: Found, source: str) -> None:
    sections = bridge_config(text)
    if sections:
        found.format("megatron-bridge-config")
        found.put("framework", "megatron-bridge", f"{source} (Task Configuration)")
        merged: dict[str, Any] = {}
        for name in _BRIDGE_SECTIONS:
            for key, v in sections.get(name, {}).items():
                merged.setdefault(_RENAMES.get(key, key), v)
        apply_args(found, merged, f"{source} Task Configuration")
    _run_name(text, found, source)
    _lightning(text, found, source)
    for m in _BRIDGE_STEP.finditer(text):
        found.put("bridge_step_time_s", number(m.group(1)), source)
    _yaml_lines(text, found, source)


def _run_name(text: str, found: Found, source: str) -> None:
    m = _RUN_NAME.search(text, 0, HEAD_CHARS)
    if m is None:
        return
    found.format("nemo-run-name")
    found.put("framework", "nemo", f"{source} (NeMo perf-script run name)")
    where = f"{source} run name {m.group(0).strip('_')!r}"
    dtype, nodes, tp, pp, cp, vp, ep, etp, mbs, gbs = m.groups()
    found.put("layout.dtype", dtype, where)
    found.put("nodes", int(nodes), where)
    found.put("layout.tp", int(tp), where)
    found.put("layout.pp", int(pp), where)
    found.put("layout.cp", int(cp), where)
    found.put("layout.vpp", 1 if vp == "None" else int(vp), where)
    found.put("layout.ep", int(ep) if ep else None, where)
    found.put("layout.etp", int(etp) if etp and etp != "None" else None, where)
    found.put("layout.mbs", int(mbs), where)
    found.put("layout.gbs", int(gbs), where)


def _lightning(text: str, found: Found, source: str) -> None:
    windows: list[Window] = []
    last = 0
    mem: list[float] = []
    tflops: list[float] = []
    for m in _LIGHTNING.finditer(text):
        it = int(m.group(1))
        fields = {}
        for part in m.group(3).split("|"):
            name, sep, v = part.partition(":")
            if sep:
                fields[name.strip()] = v.strip()
        seconds = number(fields.get("train_step_timing in s", ""))
        if seconds is None or not 0 < seconds < float("inf"):
            continue
        # NeMo's train_step_timing is the time of the step it is printed with.
        windows.append(Window(it if last == 0 or it <= last else last + 1, it, seconds))
        last = it
        found.put("layout.gbs", positive_int(number(fields.get("global_batch_size", ""))), source)
        if (v := number(fields.get("max_memory_reserved", ""))) is not None:
            mem.append(v / GIB)
        if (v := number(fields.get("TFLOPS_per_GPU", ""))) is not None:
            tflops.append(v)
    if windows:
        found.format("nemo-progress")
        found.put("framework", "nemo", f"{source} (NeMo/Lightning progress lines)")
        step = from_windows(windows, "'train_step_timing in s' values")
        if step is not None:
            found.put("measured.step_time_s", step.seconds, source)
            found.put("measured.step_time_method", step.method, source)
        if mem:
            found.put("measured.peak_memory_gib", max(mem), f"{source} (max_memory_reserved)")
        if tflops:
            from statistics import median

            found.put(
                "measured.tflops_per_gpu", float(median(tflops)), f"{source} (TFLOPS_per_GPU)"
            )


def _yaml_lines(text: str, found: Found, source: str) -> None:
    """`  global_batch_size: 128` lines (NeMo config dumps and notes) with Megatron names."""
    args: dict[str, Any] = {}
    wanted = set(INT_FIELDS) | set(SETTINGS) | {"bf16", "fp16", "fp8"}
    for m in _YAML_LINE.finditer(text, 0, HEAD_CHARS):
        if m.group(1) in wanted:
            args.setdefault(m.group(1), value(m.group(2)))
    if args:
        apply_args(found, args, f"{source} config lines")
