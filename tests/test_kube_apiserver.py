"""The real Kubernetes API server the chart is installed on (srv6pm.lab.kube; etcd,
kube-apiserver, kubectl and helm built by `make servers`): it stores what it accepts, refuses
what it would refuse in a cluster, and leaves no process behind."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from srv6pm.lab.kube import KubeApiServer
from srv6pm.lab.servers import ServerError

pytestmark = pytest.mark.slow

NAMESPACE = "srv6pm-test"

CONFIGMAP = f"""\
apiVersion: v1
kind: ConfigMap
metadata:
  name: node-manager
  namespace: {NAMESPACE}
data:
  period_s: "10"
"""

# The selector picks app=node-manager, the pod template is labelled app=collector: a Deployment
# that could never own its pods, which only the server's validation catches (helm lint does not).
MISMATCHED_DEPLOYMENT = f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: mismatched
  namespace: {NAMESPACE}
spec:
  selector:
    matchLabels: {{app: node-manager}}
  template:
    metadata:
      labels: {{app: collector}}
    spec:
      containers:
        - name: main
          image: srv6pm/node-manager:test
"""


def _alive(pid: int) -> bool:
    """The process still has a /proc entry: running, or exited but never waited for."""
    return Path(f"/proc/{pid}").exists()


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        server.kubectl("create", "namespace", NAMESPACE)
        yield server


def test_server_reports_the_version_it_was_built_as(kube: KubeApiServer) -> None:
    version = json.loads(kube.kubectl("version", "--output=json").stdout)
    assert kube.version == os.environ.get("KUBE_VERSION", "1.34.4")
    assert version["serverVersion"]["gitVersion"] == f"v{kube.version}"
    assert version["clientVersion"]["gitVersion"] == f"v{kube.version}"


def test_namespace_is_created_for_real(kube: KubeApiServer) -> None:
    namespace = json.loads(kube.kubectl("get", "namespace", NAMESPACE, "--output=json").stdout)
    assert namespace["status"]["phase"] == "Active"


def test_server_side_apply_stores_a_configmap_that_reads_back(kube: KubeApiServer) -> None:
    applied = kube.kubectl("apply", "--server-side", "--filename=-", input=CONFIGMAP)
    assert "serverside-applied" in applied.stdout
    stored = json.loads(
        kube.kubectl(
            "get",
            "configmap",
            "node-manager",
            f"--namespace={NAMESPACE}",
            "--output=json",
            "--show-managed-fields",
        ).stdout
    )
    assert stored["data"] == {"period_s": "10"}
    managers = [m["manager"] for m in stored["metadata"]["managedFields"]]
    assert managers == ["kubectl"]  # server-side apply records its field manager


def test_server_refuses_a_deployment_whose_selector_misses_its_pods(kube: KubeApiServer) -> None:
    refused = kube.kubectl(
        "apply", "--server-side", "--filename=-", input=MISMATCHED_DEPLOYMENT, check=False
    )
    assert refused.returncode != 0
    assert 'The Deployment "mismatched" is invalid' in refused.stderr
    assert "`selector` does not match template `labels`" in refused.stderr
    missing = kube.kubectl(
        "get", "deployment", "mismatched", f"--namespace={NAMESPACE}", check=False
    )
    assert missing.returncode != 0
    assert "NotFound" in missing.stderr


def test_helm_reaches_the_server(kube: KubeApiServer) -> None:
    releases = json.loads(kube.helm("list", "--all-namespaces", "--output=json").stdout)
    assert releases == []


# Last in the module: it ends the module's server (the fixture's exit is then a no-op).
def test_exit_ends_the_processes_it_started_and_removes_its_directory(
    kube: KubeApiServer,
) -> None:
    pids = [kube.etcd_pid, kube.apiserver_pid]
    workdir = kube.workdir
    assert all(pid is not None and _alive(pid) for pid in pids)
    kube.__exit__(None, None, None)
    assert not any(_alive(pid) for pid in pids if pid is not None)
    assert not workdir.exists()
    assert not kube.running
    with pytest.raises(ServerError, match="not running"):
        kube.kubectl("get", "namespaces")


def test_missing_install_names_the_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SRV6PM_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(ServerError, match=r"bash scripts/install-kube\.sh.*make servers"):
        KubeApiServer()
