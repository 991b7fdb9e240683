"""The `tierwise` typer app; commands are discovered from `tierwise.cli.commands`."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

from tierwise import __version__
from tierwise.cli import commands
from tierwise.errors import TierwiseError

app = typer.Typer(
    name="tierwise",
    help="Topology-aware distributed training: tiers, collectives, step time, plans.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tierwise {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """tierwise command line."""


for _info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
    importlib.import_module(f"{commands.__name__}.{_info.name}").register(app)


def main() -> None:
    """Entry point: user errors become one stderr line and exit code 2 (click handles usage)."""
    try:
        app()
    except TierwiseError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
