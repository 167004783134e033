"""The one runner every lab server shares: start a process from a working directory the caller
owns, wait until it serves, stop it (or SIGKILL it, as a crash would) by its PID only, and tell
its log's tail when it fails; and free ports to give it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import Any, Self

LOG_TAIL_LINES = 30


class ServerError(RuntimeError):
    """A server is not installed, did not start, or refused a request."""


def cache_dir() -> Path:
    """Where the install scripts put the servers (read at each call: tests may override it)."""
    return Path(os.environ.get("SRV6PM_CACHE") or Path.home() / ".cache" / "srv6pm")


def free_port() -> int:
    """A TCP port on 127.0.0.1 free right now (not reserved: bind it soon)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def free_ports(n: int) -> list[int]:
    """n distinct free ports (the kernel may hand out a just-closed port again)."""
    ports: list[int] = []
    while len(ports) < n:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"({path} does not exist)"
    return "\n".join(text.splitlines()[-lines:])


class Server(ABC):
    """One server process started from a working directory, stopped by its PID only."""

    name: str
    stop_signal = signal.SIGTERM  # what stop() sends first

    def __init__(self, workdir: Path, start_timeout: float, stop_timeout: float) -> None:
        self.workdir = Path(workdir).resolve()
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.output_path = self.workdir / f"{self.name}.out"  # the process's stdout and stderr
        self.last_start_s: float | None = None  # how long the last start() took until serving
        self._proc: subprocess.Popen[bytes] | None = None

    @abstractmethod
    def _prepare(self) -> list[str]:
        """Write the configuration (and initialise storage once); the command to run."""

    @abstractmethod
    def _serving(self) -> bool:
        """One quick readiness probe."""

    def _logs(self) -> list[Path]:
        """Files whose tails explain a failure."""
        return [self.output_path]

    def _popen_options(self) -> dict[str, Any]:
        """More subprocess.Popen arguments for the server process (user, env, ...)."""
        return {}

    def _kill_process(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the server and reap it."""
        proc.kill()
        proc.wait()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(f"--- {p} ---\n{tail(p, lines)}" for p in self._logs())

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the server and return once it serves; ServerError (with its log) otherwise."""
        if self.running:
            raise ServerError(f"{self.name} is already running (pid {self.pid})")
        began = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        command = self._prepare()
        with self.output_path.open("ab") as out:
            # Own session: a terminal's Ctrl-C reaches the test runner, which stops the server
            # in order, not the server itself.
            self._proc = subprocess.Popen(
                command,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **self._popen_options(),
            )
        try:
            self._wait_serving(self._proc, began + self.start_timeout)
        except BaseException:
            self.kill()  # never leave a half-started server behind, even on Ctrl-C
            raise
        self.last_start_s = time.monotonic() - began

    def _wait_serving(self, proc: subprocess.Popen[bytes], deadline: float) -> None:
        while not self._serving():
            code = proc.poll()
            if code is not None:
                raise ServerError(f"{self.name} exited with code {code}\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise ServerError(
                    f"{self.name} did not serve within {self.start_timeout:.0f} s\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.1)

    def stop(self) -> None:
        """stop_signal (SIGTERM), then SIGKILL after stop_timeout; a no-op when not running."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(self.stop_signal)
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self._kill_process(proc)
        self._proc = None

    def kill(self) -> None:
        """SIGKILL, no shutdown at all: what a crash leaves on disk."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            self._kill_process(proc)
        self._proc = None

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
