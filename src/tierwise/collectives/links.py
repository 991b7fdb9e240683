"""Load on the busiest uplink when a switch spreads flows over its uplinks.

A leaf (or a pod's spine layer) forwards the flows that leave it over `links` equal uplinks:

- `adaptive` (InfiniBand adaptive routing, AWS SRD): packets of one flow spread over every
  uplink, so the uplinks carry the fluid share, flows / links each;
- `static` (destination-based forwarding tables, InfiniBand's default D-mod-k routing): flows
  are dealt out evenly, the busiest uplink carries ceil(flows / links);
- `ecmp` (Ethernet and RoCE): each flow (one queue pair: its UDP source port) is hashed onto
  one uplink, balls into bins, and the busiest uplink carries the expected maximum.

A collective runs at the pace of its busiest link: one flow there gets the link's rate over
`busiest_load` (its expected share under ECMP). Expected maxima are
exact for up to `EXACT_MAX_FLOWS` flows (the multinomial as independent Poisson bins
conditioned on their sum, Poissonisation) and the Poisson bins' maximum above that.
"""

from __future__ import annotations

import math
from functools import lru_cache

EXACT_MAX_FLOWS = 1024
"""Most flows whose expected maximum is computed exactly (FFT of the truncated bins)."""
_TAIL = 1e-12  # a tail probability below this ends the sum over loads
_TAIL_SIGMAS = 12  # exact sums run to mean + 12 (sd + 1) loads: the rest is below 1e-12


def busiest_load(routing: str, flows: int, links: int) -> float:
    """Flows on the busiest of `links` equal uplinks carrying `flows` equal flows (expected,
    under ECMP; the fluid share flows / links under adaptive routing)."""
    if flows <= 0:
        return 0.0
    if routing == "adaptive" or links <= 1:
        return flows / max(links, 1)
    if routing == "static":
        return float(math.ceil(flows / links))
    return expected_max_load(flows, links)


@lru_cache(maxsize=4096)
def expected_max_load(flows: int, links: int) -> float:
    """Expected flows on the busiest of `links` uplinks when each of `flows` flows picks one
    uniformly at random (ECMP hashing), E[max] = sum over t >= 0 of P(max > t)."""
    if flows <= 0:
        return 0.0
    if links <= 1:
        return float(flows)
    if flows > EXACT_MAX_FLOWS:
        return _poisson_max(flows / links, links)
    return _exact_max(flows, links)


def _exact_max(flows: int, links: int) -> float:
    """E[max] of the multinomial: t0 = ceil(flows / links) (some link carries at least that)
    plus, for every t from t0 up, P(some link carries more than t) = 1 - P(all <= t), where
    P(all <= t) is the convolution over the links of independent Poisson(flows / links) bins
    cut at t, at the sum `flows`, over P(Poisson(flows) = flows). All t at once: one FFT per
    row, long enough that the full convolution does not wrap around."""
    import numpy as np

    lam = flows / links
    first = -(-flows // links)
    last = max(first, min(flows, math.ceil(lam + _TAIL_SIGMAS * (math.sqrt(lam) + 1))))
    ts = np.arange(first, last + 1)
    k = np.arange(last + 1)
    log_pmf = k * math.log(lam) - lam - np.array([math.lgamma(i + 1) for i in range(last + 1)])
    rows = np.where(k[None, :] <= ts[:, None], np.exp(log_pmf)[None, :], 0.0)
    n = 1 << (links * last + 1).bit_length()
    at_sum = np.fft.irfft(np.fft.rfft(rows, n, axis=1) ** links, n, axis=1)[:, flows]
    norm = math.exp(flows * math.log(flows) - flows - math.lgamma(flows + 1))
    below = np.clip(at_sum / norm, 0.0, 1.0)
    below[ts >= flows] = 1.0  # all flows on one link: nothing carries more
    return float(first + np.sum(1.0 - below))


def _poisson_max(lam: float, links: int) -> float:
    """Expected maximum of `links` independent Poisson(lam) loads (large flow counts)."""
    from statistics import NormalDist

    total, t, cdf, pmf = 0.0, 0, 0.0, math.exp(-lam) if lam < 700 else 0.0
    if pmf == 0.0:  # very large loads: the normal limit of the Poisson
        z = NormalDist().inv_cdf(1 - 1 / (links + 1))
        return lam + z * math.sqrt(lam)
    while True:
        cdf += pmf
        tail = 1.0 - cdf**links
        total += tail
        if t >= lam and tail < _TAIL:
            return total
        t += 1
        pmf *= lam / t
