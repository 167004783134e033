"""The VPP under test: one VPP in its own namespace, its main thread the only worker (pinned to
the measured core), two packet-generator interfaces (pg0 in, pg1 out with a static neighbour,
so ip6-rewrite and the ip6-output arc run), srv6pm's plugin loaded; the CLI, the binary API
(vpp-papi) and the stats segment's per-node clocks."""

from __future__ import annotations

import contextlib
import glob
import secrets
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from srv6pm.lab.errors import LabError
from srv6pm.lab.vpp import (
    VPP_API_FILES,
    VPP_PREFIX,
    VppProcess,
    check_installed,
    srv6pm_plugin_built,
    srv6pm_plugin_dir,
    stop,
)
from srv6pm.node_manager.drivers.base import PacketStats
from vpp_papi import VPPApiClient
from vpp_papi.vpp_stats import VPPStats

from bench.harness.meters import steal_s
from bench.harness.run import BenchError, run

IN_IF, OUT_IF = "pg0", "pg1"
IN_ADDRESS, OUT_ADDRESS = "fd00:1::1/64", "fd00:12::1/64"
NEXT_HOP, NEXT_HOP_MAC = "fd00:12::2", "02:00:00:00:12:02"
GEN_MAC = "02:00:00:00:01:02"
ROUTED = ("fc00:0:2::/48", "fc00:0:3::/48")  # to the next hop on pg1 (bench/fwd/frames.py)
HEAP = "1G"  # 10,000 SR policies, their steering routes and FIB entries
STATS_UPDATE_S = 0.05  # the stats segment's node counters are this old at most
HOOK = {"mark": 1, "count": 2}  # srv6pm.api's srv6pm_hook
MODE = {"altmark": 1, "dscp": 2}  # srv6pm.api's srv6pm_marking_mode
DSCP_BITS = (0x04, 0x08)  # monitored bit, colour bit (bench/fwd/common.py's DSCP_MARKED)
PERIOD_NS = 1_000_000_000
PLUGIN_FIELDS = tuple(f.name for f in fields(PacketStats))  # what the plugin counts per reason


class BenchVpp(VppProcess):
    """The lab's VPP process with the settings of a measurement: a heap for 10,000 policies,
    the main thread on ``core``, the stats segment's per-node counters every 50 ms; srv6pm's
    plugin from ``plugin_dir`` (another build than the package's, to compare two)."""

    def __init__(self, netns: str, run_dir: Path, core: int, plugin_dir: Path) -> None:
        super().__init__("vb", netns, run_dir)
        self.core = core
        self.plugin_dir = plugin_dir

    def config(self) -> str:
        base = super().config()
        changes = {
            "main-heap-size 256M": f"main-heap-size {HEAP}",
            "statseg {": f"statseg {{ per-node-counters on update-interval {STATS_UPDATE_S}",
            f":{srv6pm_plugin_dir()} ": f":{self.plugin_dir} ",
        }
        for old, new in changes.items():
            if old not in base:
                raise BenchError(f"VPP's lab configuration has no `{old}`: update {__file__}")
            base = base.replace(old, new)
        return base + f"cpu {{ main-core {self.core} }}\n"


@dataclass(frozen=True)
class Sched:
    """The VPP main thread's scheduler counters and its core's steal time."""

    run_delay_ns: int  # waited on a run queue
    involuntary: int  # preempted
    steal_s: float  # the hypervisor ran something else on the core

    def disturbed(self, before: Sched) -> bool:
        return self.involuntary > before.involuntary or self.steal_s > before.steal_s


@dataclass(frozen=True)
class Nodes:
    """Per-node clocks and vectors (added over threads) from the stats segment."""

    clocks: dict[str, int]
    vectors: dict[str, int]


class Router:
    """VPP with pg0 (in) and pg1 (out); ``close`` stops it and removes its namespace."""

    def __init__(
        self, run_dir: Path, core: int, prefix: str = "vb", plugin_dir: Path | None = None
    ) -> None:
        self.netns = f"{prefix}{secrets.token_hex(3)}"
        self.plugin_dir = plugin_dir or srv6pm_plugin_dir()
        self.vpp = BenchVpp(self.netns, run_dir, core, self.plugin_dir)
        self.pid: int | None = None
        self._client: Any = None
        self._stats: VPPStats | None = None
        self.hooks: set[tuple[int, int]] = set()
        run(["ip", "netns", "add", self.netns])
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        proc = self.vpp.launch()
        self.pid = proc.pid
        self.vpp.wait_ready(proc)
        self.cli(f"create packet-generator interface {IN_IF}")
        self.cli(f"create packet-generator interface {OUT_IF}")
        self.in_mac = self.mac(IN_IF)
        lines = [
            *(f"set interface state {i} up" for i in (IN_IF, OUT_IF)),
            f"set interface ip address {IN_IF} {IN_ADDRESS}",
            f"set interface ip address {OUT_IF} {OUT_ADDRESS}",
            *(f"ip6 nd {i} ra-suppress" for i in (IN_IF, OUT_IF)),
            f"set ip neighbor {OUT_IF} {NEXT_HOP} {NEXT_HOP_MAC} static",
            *(f"ip route add {p} via {NEXT_HOP} {OUT_IF}" for p in ROUTED),
            f"set sr encaps source addr {IN_ADDRESS.split('/', maxsplit=1)[0]}",
        ]
        self.exec(lines)
        files = glob.glob(f"{VPP_API_FILES}/**/*.api.json", recursive=True)
        files.append(str(self.plugin_dir / "srv6pm.api.json"))
        client = VPPApiClient(apifiles=files, server_address=str(self.vpp.sockets.api))
        client.connect("srv6pm-bench")
        self._client = client
        self.api = client.api
        self._stats = VPPStats(str(self.vpp.sockets.stats))
        self._stats.connect()
        self.sw_if_index = {i.interface_name: i.sw_if_index for i in self.api.sw_interface_dump()}

    def realtime(self) -> None:
        """VPP's main thread SCHED_FIFO (lowest priority): other processes on its core do not
        preempt it during a stream; between streams it sleeps in epoll."""
        run(["chrt", "-f", "-p", "1", str(self.pid)])

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._stats is not None:
                self._stats.disconnect()
        with contextlib.suppress(Exception):
            if self._client is not None:
                self._client.disconnect()
        try:
            if self.pid is not None:
                stop(self.pid, self.vpp.config_file)
        finally:
            subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, check=False)

    # -- CLI -------------------------------------------------------------------------------
    def cli(self, command: str) -> str:
        """One CLI command, its output (not checked: VPP's CLI exits 0 either way)."""
        argv = [str(VPP_PREFIX / "bin/vppctl"), "-s", str(self.vpp.sockets.cli), command]
        return run(argv, timeout=60).stdout.strip()

    def exec(self, lines: Sequence[str]) -> None:
        """CLI commands from a file (``exec``), 10,000s in a second; BenchError on any output
        (the commands used here print nothing when they succeed)."""
        script = self.vpp.run_dir / f"{self.netns}-exec.txt"
        script.write_text("\n".join(lines) + "\n")
        out = self.cli(f"exec {script}")
        if out:
            raise BenchError(f"VPP: a configuration command failed: {out[:500]}")

    def mac(self, ifname: str) -> str:
        shown = self.cli(f"show hardware-interfaces {ifname}")
        for line in shown.splitlines():
            if "Ethernet address" in line:
                return line.split()[-1]
        raise BenchError(f"no MAC address of {ifname} in: {shown}")

    # -- packet generator --------------------------------------------------------------------
    def add_stream(self, name: str, pcap: Path, limit: int) -> None:
        """A stream that replays ``pcap``'s frames in order (wrapping) into pg0's
        ethernet-input until ``limit`` packets, as fast as the main thread can."""
        self.cli(
            f"packet-generator new {{ name {name} limit {limit} node ethernet-input "
            f"interface {IN_IF} pcap {pcap} }}"
        )
        if name not in self.cli("show packet-generator"):
            raise BenchError(f"VPP did not create packet-generator stream {name}")

    def run_stream(self, name: str, expected_s: float, timeout_s: float = 60.0) -> float:
        """Enable the stream and wait until it has sent its packets (it disables itself); the
        time waited. The CLI is polled only after ``expected_s``, so it does not run between
        the stream's frames (it runs on the same thread)."""
        t0 = time.monotonic()
        self.cli(f"packet-generator enable-stream {name}")
        time.sleep(expected_s)
        while self._stream_enabled(name):
            if time.monotonic() - t0 > timeout_s:
                self.cli(f"packet-generator disable-stream {name}")
                raise BenchError(f"stream {name} did not end within {timeout_s:g} s")
            time.sleep(0.01)
        return time.monotonic() - t0

    def _stream_enabled(self, name: str) -> bool:
        for line in self.cli("show packet-generator").splitlines():
            words = line.split()
            if words[:1] == [name]:
                return words[1] == "Yes"
        raise BenchError(f"no packet-generator stream {name}")

    # -- measurements ----------------------------------------------------------------------
    def nodes(self) -> Nodes:
        """Every node's clocks and vectors, once the stats segment has caught up."""
        assert self._stats is not None
        time.sleep(3 * STATS_UPDATE_S)
        dump = self._stats.dump(self._stats.ls(["^/nodes/"]))
        clocks: dict[str, int] = {}
        vectors: dict[str, int] = {}
        for path, per_thread in dump.items():
            _, _, node, what = path.split("/", 3)
            if what in ("clocks", "vectors"):
                (clocks if what == "clocks" else vectors)[node] = int(sum(per_thread))
        if not clocks:
            raise BenchError("no /nodes/ counters in VPP's stats segment")
        return Nodes(clocks, vectors)

    def sched(self, core: int) -> Sched:
        assert self.pid is not None
        task = Path(f"/proc/{self.pid}/task/{self.pid}")
        delay = int((task / "schedstat").read_text().split()[1])
        status = (task / "status").read_text().splitlines()
        involuntary = next(
            int(line.split()[1]) for line in status if line.startswith("nonvoluntary_ctxt")
        )
        return Sched(delay, involuntary, steal_s(core))

    # -- srv6pm ----------------------------------------------------------------------------
    def check(self, reply: Any, what: str) -> None:
        if reply.retval != 0:
            raise BenchError(f"VPP: {what} failed: retval {reply.retval}")

    def set_mode(self, mode: str, configured: bool = True) -> None:
        """The marking mode; not ``configured``: period 0, the nodes pass packets untouched."""
        monitored, colour = DSCP_BITS if mode == "dscp" else (0, 0)
        reply = self.api.srv6pm_config_set(
            period_ns=PERIOD_NS if configured else 0,
            mode=MODE[mode],
            monitored_bit=monitored,
            colour_bit=colour,
        )
        self.check(reply, f"srv6pm_config_set {mode}")

    def set_hook(self, hook: str, ifname: str, enable: bool) -> None:
        key = (HOOK[hook], self.sw_if_index[ifname])
        if (key in self.hooks) == enable:
            return
        reply = self.api.srv6pm_interface_enable_disable(
            sw_if_index=key[1], hook=key[0], enable=enable
        )
        self.check(reply, f"srv6pm_interface_enable_disable {hook} {ifname} {enable}")
        (self.hooks.add if enable else self.hooks.discard)(key)

    def add_flows(self, role: int, sid_lists: Iterable[Sequence[str]]) -> int:
        """Flows in slots 0.. (FlowMonID slot + 1) of ``role``; how many."""
        n = 0
        for slot, sids in enumerate(sid_lists):
            segments = [*sids, *["::"] * (16 - len(sids))]
            reply = self.api.srv6pm_flow_add_del(
                is_add=True,
                slot=slot,
                role=role,
                flowmon_id=slot + 1,
                n_segments=len(sids),
                segments=segments,
            )
            self.check(reply, f"srv6pm_flow_add_del slot {slot}")
            n += 1
        return n

    def plugin_stats(self) -> dict[str, int]:
        r = self.api.srv6pm_stats_get()
        return {f: int(getattr(r, f)) for f in PLUGIN_FIELDS}

    def flow_packets(self) -> dict[int, int]:
        """Packets of every installed flow, both colours."""
        return {
            int(d.slot): int(sum(d.packets)) for d in self.api.srv6pm_counters_dump(slot=0xFFFFFFFF)
        }


def check_vpp(plugin_dir: Path | None) -> None:
    """BenchError unless VPP and srv6pm's plugin are there."""
    try:
        check_installed()
    except LabError as e:
        raise BenchError(str(e)) from e
    if plugin_dir is None and not srv6pm_plugin_built():
        raise BenchError(
            f"srv6pm's VPP plugin is not built in {srv6pm_plugin_dir()}: make vpp-plugin"
        )
    for name in ("srv6pm_plugin.so", "srv6pm.api.json"):
        if plugin_dir is not None and not (plugin_dir / name).exists():
            raise BenchError(f"no {name} in {plugin_dir}")
