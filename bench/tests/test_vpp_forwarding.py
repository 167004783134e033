"""bench/vpp_forwarding.py: its configurations, and its quick mode end to end on a real VPP
with srv6pm's plugin (`make vpp-plugin`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.vppfwd.measure import configs, write_pcap

ROOT = Path(__file__).resolve().parents[2]


def test_every_configuration_is_compared_with_a_plain_one_with_the_same_frames() -> None:
    ingress = configs("ingress", ["altmark", "dscp"], empty_hook=True)
    assert [c.name for c in ingress] == ["plain", "empty hook", "altmark", "dscp"]
    transit = configs("transit", ["altmark", "dscp"], empty_hook=False)
    assert [c.name for c in transit] == ["plain/altmark", "altmark", "plain/dscp", "dscp"]
    for cfgs in (ingress, transit):
        by_name = {c.name: c for c in cfgs}
        for c in cfgs:
            base = by_name[c.baseline]
            assert not base.hooked and base.frames == c.frames


def test_pcap_holds_the_frames_in_order(tmp_path: Path) -> None:
    frames = [bytes([i]) * (60 + i) for i in range(3)]
    data = write_pcap(tmp_path / "f.pcap", frames).read_bytes()
    assert data[:4] == bytes.fromhex("d4c3b2a1") and len(data) == 24 + sum(
        16 + len(f) for f in frames
    )
    assert data[24 + 16 : 24 + 16 + 60] == frames[0]


@pytest.mark.root
@pytest.mark.slow
def test_quick_run_forwards_and_counts_every_packet(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "bench.vpp_forwarding", "--quick", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    (path,) = tmp_path.glob("vpp-forwarding-*.json")
    result = json.loads(path.read_text())
    assert result["run_id"] == path.stem
    assert {(row["role"], row["n"]) for row in result["summary"]} == {
        (role, n) for role in ("ingress", "transit") for n in (1, 16)
    }
    assert result["samples"] and all(s["counting_ok"] for s in result["samples"])
    hooked = [s for s in result["samples"] if s["config"] in ("altmark", "dscp")]
    assert hooked and all(s["plugin_cpp"] > 0 and s["stats"]["counted"] for s in hooked)
    assert "| ingress | 16 | altmark |" in result["table"]
    assert f"run id {path.stem}" in r.stdout
