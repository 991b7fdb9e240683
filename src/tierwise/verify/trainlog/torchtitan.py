"""torchtitan logs of every release (`step: N loss: ... memory: ...GiB(..%) tps: ... tflops:
... mfu: ...%`), its TOML config, and its benchmark tables (`benchmarks/*.md`)."""

from __future__ import annotations

import re
import tomllib
from datetime import datetime
from itertools import pairwise
from typing import Any

from tierwise.frameworks import TORCHTITAN
from tierwise.verify.trainlog.record import Found
from tierwise.verify.trainlog.steps import Window, from_windows
from tierwise.verify.trainlog.text import HEAD_CHARS, PROSE_CHARS, number, positive_int

_STEP = re.compile(r"step:\s*(\d{1,12})\s+loss:\s*\S+(?P<rest>[^\n]*)")
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})")
_MEMORY = re.compile(r"memory:\s*([\d.]+)\s*GiB\s*\(\s*([\d.]+)%\)")
_TPS = re.compile(r"\b(?:tps|wps):\s*([\d,]+(?:\.\d+)?)")
_TFLOPS = re.compile(r"\btflops:\s*([\d.]+)")
_MFU = re.compile(r"\bmfu:\s*([\d.]+)%")
_CAPTION = re.compile(r"^\*\*Table \d+\*\*(.*)$", re.MULTILINE)
_TABLE_ROW = re.compile(r"^\|(.+)\|[ \t]*$", re.MULTILINE)
# torchtitan [parallelism] / [training] / [experimental] keys -> record keys.
TOML_KEYS = {
    "tensor_parallel_degree": "layout.tp",
    "pipeline_parallel_degree": "layout.pp",
    "context_parallel_degree": "layout.cp",
    "expert_parallel_degree": "layout.ep",
    "expert_tensor_parallel_degree": "layout.etp",
    "local_batch_size": "layout.mbs",
    "batch_size": "layout.mbs",  # before 2025 [training] batch_size was per rank
    "global_batch_size": "layout.gbs",
    "seq_len": "layout.seq",
}


# torchtitan's JobConfig defaults for degrees a TOML leaves out (torchtitan/config/job_config.py,
# Parallelism: tensor/pipeline/context/expert parallel degrees default to 1).
TITAN_DEFAULTS = {
    "tensor_parallel_degree": "layout.tp",
    "pipeline_parallel_degree": "layout.pp",
    "context_parallel_degree": "layout.cp",
    "expert_parallel_degree": "layout.ep",
}
# Step lines whose throughput, TFLOP/s and memory are read: the last ones logged.
FIELD_LINES = 512
_FSDP_PROSE = re.compile(r"\bFSDP\s?[= ]\s?(\d{1,12})\b", re.IGNORECASE)


def looks_like(text: str) -> bool:
    step = _STEP.search(text)
    if step is not None and (_TPS.search(step.group("rest")) or _MEMORY.search(text)):
        return True
    return "TPS/GPU" in text and bool(_CAPTION.search(text, 0, HEAD_CHARS))


def read(text: str, found: Found, source: str) -> None:
    found.put("framework", TORCHTITAN.name, f"{source} (torchtitan step lines)")
    if "TPS/GPU" in text and _CAPTION.search(text, 0, HEAD_CHARS) and not _steps_with_tps(text):
        _benchmark_table(text, found, source)
        return
    _steps(text, found, source)
    fsdp = _FSDP_PROSE.search(text, 0, PROSE_CHARS)
    if fsdp:
        found.put("layout.dp", int(fsdp.group(1)), f"{source} (text: {fsdp.group(0)!r})")


def _steps_with_tps(text: str) -> bool:
    return any(_TPS.search(m.group("rest")) for m in _STEP.finditer(text))


def _steps(text: str, found: Found, source: str) -> None:
    """Step lines of the first run in the text (a step number going back starts another run:
    PR descriptions paste several); ranks' copies of a step count once."""
    runs = 0
    seen: dict[int, tuple[float | None, str]] = {}
    last = -1
    for m in _STEP.finditer(text):
        step = int(m.group(1))
        if step == last:  # another rank's copy of the step
            continue
        rest = m.group("rest")
        if "tps:" not in rest and "wps:" not in rest:
            continue
        if step < last:
            runs += 1
            break
        last = step
        if step in seen:
            continue
        stamp = None
        ts = _STAMP.search(text, text.rfind("\n", 0, m.start()) + 1, m.start())
        if ts is not None:
            try:
                stamp = datetime.fromisoformat(ts.group(1)).timestamp() + int(ts.group(2)) / 1e3
            except ValueError:  # not a date (month 13, ...)
                stamp = None
        seen[step] = (stamp, rest)
    if runs:
        found.note(
            "torchtitan: step lines of further runs in the text are left out (first run read)"
        )
    if not seen:
        return
    found.format("torchtitan-steps")
    steps = sorted(seen)
    fields = steps[-FIELD_LINES:]  # throughput and memory: the last steps logged
    tps = [x for s in fields if (x := _search(_TPS, seen[s][1])) is not None]
    late = [t for s, t in zip(fields, tps, strict=False) if s > 2] or tps
    if not tps:
        return
    from statistics import median

    found.put("measured.tokens_per_s_per_gpu", float(median(late)), f"{source} (tps)")
    tflops = [x for s in fields if (x := _search(_TFLOPS, seen[s][1])) is not None]
    if tflops:
        found.put("measured.tflops_per_gpu", float(median(tflops[-len(late) :])), source)
    mem = [_MEMORY.search(seen[s][1]) for s in fields]
    mems = [m for m in mem if m]
    if mems:
        peak = max(number(m.group(1)) or 0.0 for m in mems)
        found.put("measured.peak_memory_gib", peak, f"{source} (memory)")
        pct = number(mems[0].group(2)) or 0.0
        if pct > 0:
            found.put(
                "gpu_memory_gib",
                (number(mems[0].group(1)) or 0.0) * 100 / pct,
                f"{source} (memory %)",
            )
    windows = []
    for a, b in pairwise(steps):
        ta, tb = seen[a][0], seen[b][0]
        if ta is not None and tb is not None and tb > ta:
            windows.append(Window(a + 1, b, (tb - ta) / (b - a)))
    step = from_windows(windows, "intervals between step-line timestamps")
    if step is not None:
        found.put("measured.step_time_s", step.seconds, source)
        found.put("measured.step_time_method", step.method, source)
    else:
        found.put("measured.tps_for_step_time", float(median(late)), source)


def _search(pattern: re.Pattern[str], text: str) -> float | None:
    m = pattern.search(text)
    return number(m.group(1)) if m else None


def _benchmark_table(text: str, found: Found, source: str) -> None:
    """torchtitan's benchmarks/*.md: the first row of the first table with TPS/GPU, its
    caption's GPUs and batch sizes (the other rows are listed in a note)."""
    for cap in _CAPTION.finditer(text, 0, HEAD_CHARS):
        rows = []
        header: list[str] | None = None
        for m in _TABLE_ROW.finditer(text, cap.end(), HEAD_CHARS):
            cells = [c.strip() for c in m.group(1).split("|")]
            if header is None:
                header = cells
            elif not set("".join(cells)) <= set("-: "):
                rows.append(cells)
            nxt = text.find("\n", m.end() + 1)
            if nxt == -1 or not text[m.end() + 1 : nxt + 1].lstrip().startswith("|"):
                break
        if header is None or "TPS/GPU" not in header or not rows:
            continue
        found.format("torchtitan-benchmark-table")
        caption = cap.group(1)
        where = f"{source} table caption"
        row = dict(zip(header, rows[0], strict=False))
        tps = number(row.get("TPS/GPU", ""))
        found.put("measured.tokens_per_s_per_gpu", tps, f"{source} table row {rows[0][0]!r}")
        mem = number(row.get("Memory(GiB)", ""))
        found.put("measured.peak_memory_gib", mem, f"{source} table row {rows[0][0]!r}")
        if tps:
            found.put("measured.tps_for_step_time", tps, source)
        if (m := re.search(r"(\d{1,12}) GPUs", caption)) is not None:
            found.put("gpus", int(m.group(1)), where)
        if (m := re.search(r"Local batch size (\d{1,12})", caption, re.I)) is not None:
            found.put("layout.mbs", int(m.group(1)), where)
        if (m := re.search(r"global batch size (\d{1,12})", caption, re.I)) is not None:
            found.put("layout.gbs", int(m.group(1)), where)
        ac = re.search(r"(Selective|Full|No) activation checkpointing", caption, re.I)
        if ac:
            found.put("layout.recompute", ac.group(1).lower().replace("no", "none"), where)
        if "Float8" in rows[0][0]:
            found.put("layout.dtype", "fp8", f"{source} table row {rows[0][0]!r}")
        found.note(
            f"benchmark table: row {rows[0][0]!r} of table{cap.group(1).split('.')[0] or ''} "
            f"read; {len(rows) - 1} other row(s) in it are other runs"
        )
        return


def read_toml(text: str, found: Found, source: str) -> None:
    """A torchtitan job config: degrees, batch, sequence, model flavour, AC mode, float8."""
    try:
        cfg = tomllib.loads(text)
    except (ValueError, RecursionError):  # TOMLDecodeError, an integer over 4300 digits
        return
    found.format("torchtitan-toml")
    found.put("framework", TORCHTITAN.name, f"{source} (TOML)")
    tables: dict[str, Any] = {}
    for section in ("parallelism", "training", "experimental"):
        if isinstance(cfg.get(section), dict):
            for key, v in cfg[section].items():
                tables.setdefault(key, v)
    for key, rec in TOML_KEYS.items():
        if key in tables:
            found.put(rec, positive_int(tables[key]), f"{source} ({key})")
    if isinstance(cfg.get("parallelism"), dict) or isinstance(cfg.get("experimental"), dict):
        for key, rec in TITAN_DEFAULTS.items():
            found.put(rec, 1, f"{source} ({key} not set: torchtitan's default 1)")
    for key in ("data_parallel_shard_degree", "data_parallel_replicate_degree"):
        if key in tables and isinstance(tables[key], int):
            found.put(f"titan.{key}", tables[key], source)
    model = cfg.get("model") if isinstance(cfg.get("model"), dict) else {}
    if model.get("name") and model.get("flavor"):
        found.put("model.name", f"{model['name']} {model['flavor']}", f"{source} [model]")
        found.put("titan.model", (str(model["name"]), str(model["flavor"])), source)
    ac = cfg.get("activation_checkpoint")
    if isinstance(ac, dict) and isinstance(ac.get("mode"), str):
        found.put("layout.recompute", ac["mode"], f"{source} [activation_checkpoint] mode")
    f8 = cfg.get("float8")
    converters = model.get("converters") or []
    if (isinstance(f8, dict) and f8.get("enable_float8_linear")) or "float8" in converters:
        found.put("layout.dtype", "fp8", f"{source} (float8)")
    elif isinstance(f8, dict) or "training" in cfg:
        found.put("layout.dtype", "bf16", f"{source} (no float8 converter: bf16 mixed precision)")
    comp = cfg.get("compile")
    if isinstance(comp, dict) and "enable" in comp:
        found.setting("compile", bool(comp["enable"]))
    elif isinstance(cfg.get("training"), dict) and "compile" in cfg["training"]:
        found.setting("compile", bool(cfg["training"]["compile"]))
