"""Per-flow marking and counting: the eBPF programs, their pinned maps, and the flow slots.

Everything that must survive a node-manager restart lives in bpffs (maps, programs) or in the
state directory (flow names and slots, written before the maps are changed), so a restarted node
manager, even after kill -9, finds the same counters and hooks and never re-attaches with a gap.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import struct
import time
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from ...domain.errors import FailedPrecondition
from ...domain.flowkey import flow_key
from ...domain.model import Marking, MonitoredFlow, Role
from ..base import ColourCount, FlowCounters
from . import maps
from .bpftool import Bpftool, ensure_bpffs, hexbytes, read_percpu_array
from .hooks import Hook, Hooks

log = logging.getLogger(__name__)

_COUNTER = struct.Struct("<QQ")
MARK = "srv6pm_mark"
COUNT = "srv6pm_count"


@dataclass(frozen=True)
class InstalledFlow:
    name: str
    segments: tuple[str, ...]
    role: Role
    interfaces: tuple[str, ...]
    slot: int

    def spec(self) -> MonitoredFlow:
        return MonitoredFlow(self.name, self.segments, self.role, self.interfaces)

    def hooks(self) -> list[Hook]:
        return [Hook(i, egress=self.role is Role.INGRESS) for i in self.interfaces]


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
        self._maps_dir = bpf_dir / "maps"
        self._progs_dir = bpf_dir / "progs" / self._version
        self._state_file = state_dir / "flows.json"
        self._hooks = hooks
        self._period_ns = period_ns
        self._tool = bpftool or Bpftool()
        ensure_bpffs(bpf_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        self._load_programs()
        self._flows = self._recover_flows()
        self._marking = self._current_marking()

    # ---- programs ----------------------------------------------------------------------------

    def _map(self, name: str) -> str:
        return str(self._maps_dir / name)

    def _load_programs(self) -> None:
        if (self._progs_dir / MARK).exists() and (self._progs_dir / COUNT).exists():
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

    def _program(self, hook: Hook) -> tuple[Path, str]:
        prog = MARK if hook.egress else COUNT
        return self._progs_dir / prog, f"{prog}_{self._version}"

    def sync_hooks(self) -> None:
        """Attach where a flow needs a hook (replacing older versions), detach elsewhere."""
        wanted = {h for f in self._flows.values() for h in f.hooks()}
        for hook in wanted:
            path, name = self._program(hook)
            if self._hooks.attached(hook) != name:
                self._hooks.attach(hook, path, name)
        for hook in self._known_hooks() - wanted:
            self._hooks.detach(hook)
        self._save_hooks(wanted)
        for old in (self._progs_dir.parent).iterdir():
            if old != self._progs_dir:
                shutil.rmtree(old, ignore_errors=True)  # unpinning releases unused versions

    def _known_hooks(self) -> set[Hook]:
        path = self._state_file.with_name("hooks.json")
        if not path.exists():
            return set()
        return {Hook(h["ifname"], h["egress"]) for h in json.loads(path.read_text())}

    def _save_hooks(self, hooks: set[Hook]) -> None:
        _write_json(self._state_file.with_name("hooks.json"), [asdict(h) for h in hooks])

    # ---- marking -----------------------------------------------------------------------------

    def _current_marking(self) -> Marking:
        out = self._tool.run(
            "map", "lookup", "pinned", self._map(maps.CONFIG), "key", "hex", *hexbytes(bytes(4))
        )
        raw = _bytes(out["value"])
        period, offset, _, monitored, colour = maps.parse_config(raw)
        if period != self._period_ns or offset != tai_offset_ns() or not monitored:
            # first start, new period or clock offset: keep bits, rewrite the rest
            marking = Marking(monitored, colour) if monitored else Marking()
            self._write_config(marking)
            return marking
        return Marking(monitored, colour)

    def _write_config(self, marking: Marking) -> None:
        value = maps.config_value(
            self._period_ns,
            tai_offset_ns(),
            time.monotonic_ns() >> 20,
            marking.monitored_bit,
            marking.colour_bit,
        )
        self._tool.run(
            "map",
            "update",
            "pinned",
            self._map(maps.CONFIG),
            "key",
            "hex",
            *hexbytes(bytes(4)),
            "value",
            "hex",
            *hexbytes(value),
        )

    def marking(self) -> Marking:
        return self._marking

    def set_marking(self, marking: Marking) -> None:
        if marking != self._marking:
            self._write_config(marking)
            self._marking = marking

    # ---- flows -------------------------------------------------------------------------------

    def flows(self) -> list[MonitoredFlow]:
        return [f.spec() for f in self._flows.values()]

    def flow_names(self) -> AbstractSet[str]:
        return self._flows.keys()  # the dict is replaced, never mutated

    def _recover_flows(self) -> dict[str, InstalledFlow]:
        """Flows from the state file that the flows map still holds, with the same slot."""
        if not self._state_file.exists():
            return {}
        saved = [
            InstalledFlow(
                f["name"], tuple(f["segments"]), Role(f["role"]), tuple(f["interfaces"]), f["slot"]
            )
            for f in json.loads(self._state_file.read_text())
        ]
        entries = self._tool.run("map", "dump", "pinned", self._map(maps.FLOWS)) or []
        found = {_bytes(e["key"]): _bytes(e["value"]) for e in entries}
        kept = {}
        for f in saved:
            raw = found.get(maps.flow_key(flow_key(f.segments)))
            if raw == maps.flow_value(f.slot, f.role, f.segments):
                kept[f.name] = f
            else:
                log.warning("flow %s not found in the data plane; dropped", f.name)
        return kept

    def _save_flows(self, flows: Iterable[InstalledFlow]) -> None:
        _write_json(self._state_file, [asdict(f) for f in flows])

    def update_flows(self, add: Iterable[MonitoredFlow], remove: Iterable[MonitoredFlow]) -> None:
        add, remove = list(add), list(remove)
        removed = [self._flows[f.name] for f in remove if f.name in self._flows]
        # Remove first (map, then state file), so re-adding a flow under a new role works.
        self._tool.batch(
            [
                "map",
                "delete",
                "pinned",
                self._map(maps.FLOWS),
                "key",
                "hex",
                *hexbytes(maps.flow_key(flow_key(f.segments))),
            ]
            for f in removed
        )
        gone = {f.name for f in removed}
        # The dict is replaced, never mutated: readers on other threads iterate it.
        self._flows = {n: f for n, f in self._flows.items() if n not in gone}
        self._save_flows(self._flows.values())

        used = {f.slot for f in self._flows.values()}
        free = (s for s in range(maps.MAX_FLOWS) if s not in used)
        if len(used) + len(add) > maps.MAX_FLOWS:
            raise FailedPrecondition(
                f"{len(used) + len(add)} monitored flows exceed this node's {maps.MAX_FLOWS}"
            )
        installed = [
            InstalledFlow(f.name, f.segments, f.role, f.interfaces, next(free)) for f in add
        ]
        self._check_keys(installed)
        self._save_flows([*self._flows.values(), *installed])  # intent first: slots are ours
        commands: list[list[str]] = []
        for f in installed:
            for colour in (0, 1):  # a reused slot starts from zero
                commands.append(
                    [
                        "map",
                        "update",
                        "pinned",
                        self._map(maps.COUNTERS),
                        "key",
                        "hex",
                        *hexbytes(maps.counter_index(f.slot, colour)),
                        "value",
                        "hex",
                        *hexbytes(maps.ZERO_COUNTER),
                    ]
                )
            commands.append(
                [
                    "map",
                    "update",
                    "pinned",
                    self._map(maps.FLOWS),
                    "key",
                    "hex",
                    *hexbytes(maps.flow_key(flow_key(f.segments))),
                    "value",
                    "hex",
                    *hexbytes(maps.flow_value(f.slot, f.role, f.segments)),
                ]
            )
        self._tool.batch(commands)
        self._flows = {**self._flows, **{f.name: f for f in installed}}
        self.sync_hooks()

    def _check_keys(self, installed: list[InstalledFlow]) -> None:
        keys: dict[int, str] = {flow_key(f.segments): f.name for f in self._flows.values()}
        for f in installed:
            other = keys.setdefault(flow_key(f.segments), f.name)
            if other != f.name:
                raise FailedPrecondition(
                    f"flows {other!r} and {f.name!r} fold to the same 64-bit key; rename a SID"
                )

    # ---- counters ----------------------------------------------------------------------------

    def read_counters(self, names: Iterable[str]) -> Mapping[str, FlowCounters]:
        flows = dict(self._flows)  # replaced, never mutated, by update_flows
        raw = read_percpu_array(self._maps_dir / maps.COUNTERS, 2 * maps.MAX_FLOWS, 16)
        cpus = len(raw) // (2 * maps.MAX_FLOWS * 16)
        result: dict[str, FlowCounters] = {}
        for name in names:
            if name in flows:
                slot = flows[name].slot
                result[name] = (_sum(raw, 2 * slot, cpus), _sum(raw, 2 * slot + 1, cpus))
        return result


def _bytes(hex_list: list[str]) -> bytes:
    return bytes(int(b, 16) for b in hex_list)


def _sum(raw: bytes, index: int, cpus: int) -> ColourCount:
    """Packets and bytes of counter `index`, added over every CPU."""
    packets = octets = 0
    for cpu in range(cpus):
        p, b = _COUNTER.unpack_from(raw, (index * cpus + cpu) * 16)
        packets += p
        octets += b
    return ColourCount(packets, octets)


def _write_json(path: Path, data: object) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
