"""The node manager's own conversions of the SRv6 vocabulary (srv6pm.common.srv6): to the proto
(by name) and to the Linux kernel's names. The vocabulary against the proto itself:
common/tests/test_srv6_vocabulary.py."""

from srv6pm.common import srv6
from srv6pm.node_manager.api import convert
from srv6pm.node_manager.drivers.linux import routes


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
