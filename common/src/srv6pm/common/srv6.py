"""The SRv6 vocabulary every srv6pm process shares: behaviours, head-end modes, marking modes and
roles on a monitored flow. One definition here; the proto's enums carry the same names
(``BEHAVIOUR_END_X`` for ``Behaviour.END_X``), checked by a test, and each data plane driver maps
these values to its own (the Linux kernel's "encap.red", VPP's enum numbers)."""

from __future__ import annotations

from enum import Enum, IntEnum, StrEnum
from typing import Any, TypeVar


class Behaviour(StrEnum):
    """Local SID behaviours (RFC 8986 section 4); values are the RFC's names."""

    END = "End"
    END_X = "End.X"
    END_T = "End.T"
    END_DT4 = "End.DT4"
    END_DT6 = "End.DT6"
    END_DT46 = "End.DT46"
    END_DX4 = "End.DX4"
    END_DX6 = "End.DX6"

    @property
    def decapsulates(self) -> bool:
        """Does the behaviour remove the outer header (the end of an encapsulating policy)?"""
        return self.value.startswith(("End.DT", "End.DX"))


class EncapMode(StrEnum):
    """How a head-end steers traffic into a policy (RFC 8986 section 5)."""

    ENCAP = "encap"  # H.Encaps
    ENCAP_RED = "encap-red"  # H.Encaps.Red
    INLINE = "inline"  # H.Insert
    L2ENCAP = "l2encap"  # H.Encaps.L2

    @property
    def encapsulates(self) -> bool:
        return self is not EncapMode.INLINE


class MarkingMode(StrEnum):
    """How the ingress node marks a monitored packet's colour."""

    ALTMARK = "altmark"  # RFC 9343 AltMark option: the customer's DSCP untouched
    DSCP = "dscp"  # two Traffic Class bits (the PF-PLM paper): changes the DSCP transit sees


class Role(IntEnum):
    """Where a node sits on a monitored flow; values are the proto's and the eBPF programs'."""

    INGRESS = 1  # encapsulates: marks the colour and counts
    TRANSIT = 2  # counts marked packets
    EGRESS = 3  # counts marked packets before decapsulation


E = TypeVar("E", bound=Enum)
N = TypeVar("N", bound=int)


def proto_numbers(vocabulary: type[E], enum_pb: type[N], prefix: str) -> dict[E, N]:
    """Each member's number in the proto enum of the same name (``BEHAVIOUR_END_X`` for
    ``Behaviour.END_X``). A member the proto lacks fails where the table is built (at import),
    never in a request."""
    wrapper: Any = enum_pb  # protobuf's generated enum class: Value() by name
    return {member: wrapper.Value(prefix + member.name) for member in vocabulary}
