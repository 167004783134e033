"""The SRv6 vocabulary (srv6pm.common.srv6) and the proto's enums are one contract: every member
has its proto member of the same name and nothing else does, so a member added on either side
fails here before it fails a request. Each service's own conversion tables are checked beside
it (controller/tests/test_controller_enums.py, node-manager/tests/test_node_manager_enums.py)."""

import pytest
from srv6pm.common import srv6
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import records_pb2 as records

PAIRS = [
    (srv6.Behaviour, pb.Behaviour, "BEHAVIOUR_"),
    (srv6.EncapMode, pb.EncapMode, "ENCAP_MODE_"),
    (srv6.MarkingMode, pb.MarkingMode, "MARKING_MODE_"),
    (srv6.Role, records.Role, "ROLE_"),
]


@pytest.mark.parametrize(
    ("common", "enum_pb", "prefix"), PAIRS, ids=lambda x: getattr(x, "__name__", x)
)
def test_each_common_enum_has_exactly_the_proto_enums_members_by_name(common, enum_pb, prefix):
    names = {name.removeprefix(prefix) for name, value in enum_pb.items() if value != 0}
    assert {m.name for m in common} == names
    assert enum_pb.Value(prefix + "UNSPECIFIED") == 0  # proto3's default is never a member


def test_roles_have_the_proto_values_too():
    # the eBPF programs and the records carry the number itself
    assert {r.name: r.value for r in srv6.Role} == {
        name.removeprefix("ROLE_"): value for name, value in records.Role.items() if value
    }
