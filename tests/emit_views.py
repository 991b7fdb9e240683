"""Read emitted launches back: torchtitan's dotted overrides and subcommand, Megatron-LM's
flags (as values), for the emitter tests."""

from __future__ import annotations

from typing import Any


def flag_values(args: list[str]) -> dict[str, str | bool]:
    """``--name value`` (or a bare ``--flag``) per argument, as an argparse would read them."""
    out: dict[str, str | bool] = {}
    for arg in args:
        name, _, value = arg.partition(" ")
        out[name] = value.strip('"') if value else True
    return out


def torchtitan_view(args: list[str]) -> dict[str, Any]:
    """torchtitan arguments as sections: ``{"module", "config", "ac", "parallelism": {...},
    "training": {...}, "debug": {...}, "compile": {...}}`` (integers where the value is one)."""
    view: dict[str, Any] = {"parallelism": {}, "training": {}, "debug": {}, "compile": {}}
    for arg in args:
        if arg.startswith("activation-checkpoint:"):
            view["ac"] = arg.split(":", 1)[1]
            continue
        name, _, value = arg.removeprefix("--").partition(" ")
        section, _, key = name.partition(".")
        if not key:
            view[section] = value
            continue
        view[section][key] = int(value) if value.isdigit() else (value or True)
    return view
