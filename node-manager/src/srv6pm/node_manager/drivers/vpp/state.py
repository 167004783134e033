"""What the vpp driver keeps in the state directory (vpp-state.json), written before VPP is
changed: the local SIDs it created, its monitored flows and their counter slots, the marking,
the STAMP addresses and probe routes, and which VPP (boot) they were installed in. VPP itself
keeps nothing across its restarts."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from srv6pm.common.srv6 import MarkingMode, Role

from ...domain.model import Marking, ProbeRoute
from ..slots import InstalledFlow

STATE_FILE = "vpp-state.json"


@dataclass(frozen=True)
class DriverState:
    """`boot` identifies the VPP that holds what is listed ("" : none yet)."""

    boot: str = ""
    local_sids: frozenset[str] = frozenset()
    flows: tuple[InstalledFlow, ...] = ()
    marking: Marking = field(default_factory=Marking)
    probe_routes: tuple[ProbeRoute, ...] = ()
    local_addresses: frozenset[str] = frozenset()


class StateFile:
    """The driver's state, replaced (never mutated) and saved atomically on every change."""

    def __init__(self, state_dir: Path) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self._path = state_dir / STATE_FILE
        self.current = _load(self._path) if self._path.exists() else DriverState()

    def save(self, state: DriverState) -> None:
        data = {
            "boot": state.boot,
            "local_sids": sorted(state.local_sids),
            "flows": [asdict(f) for f in state.flows],
            "marking": asdict(state.marking),
            "probe_routes": [asdict(r) for r in state.probe_routes],
            "local_addresses": sorted(state.local_addresses),
        }
        tmp = self._path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, self._path)
        self.current = state

    def update(self, **changes: object) -> DriverState:
        """Save the current state with `changes`; the new state."""
        new = replace(self.current, **changes)  # type: ignore[arg-type]
        self.save(new)
        return new


def _load(path: Path) -> DriverState:
    data = json.loads(path.read_text())
    marking = data.get("marking") or {}
    return DriverState(
        boot=str(data.get("boot", "")),
        local_sids=frozenset(data.get("local_sids", ())),
        flows=tuple(
            InstalledFlow(
                f["name"],
                tuple(f["segments"]),
                Role(f["role"]),
                tuple(f["interfaces"]),
                int(f["slot"]),
                int(f.get("flowmon_id", 0)),
            )
            for f in data.get("flows", ())
        ),
        marking=Marking(
            MarkingMode(marking["mode"]),
            int(marking["monitored_bit"]),
            int(marking["colour_bit"]),
            tuple(marking["boundary_interfaces"]),
        )
        if marking
        else Marking(),
        probe_routes=tuple(
            ProbeRoute(int(r["mark"]), str(r["address"]), tuple(r["segments"]))
            for r in data.get("probe_routes", ())
        ),
        local_addresses=frozenset(data.get("local_addresses", ())),
    )
