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


def test_tls_server_name_needs_mutual_tls():
    with pytest.raises(ValidationError, match="tls_server_name needs mTLS"):
        Settings(tls_server_name="srv6pm-node-manager")


def test_the_default_stamp_key_is_read_and_checked_at_start(tmp_path):
    key = tmp_path / "stamp.key"
    key.write_text("ab" * 32 + "\n")
    assert Settings(stamp_key_file=key).stamp_key() == b"\xab" * 32
    assert Settings().stamp_key() == b""
    for content, error in (("zz" * 16, "not hex"), ("ab" * 8, "8 octets, needs 16 to 64")):
        key.write_text(content)
        with pytest.raises(ValidationError, match=error):
            Settings(stamp_key_file=key)
    with pytest.raises(ValidationError, match="No such file"):
        Settings(stamp_key_file=tmp_path / "missing")
