"""Fuzz the STAMP decoders (RFC 8762 / RFC 8972 codec): any byte string must decode or raise a
StampError, and whatever decodes must encode again (a reflector re-encodes what it received).

    python twamp/bench/fuzz.py [--count N] [--engine auto|atheris|plain] [--seed S]

Each input goes through decode_sender and decode_reflector, unauthenticated and authenticated;
for the authenticated path the input's base HMAC is also fixed up first, so the TLV parser and
the HMAC TLV check are reached with a key too. `atheris` (coverage-guided, libFuzzer) is used when
installed and asked for; `plain` mutates valid packets and random strings with a seeded PRNG.
Prints inputs/s and exits 1 on any non-StampError exception.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import hmac
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

# Imported by main(): under atheris, inside its import hook so that only the codec is
# instrumented for coverage (instrumenting the standard library too costs ~5x in speed).
c: ModuleType
StampError: type[Exception]

KEY = b"fuzzing key, 32 octets long....."


def _seeds() -> list[bytes]:
    """Valid packets of every kind, the starting points of the mutations."""
    tlvs = (
        c.DirectMeasurement(1, 2, 3),
        c.ClassOfService(46, 10, 1, 1),
        c.ReturnPath(("fc00::1", "fc00::2"), "2001:db8::1", 1),
        c.Location(862, 40000, (c.SubTlv(6, bytes(16)),)),
        c.TimestampInformation(1, 1, 1, 1),
        c.AccessReport(1, 1),
        c.DestinationNodeAddress("192.0.2.1"),
        c.ExtraPadding(12),
        c.UnknownTlv(200, b"xyz"),
    )
    out: list[bytes] = []
    for key in (None, KEY):
        for i in range(len(tlvs) + 1):
            chosen = tlvs[:i]
            s = c.SenderPacket(i, 2**63 + i, 0x8101, 7, chosen)
            r = c.ReflectorPacket(i, 5, 6, 7, 8, 9, 10, 11, 64, chosen)
            out.append(c.encode_sender(s, key))
            out.append(c.encode_reflector(r, key))
    return out


def _resign(data: bytes) -> bytes:
    """The input with a valid base HMAC (octets 96-111 over 0-95), when it is long enough."""
    if len(data) < 112:
        return data
    mac = hmac.new(KEY, data[:96], hashlib.sha256).digest()[:16]
    return data[:96] + mac + data[112:]


def one_input(data: bytes) -> None:
    """The fuzz target: raises only on a bug (a non-StampError exception or a size change)."""
    for blob, key in ((data, None), (data, KEY), (_resign(data), KEY)):
        try:
            sender = c.decode_sender(blob, key)
        except StampError:
            pass
        else:
            _check(blob, key, c.encode_sender(_reflected(sender), key))
        try:
            reflector = c.decode_reflector(blob, key)
        except StampError:
            pass
        else:
            _check(blob, key, c.encode_reflector(_reflected(reflector), key))


def _check(blob: bytes, key: bytes | None, wire: bytes) -> None:
    # What decodes re-encodes, reflected TLVs included, at the same size for a full STAMP packet.
    if len(blob) >= c.UNAUTH_BASE_LEN and key is None and len(wire) != len(blob):
        raise AssertionError(f"re-encoded {len(wire)} != {len(blob)}: {blob.hex()}")


def _reflected(packet: Any) -> Any:
    return dataclasses.replace(packet, tlvs=c.reflect_tlvs(packet.tlvs))


def _mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    if rng.random() < 0.1:
        return rng.randbytes(rng.randrange(0, 200))
    data = bytearray(rng.choice(seeds))
    for _ in range(rng.randrange(1, 6)):
        op = rng.randrange(6)
        if op == 0 and data:  # flip a bit
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1 and data:  # set a byte
            data[rng.randrange(len(data))] = rng.choice(
                (0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256))
            )
        elif op == 2:  # truncate
            del data[rng.randrange(len(data) + 1) :]
        elif op == 3:  # insert random bytes
            i = rng.randrange(len(data) + 1)
            data[i:i] = rng.randbytes(rng.randrange(1, 8))
        elif op == 4 and len(data) > 46:  # extreme TLV-ish length field after the base
            i = rng.randrange(44, len(data) - 1)
            data[i : i + 2] = rng.choice((b"\xff\xff", b"\x00\x00", b"\x00\x01", b"\x00\x10"))
        elif op == 5:  # append a random TLV header
            data += bytes((rng.randrange(256), rng.randrange(256))) + rng.randbytes(2)
    return bytes(data)


def run_plain(count: int, seed: int) -> int:
    rng = random.Random(seed)
    seeds = _seeds()
    start = time.perf_counter()
    for n in range(count):
        data = _mutate(rng, seeds)
        try:
            one_input(data)
        except Exception:
            traceback.print_exc()
            print(f"FAILED after {n} inputs on {data.hex()}", file=sys.stderr)
            return 1
    elapsed = time.perf_counter() - start
    print(
        f"plain: {count} inputs in {elapsed:.1f} s = {count / elapsed:,.0f} inputs/s; "
        "no exception other than StampError"
    )
    return 0


def run_atheris(count: int, seed: int) -> int:
    import atheris  # noqa: PLC0415 - optional dependency, imported only when asked for

    corpus = Path(tempfile.mkdtemp(prefix="stamp-corpus-"))
    for i, blob in enumerate(_seeds()):
        (corpus / f"seed{i}").write_bytes(blob)
    done = 0
    start = 0.0

    def one(data: bytes) -> None:
        nonlocal done, start
        if done == 0:
            start = time.perf_counter()
        one_input(data)  # an exception propagates: libFuzzer reports the crash and its input
        done += 1
        if done >= count:
            elapsed = time.perf_counter() - start
            print(
                f"atheris: {done} inputs in {elapsed:.1f} s = {done / elapsed:,.0f} inputs/s; "
                "no exception other than StampError",
                flush=True,
            )
            shutil.rmtree(corpus, ignore_errors=True)  # os._exit skips every cleanup
            os._exit(0)  # libFuzzer never returns from Fuzz()

    atheris.Setup([sys.argv[0], f"-seed={seed}", "-max_len=512", str(corpus)], one)
    atheris.Fuzz()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1_000_000, help="inputs to run")
    parser.add_argument("--engine", choices=("auto", "atheris", "plain"), default="auto")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: PLC0415 - probe only
        except ImportError:
            engine = "plain"
        else:
            engine = "atheris"
    global c, StampError
    if engine == "atheris":
        import atheris  # noqa: PLC0415 - optional dependency

        with atheris.instrument_imports(include=["srv6pm.twamp"]):
            from srv6pm.twamp import codec, errors  # noqa: PLC0415
    else:
        from srv6pm.twamp import codec, errors  # noqa: PLC0415
    c, StampError = codec, errors.StampError
    if engine == "atheris":
        return run_atheris(args.count, args.seed)
    return run_plain(args.count, args.seed)


if __name__ == "__main__":
    sys.exit(main())
