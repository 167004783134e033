"""Controller settings: environment variables SRV6PM_*, a YAML file, or command-line flags."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from srv6pm.common import settings
from srv6pm.common.srv6 import MarkingMode


class Settings(BaseSettings):
    """Every setting of the controller, with defaults that run against local servers."""

    model_config = SettingsConfigDict(env_prefix="SRV6PM_", extra="forbid")

    database_url: str = Field(
        "sqlite:////var/lib/srv6pm/controller/controller.db",
        description="Desired state: a SQLite file, or postgresql+psycopg://user:pw@host/db.",
    )
    listen: str = Field("127.0.0.1:8080", description="REST API listen address host:port.")
    marking_mode: MarkingMode = Field(
        MarkingMode.ALTMARK, description="Alternate marking of the whole domain: altmark or dscp."
    )
    tls_ca: Path | None = Field(
        None,
        description="CA that signs the node managers' certificates.",
        json_schema_extra={"doc_default": "(none: plaintext)"},
    )
    tls_cert: Path | None = Field(
        None,
        description="The controller's client certificate (mTLS).",
        json_schema_extra={"doc_default": "(none: plaintext)"},
    )
    tls_key: Path | None = Field(
        None,
        description="The client certificate's private key.",
        json_schema_extra={"doc_default": "(none: plaintext)"},
    )
    tls_server_name: str = Field(
        "",
        description="Name every node manager's certificate is checked against (one certificate "
        "shared by a whole DaemonSet); '' = each node's address.",
    )
    stamp_key_file: Path | None = Field(
        None,
        description="File with a hex HMAC-SHA-256 key (16 to 64 octets, e.g. a mounted Secret) "
        "for STAMP sessions created without hmac_key: authenticated unless a session says ''.",
        json_schema_extra={"doc_default": "(none: unauthenticated)"},
    )
    reconcile: bool = Field(
        True,
        description="Push the desired state to the node managers. false: the API stores and "
        "serves it but no node is contacted (to stage a fleet, or a read-only replica).",
    )
    resync_s: float = Field(
        30.0, gt=0, description="How often each node is checked for drift (a dry-run ApplyState)."
    )
    apply_timeout_s: float = Field(60.0, gt=0, description="Deadline of one ApplyState.")
    info_timeout_s: float = Field(5.0, gt=0, description="Deadline of one GetInfo.")
    influx_url: str = Field(
        "http://127.0.0.1:8086", description="InfluxDB the results are read from."
    )
    influx_database: str = Field("srv6pm", description="InfluxDB database (or DBRP-mapped bucket).")
    influx_token: str = Field("", description="InfluxDB token ('' without auth).")
    thresholds_every_s: float = Field(10.0, gt=0, description="How often objectives are evaluated.")
    bootstrap_token: str = Field(
        "",
        description="An admin API token installed at start if no token named 'bootstrap' exists "
        "(a deployment's secret; '' = none: create tokens with `srv6pm-controller token`).",
    )
    log_level: str = Field("INFO", description="Python logging level.")

    @model_validator(mode="after")
    def _tls_all_or_none(self) -> Settings:
        given = [self.tls_ca, self.tls_cert, self.tls_key]
        if any(given) and not all(given):
            raise ValueError("mTLS needs tls_ca, tls_cert and tls_key together")
        if self.tls_server_name and not any(given):
            raise ValueError("tls_server_name needs mTLS (tls_ca, tls_cert, tls_key)")
        return self

    @model_validator(mode="after")
    def _stamp_key_readable(self) -> Settings:
        self.stamp_key()  # a bad key stops the start, not the first session
        return self

    def stamp_key(self) -> bytes:
        """The default STAMP HMAC key (b"" without stamp_key_file)."""
        if self.stamp_key_file is None:
            return b""
        try:
            key = bytes.fromhex(self.stamp_key_file.read_text().strip())
        except OSError as e:
            raise ValueError(f"stamp_key_file: {e.strerror}: {self.stamp_key_file}") from e
        except ValueError:
            raise ValueError(f"stamp_key_file {self.stamp_key_file}: not hex") from None
        if not 16 <= len(key) <= 64:
            raise ValueError(
                f"stamp_key_file {self.stamp_key_file}: {len(key)} octets, needs 16 to 64"
            )
        return key


if __name__ == "__main__":
    print(settings.markdown(Settings), end="")
