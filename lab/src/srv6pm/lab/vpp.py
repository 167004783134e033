"""A VPP process inside a network namespace, as the lab runs one per VPP router: its own
startup configuration and API, CLI and stats sockets (several run side by side), no hugepages,
the namespace's veths attached through af_packet, srv6pm's plugin loaded when it is built.

The main thread does everything (no workers). It polls the veths (rx-mode polling, TPACKET_V2
rings: a packet is seen as it comes, where TPACKET_V3's blocks hold it up to 1 ms) and sleeps
100 us between empty polls (``poll-sleep-usec``): about 9 % of a core for an idle VPP, and at most
that much added latency. Interrupt rx-mode, which would cost nothing idle, lost packets here (40 %
of a ping every 10 ms, VPP 26.06 af_packet)"""

from __future__ import annotations

import contextlib
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
SRV6PM_PLUGIN = "srv6pm_plugin.so"


def srv6pm_plugin_dir() -> Path:
    """Where `make vpp-plugin` puts srv6pm_plugin.so and its API file."""
    return Path(str(resources.files("srv6pm.node_manager") / "drivers" / "vpp" / "plugin"))


def srv6pm_plugin_built() -> bool:
    """True if srv6pm's VPP plugin has been built (`make vpp-plugin`)."""
    return (srv6pm_plugin_dir() / SRV6PM_PLUGIN).exists()


def check_installed() -> None:
    """:class:`LabError` unless VPP is installed in :data:`VPP_PREFIX`."""
    for tool in ("vpp", "vppctl", "vat2"):
        if not (VPP_PREFIX / "bin" / tool).exists():
            raise LabError(
                f"no {tool} in {VPP_PREFIX}/bin: run scripts/install-vpp.sh (docs/VPP.md)"
            )


@dataclass(frozen=True)
class VppSockets:
    """An instance's sockets: binary API (vpp-papi), CLI (vppctl), stats segment."""

    api: Path
    cli: Path
    stats: Path


class VppProcess:
    """VPP ``name`` in network namespace ``netns``, its sockets and log in ``run_dir``.

    With ``srv6pm_plugin`` it loads srv6pm's plugin (:class:`LabError` at :meth:`launch` if it
    is not built); the node manager's vpp driver needs it, plain forwarding does not."""

    def __init__(self, name: str, netns: str, run_dir: Path, srv6pm_plugin: bool = True) -> None:
        self.name = name
        self.netns = netns
        self.run_dir = run_dir
        self.srv6pm_plugin = srv6pm_plugin
        self.sockets = VppSockets(
            run_dir / f"{name}-api.sock",
            run_dir / f"{name}-cli.sock",
            run_dir / f"{name}-stats.sock",
        )
        self.config_file = run_dir / f"{name}-vpp.conf"
        self.log_file = run_dir / f"{name}-vpp.log"
        self.output_file = run_dir / f"{name}-vpp.out"

    @property
    def api_prefix(self) -> str:
        """The shared-memory prefix of its binary API (``/dev/shm/<prefix>-*``): the namespace's
        name, unique per lab and router."""
        return self.netns

    def config(self) -> str:
        """The startup configuration."""
        names = [*PLUGINS, *([SRV6PM_PLUGIN] if self.srv6pm_plugin else [])]
        plugins = " ".join(f"plugin {p} {{ enable }}" for p in names)
        path = f"{VPP_PLUGINS}:{srv6pm_plugin_dir()}" if self.srv6pm_plugin else f"{VPP_PLUGINS}"
        return f"""\
unix {{ nodaemon nosyslog cli-listen {self.sockets.cli} log {self.log_file} poll-sleep-usec 100 }}
api-segment {{ prefix {self.api_prefix} }}
socksvr {{ socket-name {self.sockets.api} }}
memory {{ main-heap-size 256M main-heap-page-size 4k }}
buffers {{ buffers-per-numa 16384 page-size 4k }}
statseg {{ size 32M page-size 4k socket-name {self.sockets.stats} }}
plugins {{ path {path} plugin default {{ disable }} {plugins} }}
"""

    def launch(self) -> subprocess.Popen[bytes]:
        """Start VPP detached from us (it outlives this process, like the node managers); the
        caller records its PID, then calls :meth:`wait_ready`."""
        check_installed()
        if self.srv6pm_plugin and not srv6pm_plugin_built():
            raise LabError(
                f"{SRV6PM_PLUGIN} is not in {srv6pm_plugin_dir()}: run `make vpp-plugin`"
            )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for sock in (self.sockets.api, self.sockets.cli, self.sockets.stats):
            sock.unlink(missing_ok=True)
        self.config_file.write_text(self.config())
        with open(self.output_file, "ab") as out:
            return subprocess.Popen(
                ["nsenter", f"--net={NETNS_DIR / self.netns}", str(VPP_PREFIX / "bin/vpp"),
                 "-c", str(self.config_file)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def wait_ready(self, proc: subprocess.Popen[bytes], timeout: float = START_TIMEOUT_S) -> None:
        """Wait until its CLI answers."""
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise LabError(
                    f"VPP {self.name} exited with {proc.returncode}: see {self.output_file}"
                )
            if self.sockets.api.exists() and self.sockets.stats.exists():
                try:
                    self.cli("show version")
                    break
                except LabError:
                    pass
            if time.monotonic() > deadline:
                raise LabError(f"VPP {self.name} did not answer within {timeout:g} s")
            time.sleep(0.1)

    def cli(self, *commands: str) -> str:
        """Run CLI commands in order; their output. :class:`LabError` if one reports an error
        (VPP's CLI exits 0 either way; see :func:`cli_error`)."""
        out = []
        for command in commands:
            r = subprocess.run(
                [str(VPP_PREFIX / "bin/vppctl"), "-s", str(self.sockets.cli), command],
                capture_output=True, text=True, check=False, timeout=10,
            )  # fmt: skip
            text = r.stdout.strip()
            if r.returncode != 0 or cli_error(command, text):
                raise LabError(f"VPP {self.name}: `{command}` failed: {text or r.stderr.strip()}")
            out.append(text)
        return "\n".join(out)


def cli_error(command: str, output: str) -> bool:
    """True if ``output`` is VPP's CLI reporting an error for ``command``: ``unknown input``,
    or the command's path (its first words) then a colon, as in ``set interface ip address:
    unknown interface``. vppctl's own failures start with ``vppctl:``."""
    first = output.split("\n", 1)[0]
    if first.startswith(("unknown input", "vppctl:")):
        return True
    path, colon, _ = first.partition(":")
    words = path.split()
    return bool(colon and words and command.split()[: len(words)] == words)


def is_vpp(pid: int, config_file: Path) -> bool:
    """True if ``pid`` is alive and is the VPP started with ``config_file``: the check that
    keeps a reused PID from being killed."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return not _exited(pid) and str(config_file).encode() in cmdline


def stop(pid: int, config_file: Path, timeout: float = 5.0) -> None:
    """Stop the VPP of ``pid`` started with ``config_file`` (SIGTERM, then SIGKILL); nothing if
    it is gone. :class:`LabError` if it does not die."""
    if not is_vpp(pid, config_file):
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # not is_vpp(): an exiting process has an empty cmdline before it is a zombie
            if _exited(pid):
                return
            time.sleep(0.05)
    raise LabError(f"VPP (pid {pid}) does not die")


def _exited(pid: int) -> bool:
    """True if ``pid`` is gone or a zombie; a zombie child of ours is reaped on the way."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")
