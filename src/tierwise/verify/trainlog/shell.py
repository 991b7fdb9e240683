"""Shell config scripts (MLPerf `config_*.sh`, launch scripts): the variables they set.

A small evaluator, not a shell: `export NAME=value`, `NAME="${NAME:=default}"`,
`: "${NAME:=default}"`, `${VAR}` / `${VAR:-x}` expansion and `source .../other.sh` (resolved
among the files given, by name, where the line stands). Assignments inside `if`/`case`
blocks, command substitutions and arithmetic are not evaluated (a note says which).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePath

_ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_DEFAULT = re.compile(r"^:\s+\"?\$\{([A-Za-z_][A-Za-z0-9_]*):?=([^}]*)\}\"?\s*$")
_SOURCE = re.compile(r"^(?:source|\.)\s+(.+)$")
_EXPAND = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)
_OPEN = re.compile(r"^(if|case|for|while|until)\b")
_CLOSE = re.compile(r"^(fi|esac|done)\b")
MAX_DEPTH = 8


def _logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations and multi-line double-quoted strings joined."""
    out: list[str] = []
    parts: list[str] = []
    quoted = False  # inside a double-quoted string that spans lines
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            parts.append(line[:-1])
            quoted ^= bool((line.count('"') - line.count('\\"')) & 1)
            continue
        parts.append(line)
        quoted ^= bool((line.count('"') - line.count('\\"')) & 1)
        if quoted:
            continue
        out.append(" ".join(parts).strip())
        parts = []
    buf = " ".join(parts)
    if buf.strip():
        out.append(buf.strip())
    return out


def _strip_comment(line: str) -> str:
    quoted = False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif ch == "#" and not quoted and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line


def expand(text: str, env: Mapping[str, str]) -> str:
    """``text`` with ``$VAR``, ``${VAR}``, ``${VAR:-x}`` and ``${VAR:=x}`` expanded."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(4)
        if name in env and (env[name] != "" or not (m.group(2) or "").startswith(":")):
            return env[name]
        return m.group(3) or "" if m.group(2) else ""

    return _EXPAND.sub(sub, text)


def _unquote(v: str) -> str:
    v = v.strip().rstrip(";").strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        return v[1:-1]
    return v


class ShellVars:
    """Variables set by a script and the scripts it sources (given as ``files``)."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = dict(files)
        self.env: dict[str, str] = {}
        self.skipped: list[str] = []
        self.commands: list[str] = []

    def run(self, name: str, depth: int = 0) -> None:
        """Evaluate the script named ``name`` (a key of ``files``)."""
        if depth > MAX_DEPTH:
            return
        block = 0
        for line in _logical_lines(self.files[name]):
            line = _strip_comment(line)
            if not line:
                continue
            if _OPEN.match(line):
                block += 1
                continue
            if _CLOSE.match(line):
                block = max(0, block - 1)
                continue
            if (m := _SOURCE.match(line)) is not None:
                words = expand(m.group(1), self.env).replace('"', " ").replace("'", " ").split()
                target = PurePath(words[-1]).name if words else ""
                if target in self.files and target != name:
                    # a file the user gave is the one sourced, also inside an if/else
                    self.run(target, depth + 1)
                elif block == 0:
                    self.skipped.append(f"{name}: sources {target}, not given")
                continue
            m = _ASSIGN.match(line) or _DEFAULT.match(line)
            if m is None:
                if block == 0 and not line.startswith(("set ", "unset ", "echo ", ":")):
                    self.commands.append(expand(line, self.env))
                continue
            var, raw = m.group(1), m.group(2)
            if block:
                self.skipped.append(f"{name}: {var} set inside a conditional block")
                continue
            if _DEFAULT.match(line):
                self.env.setdefault(var, _unquote(raw))
                continue
            if "$(" in raw or "$((" in raw or "`" in raw:
                continue
            self.env[var] = _unquote(expand(raw, self.env))
