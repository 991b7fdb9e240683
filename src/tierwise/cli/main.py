"""The `tierwise` typer app. Each module of `tierwise.cli.commands` is one command of the same
name, imported only when that command runs, so `--version` and `--help` stay fast."""

from __future__ import annotations

import gc
import importlib
import json
import os
import pkgutil
import re
import sys
from pathlib import Path
from typing import Any

import typer
from typer._click import exceptions as click_exceptions
from typer.core import TyperCommand, TyperGroup

from tierwise import __version__
from tierwise.cli import commands

DEBUG_ENV = "TIERWISE_DEBUG"
"""Set to 1 to see the traceback of an internal error."""
EXIT_CODES = (
    "Exit codes: 0 ok; 1 a check ran and failed (verify, bench #wrong); 2 user error, one "
    "stderr line naming the input, the value and what is allowed; 3 internal error, one line "
    f"({DEBUG_ENV}=1 prints the traceback). With --json an error is also one JSON object "
    '{"error": ..., "exit_code": ...} on stdout.'
)
INTERNAL_ERROR = 3
USAGE_ERROR = 2
PROG = "tierwise"
MESSAGE_LIMIT = 2000
"""Longest error line, characters (a message quoting a huge input is cut)."""
_DOC = re.compile(r'^\s*"""(.*?)"""', re.DOTALL)
_gc_paused = False
"""True while main() holds the garbage collector off for start-up (see `resume_gc`)."""


def command_modules() -> dict[str, str]:
    """Command name -> module name, from the files in `tierwise.cli.commands` (none imported)."""
    return {
        info.name.replace("_", "-"): f"{commands.__name__}.{info.name}"
        for info in pkgutil.iter_modules(commands.__path__)
        if not info.name.startswith("_")
    }


def command_summary(module: str) -> str:
    """The listing line of a command: its module docstring's first paragraph after '`...`: '."""
    path = Path(commands.__path__[0], module.rsplit(".", 1)[1] + ".py")
    match = _DOC.match(path.read_text(encoding="utf-8"))
    text = match.group(1).split("\n\n")[0] if match else ""
    text = " ".join(text.split()).split("`: ", 1)[-1]
    return text[:1].upper() + text[1:]


def load_command(name: str, module: str) -> Any:
    """Import one command module and build its click command (a group for sub-apps)."""
    holder = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    holder.callback()(lambda: None)  # a callback keeps typer from collapsing to one command
    importlib.import_module(module).register(holder)
    registered = typer.main.get_command(holder).commands  # type: ignore[attr-defined]
    if name not in registered:
        raise RuntimeError(f"{module} registers {', '.join(registered)}, not its name {name!r}")
    command = registered[name]
    command.multi_value_options = getattr(sys.modules[module], "MULTI_VALUE_OPTIONS", ())
    return command


def spread_values(args: list[str], options: tuple[str, ...]) -> list[str]:
    """`--logs a b c` -> `--logs a --logs b --logs c` for each of `options` (click gives an
    option one value per occurrence); a value run ends at the next token starting with '-'."""
    out: list[str] = []
    current, taken = None, False
    for token in args:
        if token.startswith("-"):
            current, taken = (token if token in options else None), False
        elif current is not None:
            if taken:
                out.append(current)
            taken = True
        out.append(token)
    return out


class LazyGroup(TyperGroup):
    """Lists every command module; imports one only to run it (help shows module summaries)."""

    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted({*self.commands, *command_modules()})

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        module = command_modules().get(cmd_name)
        if module is None:
            return None
        if self._listing:
            return TyperCommand(cmd_name, help=command_summary(module))
        self.commands[cmd_name] = load_command(cmd_name, module)
        resume_gc()
        return self.commands[cmd_name]

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        return name, command, spread_values(rest, getattr(command, "multi_value_options", ()))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="tierwise",
    cls=LazyGroup,
    help="Topology-aware distributed training: tiers, collectives, step time, plans.",
    epilog=EXIT_CODES,
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


def click_app() -> Any:
    """The root click group with every command loaded (for tests and docs)."""
    group = typer.main.get_command(app)
    for name in group.list_commands(None):  # type: ignore[attr-defined]
        group.get_command(None, name)  # type: ignore[attr-defined]
    return group


def one_line(exc: BaseException, limit: int = MESSAGE_LIMIT) -> str:
    """An exception's message on one line, cut to `limit` characters."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fail(message: str, code: int) -> None:
    """Exit with `code` after one stderr line; under --json also an error object on stdout
    (unless the command printed its result before failing, as bench does on #wrong)."""
    output = sys.modules.get("tierwise.cli.output")
    if "--json" in sys.argv[1:] and not getattr(output, "json_printed", False):
        sys.stdout.write(json.dumps({"error": message, "exit_code": code}) + "\n")
    typer.echo(message, err=True)
    sys.exit(code)


def _option_value(param: Any, args: list[str]) -> str | None:
    """The value given to option ``param`` on the command line (its last occurrence)."""
    value = None
    opts = [*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())]
    for i, token in enumerate(args):
        for opt in opts:
            if token == opt and i + 1 < len(args):
                value = args[i + 1]
            elif opt.startswith("--") and token.startswith(opt + "="):
                value = token[len(opt) + 1 :]
    return value


def _param_name(param: Any) -> str:
    """``--model`` for an option (its long name), ``LOG`` for an argument."""
    opts = getattr(param, "opts", None) or []
    if getattr(param, "param_type_name", "") == "argument" or not opts:
        return (getattr(param, "name", None) or "argument").upper()
    return max(opts, key=len)


def _allowed(message: str) -> str:
    """A usage message phrased as tierwise's '...; allowed: ...' (pydantic's 'Input should be
    X' says what is allowed)."""
    message = message.rstrip(".").removeprefix("Value error, ")
    head = "Input should be "
    if message.startswith(head):
        return f"allowed: {message[len(head) :]}"
    return message[:1].lower() + message[1:]


def _command_path(args: list[str]) -> str:
    """``tierwise schedule place`` from the leading command names in ``args`` (for a usage
    error the parser raised without its context)."""
    path, command = [PROG], typer.main.get_command(app)
    for token in args:
        sub = command.get_command(None, token) if hasattr(command, "get_command") else None
        if token.startswith("-") or sub is None:
            break
        path.append(token)
        command = sub
    return " ".join(path)


def usage_error(exc: Any, args: list[str] | None = None) -> str:
    """One line for a click usage error: the flag, the value given, what is allowed, and the
    command's ``--help``. A group run without its subcommand lists the subcommands (and its
    help goes to stdout unless --json)."""
    args = sys.argv[1:] if args is None else args
    ctx = exc.ctx
    path = ctx.command_path if ctx is not None else _command_path(args)
    see = f"see '{path} --help'"
    missing = isinstance(exc, click_exceptions.NoArgsIsHelpError) or (
        exc.message == "Missing command."
    )
    if missing and ctx is not None:
        if "--json" not in args:
            typer.echo(ctx.get_help())
        names = ", ".join(ctx.command.list_commands(ctx))
        return f"error: {path} needs a command; allowed: {names}; {see}"
    param = getattr(exc, "param", None)
    if isinstance(exc, click_exceptions.MissingParameter) and param is not None:
        return f"error: {path}: {_param_name(param)} is required; {see}"
    if param is not None:
        value = _option_value(param, args)
        given = "" if value is None else f" {value[:80]!r}"
        return f"error: {_param_name(param)}{given}: {_allowed(exc.message)}; {see}"
    text = exc.message.rstrip(".")
    if isinstance(exc, click_exceptions.NoSuchOption) and exc.possibilities:
        text += f" (did you mean {', '.join(sorted(exc.possibilities))}?)"
    elif text.startswith("No such command") and ctx is not None:
        text += f"; allowed: {', '.join(ctx.command.list_commands(ctx))}"
    return f"error: {path}: {text[:1].lower() + text[1:]}; {see}"


def resume_gc() -> None:
    """Once the command has loaded: freeze the objects start-up made (they live until exit, so
    no collection need scan them again) and turn the collector main() paused back on."""
    global _gc_paused
    if _gc_paused:
        _gc_paused = False
        gc.freeze()
        gc.enable()


def main() -> None:
    """Entry point: exit 2 with one stderr line on a user error (a usage error too, see
    `usage_error`), 3 with one line on an internal error (the traceback with TIERWISE_DEBUG=1),
    never a traceback. The garbage collector is off while the command loads (imports make many
    objects and no garbage) and frozen at exit (no last collection over them)."""
    global _gc_paused
    from tierwise.errors import TierwiseError

    if gc.isenabled():
        gc.disable()
        _gc_paused = True
    output = sys.modules.get("tierwise.cli.output")
    if output is not None:  # a second run in one process (tests, fuzzing) starts afresh
        output.json_printed = False
    try:
        code = app(prog_name=PROG, standalone_mode=False)
        if isinstance(code, int) and code:  # typer.Exit(code) / ctx.exit(code)
            sys.exit(code)
    except click_exceptions.UsageError as exc:
        fail(one_line(Exception(usage_error(exc))), USAGE_ERROR)
    except click_exceptions.ClickException as exc:
        fail(f"error: {one_line(Exception(exc.format_message()))}", USAGE_ERROR)
    except typer.Abort:
        fail("aborted", 1)
    except TierwiseError as exc:
        fail(f"error: {one_line(exc)}", exc.exit_code)
    except Exception as exc:
        if os.environ.get(DEBUG_ENV, "") not in {"", "0"}:
            raise
        fail(
            f"internal error: {type(exc).__name__}: {one_line(exc)} (a tierwise bug; run again "
            f"with {DEBUG_ENV}=1 for the traceback)",
            INTERNAL_ERROR,
        )
    finally:
        resume_gc()
        gc.freeze()


if __name__ == "__main__":
    main()
