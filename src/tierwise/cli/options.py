"""Typer option types shared by commands, and `cluster_options` adding --cluster + overrides."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from tierwise.hardware.cluster import load_cluster

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object to stdout.")]
LogOpOpt = Annotated[
    str | None,
    typer.Option(
        "--op",
        help="Collective the logs ran (all_reduce, all_gather, ...), for logs that do not name "
        "it; default: the log's banner or command line, its file name, else inferred from "
        "its table.",
    ),
]
ModelOpt = Annotated[
    str, typer.Option("--model", "-m", help="Preset name, model YAML or Hugging Face config.json.")
]

_CLUSTER_OPTIONS: dict[str, tuple[Any, Any]] = {
    "cluster": (
        Annotated[
            str, typer.Option("--cluster", "-c", help="Preset (tierwise catalog clusters) or YAML.")
        ],
        "dgx-h100",
    ),
    "nodes": (
        Annotated[int | None, typer.Option("--nodes", help="Override the node count.")],
        None,
    ),
    "gpus_per_node": (
        Annotated[int | None, typer.Option("--gpus-per-node", help="Override GPUs per node.")],
        None,
    ),
    "nics_per_node": (
        Annotated[int | None, typer.Option("--nics-per-node", help="Override NICs per node.")],
        None,
    ),
    "nic": (
        Annotated[str | None, typer.Option("--nic", help="Override the NIC (catalog key).")],
        None,
    ),
    "intra": (
        Annotated[str | None, typer.Option("--intra", help="Override the intra-node link.")],
        None,
    ),
    "oversubscription": (
        Annotated[
            float | None, typer.Option("--oversubscription", help="Leaf uplink ratio, e.g. 2.")
        ],
        None,
    ),
}

F = TypeVar("F", bound=Callable[..., Any])


def cluster_options(func: F) -> F:
    """Give a command --cluster and the shape overrides; it receives `cluster_spec`."""
    sig = inspect.signature(func)
    hints = typing.get_type_hints(func, include_extras=True)
    kept = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in sig.parameters.values()
        if p.name != "cluster_spec"
    ]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=ann, default=default)
        for name, (ann, default) in _CLUSTER_OPTIONS.items()
    ]

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        picked = {name: kwargs.pop(name) for name in _CLUSTER_OPTIONS}
        cluster = picked.pop("cluster")
        return func(cluster_spec=load_cluster(cluster, **picked), **kwargs)

    wrapper.__signature__ = sig.replace(parameters=kept + added)  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
