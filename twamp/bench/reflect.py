"""Time the Session-Reflector spends on one probe (decode, TLV processing, encode), without the
socket: the cost of the RFC 8972 processing on the reflector's hot path.

    python twamp/bench/reflect.py [--runs 7] [-n 20000] [--u-flag]

Run it with PYTHONPATH pointing at another checkout's twamp/src to compare two versions side
by side. Each figure is the median over `runs` of the mean time per probe within a run.
"""

from __future__ import annotations

import argparse
import statistics
import time

from srv6pm.twamp import codec
from srv6pm.twamp.reflector import ReflectedFlows, Reflector, ReflectorConfig
from srv6pm.twamp.transport import Datagram

KEY = b"benchmark key, 32 octets long..."


class ConstantCounters:
    def block_packets(self, flow: str, block: int) -> int | None:
        return 1000


def per_probe_us(key: bytes | None, flags: int, runs: int, n: int) -> float:
    config = ReflectorConfig(key=key, sessions={1: ReflectedFlows("f", "r")})
    reflector = Reflector(config, ConstantCounters(), lambda *_: True)
    tlvs = (codec.DirectMeasurement(5, flags=flags),)
    data = codec.encode_sender(codec.SenderPacket(1, 2**63, 0x8001, 1, tlvs), key)
    datagram = Datagram(data, ("2001:db8::1", 5000), time.time_ns(), 64, 0)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(n):
            reflector.handle(datagram)
        times.append((time.perf_counter() - start) / n * 1e6)
    if reflector.stats.reflected != runs * n:
        raise SystemExit(f"not every probe was reflected: {reflector.stats}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("-n", type=int, default=20000)
    parser.add_argument("--u-flag", action="store_true", help="TLVs sent with U set (RFC 8972)")
    args = parser.parse_args()
    flags = codec.FLAG_U if args.u_flag else 0
    open_us = per_probe_us(None, flags, args.runs, args.n)
    auth_us = per_probe_us(KEY, flags, args.runs, args.n)
    print(
        f"open + Direct Measurement: {open_us:.2f} us; authenticated + HMAC TLV: {auth_us:.2f} us"
    )


if __name__ == "__main__":
    main()
