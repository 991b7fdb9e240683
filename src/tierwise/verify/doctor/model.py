"""What the doctor reports: evidence lines, findings and the bandwidth gap they explain.

Bandwidths are busbw in GB/s (1e9 B/s) as nccl-tests prints them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "info": 2}

CATEGORIES = (
    "socket_fallback",
    "no_gdr",
    "nic_selection",
    "p2p_disabled_or_acs",
    "nvls_unavailable",
    "link_degraded",
    "roce_config",
    "container_limits",
    "topology_detection",
    "slow_node",
    "collnet_sharp",
    "channels",
    "version_mismatch",
)
"""The fixed list a finding's ``category`` comes from (docs/doctor-rules.md)."""


class Evidence(NamedTuple):
    """One input line that supports a fact or a finding (``line`` is 1-based); a tuple,
    because a 50 MB log makes one per line (facts keep the raw line, findings strip it)."""

    file: str
    line: int
    text: str

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"file": self.file, "line": self.line, "text": self.text}


@dataclass(frozen=True)
class Finding:
    """One diagnosed cause.

    ``tier``: which tier it slows (``inter`` node network, ``intra`` node links, or ``any``);
    ``weight``: the share of that tier's bandwidth the cause typically costs (0-1, a ranking
    prior documented per rule); ``explains_GBps``: the part of the measured gap attributed to
    it, None without an nccl-tests table to compare with; ``confidence``: how surely the
    evidence shows this cause (0-1: about 0.9 for NCCL naming the fault, below 0.5 for an
    indirect sign, when ``confirm`` says what to run to settle it).
    """

    id: str
    category: str
    severity: Severity
    title: str
    evidence: tuple[Evidence, ...]
    fix: str
    tier: Literal["inter", "intra", "any"]
    weight: float
    explains_GBps: float | None = None
    confidence: float = 1.0
    confirm: str | None = None

    def as_dict(self, rank: int) -> dict[str, Any]:
        """JSON form with its 1-based rank."""
        return {
            "rank": rank,
            "id": self.id,
            "category": self.category,
            "severity": self.severity,
            "title": self.title,
            "evidence": [e.as_dict() for e in self.evidence],
            "explains_GBps": self.explains_GBps,
            "confidence": self.confidence,
            "confirm": self.confirm,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class Gap:
    """Measured against expected busbw at the table's largest message size."""

    source: str
    op: str
    nranks: int
    nodes: int
    size_bytes: int
    measured_busbw_GBps: float
    expected_busbw_GBps: float

    @property
    def gap_GBps(self) -> float:
        """How far below the model the measurement is (0 when at or above it)."""
        return max(0.0, self.expected_busbw_GBps - self.measured_busbw_GBps)

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "source": self.source,
            "op": self.op,
            "nranks": self.nranks,
            "nodes": self.nodes,
            "size_bytes": self.size_bytes,
            "measured_busbw_GBps": self.measured_busbw_GBps,
            "expected_busbw_GBps": self.expected_busbw_GBps,
            "gap_GBps": self.gap_GBps,
        }


@dataclass(frozen=True)
class Diagnosis:
    """Ranked findings, the bandwidth gap they were ranked against and the facts read."""

    findings: tuple[Finding, ...]
    gap: Gap | None
    facts: dict[str, Any] = field(default_factory=dict)
    files: tuple[dict[str, Any], ...] = ()
    cluster_source: dict[str, Any] = field(default_factory=dict)  # expect.ClusterChoice
    idle_overrides: tuple[str, ...] = ()  # cluster options that change nothing (the CLI says)

    def as_dict(self) -> dict[str, Any]:
        """JSON form: ``findings`` ordered by rank; ``cluster_source`` the cluster compared
        with and why it was chosen."""
        return {
            "files": list(self.files),
            "cluster_source": self.cluster_source,
            "bandwidth": None if self.gap is None else self.gap.as_dict(),
            "findings": [f.as_dict(i) for i, f in enumerate(self.findings, start=1)],
            "facts": self.facts,
        }
