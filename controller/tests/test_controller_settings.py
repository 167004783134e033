from pathlib import Path

import pytest
from pydantic import ValidationError
from srv6pm.common.settings import markdown, parse
from srv6pm.controller.config import Settings

DOC = Path(__file__).parents[2] / "docs" / "CONFIGURATION.md"


def test_configuration_doc_lists_every_controller_setting_as_the_code_defines_it():
    assert markdown(Settings) in DOC.read_text()


def test_environment_and_flags_configure_the_controller(monkeypatch):
    monkeypatch.setenv("SRV6PM_DATABASE_URL", "postgresql+psycopg://u@db/srv6pm")
    settings = parse(Settings, ["--marking-mode", "dscp", "--resync-s", "5"], "t", None)
    assert settings.database_url == "postgresql+psycopg://u@db/srv6pm"
    assert (settings.marking_mode.value, settings.resync_s) == ("dscp", 5.0)


def test_mutual_tls_needs_all_three_files():
    with pytest.raises(ValidationError, match="tls_ca, tls_cert and tls_key together"):
        Settings(tls_ca=Path("/ca.pem"))
