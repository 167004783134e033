"""The SRv6 vocabulary (srv6pm.common.srv6) against the node-manager contract's enums (proto/):
the controller converts by name, so every member on one side must have its namesake on the
other, and a side that gains a member fails here until the other has it too."""

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


@pytest.mark.parametrize(("common", "proto", "prefix", "to_proto"), PAIRS, ids=IDS)
def test_every_proto_member_but_unspecified_has_a_common_counterpart(
    common: type[Enum], proto: EnumTypeWrapper, prefix: str, to_proto
):
    names = {name.removeprefix(prefix) for name, _ in proto.items()} - {"UNSPECIFIED"}
    assert names == set(common.__members__)
    assert proto.Value(prefix + "UNSPECIFIED") == 0


def test_roles_share_their_numbers_with_the_proto():
    """Role's values are also the eBPF programs' and the records': the numbers, not only the
    names, must agree."""
    for role in Role:
        assert records_pb2.Role.Value("ROLE_" + role.name) == role.value


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
