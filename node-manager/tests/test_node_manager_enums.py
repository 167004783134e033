"""The SRv6 vocabulary (srv6pm.common.srv6) and the proto's enums are one contract: every member
has its proto value of the same name and nothing else does, so a member added on either side
fails here before it fails a request."""

import pytest
from srv6pm.common import srv6
from srv6pm.node_manager.api import convert
from srv6pm.node_manager.drivers.linux import routes
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import records_pb2 as records

PAIRS = [
    (srv6.Behaviour, pb.Behaviour, "BEHAVIOUR_"),
    (srv6.EncapMode, pb.EncapMode, "ENCAP_MODE_"),
    (srv6.MarkingMode, pb.MarkingMode, "MARKING_MODE_"),
    (srv6.Role, records.Role, "ROLE_"),
]


def proto_names(enum_pb, prefix: str) -> set[str]:
    """The proto enum's members but UNSPECIFIED (0, proto3's default), without the prefix."""
    return {name.removeprefix(prefix) for name, value in enum_pb.items() if value != 0}


@pytest.mark.parametrize(
    ("common", "enum_pb", "prefix"), PAIRS, ids=lambda x: getattr(x, "__name__", x)
)
def test_each_common_enum_has_exactly_the_proto_enums_members_by_name(common, enum_pb, prefix):
    assert {m.name for m in common} == proto_names(enum_pb, prefix)


def test_roles_have_the_proto_values_too():
    # the eBPF programs and the records carry the number itself
    assert {r.name: r.value for r in srv6.Role} == {
        name.removeprefix("ROLE_"): value for name, value in records.Role.items() if value
    }


def test_the_api_converts_every_member_both_ways():
    for table, common in (
        (convert.BEHAVIOUR_TO_PB, srv6.Behaviour),
        (convert.MODE_TO_PB, srv6.EncapMode),
        (convert.ROLE_TO_PB, srv6.Role),
    ):
        assert set(table) == set(common)
        assert len(set(table.values())) == len(common)


def test_the_linux_driver_names_every_mode_and_behaviour_for_the_kernel():
    assert set(routes.KERNEL_MODES) == set(srv6.EncapMode)
    assert routes.KERNEL_MODES[srv6.EncapMode.ENCAP_RED] == "encap.red"
    assert set(routes.KERNEL_ACTIONS) == set(srv6.Behaviour)
