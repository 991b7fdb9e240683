"""Upper bounds of the counts and sizes tierwise accepts, checked where a value enters.

Each bound is far above any real system yet keeps memory and time finite: the planner and the
placement models hold arrays per GPU, per layer or per job, so an unbounded count (2**31 GPUs
per node, 10**9 layers, 9.2e18 synthetic jobs) is a MemoryError or a hang, not an answer. A
value outside its bound is a user error naming the input, the value and the allowed range
(``check_count``); CLI options take theirs through ``tierwise.cli.options.count_option``, spec
fields through pydantic ``Field(le=...)``.
"""

from __future__ import annotations

from tierwise.errors import SpecError

#: GPUs in one node (one host). Largest today: 8 (HGX), 4 per GB200 tray, 16 (HGX-2); the
#: NVLink domain may be larger (``nvlink_domain_gpus``, up to ``MAX_DOMAIN_GPUS``).
MAX_GPUS_PER_NODE = 1024
#: GPUs in one NVLink domain: NVIDIA's largest announced is 576 (Vera Rubin NVL576, GTC 2025).
MAX_DOMAIN_GPUS = 4096
#: GPUs in one cluster (nodes x GPUs per node): the largest built have ~2*10^5 (xAI Colossus,
#: 2025); placement, group and plan models hold a few arrays per GPU, and at 2^20 GPUs a plan
#: stays within seconds where 10^8 GPUs (10^5 nodes of 1024) took minutes and 10 GB.
MAX_GPUS = 1 << 20
#: NIC ports per node: DGX H100/B200 have 8 compute NICs (+2 storage), some designs 16.
MAX_NICS_PER_NODE = 64
#: Transformer layers: the deepest published LLMs have ~128 (Llama 3.1 405B: 126).
MAX_LAYERS = 10_000
#: Routed experts per MoE layer: DeepSeek-V3 256, Kimi K2 384; fine-grained research ~10^4.
MAX_EXPERTS = 65_536
#: Sequences in a global or micro batch (Megatron runs use <= ~16k sequences per step).
MAX_SEQUENCES = 1 << 24
#: Tokens in one sequence (Llama 4 Scout's 10M context fits).
MAX_SEQ_TOKENS = 1 << 26
#: Bytes of one size a user types (message sizes, buffers): 1 PiB.
MAX_BYTES = 1 << 50
#: Jobs in a generated trace; ``schedule simulate`` on this many stays within seconds.
MAX_JOBS = 100_000
#: Rows of one `sweep --vary` (the product of its value lists): each row is a plan search,
#: ~10 ms on a small cluster, ~1.5 s on 10^5 nodes.
MAX_SWEEP_ROWS = 256
#: Random seeds: numpy takes any non-negative integer; tierwise takes those of 63 bits.
MAX_SEED = 2**63 - 1


def check_count(name: str, value: int, low: int, high: int) -> int:
    """``value`` when ``low <= value <= high``, else a SpecError naming ``name``."""
    if not low <= value <= high:
        shown = str(value) if len(str(value)) <= 24 else f"{str(value)[:12]}..."
        raise SpecError(f"{name}: {shown}; allowed: {low} to {high}")
    return value
