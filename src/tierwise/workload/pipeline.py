"""How a model's layers are split over pipeline stages, as Megatron-LM writes it.

- Even: layers / pp on every stage (Megatron's default; each stage split over vpp chunks).
- Megatron's ``--account-for-embedding-in-pipeline-split`` / ``--account-for-loss-in-pipeline-
  split`` count the input embedding and the loss as one layer each: (layers + e + l) / (pp*vpp)
  per virtual stage, the first virtual stage of the first rank one decoder layer short (and
  the last of the last rank), e.g. Llama 3.1 405B's 126 layers on pp 8, vpp 8: 2 per chunk,
  15 + 16*6 + 15 per rank (megatron/core/transformer/transformer_config.py, TransformerBlock).
- ``--pipeline-model-parallel-layout`` strings (Megatron-core's PipelineParallelLayerLayout):
  ``|`` separates the pp*vpp virtual stages, listed chunk by chunk (virtual stage
  ``v*pp + r`` runs on rank r); ``E`` embedding, ``t`` decoder layer, ``L`` loss, ``m`` MTP
  layer; ``x*n`` and ``(...)*n`` repeat; commas are cosmetic. "Et|(tt|)*62tL" is 405B's.
- Standard uneven split (what ``estimate`` and ``plan`` pick when layers do not divide): the
  embedding and loss accounting above when it divides, else the rest spread from the middle
  stages outwards so the first and last stages (embedding, logits) hold the fewest.

The embedding always sits on the first rank and the loss (logits) on the last; the step
model weighs them there (`tierwise.perf.step`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import NamedTuple

from tierwise.bounds import MAX_LAYERS
from tierwise.errors import SpecError
from tierwise.frameworks import DUAL_SCHEDULES, V_SCHEDULES
from tierwise.workload.flops import Array, maximum
from tierwise.workload.layout import Layout, middle_stage_layers
from tierwise.workload.spec import ModelSpec

LAYOUT_FLAG = "--pp-layout"
DUAL_OR_V = (*DUAL_SCHEDULES, *V_SCHEDULES)
LAYER_CHARS = {"E": "embedding", "t": "decoder", "L": "loss", "m": "mtp"}
_REPEAT_GROUP = re.compile(r"\(([^()]*)\)\*([0-9]+)")
_REPEAT_CHAR = re.compile(r"(.)\*([0-9]+)")
#: Longest layout once its repeats are unrolled: E, L, m and '|' beside at most MAX_LAYERS t's.
MAX_LAYOUT_CHARS = 4 * MAX_LAYERS


class Split(NamedTuple):
    """Decoder layers per pipeline rank, virtual stages per rank, and the rule that chose them."""

    stage_layers: tuple[int, ...]
    vpp: int
    rule: str
    mtp_rank: int | None = None
    """The rank holding the MTP layers where a layout string places them apart from the
    loss (None: with it, or the model has none)."""


def megatron_split(
    layers: int, pp: int, vpp: int = 1, embedding: bool = False, loss: bool = False
) -> Split:
    """Megatron's split with the embedding and/or the loss counted as a layer each."""
    counted = [name for name, on in (("embedding", embedding), ("loss", loss)) if on]
    total = layers + len(counted)
    if total % (pp * vpp):
        raise SpecError(
            f"layout: {' + '.join(['layers', *counted])} = {total} must be divisible by pp*vpp "
            f"= {pp}*{vpp} (Megatron's even split"
            + (f" with the {' and '.join(counted)} counted as layers)" if counted else ")")
        )
    stages = [total // pp] * pp
    stages[0] -= embedding
    stages[-1] -= loss
    if min(stages) < 1:
        raise SpecError(f"layout: pp {pp} leaves a stage without decoder layers ({stages})")
    rule = f"{' and '.join(counted)} counted as layers" if counted else "even"
    return Split(tuple(stages), vpp, rule)


def balanced_split(layers: int, pp: int) -> tuple[int, ...]:
    """layers // pp per stage; the remainder one each on the middle stages first (centre
    outwards), so the first and last stages, which carry the embedding and logits, get fewest."""
    base, extra = divmod(layers, pp)
    order = sorted(range(pp), key=lambda r: (r in (0, pp - 1), abs(2 * r - (pp - 1)), r))
    stages = [base] * pp
    for r in order[:extra]:
        stages[r] += 1
    return tuple(stages)


def uneven_split(layers: int, pp: Array) -> tuple[Array, Array]:
    """(first, last) stage layers of the uneven split where `pp` (an int or an array) does not
    divide `layers`: every middle stage holds ceil(layers / pp) and the first and last (the
    embedding's and the loss's) share the rest, the first one fewer when it is odd: 80 layers
    over 3 stages 26/27/27, Llama 3 405B's 126 over 16 7/8.../7, DeepSeek-V3's 61 over 8
    6/8.../7 (what Megatron's --decoder-first/last-pipeline-num-layers state)."""
    middle = -(-layers // pp)
    rest = layers - maximum(pp - 2, 0) * middle
    first = rest // 2
    return first, rest - first


def standard_split(layers: int, pp: int, vpp: int = 1) -> Split:
    """Even when it divides; else embedding and loss counted as layers when that divides;
    else the first and last stages short (`uneven_split`), as `plan` splits; else (an end
    stage would be empty) balanced with the ends lightest. Over pp*vpp chunks first, then
    over the pp ranks with chunks of a rank uneven."""
    if layers < pp:
        raise SpecError(f"layout: pp {pp} must be <= layers ({layers})")
    for chunks, uneven in ((pp * vpp, ""), (pp, ", chunks uneven")):
        if layers % chunks == 0:
            return Split(tuple([layers // pp] * pp), vpp, "even" + uneven)
        if (layers + 2) % chunks == 0:
            split = megatron_split(layers, pp, chunks // pp, embedding=True, loss=True)
            return Split(split.stage_layers, vpp, split.rule + uneven)
    first, last = uneven_split(layers, pp)
    if min(first, last) >= 1:
        middle = [int(middle_stage_layers(layers, pp, first, last))] * (pp - 2)
        rule = "first and last stages short" + (", chunks uneven" if vpp > 1 else "")
        return Split((first, *middle, last), vpp, rule)
    return Split(balanced_split(layers, pp), vpp, "balanced, first and last stages lightest")


def expand_layout(text: str) -> list[str]:
    """A layout string's virtual stages, repeats unrolled: "E(tt|)*2L" -> ["Ett", "tt", "L"]."""
    flat = text.replace(",", "").replace(" ", "")
    while True:
        unrolled = _unroll(_REPEAT_GROUP, flat, text)
        if unrolled == flat:
            break
        flat = unrolled
    flat = _unroll(_REPEAT_CHAR, flat, text)
    bad = sorted(set(flat) - set(LAYER_CHARS) - {"|"})
    if bad:
        allowed = ", ".join(f"{c} ({name})" for c, name in LAYER_CHARS.items())
        raise SpecError(
            f"{LAYOUT_FLAG}: {text!r} has {''.join(bad)!r}; allowed: {allowed}, '|' between "
            "virtual stages, x*n and (...)*n repeats"
        )
    return flat.split("|")


def _unroll(repeat: re.Pattern[str], flat: str, text: str) -> str:
    """``flat`` with each match of ``repeat`` unrolled, refused (before building it) when the
    result would be longer than MAX_LAYOUT_CHARS."""
    matches = list(repeat.finditer(flat))
    length = len(flat)
    for match in matches:
        digits = match.group(2).lstrip("0") or "0"
        if len(digits) > len(str(MAX_LAYOUT_CHARS)):
            length = MAX_LAYOUT_CHARS + 1
            break
        length += len(match.group(1)) * int(digits) - len(match.group(0))
    if length > MAX_LAYOUT_CHARS:
        raise SpecError(
            f"{LAYOUT_FLAG}: {text[:80]!r} unrolls to more than {MAX_LAYOUT_CHARS} characters; "
            f"allowed: at most {MAX_LAYERS} layers"
        )
    return repeat.sub(lambda g: g.group(1) * int(g.group(2)), flat)


def parse_layout(
    text: str, pp: int, layers: int, mtp_layers: int = 0, schedule: str | None = None
) -> Split:
    """Decoder layers per rank and vpp of a Megatron pipeline layout string (module docstring);
    every problem is a one-line `SpecError` naming the string. A model with `mtp_layers`
    multi-token-prediction layers places them (``m``) as megatron-core 0.16.1 accepts them
    (PipelineParallelLayerLayout.validate_layer_layout): all in one virtual stage, the last
    of its rank, no decoder layer after them ("Et*3|(tt|)*29m|L" runs them alone on rank 14;
    "Et*3|(t*4|)*14ttmL" with the loss). A V-shaped `schedule` (`V_SCHEDULES`) runs virtual
    stage s on rank s, or 2pp-1-s past the first pp; the two-direction ones keep ``m`` with
    the loss, and so do the V-shaped ones."""
    stages = expand_layout(text)
    flat = "".join(stages)
    problem = None
    vpp = max(len(stages) // pp, 1)
    with_m = [i for i, stage in enumerate(stages) if "m" in stage]
    if len(stages) % pp:
        problem = f"{len(stages)} virtual stages are not a multiple of pp ({pp})"
    elif pp == 1 and len(stages) > 1:
        problem = f"{len(stages)} virtual stages on one pipeline rank; give --pp (pp > 1)"
    elif schedule in V_SCHEDULES and len(stages) != 2 * pp:
        problem = (
            f"{len(stages)} virtual stages; --pipeline-schedule {schedule} runs a V of "
            f"2*pp = {2 * pp}"
        )
    elif flat.count("E") != 1 or not flat.startswith("E"):
        problem = "the embedding E must come once, first"
    elif flat.count("L") != 1 or not flat.endswith("L"):
        problem = "the loss L must come once, last"
    elif "m" in flat and not mtp_layers:
        problem = "MTP layers (m) need a model with multi-token prediction; this one has none"
    elif flat.count("m") not in (0, mtp_layers):
        problem = f"it holds {flat.count('m')} MTP layers (m); the model has {mtp_layers}"
    elif "t" in flat[flat.find("m") :] and "m" in flat:
        problem = "decoder layers (t) must all come before the MTP layers (m)"
    elif len(with_m) > 1:
        problem = "the MTP layers (m) must all sit in one virtual stage"
    elif with_m and with_m[0] // pp != vpp - 1:
        problem = "the MTP layers (m) must sit in the last virtual stage of their rank"
    elif with_m and schedule in DUAL_OR_V and with_m[0] != len(stages) - 1:
        problem = f"--pipeline-schedule {schedule} runs the MTP layers (m) with the loss L"
    elif flat.count("t") != layers:
        problem = f"it holds {flat.count('t')} decoder layers (t); the model has {layers}"
    if problem is not None:
        raise SpecError(f"{LAYOUT_FLAG}: {text!r}: {problem}")
    rank_of = stage_ranks(len(stages), pp, schedule in V_SCHEDULES)
    per_rank = [0] * pp
    for index, stage in enumerate(stages):
        per_rank[rank_of[index]] += stage.count("t")
    if min(per_rank) < 1:
        raise SpecError(f"{LAYOUT_FLAG}: {text!r}: a pipeline rank holds no decoder layer")
    mtp_rank = rank_of[with_m[0]] if with_m and with_m[0] != len(stages) - 1 else None
    return Split(tuple(per_rank), vpp, f"{LAYOUT_FLAG} {text}", mtp_rank)


def stage_ranks(stages: int, pp: int, v_shape: bool = False) -> list[int]:
    """The pipeline rank of each virtual stage: ``s % pp`` (Megatron's interleaving), or
    with `v_shape` s for s < pp and 2pp-1-s after (torch.distributed.pipelining
    generate_stage_to_rank_mapping, style "v")."""
    if v_shape:
        return [s if s < pp else 2 * pp - 1 - s for s in range(stages)]
    return [s % pp for s in range(stages)]


def with_split(
    model: ModelSpec,
    layout: Layout,
    pp_layout: str | None = None,
    embedding: bool = False,
    loss: bool = False,
    schedule: str | None = None,
) -> tuple[Layout, str | None]:
    """`layout` with the split a Megatron layout string, the embedding/loss accounting or,
    where layers do not divide over pp*vpp, `standard_split` gives (and the rule's name);
    otherwise unchanged (rule None). The split is stated before any check reads the layout
    (a framework that cannot state one refuses it). `schedule`: the pipeline schedule, which
    maps the string's virtual stages to ranks (`parse_layout`). Conflicting flags are
    one-line errors."""
    chosen = [
        name
        for name, on in (
            (LAYOUT_FLAG, pp_layout is not None),
            ("--pp-layers", layout.pp_layers is not None),
            ("--account-for-*-in-pipeline-split", embedding or loss),
        )
        if on
    ]
    if len(chosen) > 1:
        raise SpecError(f"{' and '.join(chosen)} both set the pipeline split; give one")
    if pp_layout is not None:
        split = parse_layout(pp_layout, layout.pp, model.layers, model.mtp_layers, schedule)
        if layout.vpp not in (1, split.vpp):
            raise SpecError(
                f"--vpp {layout.vpp}: {LAYOUT_FLAG} {pp_layout!r} has {split.vpp * layout.pp} "
                f"virtual stages, {split.vpp} per rank on pp {layout.pp}"
            )
    elif embedding or loss:
        split = megatron_split(model.layers, layout.pp, layout.vpp, embedding, loss)
    elif layout.pp_layers is None and model.layers % (layout.pp * layout.vpp):
        split = standard_split(model.layers, layout.pp, layout.vpp)
    else:
        return layout, None
    update = {"pp_layers": split.stage_layers, "vpp": split.vpp, "mtp_rank": split.mtp_rank}
    return layout.model_copy(update=update), split.rule


def split_text(stage_layers: Sequence[int]) -> str:
    """Layers per stage with runs folded: (7, 8, 8, 8, 7) -> "7+8x3+7"."""
    runs = [(n, len(list(group))) for n, group in itertools.groupby(stage_layers)]
    return "+".join(f"{n}x{count}" if count > 1 else str(n) for n, count in runs)


def chunk_layers(stage_layers: Sequence[int], vpp: int) -> list[int]:
    """Layers of every virtual stage in order (virtual stage v*pp + r on rank r): each rank's
    layers split over its vpp chunks as evenly as they go, the first rank's smaller chunks
    first (its first holds the embedding), every other rank's last (the last one's, the loss)."""
    pp = len(stage_layers)

    def size(r: int, v: int) -> int:
        n = stage_layers[r]
        position = vpp - 1 - v if r == 0 else v
        return n // vpp + (position < n % vpp)

    return [size(r, v) for v in range(vpp) for r in range(pp)]


def layout_string(stage_layers: Sequence[int], vpp: int, mtp: int = 0) -> str:
    """The Megatron layout string of a split: "Et|(tt|)*62tL" for 405B's (15+16x6+15, vpp 8);
    `mtp` multi-token-prediction layers sit before the loss ("m", as Megatron-core counts
    them against --mtp-num-layers)."""
    stages = ["t" * n if n <= 2 else f"t*{n}" for n in chunk_layers(stage_layers, vpp)]
    stages[0], stages[-1] = "E" + stages[0], stages[-1] + "m" * mtp + "L"
    out = []
    for text, group in itertools.groupby(stages):
        count = len(list(group))
        out.append(f"({text}|)*{count}" if count > 1 else f"{text}|")
    return "".join(out).removesuffix("|")
