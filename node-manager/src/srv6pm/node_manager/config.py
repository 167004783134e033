"""Node-manager settings: environment variables SRV6PM_*, a YAML file, or command-line flags."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from srv6pm.common import settings

from .domain.model import STEERING_MARKS
from .drivers import registry
from .service.desired import DEFAULT_STEERING_MARK_BASE


class Settings(BaseSettings):
    """Every setting of the node manager, with defaults that run on a single router."""

    model_config = SettingsConfigDict(env_prefix="SRV6PM_", extra="forbid")

    node_id: str = Field("node", description="Name of this router, reported by GetInfo.")
    listen: str = Field(
        "127.0.0.1:50051",
        description="gRPC listen address host:port, or unix:PATH. Anything but loopback or a "
        "unix socket needs mutual TLS (tls_ca, tls_cert, tls_key).",
    )
    driver: str = Field(
        registry.DEFAULT,
        description="Data plane driver: linux (netlink routes, eBPF marking and counting) or "
        "vpp (a VPP router: its binary API, srv6pm's VPP plugin for marking and counting). "
        "An unknown name stops the start with the list of known drivers.",
    )
    netns: str = Field("", description="Network namespace to program ('' = our own).")
    period_s: float = Field(10.0, gt=0, description="Marking period T in seconds.")
    guard_ms: int = Field(
        500,
        ge=0,
        description="Max path delay + clock skew: a block is read this long after "
        "it ends at the earliest. Must be below T/2.",
    )
    bpf_dir: Path = Field(
        Path("/sys/fs/bpf/srv6pm/node"),
        description="Where maps and programs are pinned (on a bpffs).",
    )
    state_dir: Path = Field(
        Path("/var/lib/srv6pm/node"), description="Flow names, slots and block snapshots."
    )
    bpf_object: Path | None = Field(None, description="Compiled monitor.o (default: packaged).")
    steering_mark_base: int = Field(
        DEFAULT_STEERING_MARK_BASE,
        ge=1,
        le=0xFFFFFFFF - 0x20000,
        description="First of the 131072 packet marks (and routing tables of the same numbers) "
        "that steer STAMP probes (+ SSID) and replies (+ 65536 + SSID) into the segment list "
        "they measure; a multiple of 131072. Move it if something else on the host uses marks "
        "in that range.",
    )
    vpp_api_socket: Path = Field(
        Path("/run/vpp/api.sock"),
        description="vpp driver: VPP's binary API socket (its startup configuration's "
        "socksvr socket-name).",
    )
    vpp_stats_socket: Path = Field(
        Path("/run/vpp/stats.sock"),
        description="vpp driver: VPP's stats segment socket (statseg socket-name). The "
        "driver reads counters through the binary API; this is where other readers (the "
        "lab, an exporter) find the stats segment.",
    )
    vpp_api_dir: Path = Field(
        Path("/opt/vpp/share/vpp/api"),
        description="vpp driver: VPP's API definitions (*.api.json, searched recursively); "
        "srv6pm's plugin's own come from the package (make vpp-plugin).",
    )
    vpp_bsid_prefix: str = Field(
        "fcff:5336::/64",
        description="vpp driver: the binding SIDs it gives its SR policies (the lowest free "
        "address after the first). Policies with a BSID in this range are srv6pm's, "
        "and only those are listed, changed or removed: move it if VPP's own configuration "
        "uses these addresses.",
    )
    vpp_encap_source: str = Field(
        "",
        description="vpp driver: outer source address of H.Encaps ('' = VPP's own `set sr "
        "encaps source addr` if set, else an address of the interface toward the first SID).",
    )
    history_blocks: int = Field(32, ge=3, description="Block snapshots kept in memory.")
    clock_sync: Literal["auto", "yes", "no"] = Field(
        "auto",
        description="Is the clock synchronised (STAMP S bit; loss results need it)? "
        "auto asks the kernel (adjtimex); yes for routers sharing one clock, as in the lab.",
    )
    kafka_bootstrap: str = Field(
        "",
        description="Kafka brokers host:port[,host:port...] records are published to "
        "('' = none: the journal only, ReadResults still serves them).",
    )
    kafka_topic: str = Field("srv6pm.measurements.v1", description="Topic of the records.")
    kafka_config: dict[str, str] = Field(
        default_factory=dict,
        description="Extra librdkafka producer properties (TLS, SASL), a JSON object.",
    )
    journal_retention_h: float = Field(
        168.0, gt=0, description="Records older than this are removed from the journal."
    )
    journal_max_mb: int = Field(
        1024, ge=1, description="The journal's size bound: the oldest records go first."
    )
    publish_probes: bool = Field(
        False, description="Also journal and publish one record per STAMP probe."
    )
    metrics_listen: str = Field(
        "",
        description="/metrics (Prometheus) and /healthz listen address host:port ('' = off).",
    )
    log_level: str = Field("INFO", description="Python logging level.")
    tls_ca: Path | None = Field(
        None,
        description="CA certificate (PEM) the clients' certificates must be signed by. "
        "With tls_cert and tls_key: mutual TLS, required unless listen is loopback.",
        json_schema_extra={"doc_default": "(none: plaintext)"},
    )
    tls_cert: Path | None = Field(
        None,
        description="This node manager's certificate (PEM; intermediates after it) for mutual TLS.",
        json_schema_extra={"doc_default": "(none: plaintext)"},
    )
    tls_key: Path | None = Field(
        None,
        description="Private key (PEM) of tls_cert; keep it readable by root only.",
        json_schema_extra={"doc_default": "(none: plaintext)"},
    )

    @field_validator("driver")
    @classmethod
    def _known_driver(cls, value: str) -> str:
        try:
            return registry.check(value)
        except registry.UnknownDriver as e:
            raise ValueError(str(e)) from None

    @field_validator("vpp_bsid_prefix")
    @classmethod
    def _bsid_range(cls, value: str) -> str:
        try:
            prefix = ipaddress.IPv6Network(value)
        except ValueError as e:
            raise ValueError(f"vpp_bsid_prefix {value!r} is not an IPv6 prefix: {e}") from None
        if prefix.prefixlen > 120:
            raise ValueError(f"vpp_bsid_prefix {value!r}: give at least 256 addresses (/120)")
        return prefix.compressed

    @field_validator("vpp_encap_source")
    @classmethod
    def _encap_source(cls, value: str) -> str:
        if not value:
            return value
        try:
            return ipaddress.IPv6Address(value).compressed
        except ValueError:
            raise ValueError(f"vpp_encap_source {value!r} is not an IPv6 address") from None

    @field_validator("kafka_config", mode="before")
    @classmethod
    def _json_object(cls, value: object) -> object:
        return settings.json_object(value)

    @field_validator("steering_mark_base")
    @classmethod
    def _aligned(cls, base: int) -> int:
        if base % STEERING_MARKS:
            raise ValueError(
                f"{base:#x} is not a multiple of {STEERING_MARKS:#x}: one mask must cover the "
                "range (the rule that lets unmarked packets skip the sessions' rules)"
            )
        return base

    @model_validator(mode="after")
    def _guard_below_half_period(self) -> Settings:
        if self.guard_ns * 2 >= self.period_ns:
            raise ValueError(
                f"guard_ms {self.guard_ms} must be below half the period "
                f"({self.period_s} s): a block must be readable before its "
                "colour comes back"
            )
        return self

    @model_validator(mode="after")
    def _mutual_tls_off_loopback(self) -> Settings:
        # The API programs the router's routes and data plane: whoever reaches the port
        # owns the router, so only loopback may serve it in plaintext.
        given = {"tls_ca": self.tls_ca, "tls_cert": self.tls_cert, "tls_key": self.tls_key}
        missing = [name for name, path in given.items() if path is None]
        if missing and len(missing) < len(given):
            raise ValueError(
                f"mutual TLS needs tls_ca, tls_cert and tls_key together, but "
                f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set: "
                f"set all three (--tls-ca/--tls-cert/--tls-key or "
                f"SRV6PM_TLS_CA/_CERT/_KEY) or none"
            )
        if missing and not is_loopback(self.listen):
            raise ValueError(
                f"listen {self.listen!r} is not a loopback address and TLS is off: the "
                "node manager serves plaintext gRPC on loopback only (127.0.0.0/8, [::1], "
                "localhost). Set tls_ca, tls_cert and tls_key (--tls-ca/--tls-cert/--tls-key "
                "or SRV6PM_TLS_CA/_CERT/_KEY) for mutual TLS, or listen on 127.0.0.1"
            )
        return self

    @property
    def tls(self) -> bool:
        """True if the gRPC API is served with mutual TLS."""
        return self.tls_ca is not None

    @property
    def period_ns(self) -> int:
        return round(self.period_s * 1e9)

    @property
    def guard_ns(self) -> int:
        return self.guard_ms * 1_000_000


def is_loopback(listen: str) -> bool:
    """True if the gRPC listen address ``host:port`` binds loopback only (127.0.0.0/8,
    ::1, localhost) or is a unix socket (``unix:PATH``, reached through the file system only).
    An empty host, a wildcard or anything unparsable is not loopback."""
    if listen.startswith("unix:"):
        return True
    host = listen.rsplit(":", 1)[0] if ":" in listen else listen
    host = host.removeprefix("[").removesuffix("]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


if __name__ == "__main__":
    print(settings.markdown(Settings), end="")
