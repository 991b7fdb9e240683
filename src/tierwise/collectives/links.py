"""Load on the busiest link when switches spread flows over their uplinks.

A leaf (or a pod's spine layer) forwards the flows that leave it over `links` equal uplinks:

- `adaptive` (InfiniBand adaptive routing, AWS SRD): packets of one flow spread over every
  uplink, so the uplinks carry the fluid share, flows / links each;
- `static` (destination-based forwarding tables, InfiniBand's default D-mod-k routing): flows
  are dealt out evenly, the busiest uplink carries ceil(flows / links);
- `ecmp` (Ethernet and RoCE): each flow (one queue pair: its UDP source port) is hashed onto
  one uplink, balls into bins, and the busiest uplink carries the expected maximum.

A synchronous collective runs at the pace of its busiest link in the whole fabric, not of one
switch's: with `switches` switches each hashing its own flows onto its own links
independently, P(fabric max <= t) = F(t)^switches, F the one switch's distribution of its
busiest link (`max_load_cdf`), and E[max] = sum over t >= 0 of 1 - F(t)^switches. One flow
there gets the link's rate over `busiest_load`.

F is exact for up to `EXACT_MAX_FLOWS` flows (the multinomial as independent Poisson bins
conditioned on their sum, Poissonisation; the links-fold product of the cut bins as a power
series truncated at `flows`, by repeated squaring with FFTs of length ~2 x flows, so the cost
does not grow with `links`). Above that the bins are taken as independent Poisson(flows /
links) loads (their sum not conditioned: at most +0.2% at 1,000 flows against a simulation,
docs/validation-fabric.md), summed in one numpy window of mean +- 40 standard deviations;
above `NORMAL_MIN_MEAN` flows per link, the normal limit mean + sd x E[max of the bins'
standard normals] (its relative error is below 1e-6 there).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

EXACT_MAX_FLOWS = 1024
"""Most flows per switch whose busiest-link distribution is computed exactly."""
NORMAL_MIN_MEAN = 1e6
"""Flows per link above which the Poisson loads are taken as normal (module docstring)."""
_TAIL_SIGMAS = 12  # exact sums run to mean + 12 (sd + 1) loads: the rest is below 1e-12
_WINDOW_SIGMAS = 40  # the Poisson window: mean +- 40 sd (beyond: e^-800, nothing in a double)


def busiest_load(routing: str, flows: int, links: int, switches: int = 1) -> float:
    """Flows on the busiest of the links of `switches` switches, each carrying `flows` equal
    flows over `links` equal links (expected, under ECMP; the fluid share flows / links under
    adaptive routing; ceil(flows / links) under static routing, whatever the switches)."""
    if flows <= 0:
        return 0.0
    if routing == "adaptive" or links <= 1:
        return flows / max(links, 1)
    if routing == "static":
        return float(math.ceil(flows / links))
    return expected_max_load(flows, links, switches)


@lru_cache(maxsize=4096)
def expected_max_load(flows: int, links: int, switches: int = 1) -> float:
    """Expected flows on the busiest link of `switches` switches when each switch hashes its
    `flows` flows uniformly and independently onto its `links` links (ECMP),
    E[max] = sum over t >= 0 of P(max > t) = first + sum over t >= first of 1 - F(t)^switches."""
    import numpy as np

    if flows <= 0:
        return 0.0
    if links <= 1:
        return float(flows)
    switches = max(1, switches)
    if flows > EXACT_MAX_FLOWS:
        return _poisson_max(flows / links, links * switches)
    first, below = max_load_cdf(flows, links)
    with np.errstate(divide="ignore"):
        above = -np.expm1(switches * np.log(below))  # 1 - F^switches, without cancelling
    return float(first + np.sum(above))


@lru_cache(maxsize=4096)
def max_load_cdf(flows: int, links: int) -> tuple[int, np.ndarray]:
    """(first, F): F[i] = P(the busiest of `links` links carries <= first + i of `flows`
    flows hashed uniformly onto them), first = ceil(flows / links) (some link carries that
    many); F is 1 (to 1e-12) past its end. For up to `EXACT_MAX_FLOWS` flows, links >= 2.

    P(all <= t) is the convolution over the links of independent Poisson(flows / links) bins
    cut at t, at the sum `flows`, over P(Poisson(flows) = flows): every t at once, one row
    each, the links-fold power truncated at degree `flows` by repeated squaring."""
    import numpy as np

    lam = flows / links
    first = -(-flows // links)
    last = max(first, min(flows, math.ceil(lam + _TAIL_SIGMAS * (math.sqrt(lam) + 1))))
    ts = np.arange(first, last + 1)
    k = np.arange(last + 1)
    log_pmf = k * math.log(lam) - lam - np.array([math.lgamma(i + 1) for i in range(last + 1)])
    rows = np.where(k[None, :] <= ts[:, None], np.exp(log_pmf)[None, :], 0.0)
    at_sum = _truncated_power(rows, links, flows)[:, flows]
    norm = math.exp(flows * math.log(flows) - flows - math.lgamma(flows + 1))
    below = np.clip(at_sum / norm, 0.0, 1.0)
    below[ts >= flows] = 1.0  # all flows on one link: nothing carries more
    below.setflags(write=False)
    return first, below


def _truncated_power(rows: np.ndarray, power: int, degree: int) -> np.ndarray:
    """Each row's polynomial raised to `power`, coefficients up to `degree` (the rest cut
    after every product, so FFTs of length >= 2 (degree + 1) never wrap onto them)."""
    import numpy as np

    n = 1 << (2 * degree + 1).bit_length()

    def times(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.fft.irfft(np.fft.rfft(a, n, axis=1) * np.fft.rfft(b, n, axis=1), n, axis=1)[
            :, : degree + 1
        ]

    base = np.zeros((rows.shape[0], degree + 1))
    width = min(rows.shape[1], degree + 1)
    base[:, :width] = rows[:, :width]
    out: np.ndarray | None = None
    while True:
        if power & 1:
            out = base if out is None else times(out, base)
        power >>= 1
        if not power:
            assert out is not None
            return out
        base = times(base, base)


@lru_cache(maxsize=1024)
def _poisson_max(lam: float, bins: int) -> float:
    """Expected maximum of `bins` independent Poisson(lam) loads: sum over t of
    1 - (1 - P(X > t))^bins over mean +- 40 sd (below it P(max > t) is 1); the normal limit
    above `NORMAL_MIN_MEAN`."""
    import numpy as np

    if lam > NORMAL_MIN_MEAN:
        from tierwise.hardware.fleet import expected_max_normal

        return lam + math.sqrt(lam) * expected_max_normal(bins)
    sd = math.sqrt(lam)
    lo = max(0, math.floor(lam - _WINDOW_SIGMAS * sd) - 1)
    hi = math.ceil(lam + _WINDOW_SIGMAS * (sd + 1))
    mode = math.floor(lam)
    t = np.arange(lo, hi + 1)
    # log pmf(t) from the mode's by the ratios pmf(u) / pmf(u - 1) = lam / u, both ways
    log_mode = mode * math.log(lam) - lam - math.lgamma(mode + 1)
    ratios = np.cumsum(np.log(lam / np.maximum(t, 1)))
    log_pmf = log_mode + ratios - ratios[mode - lo]
    pmf = np.exp(log_pmf)
    above = np.cumsum(pmf[::-1])[::-1] - pmf  # P(X > t), summed from the top of the window
    with np.errstate(divide="ignore"):
        tail = -np.expm1(bins * np.log1p(-np.minimum(above, 1.0)))
    return float(lo + np.sum(tail))
