"""Building named tuples on the one-layout hot path.

Calling a named tuple class runs its Python-level ``__new__`` through ``type()``, and
``_make`` runs a Python-level length check: ``tuple.__new__`` builds the same tuple in C, in
about half the time of ``_make``. The step model builds some twenty per estimate.
"""

from __future__ import annotations

record = tuple.__new__
"""``record(Cls, (v1, v2, ...))``: the named tuple ``Cls`` of those values. Give every field,
in order: nothing checks the count (a short tuple fails at its first read of a missing field)."""
