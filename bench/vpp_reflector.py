"""srv6pm's VPP reflector (srv6pm-reflect, node-manager/vpp-plugin/srv6pm/reflect_node.c) as
one of the STAMP benchmarks' reflectors: a VPP in the reflector's namespace, started and given
its veth as the lab starts a VPP router (lab/src/srv6pm/lab/vpp.py, vpp_routers.py: af_packet
TPACKET_V2 in polling rx-mode, 100 us poll-sleep, the veth's own MAC, the kernel's IPv6 off on
it), with its main thread the only one that handles packets, pinned to the reflector's core.
One difference: af_packet sends past the qdisc layer, VPP's default (the lab's routers go
through it so that drops can be injected on their veths' egress; that costs about a fifth of
the capacity here: 204k against 246k replies per busy core-second in two runs side by side).
The reflector is configured as the node manager's vpp driver does (srv6pm_reflector_set):
stateless, unauthenticated, on the veth's address.

Its counters (srv6pm_reflector_stats_get) are a trial's program counters; when it stops, VPP's
per-node clocks (`show runtime`, since the first trial), its errors and interface counters are
kept with its final figures: where the time goes."""

from __future__ import annotations

import contextlib
import glob
import json
import shutil
import subprocess
import tempfile
from ipaddress import IPv6Address
from pathlib import Path
from typing import Any

from bench.harness import provenance
from bench.harness.run import BenchError, progress, run
from bench.harness.topology import Side
from bench.reflectors import PORT, ReflectorProcess

VPP = "srv6pm.vpp"
# a VPP-driven veth's offloads, as the lab sets them (lab/src/srv6pm/lab/network.py): no
# super-packets at either end, no checksum left to the NIC by the kernel end sending to VPP
SUPER_PACKETS = ("tso", "gso", "gro")
CHECKSUM_LEFT_TO_NIC = ("tx",)


def _ns(side: Side, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", side.netns, *argv]


class VppReflector(ReflectorProcess):
    """VPP answering STAMP on ``side``'s veth; ``peer`` is the generator's side (its MAC is
    VPP's static neighbour, its veth's offloads are set as the lab sets them and put back)."""

    def __init__(self, side: Side, peer: Side, core: int) -> None:
        # imported here: the other reflectors need neither the lab package nor vpp-papi
        from srv6pm.lab.vpp import VPP_API_FILES, VppProcess, srv6pm_plugin_dir  # noqa: PLC0415
        from srv6pm.node_manager.drivers.vpp.reflector import ANY_DSCP, MAX_KEY  # noqa: PLC0415
        from srv6pm.twamp.error_estimate import clock_error_estimate  # noqa: PLC0415
        from vpp_papi import VPPApiClient  # noqa: PLC0415

        class PinnedVpp(VppProcess):
            def config(self) -> str:
                return super().config() + f"cpu {{ main-core {core} }}\n"

        self.name = VPP
        self.info = {}
        self.kernel = None
        self.side, self.peer = side, peer
        self.run_dir = Path(tempfile.mkdtemp(prefix="srv6pm-bench-vpp-"))
        self.vpp = PinnedVpp("refl", side.netns, self.run_dir)
        self._client: Any = None
        self._undo: list[tuple[str, list[str]]] = []
        self.pid = 0
        try:
            self._kernel_side()
            proc = self.vpp.launch()
            self._proc = proc
            self.pid = proc.pid
            self.vpp.wait_ready(proc)
            # every VPP thread on the reflector's core, not only the main one
            run(["taskset", "-a", "-p", "-c", str(core), str(self.pid)])
            self._interface()
            files = glob.glob(f"{VPP_API_FILES}/**/*.api.json", recursive=True)
            files.append(str(srv6pm_plugin_dir() / "srv6pm.api.json"))
            client = VPPApiClient(apifiles=files, server_address=str(self.vpp.sockets.api))
            client.connect("srv6pm-bench-reflector")
            self._client = client
            reply = client.api.srv6pm_reflector_set(
                enabled=True,
                stateful=False,
                port=PORT,
                error_estimate=clock_error_estimate(False),  # as our userspace reflector
                address=IPv6Address(side.address),
                period_ns=0,
                allowed_dscp=ANY_DSCP,
                key_len=0,
                key=b"\0" * MAX_KEY,
            )
            if reply.retval != 0:
                raise BenchError(f"srv6pm_reflector_set failed: retval {reply.retval}")
            self.info = {
                "ready": True,
                "loop": "VPP main thread, af_packet polling",
                "config": self.vpp.config(),
                "reflector": self.cli("show srv6pm reflector"),
                "version": self.cli("show version"),
                # the plugin as built when VPP loaded it, and the reflector's source then
                "plugin_sha256": provenance.sha256(srv6pm_plugin_dir() / "srv6pm_plugin.so"),
                **provenance.source_revision(
                    provenance.ROOT / "node-manager/vpp-plugin/srv6pm/reflect_node.c"
                ),
            }
            self.cli("clear runtime")
        except BaseException:
            self.stop()
            raise

    def _kernel_side(self) -> None:
        """The veth as the lab leaves it to VPP: IPv6 off (the kernel neither answers nor
        holds the address), offloads off."""
        side, peer = self.side, self.peer
        off = f"net.ipv6.conf.{side.ifname}.disable_ipv6"
        run(_ns(side, "sysctl", "-qw", f"{off}=1"))
        # IPv6 on again drops the address: put it back with it
        restore = f"sysctl -qw {off}=0 && ip addr add {side.address}/64 dev {side.ifname} nodad"
        self._undo.append((restore, _ns(side, "sh", "-c", restore)))
        for s, features in ((side, SUPER_PACKETS), (peer, SUPER_PACKETS + CHECKSUM_LEFT_TO_NIC)):
            shown = run(_ns(s, "ethtool", "-k", s.ifname)).stdout
            was = {f: _feature_on(shown, f) for f in features}
            run(_ns(s, "ethtool", "-K", s.ifname, *[a for f in features for a in (f, "off")]))
            back = [a for f, on in was.items() for a in (f, "on" if on else "off")]
            what = f"ethtool -K {s.ifname} {' '.join(back)}"
            self._undo.append((what, _ns(s, "ethtool", "-K", s.ifname, *back)))

    def _interface(self) -> None:
        side, peer = self.side, self.peer
        mac = _mac(side)
        vif = f"host-{side.ifname}"
        for command in (
            f"create host-interface name {side.ifname} v2 hw-addr {mac}",
            f"set interface ip address {vif} {side.address}/64",
            f"set interface state {vif} up",
            f"set interface rx-mode {vif} polling",
            f"ip6 nd {vif} ra-suppress",
            f"set ip neighbor {vif} {peer.address} {_mac(peer)} static",
        ):
            self.vpp.cli(command)

    def cli(self, command: str) -> str:
        return self.vpp.cli(command)

    def program_stats(self) -> dict[str, int]:
        if self._client is None:
            return {}
        from srv6pm.node_manager.drivers.vpp.reflector import STATS  # noqa: PLC0415

        reply = self._client.api.srv6pm_reflector_stats_get()
        return {name: int(getattr(reply, name)) for name in STATS}

    def drained(self, timeout_s: float = 10.0) -> None:
        """Nothing queued in a socket: VPP answers from its poll loop."""

    def stop(self) -> dict[str, object]:
        """VPP's counters and clocks, then VPP stopped and the veths as they were."""
        from srv6pm.lab.vpp import stop as stop_vpp  # noqa: PLC0415

        final: dict[str, object] = {}
        if self._client is not None:
            with contextlib.suppress(Exception):
                final["stats"] = self.program_stats()
                for what in ("show runtime", "show errors", "show interface"):
                    final[what] = self.cli(what)
            with contextlib.suppress(Exception):
                self._client.disconnect()
            self._client = None
        problems = []
        if self.pid:
            try:
                stop_vpp(self.pid, self.vpp.config_file)
                self._proc.wait(timeout=10)
            except Exception as e:
                problems.append(f"stop VPP {self.pid}: {e}")
            self.pid = 0
        for prefix in (self.vpp.api_prefix,):
            for leftover in (f"/dev/shm/{prefix}-global_vm", f"/dev/shm/{prefix}-vpe-api"):
                Path(leftover).unlink(missing_ok=True)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        while self._undo:
            what, argv = self._undo.pop()
            r = subprocess.run(argv, capture_output=True, text=True, check=False)
            if r.returncode != 0:
                problems.append(f"{what}: {r.stderr.strip()}")
        for problem in problems:
            progress(f"teardown: {problem}")
        final["teardown_problems"] = problems
        return final


def _feature_on(shown: str, feature: str) -> bool:
    names = {"tso": "tcp-segmentation-offload", "gso": "generic-segmentation-offload",
             "gro": "generic-receive-offload", "tx": "tx-checksumming"}  # fmt: skip
    for line in shown.splitlines():
        name, _, value = line.strip().partition(":")
        if name == names[feature]:
            return value.split()[0] == "on"
    raise BenchError(f"ethtool -k shows no {names[feature]}")


def _mac(side: Side) -> str:
    shown = run(["ip", "-n", side.netns, "-j", "link", "show", side.ifname]).stdout
    return str(json.loads(shown)[0]["address"])
