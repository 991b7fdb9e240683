"""Megatron-LM logs of every era (and Megatron-DeepSpeed's): the arguments block, the
`using world size` header, iteration lines, timers and memory reports."""

from __future__ import annotations

import math
import re
from collections import deque
from typing import Any

from tierwise.verify.trainlog.args import apply_args
from tierwise.verify.trainlog.record import Found
from tierwise.verify.trainlog.steps import Window, from_values, from_windows
from tierwise.verify.trainlog.text import HEAD_CHARS, number, positive_int, value

MIB_PER_GIB = 1024.0
TIMER_BLOCK_CHARS = 8000
HEADER_CHARS = 1000  # of the `using world size` line
ARGS_BLOCK_CHARS = 200_000  # an arguments block (~300 lines of < 200 characters)
ARG_LINE_CHARS = 1000
# Iteration lines whose other fields (TFLOP/s, tokens/s, global batch) are read: the last ones.
FIELD_LINES = 512

# `  name ........ value` (dots pad the name to a column; 2021+ pad to 48 characters).
_ARG_DOTS = re.compile(r"^[ \t]{1,8}([A-Za-z_][A-Za-z0-9_]*) \.{2,} ?(.*?)[ \t]*$", re.MULTILINE)
# 2020's block: names longer than the column run into the value (`name  value`).
_ARG_RUN_IN = re.compile(r"^[ \t]{1,8}([A-Za-z_][A-Za-z0-9_]*)[ \t]+(?:\.+[ \t]*)?(\S.*?)[ \t]*$")
_BANNER = re.compile(r"^-{5,} arguments -{5,}[ \t]*$", re.MULTILINE)
_HEADER = re.compile(r"using world size: .*$", re.MULTILINE)
_HEADER_PAIR = re.compile(r"([A-Za-z][A-Za-z -]*?)[ -]sizes?: (\d{1,12})")
_HEADER_KEYS = {
    "using world": "gpus",
    "world": "gpus",
    "data-parallel": "layout.dp",
    "tensor-model-parallel": "layout.tp",
    "pipeline-model-parallel": "layout.pp",
    "context-parallel": "layout.cp",
    "and model-parallel": "layout.tp",
    "model-parallel": "layout.tp",
}
_ITERATION = re.compile(
    r"iteration\s+(\d{1,12})\s*/\s*\d+\s*\|"
    r"([^\n]*?elapsed time per iteration \(ms\): ([\d.]+)[^\n]*)"
)
_MICROBATCHES = re.compile(r"setting number of micro-?batches to constant (\d{1,12})")
_MEMORY = re.compile(
    r"after (\d{1,12}) iterations\)? memory \(MB\) \| allocated: ([\d.]+) \| "
    r"max allocated: ([\d.]+) \| reserved: ([\d.]+) \| max reserved: ([\d.]+)"
)
_THEORETICAL = re.compile(
    r"Theoretical memory footprints: weight and optimizer=([\d.]+) MB"
    r"(?:, activation=([\d.]+) MB, total=([\d.]+) MB)?"
)
_TIMER_LINE = re.compile(r"\ntime \(ms\) \|([^\n]*)")
_TIMER_MINMAX = re.compile(r"^\s*([A-Za-z][\w-]*(?: [\w-]+)*) \.{2,}: \(([\d.]+), ([\d.]+)\)", re.M)
_DEEPSPEED = re.compile(r"steps: \d+ loss: \S+ iter time \(s\): ([\d.]+)")
_PARAMS_DTYPE = re.compile(r"using torch\.(bfloat16|float16|float32) for parameters")
_PARAMS = re.compile(
    r"Number of parameters in transformer (?:layers|block) in billions:\s*([\d.]+)"
)


def looks_like(text: str) -> bool:
    """Megatron-LM (or a fork, or Megatron-DeepSpeed) wrote this."""
    return bool(
        "elapsed time per iteration" in text
        or "using world size:" in text
        or _ARG_DOTS.search(text, 0, HEAD_CHARS)
        or _DEEPSPEED.search(text)
    )


def arguments(text: str) -> dict[str, Any]:
    """The printed arguments (every era; excerpts with gaps keep what they show)."""
    args: dict[str, Any] = {}
    text = text[:HEAD_CHARS]
    for m in _ARG_DOTS.finditer(text):
        args.setdefault(m.group(1), value(m.group(2)))
    banner = _BANNER.search(text)  # 2020: names that ran into their value (first block)
    if banner is not None:
        block = text[banner.end() : banner.end() + ARGS_BLOCK_CHARS]
        for raw in block.splitlines()[1:]:
            if raw.startswith("-"):
                break
            m = _ARG_RUN_IN.match(raw[:ARG_LINE_CHARS])
            if m is None:
                if raw.strip() in ("", "[...]", "..."):
                    continue
                break
            args.setdefault(m.group(1), value(m.group(2)))
    return args


def read(text: str, found: Found, source: str) -> None:
    """Everything a Megatron log states, into ``found``."""
    args = arguments(text)
    if args:
        found.format("megatron-arguments")
        apply_args(found, args, f"{source} arguments")
    header = _HEADER.search(text, 0, HEAD_CHARS)
    if header:
        for name, n in _HEADER_PAIR.findall(header.group()[:HEADER_CHARS]):
            key = _HEADER_KEYS.get(name.strip().lower())
            if key:
                found.put(key, int(n), f"{source} header ({name.strip()} size)")
        if "and model-parallel" in header.group():
            where = f"{source} header (Megatron-LM v1: no pipeline or context parallelism)"
            for key in ("layout.pp", "layout.cp", "layout.vpp"):
                found.put(key, 1, where)
    dtype = _PARAMS_DTYPE.search(text)
    if dtype:
        name = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}[dtype.group(1)]
        found.put("layout.dtype", name, f"{source} ('using torch.{dtype.group(1)} for parameters')")
    micro = _MICROBATCHES.search(text)
    if micro:
        found.put("num_microbatches", int(micro.group(1)), f"{source} (micro-batches line)")
    _iterations(text, found, source, args.get("log_interval"))
    _memory(text, found, source)
    _timers(text, found)
    params = _PARAMS.search(text)
    if params:
        found.put("params_transformer_b", number(params.group(1)), source)


def _iterations(text: str, found: Found, source: str, log_interval: Any) -> None:
    windows: list[Window] = []
    tail: deque[str] = deque(maxlen=FIELD_LINES)
    last = 0
    interval = log_interval if isinstance(log_interval, int) and log_interval > 0 else None
    for it_text, rest, ms in _ITERATION.findall(text):
        it = int(it_text)
        first = it - interval + 1 if interval else (last + 1 if last < it else it)
        last = it
        seconds = (number(ms) or 0.0) / 1e3
        if seconds > 0 and math.isfinite(seconds):
            windows.append(Window(max(first, 1), it, seconds))
            tail.append(rest)
    if not windows:
        _deepspeed(text, found, source)
        return
    found.format("megatron-iterations")
    step = from_windows(windows, "'elapsed time per iteration' values")
    _put_step(found, step, source)
    # The other fields of the last lines (past warm-up when later lines exist).
    late = list(tail)[-step.values_used :] if step is not None else list(tail)
    tflops, tokens = [], []
    for rest in late:
        fields = _fields(rest)
        for name in ("throughput per GPU (TFLOP/s/GPU)", "TFLOPs"):
            if name in fields and (v := number(fields[name])) is not None:
                tflops.append(v)
        for name in ("tokens per gpu per second (tgs)", "average token/sec/GPU", "tokens/sec/gpu"):
            if name in fields and (v := number(fields[name])) is not None:
                tokens.append(v)
        gbs = fields.get("global batch size")
        if gbs is not None:
            found.put("layout.gbs", positive_int(number(gbs)), f"{source} iteration lines")
    if tflops:
        found.put("measured.tflops_per_gpu", _median(tflops), source)
    if tokens:
        found.put("measured.tokens_per_s_per_gpu", _median(tokens), source)
    _deepspeed(text, found, source)


def _deepspeed(text: str, found: Found, source: str) -> None:
    deepspeed = [x for t in _DEEPSPEED.findall(text) if (x := number(t)) and 0 < x < math.inf]
    if deepspeed:
        found.format("megatron-deepspeed")
        found.put("framework", "megatron-deepspeed", f"{source} (DeepSpeed engine lines)")
        step = from_values(deepspeed, "DeepSpeed 'iter time (s)' values")
        _put_step(found, step, source)


def _put_step(found: Found, step: Any, source: str) -> None:
    if step is not None:
        found.put("measured.step_time_s", step.seconds, source)
        found.put("measured.step_time_method", step.method, source)


def _fields(rest: str) -> dict[str, str]:
    """`name: value | name: value` pairs of one iteration line."""
    out: dict[str, str] = {}
    for part in rest.split("|"):
        name, sep, val = part.partition(":")
        if sep:
            out[name.strip()] = val.strip()
    return out


def _median(values: list[float]) -> float:
    from statistics import median

    return float(median(values))


def _memory(text: str, found: Found, source: str) -> None:
    reports = _MEMORY.findall(text)
    if reports:
        max_reserved = max(number(r[4]) or 0.0 for r in reports)
        max_alloc = max(number(r[2]) or 0.0 for r in reports)
        found.put(
            "measured.peak_memory_gib",
            max_reserved / MIB_PER_GIB,
            f"{source} memory report (max reserved over {len(reports)} rank line(s))",
        )
        found.put("measured.peak_allocated_gib", max_alloc / MIB_PER_GIB, source)
    theory = _THEORETICAL.search(text)
    if theory:
        found.put(
            "log_estimate.weight_and_optimizer_gib",
            (number(theory.group(1)) or 0.0) / MIB_PER_GIB,
            source,
        )
        if theory.group(3):
            found.put(
                "log_estimate.total_gib", (number(theory.group(3)) or 0.0) / MIB_PER_GIB, source
            )


def _timers(text: str, found: Found) -> None:
    """The last timer set printed (ms): `time (ms) | name: v | ...` or `(min, max)` blocks."""
    lines = _TIMER_LINE.findall(text)
    timers: dict[str, float] = {}
    if lines:
        for name, v in _fields(lines[-1]).items():
            if (x := number(v)) is not None:
                timers[name] = x
    block = text.rfind("(min, max) time across ranks (ms):")
    if block >= 0:  # the last block printed: its indented lines that follow
        for m in _TIMER_MINMAX.finditer(text, block, block + TIMER_BLOCK_CHARS):
            if (x := number(m.group(3))) is not None:
                timers[m.group(1)] = x
    if timers:
        found.put("measured.timers_ms", timers, "timers")
