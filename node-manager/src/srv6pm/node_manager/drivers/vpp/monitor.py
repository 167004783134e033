"""Marking and counting through srv6pm's VPP plugin (node-manager/vpp-plugin/srv6pm/srv6pm.api):
its configuration (period, marking mode, DSCP bits), the monitored flows by counter slot, the
hooks on interfaces, the counters and what its nodes saw.

The flows and their slots live in the driver's state file, written before the plugin is told.
The plugin keeps nothing across a VPP restart: the driver installs everything again in a VPP it
has not seen (another `instance_id`), and its counters begin from zero there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import fields
from ipaddress import IPv6Address
from typing import Any

from srv6pm.common.srv6 import MarkingMode, Role

from ...domain.errors import FailedPrecondition
from ...domain.model import MAX_SEGMENTS, Marking, MonitoredFlow
from .. import slots
from ..base import ColourCount, FlowCounters, PacketStats
from ..slots import InstalledFlow
from .api import NO_INDEX, VppApi, VppRefused
from .fib import Fib
from .state import StateFile

log = logging.getLogger(__name__)
FLOWS_PER_MESSAGE = 256  # ~68 kB messages: 10,000 flows in 40 round trips

PLUGIN_PROBE = "srv6pm_config_get"  # defined by VPP only where the plugin is loaded
MODES = {MarkingMode.ALTMARK: 1, MarkingMode.DSCP: 2}  # vl_api_srv6pm_marking_mode_t
HOOK_MARK, HOOK_COUNT, HOOK_GUARD = 1, 2, 3  # vl_api_srv6pm_hook_t


class Monitor:
    def __init__(self, api: VppApi, fib: Fib, state: StateFile, period_ns: int) -> None:
        self._api = api
        self._fib = fib
        self._state = state
        self._period_ns = period_ns
        self._unhooked = False  # interfaces a flow names that VPP did not have (yet)

    # ---- the plugin and the VPP it runs in ---------------------------------------------------

    def loaded(self) -> bool:
        return self._api.has(PLUGIN_PROBE)

    def _require(self, what: str) -> None:
        if not self.loaded():
            raise FailedPrecondition(
                f"{what} needs srv6pm's VPP plugin (srv6pm_plugin.so), which this VPP has not "
                "loaded: build it (make vpp-plugin) and enable it in VPP's startup configuration"
            )

    def instance(self) -> int:
        """The plugin's instance id (another one after every VPP restart); 0 without it."""
        if not self.loaded():
            return 0
        return int(self._api.call("srv6pm_config_get").instance_id)

    def max_flows(self) -> int:
        return int(self._api.call("srv6pm_config_get").max_flows) if self.loaded() else 0

    def boot(self) -> str:
        """What tells this VPP from the one before a restart: the plugin's instance id, or
        (without the plugin) VPP's process id."""
        if self.loaded():
            return f"instance:{self.instance()}"
        return f"pid:{int(self._api.call('control_ping').vpe_pid)}"

    def reinstall(self) -> None:
        """Give a VPP that holds none of it (started, or restarted) the saved configuration,
        flows and hooks."""
        state = self._state.current
        if not self.loaded():
            if state.flows:
                log.error("VPP has no srv6pm plugin: dropping %d monitored flows", len(state.flows))
                self._state.update(flows=())
            return
        self._configure(state.marking)
        held = {int(d.slot) for d in self._api.dump("srv6pm_flow_dump")}
        self._flows_del(held - {f.slot for f in state.flows})
        self._flows_add(state.flows)
        self.sync_hooks(strict=False)
        log.info("installed in VPP flows=%d instance=%s", len(state.flows), self.instance())

    def recover(self) -> None:
        """The same VPP as before a node-manager restart: keep the saved flows it still holds
        (a crash between the state file and the plugin leaves one out: dropped, as the next
        apply adds it again) and remove what it holds that is not saved."""
        if not self.loaded():
            self.reinstall()
            return
        state = self._state.current
        held = {int(d.slot): _flow_of(d) for d in self._api.dump("srv6pm_flow_dump")}
        kept = []
        for f in state.flows:
            if held.get(f.slot) == (f.role, f.flowmon_id, f.segments):
                kept.append(f)
            else:
                log.warning("flow %s not found in VPP; dropped", f.name)
        self._flows_del(set(held) - {f.slot for f in kept})
        if len(kept) != len(state.flows):
            self._state.update(flows=tuple(kept))
        if self._config_differs(state.marking):
            self._configure(state.marking)
        self.sync_hooks(strict=False)

    # ---- configuration -----------------------------------------------------------------------

    def _config_fields(self, marking: Marking) -> tuple[int, int, int, int]:
        return self._period_ns, MODES[marking.mode], marking.monitored_bit, marking.colour_bit

    def _config_differs(self, marking: Marking) -> bool:
        c = self._api.call("srv6pm_config_get")
        held = (int(c.period_ns), int(c.mode), int(c.monitored_bit), int(c.colour_bit))
        return held != self._config_fields(marking)

    def _configure(self, marking: Marking) -> None:
        period, mode, monitored, colour = self._config_fields(marking)
        self._api.call(
            "srv6pm_config_set",
            period_ns=period,
            mode=mode,
            monitored_bit=monitored,
            colour_bit=colour,
        )

    def marking(self) -> Marking:
        self._api.ping()  # a restarted VPP gets it again first
        return self._state.current.marking

    def set_marking(self, marking: Marking) -> None:
        old = self._state.current.marking
        if marking == old:
            return
        if not self.loaded():
            if marking.boundary_interfaces:
                self._require("guarding boundary interfaces")
            self._state.update(marking=marking)
            return
        self._state.update(marking=marking)
        if self._config_fields(marking) != self._config_fields(old):
            self._configure(marking)
        self.sync_hooks()

    # ---- flows -------------------------------------------------------------------------------

    def flows(self) -> list[MonitoredFlow]:
        self._api.ping()  # a restarted VPP gets them again first
        if self._unhooked:  # asked once a block: hooked as soon as the interface appears
            with self._api.lock:
                self.sync_hooks(strict=False)
        return [f.spec() for f in self._state.current.flows]

    def flow_names(self) -> frozenset[str]:
        return frozenset(f.name for f in self._state.current.flows)

    def update_flows(self, add: Iterable[MonitoredFlow], remove: Iterable[MonitoredFlow]) -> None:
        add, remove = list(add), list(remove)
        gone = {f.name for f in remove}
        flows = self._state.current.flows
        removed = [f for f in flows if f.name in gone]
        if removed:  # VPP first, then the state file: a slot is never given twice
            self._flows_del(f.slot for f in removed)
            flows = tuple(f for f in flows if f.name not in gone)
            self._state.update(flows=flows)
        if not add:
            self.sync_hooks()
            return
        self._require("monitoring a flow")
        used = {f.slot for f in flows}
        installed = tuple(slots.install(add, used, self.max_flows(), InstalledFlow))
        self._state.update(flows=flows + installed)  # intent first: the slots are ours
        try:
            self._flows_add(installed)
        except FlowRefused as e:  # e.g. a SID list or FlowMonID another flow holds
            self._state.update(flows=flows + installed[: e.done])
            self.sync_hooks(strict=False)
            f = installed[e.done]
            raise FailedPrecondition(
                f"flow {f.name!r}: {e.reason} (a SID list or FlowMonID another flow holds?)"
            ) from None
        self.sync_hooks()

    def _flows_add(self, flows: Iterable[InstalledFlow]) -> None:
        self._flows_add_del(
            True, [_wire_flow(f.slot, f.role, f.flowmon_id, f.segments) for f in flows]
        )

    def _flows_del(self, slots: Iterable[int]) -> None:
        self._flows_add_del(False, [_wire_flow(s, Role.INGRESS, 0, ()) for s in sorted(slots)])

    def _flows_add_del(self, is_add: bool, flows: list[dict[str, Any]]) -> None:
        """In messages of FLOWS_PER_MESSAGE flows (VPP's barrier once per message);
        :class:`FlowRefused` says how many were done before the first one refused."""
        for start in range(0, len(flows), FLOWS_PER_MESSAGE):
            batch = flows[start : start + FLOWS_PER_MESSAGE]
            try:
                self._api.call(
                    "srv6pm_flows_add_del", is_add=is_add, n_flows=len(batch), flows=batch
                )
            except VppRefused as e:
                raise FlowRefused(start + int(e.reply.n_done), str(e)) from None

    # ---- hooks -------------------------------------------------------------------------------

    def sync_hooks(self, strict: bool = True) -> None:
        """Each flow's interfaces hooked (ingress flows: mark; others: count), the boundary
        interfaces guarded, nothing else. Not `strict`: an interface VPP lacks is skipped."""
        if not self.loaded():
            return
        state = self._state.current
        wanted_names = {
            (i, HOOK_MARK if f.role is Role.INGRESS else HOOK_COUNT)
            for f in state.flows
            for i in f.interfaces
        } | {(i, HOOK_GUARD) for i in state.marking.boundary_interfaces}
        interfaces = self._fib.interfaces()
        wanted = set()
        self._unhooked = False
        for name, hook in wanted_names:
            if name in interfaces:
                wanted.add((interfaces[name], hook))
            elif strict:
                raise FailedPrecondition(f"interface {name!r} does not exist in this node's VPP")
            else:
                log.warning("interface %s is not in VPP: not hooked (yet)", name)
                self._unhooked = True
        held = {(int(d.sw_if_index), int(d.hook)) for d in self._api.dump("srv6pm_interface_dump")}
        for sw_if_index, hook in sorted(held - wanted):
            self._hook(sw_if_index, hook, enable=False)
        for sw_if_index, hook in sorted(wanted - held):
            self._hook(sw_if_index, hook, enable=True)

    def _hook(self, sw_if_index: int, hook: int, enable: bool) -> None:
        self._api.call(
            "srv6pm_interface_enable_disable", sw_if_index=sw_if_index, hook=hook, enable=enable
        )

    # ---- counters ----------------------------------------------------------------------------

    def read_counters(self, names: Iterable[str]) -> Mapping[str, FlowCounters]:
        slots = {f.name: f.slot for f in self._state.current.flows}
        wanted = {n: slots[n] for n in names if n in slots}
        if not wanted or not self.loaded():
            return {}
        by_slot: dict[int, FlowCounters] = {}
        first = 0
        while first != NO_INDEX:  # thousands of flows a reply (a dump sends one message each)
            reply = self._api.call("srv6pm_counters_read", first_slot=first)
            for c in reply.counters:
                by_slot[int(c.slot)] = (
                    ColourCount(int(c.packets[0]), int(c.bytes[0])),
                    ColourCount(int(c.packets[1]), int(c.bytes[1])),
                )
            first = int(reply.next_slot)
        return {n: by_slot[s] for n, s in wanted.items() if s in by_slot}

    def read_stats(self) -> PacketStats:
        if not self.loaded():
            return PacketStats()
        reply = self._api.call("srv6pm_stats_get")
        return PacketStats(**{f.name: int(getattr(reply, f.name)) for f in fields(PacketStats)})


def _flow_of(d: Any) -> tuple[Role, int, tuple[str, ...]]:
    return Role(int(d.role)), int(d.flowmon_id), tuple(str(s) for s in d.segments[: d.n_segments])


class FlowRefused(Exception):
    """The plugin refused a flow after `done` of the request's flows were done."""

    def __init__(self, done: int, reason: str) -> None:
        super().__init__(reason)
        self.done = done
        self.reason = reason


def _wire_flow(slot: int, role: Role, flowmon_id: int, segments: tuple[str, ...]) -> dict[str, Any]:
    """A vl_api_srv6pm_flow_t: the SID list padded to the API's fixed 16, as packed bytes
    (vpp-papi formats every argument into a debug line before it packs the message, however
    its logger is set: with IPv6Address objects that took half of a 10,000-flow apply)."""
    sids = [IPv6Address(s).packed for s in segments]
    return {
        "slot": slot,
        "role": int(role),
        "flowmon_id": flowmon_id,
        "n_segments": len(sids),
        "segments": sids + [bytes(16)] * (MAX_SEGMENTS - len(sids)),
    }
