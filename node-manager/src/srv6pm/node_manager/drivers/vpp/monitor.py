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
from ipaddress import IPv6Address
from typing import Any

from srv6pm.common.srv6 import MarkingMode, Role

from ...domain.errors import FailedPrecondition
from ...domain.model import MAX_SEGMENTS, Marking, MonitoredFlow
from ..base import ColourCount, FlowCounters, PacketStats
from .api import NO_INDEX, VppApi, VppRefused
from .fib import Fib
from .state import InstalledFlow, StateFile

log = logging.getLogger(__name__)

PLUGIN_PROBE = "srv6pm_config_get"  # defined by VPP only where the plugin is loaded
MODES = {MarkingMode.ALTMARK: 1, MarkingMode.DSCP: 2}  # vl_api_srv6pm_marking_mode_t
HOOK_MARK, HOOK_COUNT, HOOK_GUARD = 1, 2, 3  # vl_api_srv6pm_hook_t
STATS = ("counted", "not_srv6", "unmarked", "no_flow", "parse_error", "foreign_mark", "mark_failed")


class Monitor:
    def __init__(self, api: VppApi, fib: Fib, state: StateFile, period_ns: int) -> None:
        self._api = api
        self._fib = fib
        self._state = state
        self._period_ns = period_ns

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
        for slot in held - {f.slot for f in state.flows}:
            self._flow_del(slot)
        for f in state.flows:
            self._flow_add(f)
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
        for slot in set(held) - {f.slot for f in kept}:
            self._flow_del(slot)
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
        return [f.spec() for f in self._state.current.flows]

    def flow_names(self) -> frozenset[str]:
        return frozenset(f.name for f in self._state.current.flows)

    def update_flows(self, add: Iterable[MonitoredFlow], remove: Iterable[MonitoredFlow]) -> None:
        add, remove = list(add), list(remove)
        gone = {f.name for f in remove}
        flows = self._state.current.flows
        removed = [f for f in flows if f.name in gone]
        if removed:  # VPP first, then the state file: a slot is never given twice
            for f in removed:
                self._flow_del(f.slot)
            flows = tuple(f for f in flows if f.name not in gone)
            self._state.update(flows=flows)
        if not add:
            self.sync_hooks()
            return
        self._require("monitoring a flow")
        limit = self.max_flows()
        if len(flows) + len(add) > limit:
            raise FailedPrecondition(
                f"{len(flows) + len(add)} monitored flows exceed this node's {limit}"
            )
        used = {f.slot for f in flows}
        free = (s for s in range(limit) if s not in used)
        installed = tuple(
            InstalledFlow(f.name, f.segments, f.role, f.interfaces, next(free), f.flowmon_id)
            for f in add
        )
        self._state.update(flows=flows + installed)  # intent first: the slots are ours
        for i, f in enumerate(installed):
            try:
                self._flow_add(f)
            except VppRefused as e:  # e.g. a SID list or FlowMonID another flow holds
                self._state.update(flows=flows + installed[:i])
                self.sync_hooks(strict=False)
                raise FailedPrecondition(
                    f"flow {f.name!r}: {e} (a SID list or FlowMonID another flow holds?)"
                ) from None
        self.sync_hooks()

    def _flow_add(self, f: InstalledFlow) -> None:
        sids = [IPv6Address(s) for s in f.segments]
        self._api.call(
            "srv6pm_flow_add_del",
            is_add=True,
            slot=f.slot,
            role=int(f.role),
            flowmon_id=f.flowmon_id,
            n_segments=len(sids),
            segments=sids + [IPv6Address("::")] * (MAX_SEGMENTS - len(sids)),
        )

    def _flow_del(self, slot: int) -> None:
        self._api.call(
            "srv6pm_flow_add_del",
            is_add=False,
            slot=slot,
            role=int(Role.INGRESS),
            flowmon_id=0,
            n_segments=0,
            segments=[IPv6Address("::")] * MAX_SEGMENTS,
        )

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
        for name, hook in wanted_names:
            if name in interfaces:
                wanted.add((interfaces[name], hook))
            elif strict:
                raise FailedPrecondition(f"interface {name!r} does not exist in this node's VPP")
            else:
                log.warning("interface %s is not in VPP: not hooked", name)
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
        by_slot = {
            int(d.slot): (
                ColourCount(int(d.packets[0]), int(d.bytes[0])),
                ColourCount(int(d.packets[1]), int(d.bytes[1])),
            )
            for d in self._api.dump("srv6pm_counters_dump", slot=NO_INDEX)
        }
        return {n: by_slot[s] for n, s in wanted.items() if s in by_slot}

    def read_stats(self) -> PacketStats:
        if not self.loaded():
            return PacketStats()
        reply = self._api.call("srv6pm_stats_get")
        return PacketStats(**{name: int(getattr(reply, name)) for name in STATS})


def _flow_of(d: Any) -> tuple[Role, int, tuple[str, ...]]:
    return Role(int(d.role)), int(d.flowmon_id), tuple(str(s) for s in d.segments[: d.n_segments])
