"""Schemathesis against the app (ASGI, SQLite, the lab's fleet in place, an admin token): whatever
a client sends that the OpenAPI document allows, or nearly allows, the controller answers without
a server error, and its answers conform to the document. InfluxDB is a closed port: the results
routes may answer their documented 503, and nothing else of the 5xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from controller_fleet import S1, Api, add_lab, closed_port
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from srv6pm.controller.api.app import create_app
from srv6pm.controller.config import Settings
from srv6pm.controller.server import build

pytestmark = pytest.mark.slow

EXAMPLES = 25  # per operation: about 20 s for the whole API on 2 busy cores
TOKEN = "s6pm_schemathesis-admin-token"
CONFIG = {
    "seed": 20261123,
    "headers": {"Authorization": f"Bearer {TOKEN}"},
    "generation": {"max-examples": EXAMPLES},
    "phases": {"stateful": {"enabled": False}},
    "checks": {
        # Schema-valid is not domain-valid: a SID no node holds is a 422 problem by design.
        "positive_data_acceptance": {
            "expected-statuses": ["2xx", "401", "403", "404", "409", "422"]
        },
        # Unknown query parameters are ignored, as in most HTTP APIs (FastAPI's way).
        "negative_data_rejection": {"enabled": False},
        # Starlette's 405 lists the methods of one route of the path only (Allow: POST on
        # OPTIONS /v1/nodes, though GET is served too): the framework's, not checked here.
        "allow_header_conformance": {"enabled": False},
    },
}


# Loaded when the module is imported (schemathesis' lazy fixture loading needs a pytest < 9
# internal): the routes make the document, the services are put in place by each test.
APP = create_app(None)
schema = schemathesis.openapi.from_asgi(
    "/openapi.json", APP, config=schemathesis.Config.from_dict(CONFIG)
)


@pytest.fixture
def token(tmp_path: Path) -> Iterator[str]:
    """An admin token of a controller over a fresh SQLite file holding the lab and session s1."""
    services, store, influx = build(
        Settings(
            database_url=f"sqlite:///{tmp_path / 'controller.db'}",
            influx_url=f"http://127.0.0.1:{closed_port()}",
        ),
        reconcile=False,
    )
    APP.state.services = services
    services.auth.create("schemathesis", "admin", "test", TOKEN)
    with TestClient(APP) as client:
        add_lab(Api(client, TOKEN), (S1,))
    yield TOKEN
    APP.state.services = None
    influx.close()
    store.close()


@schema.parametrize()
# One controller per operation: its examples share the database, as a client's calls would.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
def test_the_api_answers_what_its_document_says(case, token):
    headers = {"Authorization": f"Bearer {token}"}
    response = case.call()
    excluded = []
    if response.status_code == 503:
        assert case.operation.tags == ["results"], case.operation.label
        assert json.loads(response.content)["title"] == "Results unavailable"
        excluded.append(not_a_server_error)
    case.validate_response(response, headers=headers, excluded_checks=excluded)
