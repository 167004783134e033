"""An InfluxQL query type for the Grafana foundation SDK, which ships none for InfluxDB.

Built the way the SDK documents for third-party query types: a ``Dataquery`` variant that
serialises to the JSON Grafana's InfluxDB data source stores for a raw InfluxQL query
(``query`` + ``rawQuery``, as its query editor writes in "raw" mode), a builder implementing
``Builder[Dataquery]``, and a registration so ``Dashboard.from_json`` reads such targets back as
this type rather than as an opaque bag.
"""

from __future__ import annotations

import enum
from typing import Any, Self

from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import runtime as cogruntime
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models.dashboard import AnnotationQuery, DataSourceRef

DATASOURCE_TYPE = "influxdb"


class ResultFormat(enum.StrEnum):
    """How Grafana shapes the InfluxDB response (the data source's ``resultFormat``)."""

    TIME_SERIES = "time_series"
    TABLE = "table"
    LOGS = "logs"


class InfluxQLQuery(cogvariants.Dataquery):
    """One raw InfluxQL target of a panel."""

    def __init__(
        self,
        query: str = "",
        ref_id: str = "",
        hide: bool | None = None,
        datasource: DataSourceRef | None = None,
        result_format: ResultFormat | None = None,
        alias: str | None = None,
        raw_query: bool = True,
    ) -> None:
        self.query = query
        self.ref_id = ref_id
        self.hide = hide
        self.datasource = datasource
        self.result_format = result_format
        self.alias = alias
        # Without rawQuery Grafana would rebuild the query from its (empty) visual-editor model.
        self.raw_query = raw_query

    def to_json(self) -> dict[str, object]:
        payload: dict[str, object] = {
            "refId": self.ref_id,
            "query": self.query,
            "rawQuery": self.raw_query,
        }
        if self.hide is not None:
            payload["hide"] = self.hide
        if self.datasource is not None:
            payload["datasource"] = self.datasource
        if self.result_format is not None:
            payload["resultFormat"] = self.result_format
        if self.alias is not None:
            payload["alias"] = self.alias
        return payload

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        return cls(
            query=data.get("query", ""),
            ref_id=data.get("refId", ""),
            hide=data.get("hide"),
            datasource=(
                DataSourceRef.from_json(data["datasource"]) if "datasource" in data else None
            ),
            result_format=(ResultFormat(data["resultFormat"]) if "resultFormat" in data else None),
            alias=data.get("alias"),
            raw_query=data.get("rawQuery", True),
        )


class InfluxQL(cogbuilder.Builder[cogvariants.Dataquery]):
    """Builder for ``InfluxQLQuery``: ``InfluxQL('SELECT ...').ref_id('A').table()``."""

    def __init__(self, query: str) -> None:
        self._internal = InfluxQLQuery(query=query, result_format=ResultFormat.TIME_SERIES)

    def build(self) -> InfluxQLQuery:
        return self._internal

    def ref_id(self, ref_id: str) -> Self:
        self._internal.ref_id = ref_id
        return self

    def hide(self, hide: bool) -> Self:
        self._internal.hide = hide
        return self

    def datasource(self, datasource: DataSourceRef) -> Self:
        self._internal.datasource = datasource
        return self

    def result_format(self, result_format: ResultFormat) -> Self:
        self._internal.result_format = result_format
        return self

    def table(self) -> Self:
        return self.result_format(ResultFormat.TABLE)

    def alias(self, alias: str) -> Self:
        """Series name pattern: ``$tag_<key>``, ``$col`` (column), ``$m`` (measurement)."""
        self._internal.alias = alias
        return self


class InfluxQLAnnotationTarget:
    """What Grafana's InfluxDB data source stores as an annotation's InfluxQL query: the query
    and the result columns that become each event's text and tags (its annotation editor's
    fields; a SDK AnnotationTarget has only the built-in Grafana source's)."""

    def __init__(self, query: str, text_column: str, tags_column: str) -> None:
        self.query = query
        self.text_column = text_column
        self.tags_column = tags_column

    def to_json(self) -> dict[str, object]:
        return {
            "refId": "Anno",
            "query": self.query,
            "rawQuery": True,
            "fromAnnotations": True,
            "textColumn": self.text_column,
            "tagsColumn": self.tags_column,
        }


class InfluxQLAnnotation(cogbuilder.Builder[AnnotationQuery]):
    """Builder of a dashboard annotation whose events come from an InfluxQL query."""

    def __init__(
        self,
        name: str,
        query: str,
        datasource: DataSourceRef,
        *,
        text_column: str,
        tags_column: str,
    ) -> None:
        self._internal = AnnotationQuery(name=name, datasource=datasource, enable=True)
        self._internal.target = InfluxQLAnnotationTarget(  # type: ignore[assignment]
            query, text_column, tags_column
        )

    def build(self) -> AnnotationQuery:
        return self._internal

    def color(self, color: str) -> Self:
        self._internal.icon_color = color
        return self


def register() -> None:
    """Let the SDK's JSON decoding map ``influxdb`` targets to ``InfluxQLQuery``."""
    cogruntime.register_dataquery_variant(
        cogruntime.DataqueryConfig(
            identifier=DATASOURCE_TYPE, from_json_hook=InfluxQLQuery.from_json
        )
    )
