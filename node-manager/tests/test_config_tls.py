"""The node manager serves plaintext gRPC on loopback only: anywhere else it needs mutual TLS
(tls_ca, tls_cert and tls_key, all three)."""

from pathlib import Path

import pytest
from pydantic import ValidationError
from srv6pm.node_manager.config import Settings, is_loopback
from srv6pm.node_manager.server import StartupError, server_credentials

TLS = {"tls_ca": "/etc/srv6pm/ca.pem", "tls_cert": "/etc/srv6pm/r1.pem", "tls_key": "/k.pem"}
# a unix socket is local too, reached through the file system's permissions only
LOOPBACK = [
    "127.0.0.1:50051",
    "127.8.9.10:50051",
    "[::1]:50051",
    "localhost:50051",
    "unix:/run/srv6pm.sock",
]
NOT_LOOPBACK = [
    "0.0.0.0:50051",
    "[::]:50051",
    ":50051",
    "192.0.2.1:50051",
    "[2001:db8::1]:50051",
    "router.example.net:50051",
]


@pytest.mark.parametrize("listen", LOOPBACK)
def test_plaintext_is_allowed_on_loopback(listen):
    settings = Settings(listen=listen)
    assert is_loopback(listen) and not settings.tls


@pytest.mark.parametrize("listen", NOT_LOOPBACK)
def test_plaintext_off_loopback_is_refused_with_what_to_set(listen):
    assert not is_loopback(listen)
    with pytest.raises(ValidationError) as e:
        Settings(listen=listen)
    message = str(e.value)
    assert f"listen {listen!r} is not a loopback address and TLS is off" in message
    assert "--tls-ca/--tls-cert/--tls-key" in message and "listen on 127.0.0.1" in message


@pytest.mark.parametrize("listen", NOT_LOOPBACK[:2] + LOOPBACK[:1])
def test_mutual_tls_is_allowed_anywhere(listen):
    settings = Settings(listen=listen, **TLS)
    assert settings.tls and settings.tls_key == Path("/k.pem")


@pytest.mark.parametrize("listen", ["127.0.0.1:50051", "[::]:50051"])
@pytest.mark.parametrize("unset", [("tls_ca",), ("tls_key",), ("tls_cert", "tls_key")])
def test_partial_tls_settings_are_refused_naming_what_is_missing(listen, unset):
    partial = {k: v for k, v in TLS.items() if k not in unset}
    with pytest.raises(ValidationError, match="needs tls_ca, tls_cert and tls_key together") as e:
        Settings(listen=listen, **partial)
    assert f"{' and '.join(unset)} {'is' if len(unset) == 1 else 'are'} not set" in str(e.value)


def test_tls_comes_from_the_environment_too(monkeypatch):
    monkeypatch.setenv("SRV6PM_LISTEN", "[::]:50051")
    for name, value in TLS.items():
        monkeypatch.setenv(f"SRV6PM_{name.upper()}", value)
    assert Settings().tls_ca == Path(TLS["tls_ca"])


def test_unreadable_tls_file_is_a_startup_error_naming_setting_and_file(tmp_path):
    pem = tmp_path / "ok.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    missing = tmp_path / "missing.key"
    settings = Settings(tls_ca=pem, tls_cert=pem, tls_key=missing)
    with pytest.raises(StartupError, match=f"cannot read tls_key {missing}: No such file"):
        server_credentials(settings)
    (tmp_path / "not.pem").write_text("hello")
    settings = Settings(tls_ca=tmp_path / "not.pem", tls_cert=pem, tls_key=pem)
    with pytest.raises(StartupError, match=r"tls_ca .*not\.pem is not PEM"):
        server_credentials(settings)


def test_no_tls_settings_means_no_server_credentials():
    assert server_credentials(Settings()) is None
