"""Per-flow marking and counting: the eBPF programs, their pinned maps, and the flow slots.

Everything that must survive a node-manager restart lives in bpffs (maps, programs) or in the
state directory (flow names and slots, written before the maps are changed; the marking), so a
restarted node manager, even after kill -9, finds the same counters and hooks and never
re-attaches with a gap.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import asdict
from importlib import resources
from pathlib import Path
from typing import Any

from srv6pm.common.srv6 import MarkingMode, Role

from ...domain.errors import FailedPrecondition
from ...domain.flowkey import flow_key
from ...domain.model import Marking, MonitoredFlow
from .. import slots
from ..base import ColourCount, FlowCounters, PacketStats
from . import maps
from .bpftool import Bpftool, ensure_bpffs, entries, hexbytes, lookup, read_array
from .hooks import COUNT, GUARD, MARK, PROGRAMS, Hook, Hooks

log = logging.getLogger(__name__)


class InstalledFlow(slots.InstalledFlow):
    """A flow in the eBPF maps: its hooks, and how the programs find it."""

    def hooks(self) -> list[Hook]:
        program = MARK if self.role is Role.INGRESS else COUNT
        return [Hook(i, program) for i in self.interfaces]

    def keyed_by_sids(self, mode: MarkingMode) -> bool:
        """The ingress node finds a flow by its SID list, and so does DSCP mode everywhere."""
        return self.role is Role.INGRESS or mode is MarkingMode.DSCP

    def counted_by_flowmon(self) -> bool:
        return self.role is not Role.INGRESS and self.flowmon_id != 0


def tai_offset_ns() -> int:
    """CLOCK_TAI - CLOCK_REALTIME, whole seconds (0 until a time daemon sets the offset)."""
    diff = time.clock_gettime_ns(time.CLOCK_TAI) - time.time_ns()
    return round(diff / 1e9) * 1_000_000_000


def default_object() -> Path:
    return Path(str(resources.files("srv6pm.node_manager") / "bpf" / "monitor.o"))


class Monitor:
    def __init__(
        self,
        bpf_dir: Path,
        state_dir: Path,
        hooks: Hooks,
        period_ns: int,
        bpf_object: Path | None = None,
        bpftool: Bpftool | None = None,
    ) -> None:
        self._obj = bpf_object or default_object()
        if not self._obj.exists():
            raise FailedPrecondition(f"eBPF object {self._obj} is missing: run `make bpf`")
        self._version = hashlib.sha256(self._obj.read_bytes()).hexdigest()[:12]
        self._bpf_dir = bpf_dir
        self._maps_dir = bpf_dir / f"maps-v{maps.LAYOUT}"
        self._progs_dir = bpf_dir / "progs" / self._version
        self._state_file = state_dir / "flows.json"
        self._marking_file = state_dir / "marking.json"
        self._hooks = hooks
        self._period_ns = period_ns
        self._tool = bpftool or Bpftool()
        ensure_bpffs(bpf_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        self._load_programs()
        self._marking = self._current_marking()
        self._flows = self._recover_flows()

    # ---- programs ----------------------------------------------------------------------------

    def _map(self, name: str) -> str:
        return str(self._maps_dir / name)

    def _load_programs(self) -> None:
        if all((self._progs_dir / p).exists() for p in PROGRAMS):
            return
        self._maps_dir.mkdir(parents=True, exist_ok=True)
        self._progs_dir.parent.mkdir(parents=True, exist_ok=True)
        args = ["prog", "loadall", str(self._obj), str(self._progs_dir), "type", "classifier"]
        if all((self._maps_dir / m).exists() for m in maps.ALL_MAPS):
            for m in maps.ALL_MAPS:  # a restart or an upgrade reuses the counting maps
                args += ["map", "name", m, "pinned", self._map(m)]
        else:
            args += ["pinmaps", str(self._maps_dir)]
        self._tool.run(*args)
        log.info("loaded eBPF programs version=%s dir=%s", self._version, self._progs_dir)

    def sync_hooks(self) -> None:
        """Attach where a flow or the boundary needs a hook (replacing older versions), detach
        elsewhere; then release programs and maps of older versions and layouts."""
        wanted = {h for f in self._flows.values() for h in f.hooks()}
        wanted |= {Hook(i, GUARD) for i in self._marking.boundary_interfaces}
        for hook in wanted:
            name = f"{hook.program}_{self._version}"
            if self._hooks.attached(hook) != name:
                self._hooks.attach(hook, self._progs_dir / hook.program, name)
        attached = {(h.ifname, h.parent) for h in wanted}
        for hook in self._known_hooks() - wanted:
            if (hook.ifname, hook.parent) not in attached:
                self._hooks.detach(hook)
        self._save_hooks(wanted)
        for old in self._progs_dir.parent.iterdir():
            if old != self._progs_dir:
                shutil.rmtree(old, ignore_errors=True)  # unpinning releases unused versions
        for old in self._bpf_dir.iterdir():
            if old.name.startswith("maps") and old != self._maps_dir:
                shutil.rmtree(old, ignore_errors=True)

    def _known_hooks(self) -> set[Hook]:
        path = self._state_file.with_name("hooks.json")
        if not path.exists():
            return set()
        return {
            # layout 1 saved the direction only
            Hook(h["ifname"], h.get("program") or (MARK if h["egress"] else COUNT))
            for h in json.loads(path.read_text())
        }

    def _save_hooks(self, hooks: set[Hook]) -> None:
        _write_json(self._state_file.with_name("hooks.json"), [asdict(h) for h in hooks])

    def _update_map(self, name: str, key: bytes, value: bytes) -> list[str]:
        target = ["map", "update", "pinned", self._map(name)]
        return [*target, "key", "hex", *hexbytes(key), "value", "hex", *hexbytes(value)]

    # ---- marking -----------------------------------------------------------------------------

    def _current_marking(self) -> Marking:
        """The saved marking; the config map is rewritten when it differs (first start, new
        period or clock offset, or a map layout change)."""
        marking = Marking()
        if self._marking_file.exists():
            saved = json.loads(self._marking_file.read_text())
            marking = Marking(
                MarkingMode[maps.Mode(saved["mode"]).name],
                saved["monitored_bit"],
                saved["colour_bit"],
                tuple(saved["boundary_interfaces"]),
            )
        value = lookup(self._maps_dir / maps.CONFIG, bytes(4), maps.CONFIG_VALUE.size)
        if value is None:  # an array always holds its entries
            raise FailedPrecondition(f"{self._maps_dir / maps.CONFIG} has no entry 0")
        period, offset, _, monitored, colour, mode = maps.parse_config(value)
        held = (period, offset, monitored, colour, mode)
        want = (self._period_ns, tai_offset_ns(), *self._config_fields(marking))
        if held != want:
            self._write_config(marking)
        return marking

    @staticmethod
    def _config_fields(marking: Marking) -> tuple[int, int, maps.Mode]:
        return marking.monitored_bit, marking.colour_bit, maps.Mode[marking.mode.name]

    def _write_config(self, marking: Marking) -> None:
        value = maps.config_value(
            self._period_ns,
            tai_offset_ns(),
            time.monotonic_ns() >> 20,
            *self._config_fields(marking),
        )
        self._tool.run(*self._update_map(maps.CONFIG, bytes(4), value))

    def marking(self) -> Marking:
        return self._marking

    def set_marking(self, marking: Marking) -> None:
        if marking == self._marking:
            return
        if self._config_fields(marking) != self._config_fields(self._marking):
            self._write_config(marking)
        data = asdict(marking) | {"mode": int(maps.Mode[marking.mode.name])}
        _write_json(self._marking_file, data)
        self._marking = marking
        self.sync_hooks()

    # ---- flows -------------------------------------------------------------------------------

    def flows(self) -> list[MonitoredFlow]:
        return [f.spec() for f in self._flows.values()]

    def flow_names(self) -> AbstractSet[str]:
        return self._flows.keys()  # the dict is replaced, never mutated

    def _recover_flows(self) -> dict[str, InstalledFlow]:
        """Flows from the state file that the maps still hold, with the same slot."""
        if not self._state_file.exists():
            return {}
        saved = [
            InstalledFlow(
                f["name"],
                tuple(f["segments"]),
                Role(f["role"]),
                tuple(f["interfaces"]),
                f["slot"],
                f.get("flowmon_id", 0),
            )
            for f in json.loads(self._state_file.read_text())
        ]
        by_sids = entries(self._maps_dir / maps.FLOWS, maps.FLOW_KEY.size, maps.FLOW_VALUE.size)
        flowmon = read_array(
            self._maps_dir / maps.FLOWMON, maps.FLOWMON_IDS, maps.FLOWMON_ENTRY.size
        )
        kept = {}
        for f in saved:
            ok = not f.keyed_by_sids(self._marking.mode) or by_sids.get(
                maps.flow_key(flow_key(f.segments))
            ) == maps.flow_value(f.slot, f.role, f.segments, f.flowmon_id)
            if f.counted_by_flowmon():
                at = f.flowmon_id * maps.FLOWMON_ENTRY.size
                ok &= flowmon[at : at + maps.FLOWMON_ENTRY.size] == maps.flowmon_entry(
                    f.slot, f.role
                )
            if ok:
                kept[f.name] = f
            else:
                log.warning("flow %s not found in the data plane; dropped", f.name)
        return kept

    def _save_flows(self, flows: Iterable[InstalledFlow]) -> None:
        _write_json(self._state_file, [asdict(f) for f in flows])

    def update_flows(self, add: Iterable[MonitoredFlow], remove: Iterable[MonitoredFlow]) -> None:
        add, remove = list(add), list(remove)
        mode = self._marking.mode
        removed = [self._flows[f.name] for f in remove if f.name in self._flows]
        # Remove first (maps, then state file), so re-adding a flow under a new role works.
        commands: list[list[str]] = []
        for f in removed:
            if f.keyed_by_sids(mode):
                key = maps.flow_key(flow_key(f.segments))
                commands.append(["map", "delete", "pinned", self._map(maps.FLOWS), "key", "hex"])
                commands[-1] += hexbytes(key)
            if f.counted_by_flowmon():
                commands.append(
                    self._update_map(
                        maps.FLOWMON, maps.flowmon_index(f.flowmon_id), maps.NO_FLOWMON
                    )
                )
        self._tool.batch(commands)
        gone = {f.name for f in removed}
        # The dict is replaced, never mutated: readers on other threads iterate it.
        self._flows = {n: f for n, f in self._flows.items() if n not in gone}
        self._save_flows(self._flows.values())

        used = {f.slot for f in self._flows.values()}
        installed = slots.install(add, used, maps.MAX_FLOWS, InstalledFlow)
        self._check_keys(installed)
        self._save_flows([*self._flows.values(), *installed])  # intent first: slots are ours
        commands = []
        for f in installed:
            for colour in (0, 1):  # a reused slot starts from zero
                commands.append(
                    self._update_map(
                        maps.COUNTERS, maps.counter_index(f.slot, colour), maps.ZERO_COUNTER
                    )
                )
            if f.keyed_by_sids(mode):
                value = maps.flow_value(f.slot, f.role, f.segments, f.flowmon_id)
                commands.append(
                    self._update_map(maps.FLOWS, maps.flow_key(flow_key(f.segments)), value)
                )
            if f.counted_by_flowmon():
                commands.append(
                    self._update_map(
                        maps.FLOWMON,
                        maps.flowmon_index(f.flowmon_id),
                        maps.flowmon_entry(f.slot, f.role),
                    )
                )
        self._tool.batch(commands)
        self._flows = {**self._flows, **{f.name: f for f in installed}}
        self.sync_hooks()

    def _check_keys(self, installed: list[InstalledFlow]) -> None:
        mode = self._marking.mode
        keyed = [f for f in self._flows.values() if f.keyed_by_sids(mode)]
        keys: dict[int, str] = {flow_key(f.segments): f.name for f in keyed}
        for f in installed:
            if not f.keyed_by_sids(mode):
                continue
            other = keys.setdefault(flow_key(f.segments), f.name)
            if other != f.name:
                raise FailedPrecondition(
                    f"flows {other!r} and {f.name!r} fold to the same 64-bit key; rename a SID"
                )

    # ---- counters ----------------------------------------------------------------------------

    def read_counters(self, names: Iterable[str]) -> Mapping[str, FlowCounters]:
        flows = dict(self._flows)  # replaced, never mutated, by update_flows
        raw = read_array(
            self._maps_dir / maps.COUNTERS, 2 * maps.MAX_FLOWS, maps.COUNTER.size, per_cpu=True
        )
        cpus = len(raw) // (2 * maps.MAX_FLOWS * maps.COUNTER.size)
        result: dict[str, FlowCounters] = {}
        for name in names:
            if name in flows:
                slot = flows[name].slot
                result[name] = (_sum(raw, 2 * slot, cpus), _sum(raw, 2 * slot + 1, cpus))
        return result

    def read_stats(self) -> PacketStats:
        n = len(maps.Reason)
        raw = read_array(self._maps_dir / maps.STATS, n, maps.STAT.size, per_cpu=True)
        cpus = len(raw) // (n * maps.STAT.size)
        totals: dict[str, Any] = {
            r.name.lower(): sum(
                maps.STAT.unpack_from(raw, (r * cpus + c) * maps.STAT.size)[0] for c in range(cpus)
            )
            for r in maps.Reason
        }
        return PacketStats(**totals)


def _sum(raw: bytes, index: int, cpus: int) -> ColourCount:
    """Packets and bytes of counter `index`, added over every CPU."""
    packets = octets = 0
    for cpu in range(cpus):
        p, b = maps.COUNTER.unpack_from(raw, (index * cpus + cpu) * maps.COUNTER.size)
        packets += p
        octets += b
    return ColourCount(packets, octets)


def _write_json(path: Path, data: object) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
