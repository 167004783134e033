"""Collector settings: environment variables SRV6PM_*, a YAML file, or command-line flags."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from srv6pm.common import settings


class Settings(BaseSettings):
    """Every setting of the collector, with defaults that run against local servers."""

    model_config = SettingsConfigDict(env_prefix="SRV6PM_", extra="forbid")

    kafka_bootstrap: str = Field("127.0.0.1:9092", description="Kafka brokers host:port[,...].")
    kafka_topic: str = Field("srv6pm.measurements.v1", description="Topic the records come from.")
    kafka_dlq_topic: str = Field(
        "srv6pm.measurements.dlq.v1",
        description="Dead-letter topic: records that cannot become points, with the reason.",
    )
    kafka_group: str = Field(
        "srv6pm-collector", description="Consumer group: collectors in one group share partitions."
    )
    kafka_config: dict[str, str] = Field(
        default_factory=dict,
        description="Extra librdkafka properties (TLS, SASL) for consumer and producer, JSON.",
    )
    influx_url: str = Field("http://127.0.0.1:8086", description="InfluxDB base URL.")
    influx_token: str = Field(
        "", description="InfluxDB token (1.8 with auth: 'user:password'; '' without auth)."
    )
    influx_org: str = Field("-", description="InfluxDB organisation (1.8 ignores it).")
    influx_bucket: str = Field(
        "srv6pm", description="Bucket (InfluxDB 1.8: database or database/retention policy)."
    )
    influx_timeout_ms: int = Field(10_000, gt=0, description="Timeout of one write.")
    batch_size: int = Field(
        10_000, gt=0, description="Records consumed, written and committed at once."
    )
    batch_wait_ms: int = Field(
        200, ge=0, description="How long to wait for a batch to fill: latency against throughput."
    )
    http_listen: str = Field(
        "127.0.0.1:9465", description="/metrics and /healthz listen address host:port."
    )
    log_level: str = Field("INFO", description="Python logging level.")

    @field_validator("kafka_config", mode="before")
    @classmethod
    def _json_object(cls, value: object) -> object:
        return settings.json_object(value)
