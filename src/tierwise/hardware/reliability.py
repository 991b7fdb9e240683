"""Reliability and power facts of a cluster: the `reliability:` and `power:` blocks of its spec.

What a long run loses besides its step time (`tierwise.perf.train_time` prices it): node
failures (a Poisson process per node), correlated failures of a whole rack, the restart after
each (detection, relaunch, NCCL initialisation growing with the job, checkpoint load), the
checkpoint writes themselves, spare nodes; and what it draws: GPU board power, the rest of the
node, the data centre's PUE. Units in the field names: seconds, hours, GB/s (1e9 B/s), watts.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

NODE_DAYS = 1000.0
"""Failure rates are counted per 1,000 node-days (Kokolis et al.'s unit)."""

LLAMA3_DAYS, LLAMA3_NODES = 54, 16_384 // 8
"""Llama 3 405B pre-training snapshot: 54 days on 16,384 H100 in 2,048 nodes of 8 (Llama 3
paper, "The Llama 3 Herd of Models", arXiv 2407.21783, section 3.3.4)."""
LLAMA3_UNEXPECTED, LLAMA3_ALL = 419, 466
"""Its unexpected interruptions and all of them (planned maintenance included), Table 5."""

FAILURE_RATES: dict[str, float] = {
    # Kokolis et al., "Revisiting Reliability in Large-Scale Machine Learning Research
    # Clusters", HPCA 2025 (arXiv 2410.21680): failures per 1,000 node-days measured over 11
    # months on Meta's two A100 research clusters.
    "meta-rsc1": 6.50,
    "meta-rsc2": 2.34,
    # Llama 3 405B (see above): interruptions per 1,000 node-days of the job.
    "llama3-405b": LLAMA3_UNEXPECTED / (LLAMA3_DAYS * LLAMA3_NODES) * NODE_DAYS,
    "llama3-405b-all": LLAMA3_ALL / (LLAMA3_DAYS * LLAMA3_NODES) * NODE_DAYS,
}
"""Published node failure rates, per 1,000 node-days, by the name a spec or
``--node-failure-rate`` may give instead of a number."""
DEFAULT_FAILURE_RATE = "llama3-405b"
"""The unexpected interruptions of the largest published H100 run."""


def failure_rate(value: Any, field: str = "node_failures_per_1000_node_days") -> Any:
    """A named published rate as its number; anything else unchanged (the model checks it)."""
    if isinstance(value, str) and not _is_number(value):
        if value not in FAILURE_RATES:
            raise ValueError(
                f"{field}: unknown rate {value!r}; allowed: a number >= 0 or one of "
                f"{', '.join(FAILURE_RATES)}"
            )
        return FAILURE_RATES[value]
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReliabilitySpec(_Block):
    """Failures, restarts, checkpoint storage and spares of a cluster."""

    node_failures_per_1000_node_days: float = Field(
        default=FAILURE_RATES[DEFAULT_FAILURE_RATE],
        ge=0,
        description=(
            "Job-interrupting failures per 1,000 node-days, or a published rate by name: "
            "meta-rsc1 (6.50) and meta-rsc2 (2.34), Kokolis et al. HPCA'25; llama3-405b (3.79, "
            "419 unexpected interruptions in 54 days on 2,048 nodes; the default) and "
            "llama3-405b-all (4.21, all 466), Llama 3 paper Table 5. CLI: --node-failure-rate."
        ),
    )
    rack_failures_per_1000_rack_days: float = Field(
        default=0.0,
        ge=0,
        description=(
            "Correlated failures taking a whole rack down at once (power, cooling, rack "
            "switch), per 1,000 rack-days; priced by `--simulate` (spares) and counted as "
            "interruptions."
        ),
    )
    nodes_per_rack: int | None = Field(
        default=None,
        gt=0,
        description=(
            "Nodes a rack failure takes down; default the NVLink domain's nodes when it spans "
            "several (NVL72: 18), else 4 (DGX SuperPOD H100 racks hold 4 DGX)."
        ),
    )
    detection_s: float = Field(
        default=300.0,
        ge=0,
        description=(
            "Seconds from a failure to the job being torn down. Assumed: a crash is seen at "
            "once, a hang only at the NCCL watchdog's timeout (PyTorch and Megatron's "
            "--distributed-timeout-minutes default to 10 minutes)."
        ),
    )
    relaunch_s: float = Field(
        default=300.0,
        ge=0,
        description=(
            "Seconds to reschedule and start the job again on healthy nodes (scheduler, "
            "health checks, container and Python start). Assumed."
        ),
    )
    nccl_init_s: float = Field(
        default=5.0,
        ge=0,
        description="Seconds of communicator initialisation of any job (see the next field).",
    )
    nccl_init_s_per_1000_gpus: float = Field(
        default=2.5,
        ge=0,
        description=(
            "Seconds more per 1,000 GPUs: bootstrap and connection setup grow with the job. "
            "Defaults near MegaScale's (NSDI'24) optimised start: under 30 s at 10,000+ GPUs."
        ),
    )
    node_storage_GBps: float = Field(
        default=25.0,
        gt=0,
        description=(
            "Checkpoint write (and read) bandwidth of one node to the storage system, GB/s. "
            "Assumed: half the 400 Gb/s of a DGX H100's storage ports."
        ),
    )
    storage_GBps: float = Field(
        default=2000.0,
        gt=0,
        description=(
            "Aggregate bandwidth of the storage system, GB/s: Llama 3's Tectonic sustained "
            "2 TB/s (peak 7 TB/s) for 16,384 GPUs (Llama 3 paper, section 3.3.1)."
        ),
    )
    async_checkpoint: bool = Field(
        default=False,
        description=(
            "The framework snapshots its state to host memory and writes it in the "
            "background (Megatron --async-save, torchtitan checkpoint.async_mode): the step "
            "stalls only for the copy over the GPU's host link, and a checkpoint counts once "
            "it is on storage."
        ),
    )
    spare_nodes: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Healthy nodes held to replace failed ones; null: always one at hand. With a "
            "number, `--simulate` makes a restart wait for a repaired node when none is left."
        ),
    )
    repair_h: float = Field(
        default=24.0,
        gt=0,
        description="Hours until a failed node is back in the pool (assumed).",
    )

    @field_validator("node_failures_per_1000_node_days", mode="before")
    @classmethod
    def _named_rate(cls, value: Any) -> Any:
        return failure_rate(value)

    def rack_nodes(self, nodes_per_domain: int) -> int:
        """Nodes one rack failure takes down."""
        if self.nodes_per_rack is not None:
            return self.nodes_per_rack
        return nodes_per_domain if nodes_per_domain > 1 else DEFAULT_NODES_PER_RACK


DEFAULT_NODES_PER_RACK = 4
"""DGX SuperPOD (H100) reference architecture: 4 DGX systems per rack."""


class PowerSpec(_Block):
    """What the cluster draws while training (energy = power x wall-clock time x PUE)."""

    gpu_w: float | None = Field(
        default=None,
        gt=0,
        description="Watts per GPU; null: the catalog GPU's board power (its maximum).",
    )
    node_overhead_w: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Watts per node besides the GPUs (CPUs, memory, NICs, fans); null: "
            "575 W per GPU of the node, what a DGX H100 draws at its 10.2 kW maximum beyond its "
            "8 x 700 W GPUs (DGX H100 user guide)."
        ),
    )
    pue: float = Field(
        default=1.2,
        ge=1,
        description=(
            "Power usage effectiveness of the data centre. Assumed 1.2, between hyperscale "
            "fleets (Google 1.10, 2023 environmental report) and the industry mean (1.56, "
            "Uptime Institute 2024 survey)."
        ),
    )

    def node_w(self, gpu_w: float, gpus_per_node: int) -> float:
        """Watts one node draws at the wall before PUE."""
        overhead = self.node_overhead_w
        if overhead is None:
            overhead = NODE_OVERHEAD_PER_GPU_W * gpus_per_node
        return gpus_per_node * gpu_w + overhead


NODE_OVERHEAD_PER_GPU_W = (10_200 - 8 * 700) / 8
"""DGX H100: 10.2 kW maximum system power, 8 H100 SXM at 700 W (DGX H100 user guide)."""
