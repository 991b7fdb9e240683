"""`tierwise schema cluster|model|contract`: the JSON Schema of an input format."""

from __future__ import annotations

from typing import Annotated

import typer

from tierwise.cli.options import JsonOpt
from tierwise.cli.output import print_json
from tierwise.cli.specs import FORMATS, json_schema


def schema(
    kind: Annotated[str, typer.Argument(help=f"One of {', '.join(FORMATS)}.")],
    as_json: JsonOpt = False,
) -> None:
    """Print the JSON Schema of a spec (also with --json: a schema is JSON); reference pages
    with examples are in docs/reference/."""
    print_json(json_schema(kind))


def register(app: typer.Typer) -> None:
    """Add `tierwise schema`."""
    app.command("schema")(schema)
