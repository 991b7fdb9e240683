"""Context parallelism: ring attention (p2p) or Ulysses all-to-all (a2a).

Ring attention exchanges the K and V blocks cp-1 times per layer forward and twice that
backward (K, V and their gradients), hidden behind the attention core they feed. Ulysses
moves Q/K/V from sequence- to head-sharded before attention and the output back after it,
per layer and pass; nothing hides those all-to-alls.
"""

from __future__ import annotations

from tierwise.perf import comm as C
from tierwise.perf.terms.stage import CommTerm, Stage
from tierwise.workload.flops import Array, minimum, pos

CP_COMM_TYPES = ("p2p", "a2a")


def cp_comm(s: Stage, comm: C.CommFn, attention_s: Array, kind: str = "p2p") -> CommTerm:
    """CP communication of one micro-batch on the stage `s`; `attention_s`: the attention
    core's seconds the ring hides behind; `kind`: one of `CP_COMM_TYPES`."""
    m, n, tokens, cp = s.model, s.layers, s.tokens, s.f["cp"]
    if isinstance(cp, int) and cp == 1:  # one layout without CP: nothing to price
        return CommTerm(0.0, 0.0, 0.0, "cp")
    tp = s.f["tp"]
    kv_rank = m.kv_dim / minimum(tp, m.kv)
    if kind == "a2a":
        qkv = C.activation_bytes(tokens, m.q_dim / tp + C.KV_TENSORS * kv_rank)
        out = C.activation_bytes(tokens, m.q_dim / tp)
        layer = s.passes * (comm("cp", "alltoall", qkv) + comm("cp", "alltoall", out))
        exposed = n * layer
        sent = n * s.passes * (qkv + out) * (cp - 1) / cp
    else:
        kv_block = C.activation_bytes(tokens, C.KV_TENSORS * kv_rank)
        ring_passes = 1 + s.passes  # forward: K, V; backward: K, V and their gradients
        layer = (cp - 1) * comm("cp", "sendrecv", kv_block) * ring_passes
        exposed = n * pos(layer - attention_s / n)
        sent = n * (cp - 1) * kv_block * ring_passes
    return CommTerm(exposed, n * layer, sent, "cp")
