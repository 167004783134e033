"""What every part of the forwarding benchmark agrees on: cores, roles, sizes, modes, the
target, the frames' addresses and sizes, the programs' stats fields."""

from __future__ import annotations

from srv6pm.proto.v1 import node_manager_pb2 as pb

from bench.harness.pinning import LOAD_CORE, MEASURED_CORE

GEN_CORE = LOAD_CORE  # generator, sink receive, node manager, this script
ROUTER_CORE = MEASURED_CORE  # r1's receive and forwarding (RPS)

ROLES = ("ingress", "transit")
SIZES = (1, 16, 1000, 10000)  # policies (ingress) or flows (both roles) per group
MAX_SIZE = 16384  # the data plane's flow limit; the SIDs below also hold i in 16 bits
MODES = ("altmark", "dscp")
MODE_PB = {"altmark": pb.MARKING_MODE_ALTMARK, "dscp": pb.MARKING_MODE_DSCP}
PROGRAM = {"ingress": "srv6pm_mark", "transit": "srv6pm_count"}
TARGET = 0.98  # capacity with monitoring / plain capacity, at every N and role

GEN_SRC = "fd00:1::2"  # gen: the customer's source, and the upstream head-end's (transit)
END_SID = "fc00:0:1::e"  # r1's End SID (transit role)
UDP_PORT = 9000
PAYLOAD = bytes(range(16))  # 78-octet Ethernet/IPv6/UDP frames, as before
DSCP_MARKED = 0x0C  # outer Traffic Class of DSCP-marked transit frames: monitored | colour bit
ALTMARK_COLOUR = 0  # L bit of the transit frames' AltMark option (constant)
FRAME_BYTES = {"ip": 78, "altmark": 166, "dscp": 158}  # gen -> r1, on the wire

STATS_FIELDS = (
    "counted",
    "not_srv6",
    "unmarked",
    "no_flow",
    "parse_error",
    "foreign_mark",
    "mark_failed",
)
