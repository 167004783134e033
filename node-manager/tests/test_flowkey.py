import ipaddress

from hypothesis import given
from hypothesis import strategies as st
from srv6pm.common.srv6 import Role
from srv6pm.node_manager.domain.flowkey import flow_key, srh_order
from srv6pm.node_manager.drivers.linux import maps

sids = st.lists(
    st.integers(0, (1 << 128) - 1).map(lambda i: str(ipaddress.IPv6Address(i))),
    min_size=1,
    max_size=16,
)


def test_srh_order_puts_the_last_segment_first():
    assert srh_order(["fc00::1", "fc00::2"]) == [
        ipaddress.IPv6Address("fc00::2").packed,
        ipaddress.IPv6Address("fc00::1").packed,
    ]


def test_key_depends_on_order_and_length():
    a, b = "fc00:0:2::e", "fc00:0:3::d6"
    assert flow_key([a, b]) != flow_key([b, a])
    assert flow_key([a]) != flow_key([a, a])


@given(sids)
def test_key_is_a_64_bit_value(segments):
    assert 0 <= flow_key(segments) < 1 << 64


def test_flow_value_holds_the_sids_in_srh_order():
    value = maps.flow_value(7, Role.EGRESS, ["fc00::1", "fc00::2"], 0x12345)
    assert maps.FLOW_VALUE.unpack(value)[:5] == (7, 3, 2, 0, 0x12345)
    assert value[16:32] == ipaddress.IPv6Address("fc00::2").packed
    assert value[48:] == bytes(16 * 14)


def test_config_layout_round_trips():
    raw = maps.config_value(10**10, 37 * 10**9, 5, 0x04, 0x08, 1)
    assert maps.parse_config(raw) == (10**10, 37 * 10**9, 5, 0x04, 0x08, 1)
