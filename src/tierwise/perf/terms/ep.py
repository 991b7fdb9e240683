"""Expert parallelism as Megatron-core runs it: token dispatch to the experts and back.

Per MoE layer and pass (forward, backward, recompute) a dispatch and a combine on the EP
group, by Megatron's ``--moe-token-dispatcher-type``:

- ``alltoall``: each rank sends its routed tokens (top_k copies of each of its tokens: the
  1/tp share it holds under sequence parallelism) to the ranks of their experts; with
  expert tensor parallelism (etp > 1) the received tokens are then all-gathered over the
  expert's TP ranks and reduce-scattered back after it (priced on the TP group).
- ``allgather``: every rank all-gathers all tokens of the EP group and keeps the ones for
  its experts; combine is a reduce-scatter. Independent of top_k, heavier with large EP.
  Priced on the EP group (Megatron gathers over EP x ETP ranks: with etp > 1 this is low).
- ``flex`` (DeepEP / HybridEP): one all-to-all that sends a token once to each NVLink
  domain holding one of its experts and fans it out inside: the bytes of ``alltoall`` times
  the expected share of distinct domains among top_k picks, D(1 - (1 - 1/D)^k) / k, when
  the group spans D > 1 domains (uniform routing; D from ep*etp consecutive GPUs).

The permute / unpermute copies around the dispatch (and the alltoall dispatcher's sort by
local expert) are HBM traffic in the compute term, scaled per dispatcher (`permute_scale`).

Routing sets the busiest rank's load against the mean: ``balanced`` (Megatron's
``--moe-router-force-load-balancing``, as NVIDIA's benchmarks run) 1; ``capacity`` (the
model's capacity factor, ``--moe-expert-capacity-factor``) buffers padded to the factor;
``dropless`` (the default) MOE_DROPLESS_IMBALANCE. The slowest rank sets the pace of each
all-to-all and of the expert GEMMs after it.

``--overlap-moe-expert-parallel-comm`` (Megatron's combined 1F1B; DualPipe's paired
directions do the same) hides each layer's dispatch and combine behind the other
micro-batch's compute of that layer in the steady state; the first and last micro-batch of
a step stay exposed. Without ``--delay-wgrad-compute`` the backward's weight-gradient GEMMs
run before its all-to-all is issued, so only the forward and input-gradient compute
(WGRAD_FREE_SHARE of the layer) is left to hide behind.
"""

from __future__ import annotations

from tierwise.perf import comm as C
from tierwise.perf.terms.stage import CommTerm, Stage
from tierwise.records import record
from tierwise.workload.flops import Array, pos
from tierwise.workload.spec import ModelSpec

# Dropless routing: tokens on the busiest expert rank over the mean. Assumed, not fitted:
# with an auxiliary balance loss the batch-level maximum violation stays around 0.1-0.3
# once training settles (Wang et al. 2024, "Auxiliary-Loss-Free Load Balancing Strategy for
# Mixture-of-Experts", MaxVio figures); 1.2 sits in that range.
MOE_DROPLESS_IMBALANCE = 1.2
# Share of the other micro-batch's layer compute the overlapped all-to-alls can use.
EP_OVERLAP_EFFICIENCY = 0.9
# Share of a layer's forward + backward compute that is not weight-gradient GEMMs: forward 1,
# input gradient 1, weight gradient 1 (backward = 2 x forward).
WGRAD_FREE_SHARE = 2.0 / 3.0


def permute_scale(dispatcher: str, ep: Array, top_k: int, local_experts: Array = 1) -> Array:
    """Permute / unpermute HBM traffic of `dispatcher` over the workload's count
    (`tierwise.perf.terms.compute.permute_bytes`: top_k copies of each token written into
    expert order and read back, each copy a read and a write, as the alltoall dispatcher's
    permute and unpermute move them).

    - ``alltoall``: with more than one local expert the received tokens are also sorted from
      source-rank order into local-expert order and back around the experts (Megatron's
      ``sort_chunks_by_idxs``): a second read and write of every copy, twice the traffic.
    - ``allgather``: scans the tokens of all ep ranks where alltoall moves top_k copies of
      its own: ep / top_k.
    - ``flex`` (DeepEP, HybridEP's ``dispatch_with_permute``): a token lands once in the
      buffer of each of the D distinct ranks among its top_k experts and is permuted there to
      its experts (D reads, top_k writes); before the combine the top_k expert outputs are
      read and D per-rank partial sums written: (top_k + D) / (2 top_k) with D / top_k the
      `domain_share` of ep ranks (uniform routing). HybridEP can run the permute inside the
      dispatch kernel's grid, but the tokens still pass through HBM.
    """
    if dispatcher == "flex":
        return (1 + domain_share(ep, top_k)) / 2
    if dispatcher == "allgather":
        return ep / top_k
    return 1.0 + (local_experts > 1)


def routing(m: ModelSpec, force_balance: bool) -> tuple[str, float]:
    """Routing name and the busiest rank's routed tokens over the mean (module docstring)."""
    if m.moe is not None and m.moe.capacity_factor:
        return "capacity", m.moe.capacity_factor
    if force_balance:
        return "balanced", 1.0
    return "dropless", MOE_DROPLESS_IMBALANCE


def domain_share(domains: Array, top_k: int) -> Array:
    """Expected distinct NVLink domains among a token's top_k experts (uniform routing) per
    copy sent: 1 inside one domain (every copy goes over NVLink)."""
    spread = domains * (1 - (1 - 1 / domains) ** top_k) / top_k
    return (domains > 1) * spread + (domains <= 1)


NO_EP = CommTerm(0.0, 0.0, 0.0, "ep")  # a dense model (one shared, immutable tuple)


def ep_comm(
    s: Stage,
    comm: C.CommFn,
    dispatcher: str = "alltoall",
    force_balance: bool = False,
    overlap: bool = False,
    layer_compute_s: Array = 0.0,
    domain_gpus: int = 8,
    delay_wgrad: bool = False,
) -> CommTerm:
    """EP communication of one micro-batch on the stage `s` (zero for a dense model);
    `layer_compute_s`: one layer's compute, what overlap hides behind; `domain_gpus`: GPUs
    per NVLink domain (flex); `delay_wgrad`: --delay-wgrad-compute."""
    m, f = s.model, s.f
    if m.moe is None:
        return NO_EP
    tp, sp, ep, etp = f["tp"], f["sp"], f["ep"], f["etp"]
    top_k = m.moe.top_k
    _, load = routing(m, force_balance)
    local = s.tokens / (1 + sp * (tp - 1))  # tokens this rank routes
    if dispatcher == "allgather":
        gathered = C.activation_bytes(local * ep, m.hidden)
        per_layer = comm("ep", "all_gather", gathered) + comm("ep", "reduce_scatter", gathered)
        sent = 2 * gathered * (ep - 1) / ep
    else:
        buffer = C.activation_bytes(local * top_k * load, m.hidden)
        if dispatcher == "flex":
            buffer = buffer * domain_share(-(-ep * etp // domain_gpus), top_k)
        per_layer = C.A2A_PER_MOE_PASS * comm("ep", "alltoall", buffer)
        sent = C.A2A_PER_MOE_PASS * buffer * (ep - 1) / ep
        expert_tp = C.activation_bytes(local * top_k * load * etp, m.hidden) * (etp > 1)
        per_layer = (
            per_layer
            + comm("tp", "all_gather", expert_tp)
            + comm("tp", "reduce_scatter", expert_tp)
        )
    layers = s.layers * (m.moe_layers / m.layers) * s.moe_passes
    total = layers * per_layer
    exposed = total
    if overlap:  # steady-state micro-batches hide behind the other one's layer compute
        hidden_share = (s.micro - 1) / s.micro
        window = layer_compute_s * (1.0 if delay_wgrad else WGRAD_FREE_SHARE)
        steady = layers * pos(per_layer - EP_OVERLAP_EFFICIENCY * window)
        exposed = hidden_share * steady + (1 - hidden_share) * total
    return record(CommTerm, (exposed, total, layers * sent, "ep"))
