"""torch.distributed's tensor-into-tensor collectives under the name each torch release has.

torch 2.13 names them `all_gather_single` / `reduce_scatter_single` and deprecates the older
`all_gather_into_tensor` / `reduce_scatter_tensor` (FutureWarning); releases before the rename
(e.g. torch 2.11, as in CUDA 13 images) have only the older names. Same signature either way:
``(output, input[, op], group=None, async_op=False)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.distributed as dist

all_gather_single: Callable[..., Any] = (
    getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
)
reduce_scatter_single: Callable[..., Any] = (
    getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
)
