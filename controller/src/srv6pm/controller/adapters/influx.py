"""Results as the collector wrote them to InfluxDB (docs/RESULTS.md), read with InfluxQL over the
HTTP /query endpoint that InfluxDB 1.8, 2.x (DBRP) and 3.x all serve."""

from __future__ import annotations

from typing import Any

import httpx

from ..domain.errors import ResultsUnavailable


class InfluxResults:
    def __init__(self, url: str, database: str, token: str, timeout_s: float) -> None:
        headers = {"Authorization": f"Token {token}"} if token else {}
        self._client = httpx.Client(base_url=url, headers=headers, timeout=timeout_s)
        self._database = database

    def query(self, influxql: str) -> list[dict[str, Any]]:
        """The series of one statement: [{"name", "tags", "columns", "values"}], times in ns."""
        try:
            reply = self._client.get(
                "/query", params={"db": self._database, "q": influxql, "epoch": "ns"}
            )
        except httpx.HTTPError as e:
            raise ResultsUnavailable(f"InfluxDB {self._client.base_url}: {e}") from e
        if reply.status_code != 200:
            raise ResultsUnavailable(
                f"InfluxDB {self._client.base_url} answered {reply.status_code}: {reply.text[:200]}"
            )
        result = reply.json()["results"][0]
        if "error" in result:
            raise ResultsUnavailable(f"InfluxDB: {result['error']}")
        return list(result.get("series", []))

    def rows(self, influxql: str) -> list[dict[str, Any]]:
        """The points of one statement as dicts (tags of GROUP BY included)."""
        out = []
        for series in self.query(influxql):
            tags = series.get("tags", {})
            for values in series["values"]:
                out.append({**tags, **dict(zip(series["columns"], values, strict=True))})
        return out

    def close(self) -> None:
        self._client.close()
