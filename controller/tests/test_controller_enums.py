"""The controller's conversions of the SRv6 vocabulary (srv6pm.common.srv6) to and from the
node-manager contract's enums, by name. The vocabulary against the proto itself:
common/tests/test_srv6_vocabulary.py."""

from __future__ import annotations

from enum import Enum

import pytest
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper
from srv6pm.common.srv6 import Behaviour, EncapMode, MarkingMode, Role
from srv6pm.controller.adapters.nodes import (
    behaviour_of,
    behaviour_to_proto,
    encap_mode_of,
    encap_mode_to_proto,
    marking_mode_to_proto,
    role_to_proto,
)
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import records_pb2

# (common enum, proto enum, the proto's prefix, the adapter's conversion to proto)
PAIRS = [
    (Behaviour, pb.Behaviour, "BEHAVIOUR_", behaviour_to_proto),
    (EncapMode, pb.EncapMode, "ENCAP_MODE_", encap_mode_to_proto),
    (MarkingMode, pb.MarkingMode, "MARKING_MODE_", marking_mode_to_proto),
    (Role, records_pb2.Role, "ROLE_", role_to_proto),
]
IDS = [common.__name__ for common, *_ in PAIRS]


@pytest.mark.parametrize(("common", "proto", "prefix", "to_proto"), PAIRS, ids=IDS)
def test_every_common_member_is_sent_as_the_proto_member_of_its_name(
    common: type[Enum], proto: EnumTypeWrapper, prefix: str, to_proto
):
    for member in common:
        assert proto.Name(to_proto(member)) == prefix + member.name


@pytest.mark.parametrize(
    ("read", "common", "proto", "prefix"),
    [
        (behaviour_of, Behaviour, pb.Behaviour, "BEHAVIOUR_"),
        (encap_mode_of, EncapMode, pb.EncapMode, "ENCAP_MODE_"),
    ],
    ids=["Behaviour", "EncapMode"],
)
def test_what_a_node_reports_is_read_back_by_name(read, common, proto, prefix):
    for member in common:
        assert read(proto.Value(prefix + member.name)) is member
    assert read(0) is None  # UNSPECIFIED
    assert read(max(proto.values()) + 1) is None  # newer than this controller: left out
