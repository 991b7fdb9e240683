"""Training precision: which GEMMs run in a low-precision format, and what each format stores.

``--dtype bf16|fp8|mxfp8|nvfp4`` and, for fp8, ``--fp8-recipe delayed|tensorwise|blockwise``
(Megatron-LM's names; tensorwise is Transformer Engine's current scaling). Each pair is one
:class:`Format`, indexed by a small integer code so the vectorised step and memory models can
look its facts up for many layouts at once (``FORMAT_TABLE[field][code]``).

What Transformer Engine (TE) does, per its recipe documentation (``transformer_engine.common.
recipe``: DelayedScaling, Float8CurrentScaling, Float8BlockScaling, MXFP8BlockScaling,
NVFP4BlockScaling):

- The weight GEMMs of every transformer layer (QKV, output projection, MLP, experts) run in the
  format in all three passes: fprop, dgrad and wgrad. The attention core (flash/cuDNN) stays
  BF16, and so do the router and Megatron's output layer (a plain ColumnParallelLinear).
- Operands are quantized by separate kernels: read the 16-bit tensor, write the quantized one.
  Current scaling (tensorwise) first reads the tensor once more for its amax; delayed scaling
  takes the scale from the amax history. NVFP4 also needs a per-tensor amax (its second-level
  FP32 scale) and applies a random Hadamard transform to the wgrad operands.
- Block-scaled formats keep scales along the contraction dimension, so each operand is
  quantized twice (row-wise for fprop, column-wise for dgrad/wgrad); so is per-tensor FP8 on
  Hopper, whose FP8 GEMMs take only the TN layout (a transposed copy).
- TE keeps a low-precision copy of each weight (both orientations where needed) beside the
  BF16 one, and saves each linear layer's input for wgrad in its quantized form.
- Megatron's ``--fp8-param-gather`` and torchtitan's ``enable_fsdp_float8_all_gather`` gather
  parameters in FP8 (per-tensor and MXFP8); NVFP4 parameters are gathered in BF16.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from tierwise.errors import SpecError
from tierwise.hardware.catalog import GPU
from tierwise.memo import by_identity
from tierwise.workload.flops import maximum

if TYPE_CHECKING:
    import numpy as np

DTYPES = ("bf16", "fp8", "mxfp8", "nvfp4")
FP8_RECIPES = ("delayed", "tensorwise", "blockwise")
DEFAULT_FP8_RECIPE = "delayed"
"""Megatron-LM's ``--fp8-recipe`` default (TE's DelayedScaling)."""
BF16_BYTES = 2


class Format(NamedTuple):
    """One precision: its name, the GPU peak it runs at and its bytes per element."""

    name: str
    peak: str
    """Which ``peak_<peak>_tflops`` of the GPU the quantized GEMMs run against."""
    element_bytes: float
    """Bytes per element of a quantized operand, scales included."""
    gemms: tuple[bool, bool, bool]
    """(fprop, dgrad, wgrad) of the layers' weight GEMMs in this format."""
    block_scaled: bool
    """Scales per block along the contraction dim: row- and column-wise copies of operands."""
    amax_pass: bool
    """An extra read of each 16-bit operand for its amax before the cast."""
    gather_low: bool
    """Parameters all-gathered in this format (FSDP/ZeRO-3, distributed optimizer)."""


FORMATS = (
    Format("bf16", "bf16", BF16_BYTES, (False, False, False), False, False, False),
    Format("fp8-delayed", "fp8", 1.0, (True, True, True), False, False, True),
    Format("fp8-tensorwise", "fp8", 1.0, (True, True, True), False, True, True),
    # DeepSeek-V3's scaling: 1x128 activation and 128x128 weight blocks, FP32 scales.
    Format("fp8-blockwise", "fp8", 1.0 + 4 / 128, (True, True, True), True, False, True),
    # OCP MX: 32-element blocks with one E8M0 (1-byte) scale.
    Format("mxfp8", "mxfp8", 1.0 + 1 / 32, (True, True, True), True, False, True),
    # NVFP4: 4-bit E2M1, 16-element blocks with E4M3 scales, plus a per-tensor FP32 scale.
    Format("nvfp4", "nvfp4", 0.5 + 1 / 16, (True, True, True), True, True, False),
)
CODES = {f.name: code for code, f in enumerate(FORMATS)}


class ByCode:
    """One value per format code: indexed by a python int it gives a python float (the fast
    scalar path of one layout), by an array of codes a numpy array (many layouts)."""

    __slots__ = ("_array", "_values")

    def __init__(self, values: Iterable[float]) -> None:
        self._values = tuple(float(v) for v in values)
        self._array: np.ndarray | None = None  # built on the first array lookup

    def __getitem__(self, code: Any) -> Any:
        try:  # a python or numpy integer
            return self._values[code]
        except TypeError:  # an array of codes
            if self._array is None:
                import numpy as np

                self._array = np.array(self._values)
            return self._array[code]


def _column(field: str) -> ByCode:
    return ByCode(getattr(f, field) for f in FORMATS)


LOW_PRECISION_SHARE = ByCode(sum(f.gemms) / 3 for f in FORMATS)
"""Share of a layer's weight-GEMM FLOPs in the low-precision format, by code (each pass is a
third: fprop, dgrad, wgrad do the same FLOPs)."""
ELEMENT_BYTES = _column("element_bytes")
BLOCK_SCALED = _column("block_scaled")
AMAX_PASS = _column("amax_pass")
GATHER_BYTES = ByCode(f.element_bytes if f.gather_low else BF16_BYTES for f in FORMATS)
"""Bytes per parameter a low-precision all-gather moves (Megatron's --fp8-param-gather)."""
FLOAT8_FSDP = ByCode(f.name in ("fp8-delayed", "fp8-tensorwise") for f in FORMATS)
"""Formats torchtitan's FSDP2 gathers in float8 (enable_fsdp_float8_all_gather: torchao's
per-tensor float8 only)."""
IS_LOW = ByCode(f.name != "bf16" for f in FORMATS)
PRIMARY_LOW = ByCode(f.gather_low for f in FORMATS)
"""Formats Megatron can hold the model's weights in (``--fp8-param-gather``: FP8, MXFP8)."""
GATHER_LOW_DTYPES = tuple(dict.fromkeys(f.peak for f in FORMATS if f.gather_low))
"""The ``--dtype`` values whose layouts ``--fp8-param-gather`` gathers in their format."""


def gather_bytes(code: Any, low: Any) -> Any:
    """Bytes per parameter of a parameter all-gather: the format's where `low` (the framework
    gathers in it), else BF16's."""
    return BF16_BYTES + low * (GATHER_BYTES[code] - BF16_BYTES)


def format_name(dtype: str, fp8_recipe: str | None = None) -> str:
    """The :data:`FORMATS` name of a dtype and recipe (the recipe only applies to fp8)."""
    if dtype not in DTYPES:
        raise SpecError(f"--dtype: {dtype!r}; allowed: {', '.join(DTYPES)}")
    if fp8_recipe is not None and fp8_recipe not in FP8_RECIPES:
        raise SpecError(f"--fp8-recipe: {fp8_recipe!r}; allowed: {', '.join(FP8_RECIPES)}")
    if dtype != "fp8":
        return dtype
    return f"fp8-{fp8_recipe or DEFAULT_FP8_RECIPE}"


@functools.cache  # a handful of valid pairs; an invalid one raises and is not kept
def precision_code(dtype: str, fp8_recipe: str | None = None) -> int:
    """Integer code of a dtype and recipe, as the vectorised models take it."""
    return CODES[format_name(dtype, fp8_recipe)]


def dtype_and_recipe(code: int) -> tuple[str, str | None]:
    """The (dtype, fp8_recipe) of a code; the recipe is None for Megatron's default (delayed)."""
    name = FORMATS[code].name
    dtype, _, recipe = name.partition("-")
    return dtype, (recipe if recipe and recipe != DEFAULT_FP8_RECIPE else None)


def peak_of(gpu: GPU, code: int) -> float | None:
    """Dense peak of the format's GEMMs on `gpu`, TFLOP/s; None where the GPU lacks it."""
    return gpu.peak_tflops(FORMATS[code].peak)


def check_supported(gpu: GPU, dtype: str, fp8_recipe: str | None = None) -> None:
    """A dtype the GPU's tensor cores cannot run is a one-line :class:`SpecError`."""
    if precision_code(dtype, fp8_recipe) not in _supported_codes(gpu):
        runs = [d for d in DTYPES if gpu.peak_tflops(d) is not None]
        raise SpecError(
            f"--dtype: {dtype} does not run on {gpu.key} ({gpu.arch} tensor cores); "
            f"allowed: {', '.join(runs)}"
        )


@by_identity()
def _supported_codes(gpu: GPU) -> frozenset[int]:
    """The format codes whose GEMMs `gpu`'s tensor cores run."""
    return frozenset(code for code in range(len(FORMATS)) if peak_of(gpu, code) is not None)


def supported_dtypes(gpu: GPU) -> tuple[str, ...]:
    """The dtypes `gpu` runs, in :data:`DTYPES` order."""
    return tuple(d for d in DTYPES if gpu.peak_tflops(d) is not None)


def quantized_copies(gpu: GPU, code: Any) -> Any:
    """Quantized copies of each operand: two (row- and column-wise) for block-scaled formats
    and for per-tensor FP8 on Hopper (TN-only FP8 GEMMs), else one; 0 for bf16."""
    tn_only = float(gpu.arch == "hopper")
    return IS_LOW[code] * (1 + maximum(BLOCK_SCALED[code], tn_only))
