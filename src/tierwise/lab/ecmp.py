"""`tierwise lab ecmp`: hash collisions on a routed lab, measured beside the model.

Two leaves joined over spines (`tierwise.lab.spines`), four ranks in a ring that alternates
leaves (a, b, a', b'), so every ring step crosses the spines: two flows leave each leaf. The
kernel hashes each (source, destination) pair onto one spine (hash policy 0). The lab asks
the leaves' routing tables which spine each pair takes and picks two placements of the ring
from the nodes: one whose same-direction flows share a spine (`colliding`) and one whose
flows take different spines (`spread`). It times a ring step (every rank sends to the next at
once, over gloo) on both and prints the measured busbw beside the collective model's: one
flow per link gets the link, flows on one link share it (`collectives.links`: the busiest
link's load sets the pace), capped by the nodes' NICs; and the ECMP expectation over random
hashing, the model's price when the placement's hashes are unknown. Beside each link's
predicted flows it reports the flows the link measurably carried: its byte counter over the
run, in units of one flow's frames.
"""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tierwise.collectives.links import busiest_load
from tierwise.errors import TierwiseError
from tierwise.lab import netns
from tierwise.lab.cluster import check_buffers_fit
from tierwise.lab.fabric import Fabric, FabricConfig
from tierwise.lab.ring_worker import RING_BUFFERS, TASK_ENV, RingTask
from tierwise.runtime.launch import launch

#: Rendezvous port on the ring's first node (a fresh namespace has every port free).
MASTER_PORT = 29510
#: Share of a shaped link's rate TCP payload gets: 1448 payload bytes per 1514-byte frame
#: (1500-byte MTU, IPv4 + TCP with timestamps, Ethernet header; tc counts the frame).
TCP_PAYLOAD_SHARE = 1448 / 1514
PLACEMENTS = ("colliding", "spread")
SpineOf = Callable[[int, int], int | None]


@dataclass(frozen=True)
class EcmpRun:
    """One `tierwise lab ecmp`: the routed fabric and the ring step each placement times."""

    fabric: FabricConfig
    task: RingTask

    def __post_init__(self) -> None:
        if self.fabric.spines < 2:
            raise TierwiseError("lab ecmp: needs --spines >= 2")
        if self.fabric.hash_policy != 0:
            raise TierwiseError(
                "lab ecmp: --hash-policy 1 hashes ports the lab cannot choose; use 0"
            )
        check_buffers_fit(self.task.size_bytes, self.fabric.nodes, RING_BUFFERS, "--size")


def ring_flows(ring: list[int]) -> list[tuple[int, int]]:
    """(source, destination) node of every step of a ring over ``ring``."""
    return [(a, ring[(i + 1) % len(ring)]) for i, a in enumerate(ring)]


def link_loads(c: FabricConfig, ring: list[int], spine_of: SpineOf) -> Counter[tuple[Any, ...]]:
    """Flows on each leaf-spine link (up: leaf, spine; down: spine, leaf) for ``ring``."""
    loads: Counter[tuple[Any, ...]] = Counter()
    for src, dst in ring_flows(ring):
        spine = spine_of(src, dst)
        if spine is not None:
            loads["up", c.leaf_of(src), spine] += 1
            loads["down", spine, c.leaf_of(dst)] += 1
    return loads


def link_name(key: tuple[Any, ...]) -> str:
    """``leaf0>spine1`` for an uplink key of `link_loads`, ``spine1>leaf1`` for a downlink."""
    way, a, b = key
    return f"leaf{a}>spine{b}" if way == "up" else f"spine{a}>leaf{b}"


def carried_flows(
    task: RingTask, before: dict[tuple[Any, ...], int], after: dict[tuple[Any, ...], int]
) -> dict[str, float]:
    """Flows each link carried over a run of ``task``: the frame bytes its shaper sent over
    the frames of one flow's steps (untimed included; the ACKs of the flows coming back the
    other way and gloo's control messages add a few %)."""
    flow_b = task.size_bytes * (task.warmup + task.iters) / TCP_PAYLOAD_SHARE
    return {link_name(k): (after[k] - before[k]) / flow_b for k in sorted(after)}


def choose_rings(c: FabricConfig, spine_of: SpineOf) -> dict[str, list[int]]:
    """A colliding and a spread ring (a, b, a', b'; a, a' under leaf 0, b, b' under leaf 1),
    the first found in node order; a placement the hashes do not offer is left out."""
    per_leaf = c.nodes_per_leaf
    left, right = range(per_leaf), range(per_leaf, 2 * per_leaf)
    found: dict[str, list[int]] = {}
    for a, a2 in itertools.permutations(left, 2):
        for b, b2 in itertools.permutations(right, 2):
            ring = [a, b, a2, b2]
            busiest = max(link_loads(c, ring, spine_of).values())
            found.setdefault("colliding" if busiest > 1 else "spread", ring)
            if len(found) == len(PLACEMENTS):
                return found
    return found


def predict_ring(c: FabricConfig, ring: list[int], spine_of: SpineOf) -> dict[str, float]:
    """The model's busbw of a ring step (GB/s): every flow at the NIC rate or its links' rate
    over the flows on them, whichever is less; the ring at its slowest flow."""
    loads = link_loads(c, ring, spine_of)
    nic = c.rate_bit / 8e9 * TCP_PAYLOAD_SHARE
    link = c.spine_link_rate_bit / 8e9 * TCP_PAYLOAD_SHARE
    busiest = max(loads.values(), default=0)
    rate = min(nic, link / busiest) if busiest else nic
    return {"busbw_GBps": rate, "busiest_link_flows": float(busiest)}


def expected_ring_busbw(c: FabricConfig) -> float:
    """The model's ECMP price of the same ring with unknown hashes: two flows leave each of
    the two leaves over `spines` uplinks, each leaf hashing its own, and the ring runs at the
    busiest link of the two (GB/s). The downlinks add nothing here: each spine has one link
    to each leaf, and a leaf receives from the other only, so they carry what the other
    leaf's uplinks carry."""
    nic = c.rate_bit / 8e9 * TCP_PAYLOAD_SHARE
    link = c.spine_link_rate_bit / 8e9 * TCP_PAYLOAD_SHARE
    return min(nic, link / busiest_load("ecmp", 2, c.spines, switches=2))


@dataclass(frozen=True)
class EcmpReport:
    """Measured and predicted busbw per placement, with the rings and their spines."""

    run: EcmpRun
    rings: dict[str, list[int]]
    spines: dict[str, list[int | None]]
    measured: dict[str, float]
    predicted: dict[str, dict[str, float]]
    expected_busbw_GBps: float
    link_flows: dict[str, dict[str, float]]
    carried: dict[str, dict[str, float]]

    def ratio(self, values: dict[str, float]) -> float | None:
        """spread busbw / colliding busbw (None without both placements)."""
        if not all(p in values for p in PLACEMENTS):
            return None
        return values["spread"] / values["colliding"]

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` object."""
        f = self.run.fabric
        predicted = {k: v["busbw_GBps"] for k, v in self.predicted.items()}
        return {
            "nodes": f.nodes,
            "spines": f.spines,
            "hash_policy": f.hash_policy,
            "inter_rate_Gbps": f.rate_bit / 1e9,
            "spine_link_rate_Gbps": f.spine_link_rate_bit / 1e9,
            "size_bytes": self.run.task.size_bytes,
            "placements": {
                name: {
                    "ring_nodes": self.rings[name],
                    "ring_step_spines": self.spines[name],
                    "busiest_link_flows": self.predicted[name]["busiest_link_flows"],
                    "link_flows": self.link_flows[name],
                    "measured_busiest_link_flows": max(self.carried[name].values()),
                    "measured_link_flows": self.carried[name],
                    "measured_busbw_GBps": self.measured[name],
                    "predicted_busbw_GBps": self.predicted[name]["busbw_GBps"],
                }
                for name in self.rings
            },
            "measured_ratio": self.ratio(self.measured),
            "predicted_ratio": self.ratio(predicted),
            "ecmp_expected_busbw_GBps": self.expected_busbw_GBps,
        }


def run_ecmp(spec: EcmpRun, log_dir: Path | None = None) -> EcmpReport:
    """Run ``spec`` in a fresh routed lab (removed afterwards, whatever happens)."""
    from tierwise.lab.spines import link_tx_bytes, spine_of

    netns.require_lab()
    f = spec.fabric
    work = Path(tempfile.mkdtemp(prefix="tierwise-lab-ecmp-"))
    measured: dict[str, float] = {}
    carried: dict[str, dict[str, float]] = {}
    with Fabric(f):

        def hashed(src: int, dst: int) -> int | None:
            return spine_of(f, src, dst)

        rings = choose_rings(f, hashed)
        for name, ring in rings.items():
            before = link_tx_bytes(f)
            seconds = _time_ring(spec, ring, work / name, log_dir)
            carried[name] = carried_flows(spec.task, before, link_tx_bytes(f))
            measured[name] = spec.task.size_bytes / 1e9 / seconds
        spines = {name: [hashed(a, b) for a, b in ring_flows(r)] for name, r in rings.items()}
        predicted = {name: predict_ring(f, r, hashed) for name, r in rings.items()}
        link_flows = {
            name: {link_name(k): float(v) for k, v in sorted(link_loads(f, r, hashed).items())}
            for name, r in rings.items()
        }
    return EcmpReport(
        spec, rings, spines, measured, predicted, expected_ring_busbw(f), link_flows, carried
    )


def _time_ring(spec: EcmpRun, ring: list[int], work: Path, log_dir: Path | None) -> float:
    """Mean seconds of a timed ring step with rank r on node ``ring[r]``."""
    f = spec.fabric
    work.mkdir(parents=True)
    task = replace(spec.task, out=str(work / "result.json"))
    (work / "task.json").write_text(task.to_json())
    result = launch(
        [sys.executable, "-m", "tierwise.lab.ring_worker"],
        len(ring),
        ranks_per_node=1,
        master_addr=f.node_addr(ring[0]),
        master_port=MASTER_PORT,
        env={TASK_ENV: str(work / "task.json"), "OMP_NUM_THREADS": "1"},
        env_for=lambda r: {"GLOO_SOCKET_IFNAME": f.node_dev(ring[r.rank])},
        prefix=lambda r: netns.exec_prefix(f.node_ns(ring[r.rank])),
        deadline_s=task.timeout_s,
        log_dir=(log_dir or work) / "logs",
    )
    result.raise_for_failure()
    steps = json.loads((work / "result.json").read_text())["step_s"]
    return sum(steps) / len(steps)
