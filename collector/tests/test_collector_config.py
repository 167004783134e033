from pathlib import Path

import pytest
from pydantic import ValidationError
from srv6pm.collector.config import Settings
from srv6pm.common.settings import markdown, parse

DOC = Path(__file__).parents[2] / "docs" / "CONFIGURATION.md"


def test_configuration_doc_lists_every_collector_setting_as_the_code_defines_it():
    assert markdown(Settings) in DOC.read_text()


def test_flags_and_environment_configure_the_collector(monkeypatch):
    monkeypatch.setenv("SRV6PM_INFLUX_URL", "http://influxdb:8086")
    settings = parse(
        Settings,
        ["--batch-size", "100", "--kafka-config", '{"security.protocol": "SSL"}'],
        "c",
        None,
    )
    assert settings.batch_size == 100 and settings.influx_url == "http://influxdb:8086"
    assert settings.kafka_config == {"security.protocol": "SSL"}


def test_bad_settings_are_refused_with_the_setting_named():
    with pytest.raises(ValidationError, match="batch_size"):
        Settings(batch_size=0)
