"""NTP / PTP timestamps (RFC 5905 6, RFC 8877 4.3, RFC 4330 3) and Error Estimate (RFC 4656
4.1.2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from srv6pm.twamp import timestamps as ts
from srv6pm.twamp.error_estimate import ErrorEstimate, is_ptp, is_synchronised
from srv6pm.twamp.errors import InvalidErrorEstimate, InvalidTimestamp, StampError

NS = 1_000_000_000
ERA1_UNIX_S = 2_085_978_496  # 2036-02-07 06:28:16 UTC, NTP seconds wrap to 0


def test_ntp_vectors() -> None:
    assert ts.ntp_from_unix_ns(0) == 0x83AA7E80_00000000  # 2208988800 s since 1900
    assert ts.ntp_from_unix_ns(NS // 2) == 0x83AA7E80_80000000  # half a second
    assert ts.ntp_from_unix_ns(ERA1_UNIX_S * NS) == 0  # era 1 starts
    assert ts.unix_ns_from_ntp(0) == ERA1_UNIX_S * NS
    assert ts.unix_ns_from_ntp(0x83AA7E80_40000000) == NS // 4
    # 1 ns is 4.294967296 fraction units: rounds to 4.
    assert ts.ntp_from_unix_ns(1) == 0x83AA7E80_00000004


def test_ptp_vectors() -> None:
    assert ts.ptp_from_unix_ns(0) == 37 << 32  # TAI is 37 s ahead of UTC
    assert ts.ptp_from_unix_ns(1_500_000_001, tai_offset_s=0) == (1 << 32) | 500_000_001
    assert ts.unix_ns_from_ptp((100 << 32) | 5, tai_offset_s=0) == 100 * NS + 5


@given(st.integers((-(2**31) + 2_208_988_800) * NS, (2**32 + 2**31 - 2_208_988_800) * NS - 1))
def test_ntp_round_trip_is_exact_to_the_ns(unix_ns: int) -> None:
    # RFC 4330 era rule: 1968-01-20 .. 2104-02-26.
    assert ts.unix_ns_from_ntp(ts.ntp_from_unix_ns(unix_ns)) == unix_ns


@given(st.integers(-37 * NS, 4_233_462_144 * NS - 1), st.booleans())  # PTP and NTP ranges
def test_ptp_and_generic_round_trip(unix_ns: int, ptp: bool) -> None:
    assert ts.to_unix_ns(ts.from_unix_ns(unix_ns, ptp), ptp) == unix_ns


@given(st.integers(0, 2**64 - 1))
def test_ntp_decode_of_any_raw_value_reencodes(raw: int) -> None:
    unix_ns = ts.unix_ns_from_ntp(raw)
    back = ts.ntp_from_unix_ns(unix_ns)
    # 1 ns is ~4.3 fraction units: rounding to ns then back moves at most 3 units (modulo 2^64).
    assert min(abs(back - raw), 2**64 - abs(back - raw)) <= 3


def test_invalid_timestamps() -> None:
    with pytest.raises(InvalidTimestamp):
        ts.unix_ns_from_ptp(NS)  # nanoseconds field = 10^9
    with pytest.raises(InvalidTimestamp):
        ts.ntp_from_unix_ns(-3_000_000_000 * NS)
    with pytest.raises(InvalidTimestamp):
        ts.ptp_from_unix_ns(-100 * NS)
    with pytest.raises(StampError):
        ts.unix_ns_from_ntp(2**64)


def test_error_estimate_vector() -> None:
    ee = ErrorEstimate.from_fields(synchronised=True, ptp=False, scale=0x21, multiplier=3)
    assert ee.raw == 0xA103
    assert ee.seconds == 3 * 2.0  # 3 * 2^(33 - 32)
    assert ErrorEstimate(0x4001).ptp and not ErrorEstimate(0x4001).synchronised
    assert is_synchronised(0x8000) and is_ptp(0x4000)


def test_multiplier_zero_is_invalid() -> None:
    with pytest.raises(InvalidErrorEstimate):
        ErrorEstimate(0x8100)
    with pytest.raises(InvalidErrorEstimate):
        ErrorEstimate.from_fields(True, False, 1, 0)
    with pytest.raises(StampError):  # also a StampError, for engines catching one type
        ErrorEstimate(0)


@given(st.integers(0, 0xFFFF).filter(lambda r: r & 0xFF))
def test_every_valid_raw_value_round_trips(raw: int) -> None:
    ee = ErrorEstimate(raw)
    assert ErrorEstimate.from_fields(ee.synchronised, ee.ptp, ee.scale, ee.multiplier) == ee


@given(st.floats(0, 255 * 2.0**31), st.booleans(), st.booleans())
def test_from_seconds_never_understates_and_is_tight(error_s: float, sync: bool, ptp: bool) -> None:
    ee = ErrorEstimate.from_seconds(error_s, synchronised=sync, ptp=ptp)
    assert ee.synchronised == sync and ee.ptp == ptp
    assert ee.seconds >= error_s
    assert ee.seconds - error_s <= 2.0 ** (ee.scale - 32)  # within one Multiplier step
    if ee.scale > 0:  # a smaller Scale could not hold it: the Multiplier is in its upper half
        assert ee.multiplier > 127


def test_from_seconds_examples() -> None:
    assert ErrorEstimate.from_seconds(0).seconds == 2.0**-32
    ms = ErrorEstimate.from_seconds(1e-3)
    assert 1e-3 <= ms.seconds < 1e-3 * (1 + 1 / 128)
    with pytest.raises(InvalidErrorEstimate):
        ErrorEstimate.from_seconds(256 * 2.0**31)
    with pytest.raises(InvalidErrorEstimate):
        ErrorEstimate.from_seconds(float("nan"))
