"""A real InfluxDB 1.8 for tests, the demo and benchmarks: ``make servers``
(scripts/install-influxdb.sh) installs it into ``${SRV6PM_CACHE:-~/.cache/srv6pm}``."""

from __future__ import annotations

import http.client
import json
import os
import re
import urllib.parse
from pathlib import Path
from typing import Any

from .runner import Server, ServerError, cache_dir, free_ports

INFLUXDB_VERSION = "1.8.10"  # scripts/install-influxdb.sh
_INFLUX_DURATION = re.compile(r"INF|(\d+(ns|us|u|µ|ms|s|m|h|d|w))+")


def _influx_ident(name: str) -> str:
    """A double-quoted InfluxQL identifier."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


class InfluxServer(Server):
    """InfluxDB 1.8 on 127.0.0.1: InfluxQL on /query, the v2 compatibility API (/api/v2/write,
    usable by influxdb-client), no authentication, no Flux, no usage reporting."""

    name = "influxdb"

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        rpc_port: int | None = None,
        *,
        start_timeout: float = 60.0,
        stop_timeout: float = 30.0,
    ) -> None:
        super().__init__(workdir, start_timeout, stop_timeout)
        ports = free_ports(2)
        self.port = port or ports[0]
        self.rpc_port = rpc_port or next(p for p in ports if p != self.port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _binary(self) -> Path:
        binary = cache_dir() / f"influxdb-{INFLUXDB_VERSION}" / "bin" / "influxd"
        if not os.access(binary, os.X_OK):
            raise ServerError(
                f"influxd {INFLUXDB_VERSION} is not installed at {binary}: run `make servers`"
            )
        return binary

    def _prepare(self) -> list[str]:
        binary = self._binary()
        config = self.workdir / "influxdb.conf"
        d = self.workdir
        # influxd 1.8 logs to stderr only: start() sends it to influxdb.out in the directory.
        config.write_text(
            "\n".join(
                [
                    "reporting-disabled = true",
                    f"bind-address = {_toml_str(f'127.0.0.1:{self.rpc_port}')}",
                    "[meta]",
                    f"  dir = {_toml_str(str(d / 'meta'))}",
                    "[data]",
                    f"  dir = {_toml_str(str(d / 'data'))}",
                    f"  wal-dir = {_toml_str(str(d / 'wal'))}",
                    "  query-log-enabled = false",
                    "[monitor]",
                    "  store-enabled = false",  # no _internal database writes beside the test's
                    "[http]",
                    "  enabled = true",
                    f"  bind-address = {_toml_str(f'127.0.0.1:{self.port}')}",
                    "  auth-enabled = false",
                    "  flux-enabled = false",
                    f"  access-log-path = {_toml_str(str(d / 'access.log'))}",
                    "[logging]",
                    '  format = "logfmt"',
                    '  level = "info"',
                    "",
                ]
            )
        )
        return [str(binary), "run", "-config", str(config)]

    def _http(
        self, method: str, path: str, form: dict[str, str] | None = None, timeout: float = 30
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            if form is None:
                conn.request(method, path)
            else:
                body = urllib.parse.urlencode(form)
                headers = {"Content-Type": "application/x-www-form-urlencoded"}
                conn.request(method, path, body, headers)
            reply = conn.getresponse()
            return reply.status, reply.read()
        finally:
            conn.close()

    def _serving(self) -> bool:
        try:
            status, _ = self._http("GET", "/ping", timeout=1)
        except OSError:
            return False
        return status == 204

    def _query(self, q: str, db: str | None = None, epoch: str | None = None) -> list[Any]:
        form = {"q": q} | ({"db": db} if db else {}) | ({"epoch": epoch} if epoch else {})
        status, body = self._http("POST", "/query", form)  # POST runs every statement
        if status != 200:
            # InfluxDB explains a refused statement in a JSON body: {"error": "..."}
            detail = body.decode(errors="replace").strip()
            raise ServerError(f"InfluxQL {q!r}: HTTP {status} {detail}")
        results: list[Any] = json.loads(body).get("results", [])
        for result in results:
            if "error" in result:
                raise ServerError(f"InfluxQL {q!r}: {result['error']}")
        return results

    def create_database(
        self, name: str, retention_policy: str = "autogen", duration: str = "INF"
    ) -> None:
        """CREATE DATABASE with its default retention policy (duration: InfluxQL, e.g. 7d)."""
        if not _INFLUX_DURATION.fullmatch(duration):
            raise ValueError(f"not an InfluxQL duration: {duration!r}")
        self._query(
            f"CREATE DATABASE {_influx_ident(name)} WITH DURATION {duration} "
            f"NAME {_influx_ident(retention_policy)}"
        )

    def query(self, influxql: str, db: str, epoch: str | None = None) -> list[dict[str, Any]]:
        """The series of every statement's result ({"name", "columns", "values", "tags"?}),
        times in RFC 3339 or, with epoch ("ns", "u", "ms", "s", ...), integers."""
        return [s for r in self._query(influxql, db, epoch) for s in r.get("series", [])]
