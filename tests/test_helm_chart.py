"""The Helm chart deploy/helm/srv6pm: it lints, renders manifests that the Kubernetes 1.34
schemas accept, keeps its security claims (read-only roots, no privilege escalation, only the
node manager holds capabilities: exactly NET_ADMIN, BPF, PERFMON and NET_BIND_SERVICE), gives
every service settings its own Settings model accepts, and installs and upgrades on a real
kube-apiserver (srv6pm.lab.kube) keeping its generated secrets and certificates.

What is not shown here: that a pod runs. The API server has no kubelet or scheduler, so it
validates and stores every object and nothing starts. The cert-manager and Prometheus Operator
kinds have no built-in schema and no CRD on that server: they are rendered and checked by
structure only (``_check_custom_resource``), and kept off for the real install."""

from __future__ import annotations

import base64
import copy
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import kubernetes_validate
import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from pydantic_settings import BaseSettings
from srv6pm.collector.config import Settings as CollectorSettings
from srv6pm.controller.adapters.nodes import NodeClients, NodeUnavailable, Tls
from srv6pm.controller.config import Settings as ControllerSettings
from srv6pm.lab.kube import KubeApiServer, kube_binaries
from srv6pm.lab.servers import ControllerProcess, ServerError
from srv6pm.node_manager.config import Settings as NodeManagerSettings
from srv6pm.node_manager.server import server_credentials
from srv6pm.proto.v1 import node_manager_pb2 as pb
from srv6pm.proto.v1 import node_manager_pb2_grpc as pb_grpc

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "deploy" / "helm" / "srv6pm"
PRODUCTION = CHART / "values-production.yaml"
GENERATED_DASHBOARDS = REPO / "dashboards" / "generated"
KUBERNETES_VERSION = "1.34.0"  # the schemas of kubernetes-validate for the server we run
RELEASE = "srv6pm"
NAMESPACE = "srv6pm"
NODE_MANAGER_CAPABILITIES = ["NET_ADMIN", "BPF", "PERFMON", "NET_BIND_SERVICE"]
STAMP_PORT = 862  # RFC 8762: the reflector's port unless the controller sets another
SETTINGS: dict[str, type[BaseSettings]] = {
    "controller": ControllerSettings,
    "collector": CollectorSettings,
    "node-manager": NodeManagerSettings,
}
# Kinds served by CRDs (cert-manager, Prometheus Operator): no schema in kubernetes-validate.
CUSTOM_GROUPS = ("cert-manager.io/", "monitoring.coreos.com/")
# The production values need cert-manager and Prometheus Operator CRDs, which the test server
# does not have; with these the same values install with generated certificates and no monitors.
WITHOUT_CRDS = (
    "--set",
    "tls.certManager.enabled=false",
    "--set",
    "metrics.serviceMonitor.enabled=false",
)
VARIANTS: dict[str, tuple[str, ...]] = {
    "default": (),
    "production": ("-f", str(PRODUCTION)),
    "bundled-postgresql": ("--set", "postgresql.bundled.enabled=true"),
}


def _helm_binary() -> Path:
    try:
        return kube_binaries() / "helm"
    except ServerError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="module")
def helm_home() -> Iterator[dict[str, str]]:
    """helm's environment for offline commands: caches and config in a directory of ours."""
    home = Path(tempfile.mkdtemp(prefix="srv6pm-helm-"))
    yield os.environ | {
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    shutil.rmtree(home, ignore_errors=True)


def helm(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(_helm_binary()), *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if check and result.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    return result


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def render(env: dict[str, str], *args: str) -> list[dict[str, Any]]:
    out = helm(env, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args).stdout
    return documents(out)


@pytest.fixture(scope="module", params=list(VARIANTS))
def rendered(request: pytest.FixtureRequest, helm_home: dict[str, str]) -> list[dict[str, Any]]:
    return render(helm_home, *VARIANTS[request.param])


@pytest.fixture(scope="module")
def default_render(helm_home: dict[str, str]) -> list[dict[str, Any]]:
    return render(helm_home)


# --- reading rendered manifests -----------------------------------------------------------


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def component(doc: dict[str, Any]) -> str:
    return doc["metadata"]["labels"]["app.kubernetes.io/component"]


def pod_specs(docs: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload or Pod, pod spec) of every object that runs containers."""
    for doc in docs:
        if doc["kind"] in ("Deployment", "StatefulSet", "DaemonSet"):
            yield doc, doc["spec"]["template"]["spec"]
        elif doc["kind"] == "Pod":
            yield doc, doc["spec"]


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return spec.get("initContainers", []) + spec["containers"]


def secret_value(docs: list[dict[str, Any]], name: str, key: str) -> str | None:
    """A rendered Secret's value, None if the chart does not render that Secret."""
    for doc in docs:
        if doc["kind"] == "Secret" and doc["metadata"]["name"] == name:
            return base64.b64decode(doc["data"][key]).decode()
    return None


@dataclass
class ContainerEnv:
    """What a container's process sees: its environment (ConfigMaps and Secrets resolved from
    the render) and the files its volumes hold, written under ``root``."""

    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)


def container_env(
    docs: list[dict[str, Any]], spec: dict[str, Any], container: dict[str, Any], root: Path
) -> ContainerEnv:
    result = ContainerEnv()
    for source in container.get("envFrom", []):
        result.env |= find(docs, "ConfigMap", source["configMapRef"]["name"])["data"]
    for var in container.get("env", []):
        if "value" in var:
            result.env[var["name"]] = var["value"]
        elif "secretKeyRef" in var["valueFrom"]:
            ref = var["valueFrom"]["secretKeyRef"]
            # A Secret the user brings (production values): any value of the right form.
            value = secret_value(docs, ref["name"], ref["key"])
            result.env[var["name"]] = value if value is not None else _placeholder(var["name"])
        else:
            assert var["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName", var
            result.env[var["name"]] = "node-1"
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        secret = volumes.get(mount["name"], {}).get("secret")
        if secret is None:
            continue
        for item in secret["items"]:
            path = f"{mount['mountPath']}/{item['path']}"
            value = secret_value(docs, secret["secretName"], item["key"])
            local = root / path.lstrip("/")
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text(value if value is not None else "placeholder")
            result.files[path] = local
    return result


def _placeholder(name: str) -> str:
    if name == "SRV6PM_DATABASE_URL":
        return "postgresql+psycopg://srv6pm:password@postgresql.example.net:5432/srv6pm"
    return "user:password"


def settings_of(
    monkeypatch: pytest.MonkeyPatch, model: type[BaseSettings], env: ContainerEnv
) -> BaseSettings:
    """The model built from exactly this environment, as the service does at start; file
    settings point at the files the container would read."""
    for name in [n for n in os.environ if n.startswith("SRV6PM_")]:
        monkeypatch.delenv(name)
    for name, value in env.env.items():
        monkeypatch.setenv(name, str(env.files.get(value, value)))
    return model()


def port_of(listen: str) -> int:
    return int(listen.rsplit(":", 1)[1])


def named_port(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    return next(p["containerPort"] for p in container["ports"] if p["name"] == port)


# --- 1. lint ------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["default", "production"])
def test_chart_lints_strict(helm_home: dict[str, str], variant: str) -> None:
    result = helm(helm_home, "lint", "--strict", str(CHART), *VARIANTS[variant])
    assert "0 chart(s) failed" in result.stdout, result.stdout


# --- 2. schemas ---------------------------------------------------------------------------


def test_every_manifest_validates_against_kubernetes_schemas(
    rendered: list[dict[str, Any]],
) -> None:
    checked = 0
    for doc in rendered:
        if doc["apiVersion"].startswith(CUSTOM_GROUPS):
            _check_custom_resource(doc, rendered)
        else:
            # Raises ValidationError (strict: unknown fields too) with the resource named.
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        checked += 1
    kinds = {d["kind"] for d in rendered}
    assert {"Deployment", "DaemonSet", "ConfigMap", "Secret", "ServiceAccount", "Pod"} <= kinds
    assert checked == len(rendered)


def _check_custom_resource(doc: dict[str, Any], docs: list[dict[str, Any]]) -> None:
    """The fields cert-manager and Prometheus Operator require, and that each points at what
    the chart renders: a monitor selects a Service or pod of the chart and names its port; a
    Certificate writes the Secret the pods mount, with the usage its side needs."""
    kind, spec = doc["kind"], doc["spec"]
    if kind == "ServiceMonitor":
        assert doc["apiVersion"] == "monitoring.coreos.com/v1"
        service = find(docs, "Service", doc["metadata"]["name"])
        assert spec["selector"]["matchLabels"].items() <= service["spec"]["selector"].items()
        ports = {p["name"] for p in service["spec"]["ports"]}
        assert spec["endpoints"] and all(e["port"] in ports for e in spec["endpoints"])
        assert all(e["path"] == "/metrics" for e in spec["endpoints"])
    elif kind == "PodMonitor":
        assert doc["apiVersion"] == "monitoring.coreos.com/v1"
        daemonset = find(docs, "DaemonSet", doc["metadata"]["name"])
        labels = daemonset["spec"]["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items()
        ports = {
            p["name"]
            for c in daemonset["spec"]["template"]["spec"]["containers"]
            for p in c["ports"]
        }
        assert spec["podMetricsEndpoints"] and all(
            e["port"] in ports and e["path"] == "/metrics" for e in spec["podMetricsEndpoints"]
        )
    elif kind == "Issuer":
        assert doc["apiVersion"] == "cert-manager.io/v1"
        assert len(spec) == 1 and next(iter(spec)) in ("selfSigned", "ca"), spec
    elif kind == "Certificate":
        assert doc["apiVersion"] == "cert-manager.io/v1"
        assert spec["secretName"] and spec["issuerRef"]["name"]
        assert spec["issuerRef"].get("kind", "Issuer") in ("Issuer", "ClusterIssuer")
        mounted = {
            v["secret"]["secretName"]
            for _, pod in pod_specs(docs)
            for v in pod.get("volumes", [])
            if "secret" in v
        }
        if not spec.get("isCA"):
            assert spec["secretName"] in mounted, spec["secretName"]
            usage = "client auth" if component(doc) == "controller" else "server auth"
            assert usage in spec["usages"], spec
    else:
        pytest.fail(f"no check for {kind}")


# --- 3. security and settings -------------------------------------------------------------


def test_every_container_is_hardened(rendered: list[dict[str, Any]]) -> None:
    for doc, spec in pod_specs(rendered):
        for c in containers(spec):
            where = f"{doc['kind']}/{doc['metadata']['name']} {c['name']}"
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, where
            assert sc["allowPrivilegeEscalation"] is False, where
            assert sc["capabilities"]["drop"] == ["ALL"], where
            assert sc.get("privileged", False) is False, where
            if c["name"] == "node-manager":
                assert sc["capabilities"]["add"] == NODE_MANAGER_CAPABILITIES, where
                assert sc["runAsUser"] == 0, where
            else:
                assert "add" not in sc["capabilities"], where
                assert sc["runAsNonRoot"] is True and sc["runAsUser"] > 0, where
                assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
            resources = c["resources"]
            assert {"cpu", "memory"} <= resources["requests"].keys(), where
            assert {"cpu", "memory"} <= resources["limits"].keys(), where
        assert spec["automountServiceAccountToken"] is False
        # The helm test Pod runs as the controller's account; every other its component's.
        account = "controller" if component(doc) == "test" else component(doc)
        assert spec["serviceAccountName"] == f"{RELEASE}-{account}"
        assert spec.get("hostNetwork", False) == (doc["kind"] == "DaemonSet")
    assert "privileged: true" not in yaml.safe_dump_all(rendered)


def test_no_api_access_is_granted(rendered: list[dict[str, Any]]) -> None:
    accounts = [d for d in rendered if d["kind"] == "ServiceAccount"]
    assert accounts and all(a["automountServiceAccountToken"] is False for a in accounts)
    assert not [
        d
        for d in rendered
        if d["kind"] in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
    ]


def test_extra_capabilities_are_added_only_to_the_node_manager(helm_home: dict[str, str]) -> None:
    docs = render(helm_home, "--set", "nodeManager.extraCapabilities={SYS_ADMIN}")
    added = {
        c["name"]: c["securityContext"]["capabilities"].get("add")
        for _, spec in pod_specs(docs)
        for c in containers(spec)
    }
    assert added.pop("node-manager") == [*NODE_MANAGER_CAPABILITIES, "SYS_ADMIN"]
    assert set(added.values()) == {None}


def test_service_settings_are_settings_fields_and_valid(
    rendered: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    services = 0
    for doc, spec in pod_specs(rendered):
        for c in containers(spec):
            env = container_env(rendered, spec, c, tmp_path / c["name"])
            names = {n for n in env.env if n.startswith("SRV6PM_")}
            model = SETTINGS.get(c["name"])
            if model is None:
                assert not names, f"{c['name']} is no srv6pm service but sets {names}"
                continue
            services += 1
            fields = {f"SRV6PM_{f.upper()}" for f in model.model_fields}
            assert names <= fields, f"{c['name']}: not settings: {names - fields}"
            settings = settings_of(monkeypatch, model, env)
            _check_ports_and_paths(doc, spec, c, settings, env)
    assert services == 3


def _check_ports_and_paths(
    doc: dict[str, Any], spec: dict[str, Any], c: dict[str, Any], settings: Any, env: ContainerEnv
) -> None:
    """Container ports and probes equal the listen settings; files and directories the
    settings name are on the volumes mounted for them."""
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}

    def volume_at(path: Path) -> dict[str, Any]:
        mount = max((m for m in mounts if path.is_relative_to(m)), key=len)
        return volumes[mounts[mount]]

    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    probes = [
        c[p]["httpGet"] for p in ("startupProbe", "livenessProbe", "readinessProbe") if p in c
    ]
    assert probes and all(p["path"] == "/healthz" for p in probes)
    if c["name"] == "node-manager":
        assert ports == {
            "grpc": port_of(settings.listen),
            "metrics": port_of(settings.metrics_listen),
            "stamp": STAMP_PORT,
        }
        assert {named_port(c, p["port"]) for p in probes} == {ports["metrics"]}
        assert volume_at(settings.state_dir)["hostPath"]["type"] == "DirectoryOrCreate"
        assert volume_at(settings.bpf_dir)["hostPath"] == {
            "path": "/sys/fs/bpf",
            "type": "Directory",
        }
        assert all(p["hostPort"] == p["containerPort"] for p in c["ports"])
    else:
        listen = settings.listen if c["name"] == "controller" else settings.http_listen
        assert ports == {"http": port_of(listen)}
        assert {named_port(c, p["port"]) for p in probes} == {port_of(listen)}
    if c["name"] == "controller":
        assert settings.tls_server_name == "srv6pm-node-manager"
        assert len(settings.stamp_key()) == 32
        if settings.database_url.startswith("sqlite:"):
            database = Path(settings.database_url.removeprefix("sqlite:///"))
            assert "persistentVolumeClaim" in volume_at(database)
            assert doc["spec"]["strategy"]["type"] == "Recreate"
    if c["name"] in ("controller", "node-manager"):
        # Files the service reads, at their paths in the container: each an item of a Secret.
        names = ["SRV6PM_TLS_CA", "SRV6PM_TLS_CERT", "SRV6PM_TLS_KEY"]
        if c["name"] == "controller":
            names.append("SRV6PM_STAMP_KEY_FILE")
        for name in names:
            path = Path(env.env[name])
            assert "secret" in volume_at(path) and str(path) in env.files, name


class _NodeManager(pb_grpc.NodeManagerServicer):
    def GetInfo(self, request: pb.GetInfoRequest, context: grpc.ServicerContext) -> pb.NodeInfo:
        return pb.NodeInfo(driver="chart-test")


def test_controller_reaches_a_node_manager_over_mutual_tls_with_the_chart_settings(
    default_render: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The generated certificates, mounted where the chart mounts them and named by the
    settings it gives: the node manager's own server credentials, and the controller's own
    client, which checks tls.serverName, not the address it dials."""
    settings: dict[str, Any] = {}
    for _, spec in pod_specs(default_render):
        for c in containers(spec):
            if c["name"] in ("controller", "node-manager"):
                env = container_env(default_render, spec, c, tmp_path / c["name"])
                settings[c["name"]] = settings_of(monkeypatch, SETTINGS[c["name"]], env)
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_NodeManagerServicer_to_server(_NodeManager(), server)
    port = server.add_secure_port("127.0.0.1:0", server_credentials(settings["node-manager"]))
    server.start()
    try:
        controller = settings["controller"]
        tls = Tls(controller.tls_ca, controller.tls_cert, controller.tls_key)
        endpoint = f"127.0.0.1:{port}"
        clients = NodeClients(tls, 5.0, controller.tls_server_name)
        assert clients.info("node-1", endpoint).driver == "chart-test"
        # The certificate names no address: without the server name the check fails.
        with pytest.raises(NodeUnavailable):
            NodeClients(tls, 5.0).info("node-1", endpoint)
    finally:
        server.stop(grace=None)


def test_schema_settings_are_fields_of_the_settings_models() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    for key, name in (
        ("controller", "controller"),
        ("collector", "collector"),
        ("nodeManager", "node-manager"),
    ):
        allowed = schema["properties"][key]["properties"]["settings"]["properties"]
        assert set(allowed) <= set(SETTINGS[name].model_fields), key


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--set", "collector.replicas=two"), "/collector/replicas"),
        (("--set", "tls.enabled=false"), "/tls/enabled"),
        (("--set", "unknownKey=1"), "additional properties 'unknownKey'"),
        (("--set", "controller.settings.unknown_setting=1"), "unknown_setting"),
        (("--set", "controller.port=70000"), "/controller/port"),
        (("--set", "nodeManager.settings.clock_sync=maybe"), "/nodeManager/settings/clock_sync"),
        (("--set", "nodeManager.extraCapabilities={NET_ADMIN}"), "/nodeManager/extraCapabilities"),
        (("--set", "controller.stampKey.value=not-hex"), "/controller/stampKey/value"),
        (("--set", "controller.resources.limits.memory=lots"), "/controller/resources"),
    ],
)
def test_wrong_values_fail_template_and_lint(
    helm_home: dict[str, str], args: tuple[str, ...], message: str
) -> None:
    for command in (("template", RELEASE), ("lint", "--strict")):
        result = helm(helm_home, *command, str(CHART), *args, check=False)
        assert result.returncode != 0, (command, args)
        assert message in result.stdout + result.stderr, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--set", "kafka.bundled.enabled=false"), "kafka: set bootstrapServers"),
        (("--set", "kafka.bootstrapServers=k:9092"), "not both"),
        (("--set", "nodeManager.settings.netns=r1"), "needs SYS_ADMIN"),
        (("--set", "tls.existingSecrets.controller=mine"), "set both controller and nodeManager"),
    ],
)
def test_inconsistent_values_fail_with_a_reason(
    helm_home: dict[str, str], args: tuple[str, ...], message: str
) -> None:
    result = helm(helm_home, "template", RELEASE, str(CHART), *args, check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_dashboards_in_the_chart_equal_the_generated_ones(
    default_render: list[dict[str, Any]],
) -> None:
    generated = sorted(GENERATED_DASHBOARDS.glob("*.json"))
    copies = sorted((CHART / "dashboards").glob("*.json"))
    assert [p.name for p in copies] == [p.name for p in generated]
    for copy_, original in zip(copies, generated, strict=True):
        assert copy_.read_bytes() == original.read_bytes(), f"{copy_} differs: copy it again"
    rules = CHART / "dashboards" / "alert-rules.yaml"
    assert rules.read_bytes() == (GENERATED_DASHBOARDS / "alert-rules.yaml").read_bytes()
    # What Grafana's sidecar gets is the file, byte for byte.
    dashboards = find(default_render, "ConfigMap", f"{RELEASE}-dashboards")
    assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboards["data"] == {p.name: p.read_text() for p in generated}
    alerts = find(default_render, "ConfigMap", f"{RELEASE}-alert-rules")
    assert alerts["metadata"]["labels"]["grafana_alert"] == "1"
    assert list(alerts["data"].values()) == [rules.read_text()]
    sources = find(default_render, "ConfigMap", f"{RELEASE}-datasources")
    assert sources["metadata"]["labels"]["grafana_datasource"] == "1"
    datasources = yaml.safe_load(next(iter(sources["data"].values())))["datasources"]
    # The uids the dashboards and alert rules query.
    assert {d["uid"] for d in datasources} == {"srv6pm-influxdb", "srv6pm-prometheus"}


def test_sidecar_labels_are_configurable(helm_home: dict[str, str]) -> None:
    docs = render(
        helm_home,
        "--set",
        "grafana.dashboards.label=dash",
        "--set",
        "grafana.dashboards.labelValue=yes",
    )
    assert find(docs, "ConfigMap", f"{RELEASE}-dashboards")["metadata"]["labels"]["dash"] == "yes"


def test_generated_certificates_make_a_mutual_tls_pair(
    default_render: list[dict[str, Any]],
) -> None:
    def cert(name: str, key: str = "tls.crt") -> x509.Certificate:
        pem = secret_value(default_render, name, key)
        assert pem is not None, name
        return x509.load_pem_x509_certificate(pem.encode())

    ca = cert(f"{RELEASE}-ca")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    server, client = cert(f"{RELEASE}-node-manager-tls"), cert(f"{RELEASE}-controller-tls")
    for leaf, usage in (
        (server, ExtendedKeyUsageOID.SERVER_AUTH),
        (client, ExtendedKeyUsageOID.CLIENT_AUTH),
    ):
        leaf.verify_directly_issued_by(ca)
        assert usage in leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    for name in (f"{RELEASE}-node-manager-tls", f"{RELEASE}-controller-tls"):
        assert cert(name, "ca.crt") == ca
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["srv6pm-node-manager"]
    assert server.not_valid_after_utc - datetime.datetime.now(datetime.UTC) > datetime.timedelta(
        days=360
    )


def test_generated_secrets_have_their_forms(default_render: list[dict[str, Any]]) -> None:
    token = secret_value(default_render, f"{RELEASE}-bootstrap-token", "token")
    assert token is not None and re.fullmatch(r"[A-Za-z0-9]{40}", token)
    key = secret_value(default_render, f"{RELEASE}-stamp-key", "key")
    assert key is not None and re.fullmatch(r"[0-9a-f]{64}", key)


def test_cert_manager_when_the_cluster_serves_it(helm_home: dict[str, str]) -> None:
    docs = render(helm_home, "--api-versions", "cert-manager.io/v1")
    kinds = sorted(d["kind"] for d in docs if d["apiVersion"] == "cert-manager.io/v1")
    assert kinds == ["Certificate", "Certificate", "Certificate", "Issuer", "Issuer"]
    assert secret_value(docs, f"{RELEASE}-controller-tls", "tls.crt") is None
    for doc in docs:
        if doc["apiVersion"].startswith(CUSTOM_GROUPS):
            _check_custom_resource(doc, docs)


def test_a_config_change_rolls_only_that_service(
    helm_home: dict[str, str], default_render: list[dict[str, Any]]
) -> None:
    changed = render(helm_home, "--set", "collector.settings.batch_size=500")

    def checksums(docs: list[dict[str, Any]]) -> dict[str, str]:
        return {
            d["metadata"]["name"]: d["spec"]["template"]["metadata"]["annotations"][
                "checksum/config"
            ]
            for d, _ in pod_specs(docs)
            if d["kind"] != "Pod"
            and "checksum/config" in d["spec"]["template"]["metadata"].get("annotations", {})
        }

    before, after = checksums(default_render), checksums(changed)
    assert {n for n in before if before[n] != after[n]} == {f"{RELEASE}-collector"}


def test_network_policies_admit_only_the_services_ports(
    default_render: list[dict[str, Any]],
) -> None:
    policies = {
        d["metadata"]["name"]: d["spec"] for d in default_render if d["kind"] == "NetworkPolicy"
    }
    # Host-network pods are out of NetworkPolicies' reach: no policy pretends to cover them.
    assert f"{RELEASE}-node-manager" not in policies
    for spec in policies.values():
        assert spec["policyTypes"] == ["Ingress", "Egress"]
    controller = policies[f"{RELEASE}-controller"]
    assert [p["port"] for r in controller["ingress"] for p in r["ports"]] == [8080]
    grpc_rule = next(r for r in controller["egress"] if r["ports"][0]["port"] == 50051)
    assert [p["ipBlock"]["cidr"] for p in grpc_rule["to"]] == ["0.0.0.0/0", "::/0"]
    collector = policies[f"{RELEASE}-collector"]
    assert [p["port"] for r in collector["ingress"] for p in r["ports"]] == [9465]
    assert sorted(p["port"] for r in collector["egress"] for p in r["ports"]) == [
        53,
        53,
        8086,
        9092,
    ]


def test_disruption_budget_for_the_collectors_only(default_render: list[dict[str, Any]]) -> None:
    budgets = [d for d in default_render if d["kind"] == "PodDisruptionBudget"]
    assert [component(b) for b in budgets] == ["collector"]
    assert find(default_render, "Deployment", f"{RELEASE}-controller")["spec"]["replicas"] == 1
    assert find(default_render, "Deployment", f"{RELEASE}-collector")["spec"]["replicas"] == 2


@pytest.mark.slow
def test_the_helm_test_script_passes_against_a_real_controller(
    default_render: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The hook Pod's command, run here against a controller started with the chart's
    bootstrap token: it passes, and fails with another token."""
    pod = find(default_render, "Pod", f"{RELEASE}-test-controller")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (container,) = pod["spec"]["containers"]
    assert (
        container["image"]
        == find(default_render, "Deployment", f"{RELEASE}-controller")["spec"]["template"]["spec"][
            "containers"
        ][0]["image"]
    )
    command = [sys.executable, *container["command"][1:]]  # python from the controller's image
    token = secret_value(default_render, f"{RELEASE}-bootstrap-token", "token")
    assert token is not None
    with ControllerProcess(tmp_path, {"bootstrap_token": token, "reconcile": "false"}) as process:

        def run(api_token: str) -> subprocess.CompletedProcess[str]:
            env = {
                "CONTROLLER_URL": process.url,
                "API_TOKEN": api_token,
                "PATH": os.environ["PATH"],
            }
            return subprocess.run(
                command, env=env, capture_output=True, text=True, check=False, timeout=60
            )

        passed, refused = run(token), run("s6pm_" + "x" * 43)
    assert passed.returncode == 0 and passed.stdout == "nodes: 0\n", passed.stderr
    assert refused.returncode != 0 and "HTTP Error 401" in refused.stderr, refused.stderr


# --- 4. a real API server -----------------------------------------------------------------


@dataclass
class Step:
    """One helm install or upgrade: its manifest, what the server held right after, and what
    Pod admission said of a pod made from each workload's template and of the test hook:
    pod name -> None if admitted, else the server's reason."""

    manifest: list[dict[str, Any]]
    server: dict[tuple[str, str], dict[str, Any]]
    pods: dict[str, str | None]


@dataclass
class Installed:
    kube: KubeApiServer
    steps: dict[str, Step]


def _reference(doc: dict[str, Any]) -> str:
    """kind.group/name, as kubectl takes it (core kinds have no group)."""
    group = doc["apiVersion"].rpartition("/")[0]
    kind = f"{doc['kind'].lower()}.{group}" if group else doc["kind"].lower()
    return f"{kind}/{doc['metadata']['name']}"


def _server_objects(
    kube: KubeApiServer, docs: list[dict[str, Any]]
) -> dict[tuple[str, str], dict[str, Any]]:
    """Every object of the manifest as the server has it (kubectl fails if one is missing)."""
    refs = [_reference(d) for d in docs]
    items = json.loads(kube.kubectl("get", "-n", NAMESPACE, "-o", "json", *refs).stdout)["items"]
    return {(i["kind"], i["metadata"]["name"]): i for i in items}


def _pod_admission(kube: KubeApiServer, docs: list[dict[str, Any]]) -> dict[str, str | None]:
    """A server-side dry run creating each Pod, and a Pod per workload template (its
    volumeClaimTemplates as emptyDirs): admitted (None) or refused (the reason)."""
    pods = []
    for doc, spec in pod_specs(docs):
        pod = copy.deepcopy(spec)
        for claim in doc["spec"].get("volumeClaimTemplates", []):
            pod["volumes"].append({"name": claim["metadata"]["name"], "emptyDir": {}})
        template = doc if doc["kind"] == "Pod" else doc["spec"]["template"]
        metadata = {"name": doc["metadata"]["name"], "labels": template["metadata"]["labels"]}
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod})
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": pods})
    result = kube.kubectl(
        "create",
        "--dry-run=server",
        "-n",
        NAMESPACE,
        "-o",
        "name",
        "-f",
        "-",
        input=body,
        check=False,
    )
    admitted = {line.removeprefix("pod/") for line in result.stdout.split()}
    refused = dict(re.findall(r'pods "([^"]+)" is forbidden: (.*)', result.stderr))
    assert admitted | refused.keys() == {p["metadata"]["name"] for p in pods}, result.stderr
    return {name: refused.get(name) for name in admitted | refused.keys()}


@pytest.fixture(scope="module")
def installed() -> Iterator[Installed]:
    """The chart installed with its defaults, then upgraded to a bundled PostgreSQL, to the
    production values (without the CRD kinds), and once more with a renewal window that covers
    the certificates' whole lifetime. The namespace enforces the restricted Pod Security
    profile, which admits workloads (with warnings) and judges pods."""
    _helm_binary()  # a clear failure when the binaries are missing
    plan = {
        "install": ("install",),
        "bundled-postgresql": ("upgrade", *VARIANTS["bundled-postgresql"]),
        "production": ("upgrade", *VARIANTS["production"], *WITHOUT_CRDS),
        "renewal": (
            "upgrade",
            *VARIANTS["production"],
            *WITHOUT_CRDS,
            *("--set", "tls.generated.renewBeforeDays=365"),
        ),
    }
    with KubeApiServer() as kube:
        kube.kubectl("create", "namespace", NAMESPACE)
        kube.kubectl(
            "label", "namespace", NAMESPACE, "pod-security.kubernetes.io/enforce=restricted"
        )
        steps: dict[str, Step] = {}
        for name, (command, *args) in plan.items():
            kube.helm(command, RELEASE, str(CHART), "-n", NAMESPACE, *args)
            manifest = documents(kube.helm("get", "manifest", RELEASE, "-n", NAMESPACE).stdout)
            hooks = documents(kube.helm("get", "hooks", RELEASE, "-n", NAMESPACE).stdout)
            steps[name] = Step(
                manifest, _server_objects(kube, manifest), _pod_admission(kube, manifest + hooks)
            )
        yield Installed(kube, steps)


@pytest.mark.slow  # one API server for these, ~12 s to install and upgrade
def test_every_rendered_object_is_stored_by_the_server(installed: Installed) -> None:
    for name, step in installed.steps.items():
        expected = {(d["kind"], d["metadata"]["name"]) for d in step.manifest}
        assert set(step.server) == expected, name
    assert ("StatefulSet", f"{RELEASE}-postgresql") in installed.steps["bundled-postgresql"].server
    production = installed.steps["production"].server
    assert ("StatefulSet", f"{RELEASE}-kafka") not in production
    controller = production[("Deployment", f"{RELEASE}-controller")]
    assert controller["spec"]["strategy"]["type"] == "RollingUpdate"  # PostgreSQL, not SQLite


@pytest.mark.slow
def test_upgrades_keep_generated_secrets(installed: Installed) -> None:
    first = installed.steps["install"].server
    for step in ("bundled-postgresql", "production"):
        for name in ("bootstrap-token", "stamp-key", "ca", "controller-tls", "node-manager-tls"):
            key = ("Secret", f"{RELEASE}-{name}")
            assert installed.steps[step].server[key]["data"] == first[key]["data"], (step, name)


@pytest.mark.slow
def test_an_upgrade_in_the_renewal_window_renews_the_leaves_under_the_same_ca(
    installed: Installed,
) -> None:
    before, after = installed.steps["production"].server, installed.steps["renewal"].server

    def pem(server: dict[tuple[str, str], dict[str, Any]], name: str) -> x509.Certificate:
        data = server[("Secret", f"{RELEASE}-{name}")]["data"]["tls.crt"]
        return x509.load_pem_x509_certificate(base64.b64decode(data))

    def tls_checksum(server: dict[tuple[str, str], dict[str, Any]]) -> str:
        daemonset = server[("DaemonSet", f"{RELEASE}-node-manager")]
        return daemonset["spec"]["template"]["metadata"]["annotations"]["checksum/tls"]

    ca = pem(after, "ca")
    assert ca == pem(before, "ca")
    for leaf in ("controller-tls", "node-manager-tls"):
        assert pem(after, leaf) != pem(before, leaf), leaf
        pem(after, leaf).verify_directly_issued_by(ca)
    # The node managers read their certificate at start: a new one rolls them.
    assert tls_checksum(after) != tls_checksum(before)


@pytest.mark.slow
def test_server_side_validation_refuses_what_the_schemas_accept(
    installed: Installed, helm_home: dict[str, str]
) -> None:
    bad_label = ("--set-json", 'controller.podLabels={"not a label!": "x"}')
    for doc in render(helm_home, *bad_label):
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    kube = installed.kube
    kube.kubectl("create", "namespace", "refused")
    result = kube.helm("install", "refused", str(CHART), "-n", "refused", *bad_label, check=False)
    assert result.returncode != 0
    assert "Deployment" in result.stderr and "not a label!" in result.stderr, result.stderr


@pytest.mark.slow
def test_pods_meet_the_restricted_profile_except_the_node_manager(installed: Installed) -> None:
    node_manager = f"{RELEASE}-node-manager"
    for name, step in installed.steps.items():
        refused = {pod: reason for pod, reason in step.pods.items() if reason is not None}
        assert list(refused) == [node_manager], (name, refused)
        assert f"{RELEASE}-test-controller" in step.pods
    # Refused for what it needs on a router, and nothing else (no privileged, no escalation).
    refusal = installed.steps["install"].pods[node_manager] or ""
    assert refusal.startswith('violates PodSecurity "restricted:latest": '), refusal
    reasons = re.findall(r"(?:: |, )([^(,:]+?) \(", refusal)
    assert set(reasons) == {
        "host namespaces",
        "hostPort",
        "unrestricted capabilities",
        "restricted volume types",
        "runAsNonRoot != true",
        "runAsUser=0",
    }, refusal
