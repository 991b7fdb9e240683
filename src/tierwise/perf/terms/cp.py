"""Context parallelism, as Megatron's --cp-comm-type runs it (Transformer Engine's
context_parallel.py): ring attention (p2p), Ulysses all-to-all (a2a) or K/V all-gather
(allgather).

Ring attention exchanges the K and V blocks cp-1 times per layer forward and twice that
backward (K, V and their gradients), hidden behind the attention core they feed. Ulysses
moves Q/K/V from sequence- to head-sharded before attention and the output back after it,
per layer and pass; nothing hides those all-to-alls. All-gather CP (Llama 3, Dubey et al.
2024 section 3.3.2; TE's AttnFuncWithCPAndKVAllGather) gathers every rank's K and V before
each forward of the attention core and again in its backward, which then reduce-scatters
the K and V gradients; TE runs them on the compute stream before the core: all exposed.
"""

from __future__ import annotations

from tierwise.perf import comm as C
from tierwise.perf.terms.stage import CommTerm, Stage
from tierwise.records import record
from tierwise.workload.flops import Array, minimum, pos

NO_CP = CommTerm(0.0, 0.0, 0.0, "cp")  # a layout without CP (one shared, immutable tuple)


def cp_comm(s: Stage, comm: C.CommFn, attention_s: Array, kind: str = "p2p") -> CommTerm:
    """CP communication of one micro-batch on the stage `s`; `attention_s`: the attention
    core's seconds the ring hides behind; `kind`: one of `tierwise.frameworks.CP_COMM_TYPES`."""
    m, n, tokens, cp = s.model, s.layers, s.tokens, s.f["cp"]
    if isinstance(cp, int) and cp == 1:  # one layout without CP: nothing to price
        return NO_CP
    tp = s.f["tp"]
    kv_rank = m.kv_dim / minimum(tp, m.kv)
    if kind == "a2a":
        qkv = C.activation_bytes(tokens, m.q_dim / tp + C.KV_TENSORS * kv_rank)
        out = C.activation_bytes(tokens, m.q_dim / tp)
        layer = s.passes * (comm("cp", "alltoall", qkv) + comm("cp", "alltoall", out))
        exposed = n * layer
        sent = n * s.passes * (qkv + out) * (cp - 1) / cp
    elif kind == "allgather":  # every forward and the backward gather; dK, dV scattered back
        kv_block = C.activation_bytes(tokens, C.KV_TENSORS * kv_rank)
        gathered = cp * kv_block
        gather, scatter = comm("cp", "all_gather", gathered), comm("cp", "reduce_scatter", gathered)
        layer = s.passes * gather + scatter
        exposed = n * layer
        sent = n * (s.passes + 1) * (cp - 1) * kv_block
    else:
        kv_block = C.activation_bytes(tokens, C.KV_TENSORS * kv_rank)
        ring_passes = 1 + s.passes  # forward: K, V; backward: K, V and their gradients
        layer = (cp - 1) * comm("cp", "sendrecv", kv_block) * ring_passes
        exposed = n * pos(layer - attention_s / n)
        sent = n * (cp - 1) * kv_block * ring_passes
    return record(CommTerm, (exposed, n * layer, sent, "cp"))
