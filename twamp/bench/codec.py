"""Encode/decode time per STAMP packet (RFC 8762 / RFC 8972): fast codec vs the scapy layers.

    python twamp/bench/codec.py [--runs 7] [--fast-n 20000] [--scapy-n 500]

Each figure is the median over `runs` runs of the mean time per packet within a run (timeit).
Scapy "encode" builds the layer from field values and serialises it; "decode" dissects bytes.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import timeit
from collections.abc import Callable
from typing import Any

from srv6pm.twamp import codec
from srv6pm.twamp.scapy_packets import (
    StampReflector,
    StampSender,
    StampSenderAuth,
    error_estimate_layer,
)
from srv6pm.twamp.scapy_tlv import StampTlvDirectMeasurement, StampTlvHmac

KEY = b"benchmark key, 32 octets long..."
DM = codec.DirectMeasurement(1000, 990, 985)


def _scapy_sender(p: codec.SenderPacket, cls: Any = StampSender, hmac_tlv: bool = False) -> Any:
    tlvs: list[Any] = [
        StampTlvDirectMeasurement(s_txc=t.s_txc, r_rxc=t.r_rxc, r_txc=t.r_txc)
        for t in p.tlvs
        if isinstance(t, codec.DirectMeasurement)
    ]
    if hmac_tlv:
        tlvs.append(StampTlvHmac())
    return cls(
        seq=p.seq,
        ts=p.timestamp,
        err_estimate=error_estimate_layer(p.error_estimate),
        ssid=p.ssid,
        tlv_objects=tlvs,
    )


def _scapy_reflector(p: codec.ReflectorPacket) -> Any:
    return StampReflector(
        seq=p.seq,
        ts=p.timestamp,
        err_estimate=error_estimate_layer(p.error_estimate),
        ssid=p.ssid,
        ts_rx=p.receive_timestamp,
        seq_sender=p.sender_seq,
        ts_sender=p.sender_timestamp,
        err_estimate_sender=error_estimate_layer(p.sender_error_estimate),
        ttl_sender=p.sender_ttl,
    )


def per_packet_us(fn: Callable[[], object], n: int, runs: int) -> float:
    times = timeit.repeat(fn, number=n, repeat=runs)
    return statistics.median(times) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--fast-n", type=int, default=20_000)
    parser.add_argument("--scapy-n", type=int, default=500)
    args = parser.parse_args()

    sender = codec.SenderPacket(1, 0xEB00_0000_1234_5678, 0x8101, 7)
    sender_dm = codec.SenderPacket(1, 0xEB00_0000_1234_5678, 0x8101, 7, (DM,))
    reflector = codec.ReflectorPacket(1, 3, 0x8101, 7, 2, 1, 0xEB00_0000_1234_5678, 0x8101, 64)
    cases: list[
        tuple[
            str,
            Callable[[], bytes],
            Callable[[bytes], object],
            Callable[[], bytes],
            Callable[[bytes], object],
        ]
    ] = [
        (
            "sender 44 B",
            lambda: codec.encode_sender(sender),
            codec.decode_sender,
            lambda: bytes(_scapy_sender(sender)),
            StampSender,
        ),
        (
            "reflector 44 B",
            lambda: codec.encode_reflector(reflector),
            codec.decode_reflector,
            lambda: bytes(_scapy_reflector(reflector)),
            StampReflector,
        ),
        (
            "sender + DM TLV 60 B",
            lambda: codec.encode_sender(sender_dm),
            codec.decode_sender,
            lambda: bytes(_scapy_sender(sender_dm)),
            StampSender,
        ),
        (
            "auth sender + DM + HMAC TLV 148 B",
            lambda: codec.encode_sender(sender_dm, KEY),
            lambda b: codec.decode_sender(b, KEY),
            lambda: bytes(_scapy_sender(sender_dm, StampSenderAuth, True).sign(KEY)),
            StampSenderAuth,
        ),
    ]
    print(f"{'packet':36} {'fast enc':>9} {'fast dec':>9} {'scapy enc':>10} {'scapy dec':>10}  us")
    for name, f_enc, f_dec, s_enc, s_dec in cases:
        wire = f_enc()
        assert s_enc() == wire, name  # the two agree before being timed
        fe = per_packet_us(f_enc, args.fast_n, args.runs)
        fd = per_packet_us(functools.partial(f_dec, wire), args.fast_n, args.runs)
        se = per_packet_us(s_enc, args.scapy_n, args.runs)
        sd = per_packet_us(functools.partial(s_dec, wire), args.scapy_n, args.runs)
        print(f"{name:36} {fe:9.2f} {fd:9.2f} {se:10.1f} {sd:10.1f}")


if __name__ == "__main__":
    main()
