"""``python -m tierwise.lab.guard PREFIX OWNER_PID``: wait for the owner's pipe to close; if it
closed without ``release`` (the owner was killed), remove the lab it owned."""

from __future__ import annotations

import signal
import sys

from tierwise.lab.fabric import status, teardown


def main(argv: list[str]) -> int:
    """Block on stdin; tear down ``PREFIX`` when the owner dies still owning it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    prefix, owner_pid = argv[0], int(argv[1])
    released = sys.stdin.buffer.read().strip() == b"release"
    if released:
        return 0
    found = status(prefix)
    if found.owner is None or found.owner.pid == owner_pid:
        teardown(prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
