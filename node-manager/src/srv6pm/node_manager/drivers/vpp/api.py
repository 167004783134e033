"""The VPP binary API through vpp-papi: one connection, serialised, re-opened when VPP goes away.

vpp-papi raises an OSError (VPPIOError, VppTransportSocketIOError) on a dead socket; a call that
meets one connects again, lets the driver bring the new VPP up to date (`on_connect`), and is
sent once more. A reply's non-zero `retval` is VPP's refusal: :class:`VppRefused`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from vpp_papi import VPPApiClient

from ...domain.errors import FailedPrecondition

log = logging.getLogger(__name__)

CLIENT_NAME = "srv6pm-node-manager"
NO_INDEX = 0xFFFFFFFF  # ~0: "none" in VPP's u32 indices


class VppRefused(FailedPrecondition):
    """VPP answered a request with a non-zero retval."""

    def __init__(self, message: str, retval: int, reply: Any = None) -> None:
        super().__init__(f"VPP refused {message}: retval {retval}")
        self.retval = retval
        self.reply = reply  # what else the reply says (e.g. how much of a batch was done)


class VppApi:
    """A serialised connection to VPP's API socket. `on_connect` runs after every (re)connection,
    before the call that needed it is sent, with the lock held: it may call this object."""

    def __init__(
        self, socket: Path, api_files: Iterable[Path], client_name: str = CLIENT_NAME
    ) -> None:
        self._socket = socket
        self._name = client_name
        self._client = VPPApiClient(
            apifiles=[str(f) for f in api_files], server_address=str(socket)
        )
        self._lock = threading.RLock()
        self._connected = False
        self._connecting = False
        self.on_connect: Callable[[], None] = lambda: None

    def connect(self) -> None:
        with self._lock:
            if not self._connected:
                self._open()

    def _open(self) -> None:
        with contextlib.suppress(Exception):  # whatever state the old transport is in
            self._client.disconnect()
        try:
            self._client.connect(self._name)
        except OSError as e:
            raise FailedPrecondition(f"VPP does not answer on {self._socket}: {e}") from None
        self._connected = True
        log.info("connected to VPP socket=%s", self._socket)
        if self._connecting:
            return
        self._connecting = True
        try:
            self.on_connect()
        except BaseException:
            self._connected = False
            raise
        finally:
            self._connecting = False

    def ping(self) -> None:
        """Make sure VPP answers (and, if it is another VPP than before, is brought up to date
        by `on_connect`)."""
        self.call("control_ping")

    def has(self, message: str) -> bool:
        """Does this VPP know `message` (a plugin not loaded defines none of its own)?"""
        with self._lock:
            self.connect()
            return hasattr(self._client.api, message)

    def call(self, message: str, **kwargs: Any) -> Any:
        """The reply to `message`; :class:`VppRefused` if its retval is not 0."""
        reply = self._send(message, kwargs)
        retval = int(getattr(reply, "retval", 0))
        if retval != 0:
            raise VppRefused(_describe(message, kwargs), retval, reply)
        return reply

    def dump(self, message: str, **kwargs: Any) -> list[Any]:
        """The details of a dump request, as a list."""
        return list(self._send(message, kwargs))

    def _send(self, message: str, kwargs: dict[str, Any]) -> Any:
        """Send once more, on a new connection, if the first finds the connection dead."""
        with self._lock:
            try:
                return self._send_once(message, kwargs)
            except OSError as e:
                log.warning("VPP connection lost socket=%s error=%s", self._socket, e)
            try:
                return self._send_once(message, kwargs)
            except OSError as e:
                raise FailedPrecondition(f"VPP does not answer on {self._socket}: {e}") from None

    def _send_once(self, message: str, kwargs: dict[str, Any]) -> Any:
        if not self._connected:
            self._open()
        try:
            return getattr(self._client.api, message)(**kwargs)
        except OSError:
            self._connected = False
            raise

    @property
    def lock(self) -> threading.RLock:
        """Held through a change made of several requests, so that a reconnection (which
        installs the saved state again) never runs in the middle of one."""
        return self._lock

    def close(self) -> None:
        with self._lock:
            if self._connected:
                with contextlib.suppress(Exception):
                    self._client.disconnect()
            self._connected = False


def _describe(message: str, kwargs: dict[str, Any]) -> str:
    shown = ", ".join(
        f"{k}={v}" for k, v in kwargs.items() if k not in ("sids", "segments", "flows")
    )
    return f"{message}({shown})"
