"""srv6pm-reflect, the plugin's STAMP Session-Reflector (vpp-plugin/srv6pm/reflect_node.c), as
the driver offers it (base.KernelReflector): configured from the node's reflector state, given
each closed block's counts for Direct Measurement (read from the plugin's own counters), asked
what it did. It answers every probe itself, authenticated ones too, so no userspace reflector
runs beside it on a VPP node.

VPP keeps none of it across a restart: the driver configures it again (`reinstall`)."""

from __future__ import annotations

from collections.abc import Mapping
from ipaddress import IPv6Address
from typing import Any

from srv6pm.twamp.tlv import ReturnPath, encode_tlv

from ...domain.model import KernelReflection
from .api import VppApi

TLV_HLEN = 4
MAX_KEY = 64  # octets of an HMAC key the plugin takes
MAX_PATH = 260  # the Return Path TLV value it compares: one Segment List sub-TLV of 16 SIDs
BLOCKS_PER_MESSAGE = 4096
ANY_DSCP = (1 << 64) - 1
# srv6pm_reflector_stats_get_reply's fields (foreach_srv6pm_reflector_stat in srv6pm.h)
STATS = (
    "received",
    "reflected",
    "not_for_us",
    "malformed",
    "auth_failures",
    "tlv_integrity_failures",
    "counters_unavailable",
    "return_paths_refused",
    "replies_suppressed",
    "sequences_full",
)


def return_path_value(segments: tuple[str, ...]) -> bytes:
    """The Return Path TLV's value a sender writes for `segments` (what the plugin compares)."""
    return encode_tlv(ReturnPath(segments=segments))[TLV_HLEN:]


class VppReflector:
    answers_all = True

    def __init__(self, api: VppApi) -> None:
        self._api = api
        self._applied: KernelReflection | None = None

    def apply(self, reflection: KernelReflection | None) -> None:
        with self._api.lock:
            self._configure(reflection)
            self._applied = reflection

    def reinstall(self) -> None:
        """A restarted VPP answers as the last state said."""
        self._configure(self._applied)

    def _configure(self, r: KernelReflection | None) -> None:
        key = r.hmac_key if r else b""
        if len(key) > MAX_KEY:
            raise ValueError(f"an HMAC key of {len(key)} octets: VPP's reflector takes {MAX_KEY}")
        self._api.call(
            "srv6pm_reflector_set",
            enabled=r is not None,
            stateful=bool(r and r.stateful),
            port=r.port if r else 0,
            error_estimate=r.error_estimate if r else 0,
            address=IPv6Address(r.address if r else "::"),
            period_ns=r.period_ns if r else 0,
            allowed_dscp=sum(1 << d for d in r.allowed_dscp) if r and r.allowed_dscp else ANY_DSCP,
            key_len=len(key),
            key=key.ljust(MAX_KEY, b"\0"),
        )
        wanted = {
            (IPv6Address(sender), ssid): return_path_value(segments)
            for sender, ssid, segments in (r.return_paths if r else ())
        }
        held = {
            (d.sender, int(d.ssid)): bytes(d.value[: d.len])
            for d in self._api.dump("srv6pm_reflector_path_dump")
        }
        for sender, ssid in held.keys() - wanted.keys():
            self._path(False, sender, ssid, b"")
        for (sender, ssid), value in wanted.items():
            if held.get((sender, ssid)) != value:
                self._path(True, sender, ssid, value)

    def _path(self, is_add: bool, sender: IPv6Address, ssid: int, value: bytes) -> None:
        self._api.call(
            "srv6pm_reflector_path_add_del",
            is_add=is_add,
            sender=sender,
            ssid=ssid,
            len=len(value),
            value=value.ljust(MAX_PATH, b"\0"),
        )

    def refresh(self) -> None:
        """Nothing to do: it reads CLOCK_REALTIME per frame, and PTP time is that plus TAI - UTC
        (37 s), as the userspace reflector counts it."""

    def publish_block(self, block: int, counts: Mapping[int, tuple[int, int]]) -> None:
        entries: list[dict[str, Any]] = [
            {"ssid": ssid, "block": block, "rx": rx & 0xFFFFFFFF, "tx": tx & 0xFFFFFFFF}
            for ssid, (rx, tx) in sorted(counts.items())
        ]
        with self._api.lock:
            for i in range(0, len(entries), BLOCKS_PER_MESSAGE):
                chunk = entries[i : i + BLOCKS_PER_MESSAGE]
                self._api.call("srv6pm_reflector_blocks_set", n_counts=len(chunk), counts=chunk)

    def next_sequence(self, sender: str, ssid: int) -> int | None:
        return None  # no userspace reflector shares its stateful counters

    def stats(self) -> Mapping[str, int]:
        """What it did since VPP started (the proto's KernelReflectorStats fields)."""
        reply = self._api.call("srv6pm_reflector_stats_get")
        return {name: int(getattr(reply, name)) for name in STATS}
