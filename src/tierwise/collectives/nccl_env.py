"""The NCCL environment under which the collective model's prices hold: the settings a
cluster spec assumes that NCCL would not pick by itself (NCCL's environment-variable
documentation, "Environment Variables", NCCL 2.2x).

- ``qps_per_connection`` > 1 on an InfiniBand or RoCE fabric: ``NCCL_IB_QPS_PER_CONNECTION``
  (default 1; every queue pair is a flow the fabric hashes on its own). On Ethernet sockets
  the flows are NCCL's sockets per connection, ``NCCL_SOCKET_NTHREADS`` x
  ``NCCL_NSOCKS_PERTHREAD`` (both default 1 off the clouds NCCL detects; product <= 64).
- ``routing``: ``NCCL_IB_ADAPTIVE_ROUTING`` sets the queue pairs' adaptive-routing flag
  (default 1 on InfiniBand, 0 on RoCE); the spec's routing where it is not that default.
- NVLink SHARP the spec leaves out on hardware that has it: ``NCCL_NVLS_ENABLE=0`` (NCCL
  uses it wherever it is supported).
- SHARP in the switches the spec enables: ``NCCL_COLLNET_ENABLE=1`` (CollNet is off unless
  asked for; it also needs the SHARP plugin on the library path).
"""

from __future__ import annotations

from tierwise.errors import SpecError
from tierwise.hardware.cluster import ClusterSpec

IB_TRANSPORT = ("ib", "roce")
"""NIC kinds NCCL drives through its IB verbs transport."""
NCCL_ADAPTIVE_DEFAULT = {"ib": "1", "roce": "0"}
"""NCCL_IB_ADAPTIVE_ROUTING's default on each kind."""
MAX_SOCKETS_PER_CONNECTION = 64
"""NCCL's limit on NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD."""


def nccl_environment(cluster: ClusterSpec) -> dict[str, str]:
    """Environment variables (name -> value) that make NCCL run as the spec is priced;
    empty where NCCL's own defaults already do. SpecError where NCCL cannot run it."""
    env: dict[str, str] = {}
    kind, qps = cluster.inter.nic.kind, cluster.topology.qps_per_connection
    if kind in IB_TRANSPORT and cluster.inter.nics_per_node > 0:
        if qps > 1:
            env["NCCL_IB_QPS_PER_CONNECTION"] = str(qps)
        adaptive = "1" if cluster.routing == "adaptive" else "0"
        if adaptive != NCCL_ADAPTIVE_DEFAULT[kind]:
            env["NCCL_IB_ADAPTIVE_ROUTING"] = adaptive
    elif kind == "eth" and qps > 1:
        if qps > MAX_SOCKETS_PER_CONNECTION:
            raise SpecError(
                f"topology.qps_per_connection: {qps} sockets per connection on Ethernet; "
                f"NCCL opens at most {MAX_SOCKETS_PER_CONNECTION}"
            )
        env["NCCL_SOCKET_NTHREADS"] = "1"
        env["NCCL_NSOCKS_PERTHREAD"] = str(qps)
    if cluster.intra.nvls and not cluster.nvls:
        env["NCCL_NVLS_ENABLE"] = "0"
    if cluster.sharp:
        env["NCCL_COLLNET_ENABLE"] = "1"
    return env
