"""Text formats tierwise reads and writes; the bottom layer (imports only ``tierwise.errors``
and ``tierwise.textio``).

``nccl-tests``: ``parse_log``/``parse_file`` read logs of every nccl-tests
version into ``NcclTest``s, ``format_test`` prints predictions and
measurements in exactly nccl-tests' shape. ``busbw_factor``/``canonical_op``
give nccl-tests' bus-bandwidth factors and op names; ``infer_op`` names the op
of a table whose log does not.
"""

from tierwise.formats.infer import infer_op
from tierwise.formats.nccl_reader import parse_file, parse_log
from tierwise.formats.nccl_tests import (
    NA,
    NcclHalf,
    NcclRank,
    NcclRow,
    NcclTest,
    avg_busbw,
    placement_from_ranks,
)
from tierwise.formats.nccl_writer import (
    bandwidth_cell,
    format_test,
    format_tests,
    time_cell,
    wrong_cell,
)
from tierwise.formats.ops import (
    BUSBW_FACTORS,
    OPS,
    busbw_factor,
    canonical_op,
    lookup_op,
    op_in_name,
    op_in_text,
)

__all__ = [
    "BUSBW_FACTORS",
    "NA",
    "OPS",
    "NcclHalf",
    "NcclRank",
    "NcclRow",
    "NcclTest",
    "avg_busbw",
    "bandwidth_cell",
    "busbw_factor",
    "canonical_op",
    "format_test",
    "format_tests",
    "infer_op",
    "lookup_op",
    "op_in_name",
    "op_in_text",
    "parse_file",
    "parse_log",
    "placement_from_ranks",
    "time_cell",
    "wrong_cell",
]
