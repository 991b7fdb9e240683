"""`tierwise doctor`: why a collective is slow or fails, from the logs of one run.

``readers`` turns NCCL_DEBUG output, nccl-tests tables and tool printouts into ``facts``;
``rules`` (catalog in docs/doctor-rules.md) turn facts into findings with evidence and a fix;
``ranking`` orders them by how much of the gap between the collective model and the
measured busbw each explains.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tierwise.hardware.cluster import ClusterSpec, idle_overrides
from tierwise.verify.doctor.expect import ClusterChoice, choose_cluster
from tierwise.verify.doctor.facts import Facts
from tierwise.verify.doctor.model import CATEGORIES, Diagnosis, Evidence, Finding, Gap
from tierwise.verify.doctor.ranking import gap, rank
from tierwise.verify.doctor.readers import read_file
from tierwise.verify.doctor.rules import RULES, apply_rules

__all__ = [
    "CATEGORIES",
    "RULES",
    "Diagnosis",
    "Evidence",
    "Facts",
    "Finding",
    "Gap",
    "diagnose",
    "read_facts",
]


def read_facts(paths: Sequence[str | Path]) -> tuple[Facts, list[dict[str, object]]]:
    """Facts of all files of one run and a summary per file; raises ParseError."""
    facts = Facts()
    files = [read_file(path, facts) for path in paths]
    return facts, files


def diagnose(
    paths: Sequence[str | Path],
    cluster: ClusterSpec | str | None = None,
    overrides: dict[str, Any] | None = None,
) -> Diagnosis:
    """Read ``paths`` (one run), apply every rule and rank the findings against ``cluster``
    (a spec, a preset name or YAML; None: the preset the logs' GPU, nodes and NICs point at,
    `expect.choose_cluster`), with the CLI's shape ``overrides``."""
    facts, files = read_facts(paths)
    if isinstance(cluster, ClusterSpec):
        choice = ClusterChoice(cluster, "--cluster", "given")
    else:
        choice = choose_cluster(facts, cluster, overrides)
    cluster = choice.cluster
    facts.intra_GBps = cluster.intra.bw_GBps
    facts.nic_kind = cluster.inter.nic.kind
    family = cluster.gpu.key.split("-")[0].lower()  # h100-sxm -> h100
    if (
        choice.by != "logs"
        and facts.gpu_names
        and not any(family in n.lower() for n in facts.gpu_names)
    ):
        facts.notes.append(
            f"the logs ran on {', '.join(sorted(facts.gpu_names))} but the model cluster"
            f" {cluster.name!r} has {cluster.gpu.key}: pass --cluster for the right expected busbw"
        )
    measured_gap = gap(facts, cluster)
    findings = rank(apply_rules(facts), measured_gap)
    return Diagnosis(
        findings=findings,
        gap=measured_gap,
        facts=facts.as_dict(),
        files=tuple(files),
        cluster_source=choice.as_dict(),
        idle_overrides=tuple(idle_overrides(cluster, overrides or {})),
    )
