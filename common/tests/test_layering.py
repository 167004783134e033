"""The layering contracts of pyproject.toml ([tool.importlinter], run by `make lint`) hold on the
real import graph, and each one breaks when one arrow of the kind it forbids is added to that
graph: a check that cannot fail would keep no layer apart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from grimp import ImportGraph
from importlinter import configuration
from importlinter.adapters.building import GraphBuilder
from importlinter.application.app_config import settings
from importlinter.application.use_cases import create_report, read_user_options
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract
from importlinter.domain.contract import registry

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"

# (importer, imported, the contract the arrow breaks)
WRONG_ARROWS = [
    (
        "srv6pm.controller.domain.paths",
        "srv6pm.controller.api.deps",
        "controller layers: api -> service -> adapters -> domain",
    ),
    (
        "srv6pm.controller.api.routes.nodes",
        "srv6pm.controller.adapters.sql.store",
        "controller api talks to service, never to adapters",
    ),
    (
        "srv6pm.node_manager.adapters.journal",
        "srv6pm.node_manager.service.node",
        "node manager layers: api -> service -> adapters/drivers -> domain",
    ),
    (
        "srv6pm.node_manager.api.servicer",
        "srv6pm.node_manager.drivers.base",
        "node manager api never reaches into adapters or a driver",
    ),
    (
        "srv6pm.node_manager.service.node",
        "srv6pm.node_manager.drivers.linux.driver",
        "node manager service sees the data plane only through drivers.base",
    ),
    (
        "srv6pm.collector.domain.points",
        "srv6pm.collector.service.pipeline",
        "collector layers: service -> adapters -> domain",
    ),
    (
        "srv6pm.controller.domain.derive",
        "srv6pm.proto.v1.node_manager_pb2",
        "domain cores are pure: no protobuf, gRPC, SQL, HTTP or kernel libraries",
    ),
    (
        "srv6pm.collector.domain.points",
        "confluent_kafka",
        "collector domain is pure: no Kafka, InfluxDB or HTTP libraries",
    ),
    (
        "srv6pm.node_manager.server",
        "srv6pm.lab.lab",
        "production code never imports the lab",
    ),
    (
        "srv6pm.controller.service.thresholds",
        "srv6pm.dashboards.alerts",
        "the controller never imports the dashboards package",
    ),
]


class OneGraph(GraphBuilder):
    """The real graph, built once for the module; tests add an arrow and take it away."""

    def __init__(self) -> None:
        self.graph: ImportGraph | None = None

    def build(self, *args: Any, **kwargs: Any) -> ImportGraph:
        if self.graph is None:
            self.graph = super().build(*args, **kwargs)
        return self.graph


@pytest.fixture(scope="module")
def builder() -> Iterator[OneGraph]:
    configuration.configure()
    registry.register(LayersContract, "layers")
    registry.register(ForbiddenContract, "forbidden")
    one = OneGraph()
    settings.configure(GRAPH_BUILDER=one)
    yield one
    configuration.configure()


def broken(builder: OneGraph) -> set[str]:
    report = create_report(read_user_options(str(PYPROJECT)), cache_dir=None)
    assert not report.could_not_run
    return {c.name for c, check in report.get_contracts_and_checks() if not check.kept}


def test_the_code_keeps_every_contract(builder):
    assert broken(builder) == set()


@pytest.mark.parametrize(("importer", "imported", "contract"), WRONG_ARROWS)
def test_a_wrong_arrow_breaks_its_contract(builder, importer, imported, contract):
    broken(builder)  # the graph, once
    assert builder.graph is not None
    assert imported not in builder.graph.find_modules_directly_imported_by(importer)
    builder.graph.add_import(importer=importer, imported=imported)
    try:
        assert contract in broken(builder)
    finally:
        builder.graph.remove_import(importer=importer, imported=imported)


def test_every_contract_is_shown_breaking_here(builder):
    report = create_report(read_user_options(str(PYPROJECT)), cache_dir=None)
    assert {c.name for c in report.contracts} == {contract for *_, contract in WRONG_ARROWS}
