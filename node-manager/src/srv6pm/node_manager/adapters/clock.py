"""Is this node's clock synchronised to an external source? (STAMP Error Estimate S bit,
RFC 8762 section 4.1.2; one-way delays and block alignment depend on it.) The host's clock,
whatever data plane it runs: VPP reads the same kernel clock."""

from __future__ import annotations

import ctypes

TIME_ERROR = 5  # adjtimex(2): the clock is not synchronised
_TIMEX_SIZE = 208  # struct timex on 64-bit Linux


def kernel_clock_synchronised() -> bool:
    """What the kernel's NTP state says (adjtimex with no modification)."""
    libc = ctypes.CDLL(None, use_errno=True)
    timex = ctypes.create_string_buffer(_TIMEX_SIZE)  # modes = 0: read only
    state = int(libc.adjtimex(timex))
    return state >= 0 and state != TIME_ERROR
