"""Scapy layers for STAMP TLVs (RFC 8972 section 4; RFC 9503 section 4 for types 9 and 10).

Built on `scapy.contrib.stamp.STAMPTestTLV` (same header and type dispatch), with two fixes:

* Flags: IANA "STAMP TLV Flags" numbers bits from the most significant one (U = bit 0 = 0x80,
  M = 0x40, I = 0x20). scapy.contrib.stamp 2.8 lists them from the least significant bit, so its
  U is 0x01: our base class redefines the field.
* Registry: our typed TLVs register in our own table, so scapy's contrib classes are untouched,
  and the Return Path sub-TLVs (whose type numbers overlap the TLV types) get a table of their own.

Length is filled in when left at None. Typed layers expect a well-formed value; the fast codec
(`srv6pm.twamp.tlv`) is the one that copes with arbitrary bytes.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import Any, ClassVar

from scapy.contrib.stamp import STAMPTestTLV
from scapy.fields import (
    AnyField,
    BitField,
    ByteEnumField,
    FieldListField,
    FlagsField,
    IntField,
    IP6Field,
    PacketListField,
    ShortField,
    StrLenField,
    XStrFixedLenField,
)
from scapy.packet import Packet

from .tlv import HMAC_LEN, LocationSubType, ReturnPathSubType, TlvType

# scapy's FlagsField names bits from the least significant one: U, M, I are the three top bits.
_FLAG_NAMES = ["R7", "R6", "R5", "R4", "R3", "I", "M", "U"]
_TLV_NAMES = {int(t): t.name.replace("_", " ").title() for t in TlvType}
_LOCATION_SUB_NAMES = {int(t): t.name.replace("_", " ").title() for t in LocationSubType}
_RETURN_PATH_SUB_NAMES = {int(t): t.name.replace("_", " ").title() for t in ReturnPathSubType}
_SYNC_SOURCES = {0: "Reserved", 1: "NTP", 2: "PTP", 3: "SSU/BITS", 4: "GNSS", 5: "Local"}
_TIMESTAMP_METHODS = {0: "Reserved", 1: "HW Assist", 2: "SW Local", 3: "Control Plane"}
_RETURN_CODES = {0: "Reserved", 1: "Network available", 2: "Network unavailable"}


class IPAddressField(StrLenField):  # type: ignore[misc]
    """An IPv4 or IPv6 address whose family follows the Length (4 or 16 octets)."""

    def h2i(self, pkt: Packet | None, x: Any) -> bytes:
        if isinstance(x, str):
            return ipaddress.ip_address(x).packed
        return bytes(x)

    def any2i(self, pkt: Packet | None, x: Any) -> bytes:
        return self.h2i(pkt, x)

    def i2h(self, pkt: Packet | None, x: Any) -> str:
        if isinstance(x, bytes) and len(x) in (4, 16):
            return str(ipaddress.ip_address(x))
        return repr(x)

    def i2repr(self, pkt: Packet | None, x: Any) -> str:
        return self.i2h(pkt, x)


def _dispatch(cls: Any, pkt: bytes | None) -> type[Packet]:
    # The Type octet picks the class; too short a fragment stays generic (never IndexError).
    if pkt is not None and len(pkt) >= 2:
        found: type[Packet] = cls.registered_stamp_tlv.get(pkt[1], cls)
        return found
    return cls  # type: ignore[no-any-return]


class StampTlv(STAMPTestTLV):  # type: ignore[misc]
    """Generic STAMP TLV (also what unknown types dissect as)."""

    name = "STAMP TLV"
    fields_desc: ClassVar[list[AnyField]] = [
        FlagsField("flags", 0, 8, _FLAG_NAMES),
        ByteEnumField("type", None, _TLV_NAMES),
        ShortField("len", None),
        StrLenField("value", b"", length_from=lambda pkt: pkt.len),
    ]
    registered_stamp_tlv: ClassVar[dict[int | None, type[Packet]]] = {}

    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> type[Packet]:
        return _dispatch(cls, _pkt)

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        if self.len is None:  # Length counts the value only (RFC 8972 section 4)
            pkt = pkt[:2] + struct.pack(">H", len(pkt) - 4) + pkt[4:]
        return pkt + pay


def _header(type_: int, names: dict[int, str] = _TLV_NAMES) -> list[Any]:
    return [
        FlagsField("flags", 0, 8, _FLAG_NAMES),
        ByteEnumField("type", type_, names),
        ShortField("len", None),
    ]


class StampSubTlv(StampTlv):
    """A sub-TLV kept raw (Location and Timestamp Information sub-TLVs)."""

    name = "STAMP Sub-TLV"
    fields_desc: ClassVar[list[AnyField]] = [
        FlagsField("flags", 0, 8, _FLAG_NAMES),
        ByteEnumField("type", None, _LOCATION_SUB_NAMES),
        ShortField("len", None),
        StrLenField("value", b"", length_from=lambda pkt: pkt.len),
    ]
    registered_stamp_tlv: ClassVar[dict[int | None, type[Packet]]] = {}

    # scapy calls dispatch_hook only when the class itself defines it (cls.__dict__).
    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> type[Packet]:
        return _dispatch(cls, _pkt)


class ReturnPathSubTlv(StampTlv):
    """Generic Return Path sub-TLV (RFC 9503 section 4.1): SR-MPLS label stacks, unknown types."""

    name = "STAMP Return Path Sub-TLV"
    fields_desc: ClassVar[list[AnyField]] = [
        FlagsField("flags", 0, 8, _FLAG_NAMES),
        ByteEnumField("type", None, _RETURN_PATH_SUB_NAMES),
        ShortField("len", None),
        StrLenField("value", b"", length_from=lambda pkt: pkt.len),
    ]
    registered_stamp_tlv: ClassVar[dict[int | None, type[Packet]]] = {}

    # scapy calls dispatch_hook only when the class itself defines it (cls.__dict__).
    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> type[Packet]:
        return _dispatch(cls, _pkt)


class StampTlvExtraPadding(StampTlv):
    name = "STAMP TLV Extra Padding"
    fields_desc: ClassVar[list[AnyField]] = [
        *_header(TlvType.EXTRA_PADDING),
        StrLenField("padding", b"", length_from=lambda pkt: pkt.len),
    ]


class StampTlvLocation(StampTlv):
    name = "STAMP TLV Location"
    fields_desc: ClassVar[list[AnyField]] = [
        *_header(TlvType.LOCATION),
        ShortField("dport", 0),
        ShortField("sport", 0),
        PacketListField("sub_tlvs", [], StampSubTlv, length_from=lambda pkt: pkt.len - 4),
    ]


class StampTlvTimestampInformation(StampTlv):
    name = "STAMP TLV Timestamp Information"
    fields_desc: ClassVar[list[AnyField]] = [
        *_header(TlvType.TIMESTAMP_INFORMATION),
        ByteEnumField("sync_src_in", 0, _SYNC_SOURCES),
        ByteEnumField("timestamp_in", 0, _TIMESTAMP_METHODS),
        ByteEnumField("sync_src_out", 0, _SYNC_SOURCES),
        ByteEnumField("timestamp_out", 0, _TIMESTAMP_METHODS),
        PacketListField("sub_tlvs", [], StampSubTlv, length_from=lambda pkt: pkt.len - 4),
    ]


class StampTlvClassOfService(StampTlv):
    name = "STAMP TLV Class of Service"
    fields_desc: ClassVar[list[AnyField]] = [
        *_header(TlvType.CLASS_OF_SERVICE),
        BitField("dscp1", 0, 6),
        BitField("dscp2", 0, 6),
        BitField("ecn", 0, 2),
        BitField("rp", 0, 2),
        ShortField("reserved", 0),
    ]


class StampTlvDirectMeasurement(StampTlv):
    name = "STAMP TLV Direct Measurement"
    fields_desc: ClassVar[list[AnyField]] = [
        *_header(TlvType.DIRECT_MEASUREMENT),
        IntField("s_txc", 0),
        IntField("r_rxc", 0),
        IntField("r_txc", 0),
    ]


class StampTlvAccessReport(StampTlv):
    name = "STAMP TLV Access Report"
    fields_desc: ClassVar[list[AnyField]] = [
        *_header(TlvType.ACCESS_REPORT),
        BitField("access_id", 0, 4),
        BitField("resv", 0, 4),
        ByteEnumField("return_code", 0, _RETURN_CODES),
        ShortField("reserved", 0),
    ]


class StampTlvHmac(StampTlv):
    name = "STAMP TLV HMAC"
    fields_desc: ClassVar[list[AnyField]] = [
        *_header(TlvType.HMAC),
        XStrFixedLenField("hmac", bytes(HMAC_LEN), HMAC_LEN),
    ]


class StampTlvDestinationNodeAddress(StampTlv):
    name = "STAMP TLV Destination Node Address"
    fields_desc: ClassVar[list[AnyField]] = [
        *_header(TlvType.DESTINATION_NODE_ADDRESS),
        IPAddressField("address", b"\x00" * 16, length_from=lambda pkt: pkt.len),
    ]


class StampTlvReturnPath(StampTlv):
    name = "STAMP TLV Return Path"
    fields_desc: ClassVar[list[AnyField]] = [
        *_header(TlvType.RETURN_PATH),
        PacketListField("sub_tlvs", [], ReturnPathSubTlv, length_from=lambda pkt: pkt.len),
    ]


class ReturnPathControlCode(ReturnPathSubTlv):
    name = "Return Path Control Code"
    fields_desc: ClassVar[list[AnyField]] = [
        *_header(ReturnPathSubType.CONTROL_CODE, _RETURN_PATH_SUB_NAMES),
        IntField("control_code", 0),
    ]


class ReturnPathAddress(ReturnPathSubTlv):
    name = "Return Path Return Address"
    fields_desc: ClassVar[list[AnyField]] = [
        *_header(ReturnPathSubType.RETURN_ADDRESS, _RETURN_PATH_SUB_NAMES),
        IPAddressField("address", b"\x00" * 16, length_from=lambda pkt: pkt.len),
    ]


class ReturnPathSrv6SegmentList(ReturnPathSubTlv):
    name = "Return Path SRv6 Segment List"
    fields_desc: ClassVar[list[AnyField]] = [
        *_header(ReturnPathSubType.SRV6_SEGMENT_LIST, _RETURN_PATH_SUB_NAMES),
        FieldListField("segments", [], IP6Field("", "::"), length_from=lambda pkt: pkt.len),
    ]


__all__ = [
    "IPAddressField",
    "ReturnPathAddress",
    "ReturnPathControlCode",
    "ReturnPathSrv6SegmentList",
    "ReturnPathSubTlv",
    "StampSubTlv",
    "StampTlv",
    "StampTlvAccessReport",
    "StampTlvClassOfService",
    "StampTlvDestinationNodeAddress",
    "StampTlvDirectMeasurement",
    "StampTlvExtraPadding",
    "StampTlvHmac",
    "StampTlvLocation",
    "StampTlvReturnPath",
    "StampTlvTimestampInformation",
]
