"""Text formats tierwise reads and writes; the bottom layer (imports only ``tierwise.errors``
and ``tierwise.textio``).

``nccl-tests``: ``parse_log``/``parse_file`` read logs of every nccl-tests
version into ``NcclTest``s, ``format_test`` prints predictions and
measurements in exactly nccl-tests' shape. ``busbw_factor``/``canonical_op``
give nccl-tests' bus-bandwidth factors and op names; ``infer_op`` names the op
of a table whose log does not.


The names below load on first use (PEP 562), so importing ``tierwise.formats.ops`` (as the cost
models do) does not compile the log readers' patterns.
"""

from importlib import import_module
from typing import Any

_WHERE = {
    "infer_op": "infer",
    "parse_file": "nccl_reader",
    "parse_log": "nccl_reader",
    **dict.fromkeys(
        ("NA", "NcclHalf", "NcclRank", "NcclRow", "NcclTest", "avg_busbw", "placement_from_ranks"),
        "nccl_tests",
    ),
    **dict.fromkeys(
        ("bandwidth_cell", "format_test", "format_tests", "time_cell", "wrong_cell"),
        "nccl_writer",
    ),
    **dict.fromkeys(
        (
            "BUSBW_FACTORS",
            "OPS",
            "busbw_factor",
            "canonical_op",
            "lookup_op",
            "op_in_name",
            "op_in_text",
        ),
        "ops",
    ),
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)


__all__ = sorted(_WHERE)
