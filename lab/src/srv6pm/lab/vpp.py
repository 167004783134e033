"""A VPP process inside a network namespace, as the lab runs one per VPP router: its own
startup configuration and API, CLI and stats sockets (several run side by side), no hugepages,
the namespace's veths attached through af_packet, srv6pm's plugin loaded. The main thread does
everything (no workers) and sleeps while no packet comes, so a lab of several VPPs leaves the
machine's cores to the traffic."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .errors import LabError
from .network import NETNS_DIR

VPP_PREFIX = Path(os.environ.get("SRV6PM_VPP_PREFIX", "/opt/vpp"))
VPP_PLUGINS = VPP_PREFIX / "lib/x86_64-linux-gnu/vpp_plugins"
VPP_API_FILES = VPP_PREFIX / "share/vpp/api"
START_TIMEOUT_S = 20.0
# VPP's own plugins a lab router uses: af_packet for the veths, ping for diagnosis.
PLUGINS = ("af_packet_plugin.so", "ping_plugin.so")


def srv6pm_plugin_dir() -> Path:
    """Where `make vpp-plugin` puts srv6pm_plugin.so and its API file."""
    return Path(str(resources.files("srv6pm.node_manager") / "drivers" / "vpp" / "plugin"))


@dataclass(frozen=True)
class VppSockets:
    """An instance's sockets: binary API (vpp-papi), CLI (vppctl), stats segment."""

    api: Path
    cli: Path
    stats: Path


class VppProcess:
    """VPP `name` in network namespace `netns`, its sockets and log in `run_dir`."""

    def __init__(self, name: str, netns: str, run_dir: Path) -> None:
        self.name = name
        self.netns = netns
        self.run_dir = run_dir
        self.sockets = VppSockets(
            run_dir / f"{name}-api.sock", run_dir / f"{name}-cli.sock", run_dir / f"{name}-stats.sock"
        )
        self.config_file = run_dir / f"{name}-vpp.conf"
        self.log_file = run_dir / f"{name}-vpp.log"

    def config(self) -> str:
        plugin_dir = srv6pm_plugin_dir()
        plugins = " ".join(f"plugin {p} {{ enable }}" for p in (*PLUGINS, "srv6pm_plugin.so"))
        return f"""\
unix {{ nodaemon cli-listen {self.sockets.cli} log {self.log_file} poll-sleep-usec 100 }}
api-segment {{ prefix {self.netns} }}
socksvr {{ socket-name {self.sockets.api} }}
memory {{ main-heap-size 256M main-heap-page-size 4k }}
buffers {{ buffers-per-numa 16384 page-size 4k }}
statseg {{ size 32M page-size 4k socket-name {self.sockets.stats} }}
plugins {{ path {VPP_PLUGINS}:{plugin_dir} plugin default {{ disable }} {plugins} }}
"""

    def start(self) -> int:
        """Start VPP detached from us (it outlives this process, like the node managers) and
        wait until its CLI answers; its PID."""
        if not (VPP_PREFIX / "bin/vpp").exists():
            raise LabError(f"no VPP in {VPP_PREFIX}: run `make vpp-plugin` (docs/VPP.md)")
        if not (srv6pm_plugin_dir() / "srv6pm_plugin.so").exists():
            raise LabError(f"srv6pm_plugin.so is not in {srv6pm_plugin_dir()}: run `make vpp-plugin`")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for sock in (self.sockets.api, self.sockets.cli, self.sockets.stats):
            sock.unlink(missing_ok=True)
        self.config_file.write_text(self.config())
        with open(self.run_dir / f"{self.name}-vpp.out", "ab") as out:
            proc = subprocess.Popen(
                ["nsenter", f"--net={NETNS_DIR / self.netns}", str(VPP_PREFIX / "bin/vpp"),
                 "-c", str(self.config_file)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise LabError(f"VPP {self.name} exited with {proc.returncode}: see {self.log_file}")
            if self.sockets.api.exists() and self.sockets.stats.exists():
                try:
                    self.cli("show version")
                    return proc.pid
                except LabError:
                    pass
            time.sleep(0.1)
        proc.kill()
        raise LabError(f"VPP {self.name} did not answer within {START_TIMEOUT_S:g} s")

    def cli(self, *commands: str) -> str:
        """Run CLI commands in order; their output. :class:`LabError` if one reports an error
        (VPP's CLI exits 0 either way; its errors start with the command's name or `unknown`)."""
        out = []
        for command in commands:
            r = subprocess.run(
                [str(VPP_PREFIX / "bin/vppctl"), "-s", str(self.sockets.cli), command],
                capture_output=True, text=True, check=False, timeout=10,
            )  # fmt: skip
            text = r.stdout.strip()
            if r.returncode != 0 or text.startswith(("unknown input", "vppctl:")) or (
                "error" in text.lower().split(":", 1)[0]
            ):
                raise LabError(f"VPP {self.name}: `{command}` failed: {text or r.stderr.strip()}")
            out.append(text)
        return "\n".join(out)


def stop(pid: int, timeout: float = 5.0) -> None:
    """Stop the VPP of `pid` (SIGTERM, then SIGKILL); nothing if it is gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
