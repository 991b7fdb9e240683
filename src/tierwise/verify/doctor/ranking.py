"""Rank findings by how much of the measured bandwidth gap they explain.

The gap is the collective model's busbw (``tierwise.collectives.predict``) for the table's
op, rank count and nodes on the cluster, minus the busbw the table shows, both at the
table's largest message size. A finding explains the share of the gap its weight takes
among the findings on tiers the run used (a one-node run does not use the network, so
network findings explain none of its gap), weighted by how sure each finding is (its
``confidence``). Without a table, ``explains_GBps`` stays None and findings rank by
confidence, then severity, then weight: the most likely cause first, not the first rule.
"""

from __future__ import annotations

from dataclasses import replace

from tierwise.collectives.predict import predict
from tierwise.errors import TierwiseError
from tierwise.formats.nccl_tests import NcclTest
from tierwise.hardware.cluster import ClusterSpec
from tierwise.verify.doctor.facts import Facts
from tierwise.verify.doctor.model import SEVERITY_ORDER, Finding, Gap
from tierwise.verify.measured import measured, measured_shape


def _placed(test: NcclTest, facts: Facts) -> NcclTest:
    """The test with its rank count and nodes from the NCCL lines when its header has none."""
    if test.nranks is not None or not facts.nranks:
        return test
    nodes = facts.node_count or 1
    return replace(test, nranks=facts.nranks, nodes=nodes, gpus_per_node=-(-facts.nranks // nodes))


def gap(facts: Facts, cluster: ClusterSpec) -> Gap | None:
    """The gap of the table with the largest message (None without a usable table)."""
    tests = [(src, t) for src, t in facts.tables if t.op and t.rows]
    if not tests:
        return None
    source, test = max(tests, key=lambda st: max(r.size_bytes for r in st[1].rows))
    try:
        points = measured(_placed(test, facts), cluster, source)
        shape = measured_shape(points, cluster)
        size = int(points.size_bytes[-1])
        expected = float(predict(points.op, shape, [size]).busbw_GBps[0])
    except (TierwiseError, ValueError) as exc:
        facts.notes.append(f"{source}: no model comparison: {exc}")
        return None
    return Gap(
        source=source,
        op=points.op,
        nranks=points.nranks,
        nodes=points.nodes,
        size_bytes=size,
        measured_busbw_GBps=float(points.busbw_GBps[-1]),
        expected_busbw_GBps=expected,
    )


def rank(findings: list[Finding], measured_gap: Gap | None) -> tuple[Finding, ...]:
    """Findings with ``explains_GBps`` filled, best explanation first."""
    if measured_gap is not None:
        tiers = {"intra", "any"} | ({"inter"} if measured_gap.nodes > 1 else set())
        total = sum(f.weight * f.confidence for f in findings if f.tier in tiers)
        findings = [
            replace(
                f,
                explains_GBps=round(measured_gap.gap_GBps * f.weight * f.confidence / total, 1)
                if f.tier in tiers and total > 0
                else 0.0,
            )
            for f in findings
        ]
    return tuple(
        sorted(
            findings,
            key=lambda f: (
                -(f.explains_GBps or 0.0),
                -f.confidence,
                SEVERITY_ORDER[f.severity],
                -f.weight,
                f.id,
            ),
        )
    )
