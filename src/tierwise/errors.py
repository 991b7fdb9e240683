"""Typed user-facing errors; the CLI turns each into one line on stderr and exit code 2."""


class TierwiseError(Exception):
    """A mistake in user input: names the field, the value and what is allowed."""

    exit_code = 2


class SpecError(TierwiseError):
    """A cluster, model, layout or contract spec that is malformed or inconsistent."""


class ParseError(TierwiseError):
    """A log or tool output that cannot be read; carries the line number."""

    def __init__(self, message: str, line: int | None = None, source: str | None = None):
        where = ""
        if source is not None or line is not None:
            where = f"{source or '<input>'}" + (f":{line}" if line is not None else "") + ": "
        super().__init__(where + message)
        self.line = line
        self.source = source
