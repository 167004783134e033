"""The lab's node manager processes: start, health check, kill -9 and restart, teardown."""

from __future__ import annotations

from pathlib import Path

import pytest
from srv6pm.lab import Lab, LabError, Topology
from srv6pm.lab.lab import NETNS_DIR

pytestmark = pytest.mark.root


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_node_managers_lifecycle(prefix: str, base_port: int) -> None:
    lab = Lab(Topology.load("default"), prefix=prefix, base_port=base_port)
    try:
        lab.up()
        status = lab.status()["node_managers"]
        assert list(status) == ["r1", "r2", "r3"]
        assert all(s["alive"] and s["serving"] for s in status.values())
        assert [lab.grpc_address(r) for r in status] == [
            f"127.0.0.1:{base_port + i}" for i in range(3)
        ]
        pids = {r: lab.pid(r) for r in status}
        assert None not in pids.values()

        old = pids["r2"]
        assert old is not None
        lab.stop_node_manager("r2", kill=True)
        assert lab.pid("r2") is None and not _alive(old)
        assert not lab.status()["node_managers"]["r2"]["serving"]
        new = lab.start_node_manager("r2")
        assert new != old and lab.pid("r2") == new
        assert lab.status()["node_managers"]["r2"]["serving"]
        with pytest.raises(LabError, match="already running"):
            lab.start_node_manager("r2")
        lab.stop_node_manager("r3")  # SIGTERM
        assert lab.pid("r3") is None
        pids["r2"] = new
    finally:
        assert lab.down() == []
    assert not any(_alive(p) for p in pids.values() if p is not None)
    assert not any(lab.bpf_dir(r).exists() for r in lab.topology.routers)
    assert not any(NETNS_DIR.glob(f"{prefix}-*"))
    assert not lab.state_dir.exists()


class _BrokenLab(Lab):
    def node_manager_argv(self, router: str) -> list[str]:
        return [*super().node_manager_argv(router), "--no-such-flag"]


def test_failing_node_manager_reports_its_log(prefix: str, base_port: int) -> None:
    lab = _BrokenLab(Topology.load("default"), prefix=prefix, base_port=base_port)
    with pytest.raises(LabError, match=r"(?s)node manager r1 exited.*no-such-flag"):
        lab.up()
    assert not any(NETNS_DIR.glob(f"{prefix}-*"))
    assert not lab.state_dir.exists()
