"""Hypothesis strategies for STAMP packets and TLVs whose decode(encode(x)) == x."""

from __future__ import annotations

import ipaddress

from hypothesis import strategies as st
from srv6pm.twamp import codec
from srv6pm.twamp.tlv import ReturnPathSubType, TlvType

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFF_FFFF)
u64 = st.integers(0, 0xFFFF_FFFF_FFFF_FFFF)
flags = u8

ipv4 = st.builds(lambda b: str(ipaddress.IPv4Address(b)), st.binary(min_size=4, max_size=4))
ipv6 = st.builds(lambda b: str(ipaddress.IPv6Address(b)), st.binary(min_size=16, max_size=16))
address = st.one_of(ipv4, ipv6)

sub_tlv = st.builds(codec.SubTlv, u8, st.binary(max_size=24), flags)
_KNOWN_RP_SUBS = {int(t) for t in ReturnPathSubType} - {ReturnPathSubType.SR_MPLS_LABEL_STACK}
rp_other = st.builds(
    codec.SubTlv, u8.filter(lambda t: t not in _KNOWN_RP_SUBS), st.binary(max_size=24), flags
)
# Types that decode as UnknownTlv: not interpreted here, and not 0 (a zero tail reads as MBZ).
_INTERPRETED = {int(t) for t in TlvType} - {7, 11}
unknown_type = st.integers(1, 255).filter(lambda t: t not in _INTERPRETED)

tlv = st.one_of(
    st.builds(codec.ExtraPadding, st.integers(0, 64), flags),
    st.builds(codec.Location, u16, u16, st.lists(sub_tlv, max_size=3).map(tuple), flags),
    st.builds(
        codec.TimestampInformation, u8, u8, u8, u8, st.lists(sub_tlv, max_size=2).map(tuple), flags
    ),
    st.builds(
        codec.ClassOfService,
        st.integers(0, 63),
        st.integers(0, 63),
        st.integers(0, 3),
        st.integers(0, 3),
        flags,
    ),
    st.builds(codec.DirectMeasurement, u32, u32, u32, flags),
    st.builds(codec.AccessReport, st.integers(0, 15), u8, flags),
    st.builds(codec.DestinationNodeAddress, address, flags),
    st.builds(
        codec.ReturnPath,
        st.none() | st.lists(ipv6, max_size=4).map(tuple),
        st.none() | address,
        st.none() | u32,
        st.lists(rp_other, max_size=2).map(tuple),
        flags,
    ),
    st.builds(codec.UnknownTlv, unknown_type, st.binary(max_size=40), flags),
)
tlvs_no_hmac = st.lists(tlv, max_size=5).map(tuple)
tlvs = st.lists(
    st.one_of(tlv, st.builds(codec.Hmac, st.binary(min_size=16, max_size=16), flags)), max_size=5
).map(tuple)

sender = st.builds(codec.SenderPacket, u32, u64, u16, u16, tlvs)
reflector = st.builds(codec.ReflectorPacket, u32, u64, u16, u16, u64, u32, u64, u16, u8, tlvs)
