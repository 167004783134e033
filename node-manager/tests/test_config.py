import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError
from srv6pm.common.settings import markdown
from srv6pm.node_manager.config import Settings

DOC = Path(__file__).parents[2] / "docs" / "CONFIGURATION.md"


def test_configuration_doc_lists_every_setting_as_the_code_defines_it():
    assert markdown(Settings) in DOC.read_text()


def test_guard_must_leave_the_block_readable_before_its_colour_returns():
    with pytest.raises(ValidationError, match="below half the period"):
        Settings(period_s=1, guard_ms=500)


def test_environment_variables_configure_the_node_manager(monkeypatch):
    monkeypatch.setenv("SRV6PM_PERIOD_S", "2.5")
    assert Settings().period_ns == 2_500_000_000


def test_an_unknown_driver_is_refused_with_the_names_of_the_known_ones():
    with pytest.raises(
        ValidationError, match=r"unknown data plane driver 'vpp2'.*known drivers are linux"
    ):
        Settings(driver="vpp2")


def test_only_the_chosen_driver_module_is_imported():
    code = (
        "import sys; from srv6pm.node_manager import server; "
        "print(any(m.startswith('srv6pm.node_manager.drivers.linux') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
