"""Writes points to InfluxDB through the official client's v2 write API (InfluxDB 1.8's
/api/v2/write compatibility endpoint, 2.x and 3.x alike)."""

from __future__ import annotations

from influxdb_client.client.influxdb_client import InfluxDBClient
from influxdb_client.client.write_api import SYNCHRONOUS
from influxdb_client.rest import ApiException
from urllib3.exceptions import HTTPError


class WriteRefused(Exception):
    """InfluxDB refused the points themselves (HTTP 400): writing them again cannot help."""


class WriteFailed(Exception):
    """InfluxDB did not take the points (down, overloaded, misconfigured): retry later."""


class InfluxSink:
    def __init__(self, url: str, token: str, org: str, bucket: str, timeout_ms: int) -> None:
        self._client = InfluxDBClient(url=url, token=token, org=org, timeout=timeout_ms)
        self._write = self._client.write_api(write_options=SYNCHRONOUS)
        self._bucket = bucket

    def write(self, lines: list[str]) -> None:
        try:
            self._write.write(
                self._bucket,
                record="\n".join(lines),
                write_precision="ns",  # type: ignore[arg-type]
            )
        except ApiException as e:
            if e.status == 400:
                raise WriteRefused(_message(e)) from None
            raise WriteFailed(f"HTTP {e.status}: {_message(e)}") from None
        except (HTTPError, OSError) as e:
            raise WriteFailed(f"{type(e).__name__}: {e}") from None

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]


def _message(e: ApiException) -> str:
    body = e.body.decode() if isinstance(e.body, bytes) else str(e.body or e.reason)
    return body.strip()[:500]
