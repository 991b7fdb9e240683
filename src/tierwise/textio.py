"""Reading user files safely: bounded size, strict UTF-8, ASCII integers, one-line errors.

Every reader of a user's file (specs, logs, tool outputs, traces, counters) goes through
``read_text`` or ``read_bytes`` (or ``read_input`` where ``-`` means stdin), so a folder, a
FIFO or device (``/dev/zero``), a binary file, a file that is not UTF-8 or one larger than its
limit (``MAX_INPUT_BYTES`` for logs, ``MAX_SPEC_BYTES`` for specs) ends as one
``TierwiseError`` line naming the file, after reading at most the limit.
Imports only ``tierwise.errors`` so the bottom layer (``tierwise.formats``) can use it.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
import sys
from pathlib import Path
from typing import BinaryIO

from tierwise.errors import ParseError, TierwiseError

#: Largest text input read (bytes): logs with NCCL_DEBUG=INFO on thousands of ranks reach
#: hundreds of MB; anything bigger is not one of tierwise's inputs.
MAX_INPUT_BYTES = 512 << 20
#: Largest spec (cluster/model/contract YAML, config.json) read (bytes); real ones are < 100 kB,
#: and YAML parses at ~1 MB/s: a larger file would take seconds to refuse.
MAX_SPEC_BYTES = 4 << 20
#: Most decimal digits accepted in an integer field: int64 holds 19, counters are uint64 (20).
MAX_INT_DIGITS = 20

_NOT_FILES = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)
_ASCII_INT = re.compile(r"^[+-]?[0-9]+$")
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def user_error(
    error: type[TierwiseError], source: str, message: str, line: int | None = None
) -> TierwiseError:
    """``error`` saying ``source[:line]: message`` (ParseError keeps line and source apart)."""
    if issubclass(error, ParseError):
        return error(message, line=line, source=source)
    return error(f"{source}{'' if line is None else f':{line}'}: {message}")


def decode(data: bytes, source: str, error: type[TierwiseError] = ParseError) -> str:
    """Text of ``data``: UTF-8 (a BOM is dropped) or UTF-16 with a BOM (PowerShell's ``>``).

    Bytes that are not UTF-8, or NUL bytes (a binary file), are an error naming the line.
    """
    encoding = next((enc for bom, enc in _BOMS if data.startswith(bom)), "utf-8")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        byte = data[exc.start]
        raise user_error(
            error,
            source,
            f"not {encoding.upper().removesuffix('-SIG')} text (byte 0x{byte:02x} on line {line});"
            " save it as UTF-8",
        ) from None
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise user_error(error, source, f"a binary file, not text (NUL byte on line {line})")
    return text


def _too_large(size: int, limit: int) -> str:
    return f"{size} bytes is larger than the {limit >> 20} MiB this input may have"


def _kind(mode: int) -> str | None:
    """What a non-regular file is ('a FIFO', 'a device', ...), None for a regular file."""
    for test, kind in _NOT_FILES:
        if test(mode):
            return kind
    return None


def open_regular(
    path: str | Path,
    *,
    limit: int = MAX_INPUT_BYTES,
    error: type[TierwiseError] = ParseError,
) -> BinaryIO:
    """A regular file of at most ``limit`` bytes, open for binary reading; anything else is one
    ``error`` line. A FIFO, socket or device (``/dev/zero``) is refused before a byte is read:
    it is opened non-blocking (a FIFO without a writer would block) and checked with ``fstat``.
    """
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        reason = getattr(exc, "strerror", None) or exc
        raise user_error(error, source, f"cannot read ({reason})") from None
    info = os.fstat(fd)
    kind = _kind(info.st_mode)
    if kind is not None or info.st_size > limit:
        os.close(fd)
        if kind is not None:
            raise user_error(error, source, f"cannot read {kind}; allowed: a regular file")
        raise user_error(error, source, _too_large(info.st_size, limit))
    return os.fdopen(fd, "rb")


def read_bytes(
    path: str | Path,
    *,
    limit: int = MAX_INPUT_BYTES,
    error: type[TierwiseError] = ParseError,
) -> bytes:
    """At most ``limit`` bytes of a regular file (see ``open_regular``); a file that grows
    while read stops at ``limit + 1`` bytes and is refused."""
    source = str(path)
    with open_regular(path, limit=limit, error=error) as f:
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise user_error(error, source, f"cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise user_error(error, source, _too_large(len(data), limit))
    return data


def read_text(
    path: str | Path,
    *,
    limit: int = MAX_INPUT_BYTES,
    error: type[TierwiseError] = ParseError,
) -> str:
    """A user's file as text (see ``read_bytes`` and ``decode``); unreadable, not a regular
    file, too large or not text is ``error``."""
    return decode(read_bytes(path, limit=limit, error=error), str(path), error)


def read_input(arg: str | Path, *, limit: int = MAX_INPUT_BYTES) -> tuple[str, str]:
    """(text, source) of a file, or of stdin when ``arg`` is ``-`` (source ``<stdin>``)."""
    if str(arg) != "-":
        return read_text(arg, limit=limit), str(arg)
    data = sys.stdin.buffer.read(limit + 1)
    if len(data) > limit:
        raise ParseError(_too_large(len(data), limit), source="<stdin>")
    return decode(data, "<stdin>"), "<stdin>"


def is_file(path: str | Path) -> bool:
    """``Path.is_file`` that says False for names the OS cannot even look up (too long, NUL)."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def ascii_int(token: str, max_digits: int = MAX_INT_DIGITS) -> int:
    """An integer written in ASCII digits (``int`` also takes '٣' and '_'; ``isdigit`` takes
    '²', which ``int`` refuses); raises ValueError for anything else or more than
    ``max_digits`` digits."""
    if not _ASCII_INT.match(token) or len(token.lstrip("+-")) > max_digits:
        raise ValueError(f"{token[:40]!r} is not an integer of at most {max_digits} digits")
    return int(token)
