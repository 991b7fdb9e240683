"""Typer option types shared by commands, `cluster_options` adding --cluster + overrides, and
`with_options`, the mechanism of every shared option group (`tierwise.cli.behaviour` too)."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from tierwise.errors import SpecError


def count_option(*decls: str, help: str, high: int, low: int = 1, **kwargs: Any) -> Any:
    """A typer option for an integer count from ``low`` to ``high`` (``tierwise.bounds``),
    also written ``8k``/``8K`` (x1024) or ``1M`` as sizes are (``parse_int_count``): a value
    outside is the one-line error naming the flag."""
    from tierwise.units import parse_int_count

    def parse(value: str | int) -> int:
        return parse_int_count(value, decls[0], high, low)

    return typer.Option(
        *decls, help=f"{help} {low} to {high}.", parser=parse, metavar="INTEGER", **kwargs
    )


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
    "nodes_per_leaf": (
        Annotated[
            int | None,
            typer.Option("--nodes-per-leaf", help="Override nodes under each leaf switch."),
        ],
        None,
    ),
    "oversubscription": (
        Annotated[
            float | None, typer.Option("--oversubscription", help="Leaf uplink ratio, e.g. 2.")
        ],
        None,
    ),
    "routing": (
        Annotated[
            str | None,
            typer.Option(
                "--routing",
                help="How switches spread flows over uplinks: ecmp, adaptive, static "
                "(default: the NIC kind's, InfiniBand adaptive, RoCE ecmp).",
            ),
        ],
        None,
    ),
    "qps_per_connection": (
        Annotated[
            int | None,
            typer.Option(
                "--qps-per-connection",
                help="Flows per NCCL connection (NCCL_IB_QPS_PER_CONNECTION; default 1).",
            ),
        ],
        None,
    ),
    "leaves_per_pod": (
        Annotated[
            int | None,
            typer.Option("--leaves-per-pod", help="Leaf switches under each pod switch."),
        ],
        None,
    ),
    "pod_oversubscription": (
        Annotated[
            float | None,
            typer.Option(
                "--pod-oversubscription", help="Pod uplink ratio, e.g. 7 (Meta's 1:7 above pods)."
            ),
        ],
        None,
    ),
}


def flag_name(option: Any) -> str:
    """The first name of an `Annotated[..., typer.Option(...)]` flag (`--sp` of --sp/--no-sp)."""
    return str(typing.get_args(option)[1].default).split("/")[0]


CLUSTER_FLAGS = {name: flag_name(option) for name, (option, _) in _CLUSTER_OPTIONS.items()}
"""Cluster override -> its flag, so a bad override is named as it was typed."""
F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_CLUSTER = _CLUSTER_OPTIONS["cluster"][1]
_CLUSTER_ARGUMENT = (
    Annotated[
        str | None,
        typer.Argument(
            help="Preset or YAML (as --cluster).", metavar="CLUSTER", show_default=False
        ),
    ],
    None,
)


def cluster_argument(func: F) -> F:
    """`cluster_options` plus an optional CLUSTER argument (`show cluster dgx-h100`)."""
    return _with_cluster(func, {"cluster_arg": _CLUSTER_ARGUMENT, **_CLUSTER_OPTIONS})


def cluster_options(func: F) -> F:
    """Give a command --cluster and the shape overrides; it receives `cluster_spec` (and,
    where it has that parameter, `cluster_overrides`: the overrides, None meaning not given)."""
    return _with_cluster(func, _CLUSTER_OPTIONS)


def cluster_choice_options(func: F) -> F:
    """`cluster_options` for a command that picks its own cluster when --cluster is not given
    (doctor: from its logs). It receives `cluster_name` (None when not given) and
    `cluster_overrides` (the shape options, None meaning keep)."""
    optional = Annotated[
        str | None,
        typer.Option(
            "--cluster", "-c", help="Preset or YAML; default: the preset the inputs point at."
        ),
    ]
    options = {**_CLUSTER_OPTIONS, "cluster": (optional, None)}
    return _with_cluster(func, options, _as_choice)


def _as_choice(cluster: str | None, overrides: dict[str, Any]) -> dict[str, Any]:
    return {"cluster_name": cluster, "cluster_overrides": overrides}


def _load(cluster: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The spec, saying each override that changes nothing on it (stderr and --json)."""
    from tierwise.cli.output import say_notes  # only to run
    from tierwise.hardware.cluster import idle_overrides, load_cluster

    spec = load_cluster(cluster, CLUSTER_FLAGS, **overrides)
    say_notes(idle_overrides(spec, overrides))
    return {"cluster_spec": spec}


_RESOLVED = ("cluster_spec", "cluster_name", "cluster_overrides")


def _with_cluster(
    func: F,
    options: dict[str, tuple[Any, Any]],
    resolve: Callable[[Any, dict[str, Any]], dict[str, Any]] = _load,
) -> F:
    wants_overrides = "cluster_overrides" in inspect.signature(func).parameters

    def resolve_cluster(picked: dict[str, Any]) -> dict[str, Any]:
        cluster, positional = picked.pop("cluster"), picked.pop("cluster_arg", None)
        if positional is not None:
            if cluster not in (DEFAULT_CLUSTER, positional):
                raise SpecError(
                    f"CLUSTER {positional!r} and --cluster {cluster!r}: give the cluster once"
                )
            cluster = positional
        resolved = resolve(cluster, picked)
        return {"cluster_overrides": picked, **resolved} if wants_overrides else resolved

    return with_options(func, options, resolve_cluster, _RESOLVED, scoped=True)


def with_options(
    func: F,
    options: dict[str, tuple[Any, Any]],
    resolve: Callable[[dict[str, Any]], dict[str, Any]],
    resolved: tuple[str, ...],
    scoped: bool = False,
) -> F:
    """`func` with the typer options `options` (name -> (Annotated type, default)) added to
    its signature and its parameters named in `resolved` removed: a call picks the options'
    values and passes what `resolve` makes of them (keyword arguments among `resolved`). The
    one mechanism behind every shared option group (cluster, behaviour flags). `scoped`: the
    call (resolve and func) is one command's run, whose notes join its JSON object
    (`tierwise.cli.output.notes_scope`; one per command: notes said in a nested scope would
    not reach the outer one's object)."""
    sig = inspect.signature(func)
    hints = typing.get_type_hints(func, include_extras=True)
    kept = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in sig.parameters.values()
        if p.name not in resolved
    ]
    added = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=ann, default=default)
        for name, (ann, default) in options.items()
    ]

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        picked = {name: kwargs.pop(name) for name in options}
        if not scoped:
            return func(**resolve(picked), **kwargs)
        from tierwise.cli.output import notes_scope  # only to run

        with notes_scope():
            return func(**resolve(picked), **kwargs)

    wrapper.__signature__ = sig.replace(parameters=kept + added)  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]
