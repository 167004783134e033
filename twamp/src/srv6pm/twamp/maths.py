"""Loss and delay maths for STAMP and alternate-marking measurements (pure functions).

References: two-way delay RFC 8762 section 4 / RFC 5357 ((T4 - T1) - (T3 - T2)); one-way delay
RFC 7679 (meaningful only between synchronised clocks, the S bit of RFC 4656 4.1.2); packet loss
RFC 7680 and alternate-marking blocks RFC 9341 section 3; interarrival jitter RFC 3550 section
6.4.1 / appendix A.8; IP delay variation as max - min RFC 5481; nearest-rank percentiles;
delay histograms over fixed bin edges. All times are integer nanoseconds.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Sequence


def block_of(unix_ns: int, period_ns: int) -> int:
    """Index of the marking block (period T) that contains `unix_ns` (RFC 9341 section 3.1).

    Block k spans [k*T, (k+1)*T); its colour is k % 2. Floor division keeps negative times in the
    right block too.
    """
    if period_ns <= 0:
        raise ValueError(f"period must be > 0 ns, not {period_ns}")
    return unix_ns // period_ns


def counter_delta(new: int, old: int, width_bits: int = 32) -> int:
    """Increment of a free-running counter of `width_bits` bits from `old` to `new`.

    Modular: a counter that wrapped once still gives the right increment (one wrap per reading
    at most, which the reading interval must guarantee).
    """
    if width_bits <= 0:
        raise ValueError(f"counter width must be > 0 bits, not {width_bits}")
    modulus = 1 << width_bits
    if not (0 <= new < modulus and 0 <= old < modulus):
        raise ValueError(f"counters {old}, {new} do not fit {width_bits} bits")
    return (new - old) % modulus


def loss(tx: int, rx: int) -> tuple[int, float | None]:
    """(lost packets, loss ratio) of a block: tx - rx and (tx - rx) / tx (RFC 7680).

    The ratio is None when nothing was sent. rx > tx gives a negative loss on purpose: it means
    miscounting (duplication, a block read too early or attributed to the wrong period), which
    clamping to 0 would hide.
    """
    lost = tx - rx
    return lost, (lost / tx if tx else None)


def two_way_delay_ns(t1: int, t2: int, t3: int, t4: int) -> int:
    """Round-trip delay less the reflector's residence time: (T4 - T1) - (T3 - T2).

    T1 sender transmit, T2 reflector receive, T3 reflector transmit, T4 sender receive. Needs no
    clock synchronisation: each difference is taken on one clock.
    """
    return (t4 - t1) - (t3 - t2)


def one_way_delays_ns(
    t1: int, t2: int, t3: int, t4: int, sender_synced: bool, reflector_synced: bool
) -> tuple[int, int] | None:
    """(forward T2 - T1, reverse T4 - T3), or None unless both clocks are synchronised.

    The flags are the S bits of the sender's and the reflector's Error Estimates: a one-way delay
    between two free-running clocks is their offset plus noise, so we refuse to produce one.
    """
    if not (sender_synced and reflector_synced):
        return None
    return t2 - t1, t4 - t3


def jitter_rfc3550(transit_times: Iterable[int]) -> float:
    """Interarrival jitter of RFC 3550 6.4.1: J += (|D| - J) / 16 over successive transit times.

    D is the difference between consecutive transit times (arrival - send, clock offset cancels).
    Returns 0.0 for fewer than two samples; ns, as a float (the filter has fractional state).
    """
    jitter = 0.0
    previous: int | None = None
    for transit in transit_times:
        if previous is not None:
            jitter += (abs(transit - previous) - jitter) / 16
        previous = transit
    return jitter


def ipdv_mean_abs(delays: Sequence[int], previous: int | None = None) -> int:
    """Mean absolute IP delay variation of consecutive packets (RFC 3393; RFC 5481 section 4.1):
    the mean of |D(i) - D(i-1)|, rounded to the ns. `previous` is the delay of the packet before
    the first (so one sample per block still yields a variation); 0 with no pair."""
    chain = [previous, *delays] if previous is not None else list(delays)
    if len(chain) < 2:
        return 0
    return round(sum(abs(b - a) for a, b in itertools.pairwise(chain)) / (len(chain) - 1))


def jitter_max_min(delays: Iterable[int]) -> int | None:
    """Delay variation as max - min over the samples (RFC 5481 PDV range); None if empty."""
    values = list(delays)
    if not values:
        return None
    return max(values) - min(values)


def percentiles(values: Iterable[int], ps: Sequence[float] = (50, 90, 99)) -> dict[float, int]:
    """Nearest-rank percentiles: the value at rank ceil(p/100 * N) of the sorted samples.

    Always a sample (no interpolation); p = 0 gives the minimum, p = 100 the maximum.
    ValueError if there are no values or a p is outside [0, 100].
    """
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentiles of no values")
    out: dict[float, int] = {}
    for p in ps:
        if not 0 <= p <= 100:
            raise ValueError(f"percentile {p} is outside [0, 100]")
        rank = max(1, math.ceil(p / 100 * len(ordered)))
        out[p] = ordered[rank - 1]
    return out


def histogram(values: Iterable[int], edges: Sequence[int]) -> tuple[int, ...]:
    """Counts of `values` per bin of ascending `edges`: len(edges) + 1 bins, bin i holding
    [edges[i-1], edges[i]) (the first from minus infinity, the last to infinity), so a value
    equal to an edge falls in the bin that edge opens. No edges: ().

    ValueError when the edges are not strictly ascending (a bin would be empty by definition).
    """
    if not edges:
        return ()
    if any(b <= a for a, b in itertools.pairwise(edges)):
        raise ValueError(f"histogram edges must be strictly ascending, not {list(edges)}")
    counts = [0] * (len(edges) + 1)
    for value in values:
        counts[bisect.bisect_right(edges, value)] += 1
    return tuple(counts)
