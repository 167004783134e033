"""The Docker Compose stack (docker-compose.yml, scripts/compose-up.sh, deploy/compose/) checked
without Docker, as CI has none: the file against the compose specification, every service's
settings against its pydantic model, every address a service is told against the services that
listen there, the security of the containers, Grafana's data sources, the lab PKI the stack
mounts, and the scripts with shellcheck. Fast, no root, no servers."""

from __future__ import annotations

import ipaddress
import itertools
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml
from pydantic_settings import BaseSettings
from srv6pm.collector.config import Settings as CollectorSettings
from srv6pm.common import pki
from srv6pm.controller.config import Settings as ControllerSettings
from srv6pm.node_manager.config import Settings as NodeManagerSettings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
SCRIPT = ROOT / "scripts" / "compose-up.sh"
SHELL_SCRIPTS = (SCRIPT, ROOT / "deploy" / "compose" / "install-secrets.sh")

# What each image sets itself: the deployment contract of the three images (docs/DEPLOY.md).
IMAGE_ENV: dict[str, dict[str, str]] = {
    "controller/Dockerfile": {
        "SRV6PM_LISTEN": "0.0.0.0:8080",
        "SRV6PM_DATABASE_URL": "sqlite:////var/lib/srv6pm/controller/controller.db",
        "SRV6PM_TLS_CA": "/etc/srv6pm/tls/ca.crt",
        "SRV6PM_TLS_CERT": "/etc/srv6pm/tls/tls.crt",
        "SRV6PM_TLS_KEY": "/etc/srv6pm/tls/tls.key",
    },
    "collector/Dockerfile": {"SRV6PM_HTTP_LISTEN": "0.0.0.0:9465"},
    "node-manager/Dockerfile": {
        "SRV6PM_LISTEN": "[::]:50051",
        "SRV6PM_METRICS_LISTEN": "0.0.0.0:9464",
        "SRV6PM_STATE_DIR": "/var/lib/srv6pm/node",
        "SRV6PM_BPF_DIR": "/sys/fs/bpf/srv6pm/node",
        "SRV6PM_TLS_CA": "/etc/srv6pm/tls/ca.crt",
        "SRV6PM_TLS_CERT": "/etc/srv6pm/tls/tls.crt",
        "SRV6PM_TLS_KEY": "/etc/srv6pm/tls/tls.key",
    },
}
SETTINGS: dict[str, type[BaseSettings]] = {
    "controller/Dockerfile": ControllerSettings,
    "collector/Dockerfile": CollectorSettings,
    "node-manager/Dockerfile": NodeManagerSettings,
}
# The settings that are listen addresses, per model
LISTEN_FIELDS = ("listen", "http_listen", "metrics_listen")
CONTROLLER_UID = "10001"  # the controller's and collector's user in their images
# Ports the third-party images listen on by default (Kafka's come from its KAFKA_LISTENERS)
IMAGE_PORTS = {"influxdb": {8086}, "grafana/grafana": {3000}, "prom/prometheus": {9090}}
ROUTER_CAPS = {"NET_ADMIN", "NET_BIND_SERVICE", "BPF", "PERFMON"}
ROUTER_SYSCTLS = {
    "net.ipv6.conf.all.forwarding": "1",
    "net.ipv6.conf.all.seg6_enabled": "1",
    "net.ipv6.conf.default.seg6_enabled": "1",
}

_VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_]\w*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_]\w*))"
)


class Unset(Exception):
    """A required ${VAR:?message} has no value."""


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """``value`` with compose's variable syntax replaced from ``env``, recursively."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match[str]) -> str:
        if m["escaped"]:
            return "$"
        name = m["braced"] or m["bare"]
        op, arg, current = m["op"] or "", m["arg"] or "", env.get(name)
        empty = current is None or (op.startswith(":") and current == "")
        if op.endswith("-"):
            return arg if empty else str(current)
        if op.endswith("?"):
            if empty:
                raise Unset(f"${{{name}}}: {arg}")
            return str(current)
        if op.endswith("+"):
            return "" if empty else arg
        return current or ""

    return _VARIABLE.sub(one, value)


def env_file_names() -> list[str]:
    """The variables scripts/compose-up.sh writes into .env."""
    return re.findall(r'^\s*echo "([A-Z][A-Z0-9_]*)=', SCRIPT.read_text(), re.M)


def sample_env() -> dict[str, str]:
    return {name: f"sample-{name.lower()}" for name in env_file_names()}


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def stack(raw: dict[str, Any]) -> dict[str, Any]:
    """The compose file as compose reads it, with a .env such as compose-up.sh makes."""
    result = interpolate(raw, sample_env())
    assert isinstance(result, dict)
    return result


def services(stack: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return stack["services"]  # type: ignore[no-any-return]


def dockerfile(service: dict[str, Any]) -> str | None:
    build = service.get("build")
    return build.get("dockerfile") if isinstance(build, dict) else None


def ours(stack: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(name, Dockerfile, service) of every service built from one of our images."""
    for name, service in services(stack).items():
        image = dockerfile(service)
        if image is not None:
            assert image in IMAGE_ENV, f"{name}: unknown image {image}"
            yield name, image, service


def routers(stack: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, img, s in ours(stack) if img == "node-manager/Dockerfile"}


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def is_one_shot(service: dict[str, Any]) -> bool:
    return service.get("restart") == "no"


def mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of every volume of the service, short syntax."""
    out = []
    for volume in service.get("volumes", []):
        assert isinstance(volume, str), f"use the short volume syntax: {volume}"
        source, target = volume.split(":")[:2]
        out.append((source, target))
    return out


def mount_of(service: dict[str, Any], path: str) -> tuple[str, str] | None:
    """The volume (source, target) that holds ``path`` in the container, if any."""
    found = [
        (s, t) for s, t in mounts(service) if path == t or path.startswith(t.rstrip("/") + "/")
    ]
    return max(found, key=lambda m: len(m[1]), default=None)


def split_host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.removeprefix("[").removesuffix("]"), int(port)


def merged_env(image: str, service: dict[str, Any]) -> dict[str, str]:
    return {**IMAGE_ENV[image], **environment(service)}


def settings_of(monkeypatch: pytest.MonkeyPatch, image: str, env: dict[str, str]) -> BaseSettings:
    """The service's settings read from ``env`` as the service reads them (SRV6PM_*)."""
    for key in list(os.environ):
        if key.startswith("SRV6PM_"):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return SETTINGS[image]()


def listen_ports(stack: dict[str, Any], name: str) -> set[int]:
    """The ports service ``name`` listens on."""
    service = services(stack)[name]
    image = dockerfile(service)
    if image is not None:
        env = merged_env(image, service)
        return {
            split_host_port(env[f"SRV6PM_{field.upper()}"])[1]
            for field in LISTEN_FIELDS
            if env.get(f"SRV6PM_{field.upper()}")
        }
    repository = service["image"].rsplit(":", 1)[0]
    if repository == "apache/kafka":
        # clients' listeners only: the KRaft controller's port answers no producer
        env = environment(service)
        internal = set(env["KAFKA_CONTROLLER_LISTENER_NAMES"].split(","))
        listeners = [urlparse(item) for item in env["KAFKA_LISTENERS"].split(",")]
        return {url.port or 0 for url in listeners if url.scheme.upper() not in internal}
    return IMAGE_PORTS[repository]


# 1. The compose specification


def test_compose_file_follows_the_compose_specification() -> None:
    done = schema_check(COMPOSE)
    assert done.returncode == 0, (
        f"check-jsonschema (pip install -r requirements-dev.txt): {done.stdout}{done.stderr}"
    )


COMPOSE_CLI = (
    Path(os.environ.get("SRV6PM_CACHE", Path.home() / ".cache" / "srv6pm"))
    / "compose-5.6.0"
    / "bin"
    / "docker-compose"
)


def schema_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "check_jsonschema",
            "--builtin-schema",
            "vendor.compose-spec",
            str(path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def compose_config(path: Path) -> subprocess.CompletedProcess[str]:
    """Compose's own loader on `path` (no engine needed), with a .env as compose-up.sh makes."""
    assert COMPOSE_CLI.exists(), "docker-compose is missing: bash scripts/install-compose.sh"
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"), **sample_env()}
    return subprocess.run(
        [str(COMPOSE_CLI), "--project-directory", str(ROOT), "-f", str(path), "config", "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_compose_itself_loads_the_file() -> None:
    done = compose_config(COMPOSE)
    assert done.returncode == 0, done.stderr


def test_compose_refuses_a_dangling_reference_the_schema_lets_through(
    raw: dict[str, Any], tmp_path: Path
) -> None:
    broken = yaml.safe_load(yaml.safe_dump(raw))
    broken["services"]["collector"]["depends_on"]["kafka-typo"] = {"condition": "service_healthy"}
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken))
    assert schema_check(path).returncode == 0  # well-formed, so the schema alone accepts it
    done = compose_config(path)
    assert done.returncode != 0
    assert "kafka-typo" in done.stderr


def test_compose_file_has_no_version_key_and_every_secret_comes_from_env(
    raw: dict[str, Any],
) -> None:
    assert "version" not in raw  # obsolete in the compose specification
    for name, service in raw["services"].items():
        for key, value in environment(service).items():
            if re.search(r"PASSWORD|TOKEN", key):
                assert re.fullmatch(r"([\w:]*)\$\{[A-Z_][A-Z0-9_]*:\?[^}]+\}", value), (
                    f"{name}: {key} must come from .env as ${{VAR:?...}}, got {value!r}"
                )


def test_every_variable_the_file_requires_is_one_compose_up_writes_to_env(
    raw: dict[str, Any],
) -> None:
    required = set(re.findall(r"\$\{([A-Z_]\w*):?\?", COMPOSE.read_text()))
    assert required, "no required variables: the secrets would have defaults"
    assert required <= set(env_file_names())
    with pytest.raises(Unset):
        interpolate(raw, {})  # no .env: compose refuses to start, naming the fix


# 2. Settings


def test_every_srv6pm_variable_is_a_setting_of_its_service(stack: dict[str, Any]) -> None:
    for name, image, service in ours(stack):
        fields = set(SETTINGS[image].model_fields)
        for key in environment(service):
            if key.startswith("SRV6PM_"):
                field = key.removeprefix("SRV6PM_").lower()
                assert field in fields, f"{name}: {key} is no setting of {image}'s service"
        # the image contract names settings too
        for key in IMAGE_ENV[image]:
            assert key.removeprefix("SRV6PM_").lower() in fields, f"{image}: {key}"


def image_env(dockerfile_path: Path) -> dict[str, str]:
    """The SRV6PM_* variables the Dockerfile's last stage sets (ENV KEY=VALUE lines)."""
    text = dockerfile_path.read_text().replace("\\\n", " ")
    last_stage = re.split(r"^FROM ", text, flags=re.M)[-1]
    env: dict[str, str] = {}
    for line in re.findall(r"^ENV (.*)$", last_stage, re.M):
        env.update(word.split("=", 1) for word in shlex.split(line))
    return {k: v for k, v in env.items() if k.startswith("SRV6PM_")}


def test_the_images_set_what_the_file_expects_of_them() -> None:
    for image, expected in IMAGE_ENV.items():
        assert image_env(ROOT / image) == expected, f"{image} differs from the image contract"


@pytest.fixture(scope="module")
def sample_host(tmp_path_factory: pytest.TempPathFactory, stack: dict[str, Any]) -> Path:
    """The files compose-up.sh makes, made the same way in a temporary folder."""
    root = tmp_path_factory.mktemp("host")
    pki.create_per_service(root / "deploy/compose/tls", sorted(routers(stack)))
    (root / "deploy/compose/stamp").mkdir(parents=True)
    (root / "deploy/compose/stamp/hmac.key").write_text("00" * 32 + "\n")
    return root


def secret_volumes(stack: dict[str, Any], host: Path) -> dict[str, Path]:
    """Named volume -> the host folder secrets-init copies into it (install-secrets.sh copies
    /in/tls/NAME to /out/NAME/tls, and /in/stamp to /out/NAME/stamp)."""
    init = services(stack)["secrets-init"]
    inputs = {target: source for source, target in mounts(init) if target.startswith("/in/")}
    out = {}
    for source, target in mounts(init):
        m = re.fullmatch(r"/out/([\w-]+)/(tls|stamp)", target)
        if m:
            name, kind = m.groups()
            folder = inputs[f"/in/{kind}"].removeprefix("./")
            out[source] = host / folder / (name if kind == "tls" else "")
    return out


def test_merged_settings_of_every_service_validate(
    stack: dict[str, Any], sample_host: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Image defaults + compose environment, with the mounted secrets' paths pointing at real
    files (the models read some: the node manager wants TLS off loopback, the controller reads
    its STAMP key)."""
    volumes = secret_volumes(stack, sample_host)
    for name, image, service in ours(stack):
        env = merged_env(image, service)
        for key, value in env.items():
            if not value.startswith("/etc/srv6pm/"):
                continue
            mount = mount_of(service, value)
            assert mount is not None, f"{name}: {key}={value} is on no volume"
            source, target = mount
            assert source in volumes, f"{name}: {value} is not a secret secrets-init installs"
            host_file = volumes[source] / posixpath.relpath(value, target)
            assert host_file.is_file(), f"{name}: {key}={value}: nothing installs {host_file}"
            env[key] = str(host_file)
        settings = settings_of(monkeypatch, image, env)
        if image == "node-manager/Dockerfile":
            assert isinstance(settings, NodeManagerSettings)
            assert settings.tls and settings.node_id == name
        if image == "controller/Dockerfile":
            assert isinstance(settings, ControllerSettings)
            assert settings.tls_ca is not None and settings.stamp_key_file is not None


def test_what_services_write_is_on_a_volume_under_a_read_only_root(
    stack: dict[str, Any],
) -> None:
    for name, image, service in ours(stack):
        assert service.get("read_only") is True, f"{name}: read_only"
        assert "/tmp" in service.get("tmpfs", []), f"{name}: /tmp must be a tmpfs"
        env = merged_env(image, service)
        written = [env[k] for k in ("SRV6PM_STATE_DIR", "SRV6PM_BPF_DIR") if k in env]
        if "SRV6PM_DATABASE_URL" in env:
            written.append(posixpath.dirname(env["SRV6PM_DATABASE_URL"].split("///", 1)[1]))
        for path in written:
            mount = mount_of(service, path)
            assert mount is not None, f"{name}: {path} is on the read-only root"
            assert not service["volumes"][mounts(service).index(mount)].endswith(":ro")


# 3. Addresses


def told_addresses(stack: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(service, host:port, where) of every address a service is given in the file."""
    for name, service in services(stack).items():
        for key, value in environment(service).items():
            if key.endswith("_BOOTSTRAP"):
                for address in value.split(","):
                    yield name, address, key
            elif key.endswith("_URL") and value.startswith("http"):
                url = urlparse(value)
                yield name, f"{url.hostname}:{url.port}", key
        command = service.get("command") or []
        words = shlex.split(command) if isinstance(command, str) else command
        words = [w for word in words for w in shlex.split(word)]
        for flag, address in itertools.pairwise(words):
            if flag == "--bootstrap-server":
                yield name, address, "command"


def test_every_address_a_service_is_told_names_a_service_listening_there_and_waited_for(
    stack: dict[str, Any],
) -> None:
    seen = set()
    for name, address, where in told_addresses(stack):
        host, port = split_host_port(address)
        assert host in services(stack), f"{name}: {where}={address}: no service {host}"
        assert port in listen_ports(stack, host), f"{name}: {where}: {host} listens not on {port}"
        depends = services(stack)[name].get("depends_on", {})
        assert depends.get(host, {}).get("condition") == "service_healthy", (
            f"{name} is told {address} ({where}) but does not wait for {host} to be healthy"
        )
        seen.add((name, host))
    # what the stack is about: nodes to Kafka, Kafka to the collector to InfluxDB
    assert {("r1", "kafka"), ("collector", "kafka"), ("collector", "influxdb")} <= seen
    assert ("controller", "influxdb") in seen


def test_every_scrape_target_names_a_service_listening_there(stack: dict[str, Any]) -> None:
    """Prometheus is told where to scrape but waits for no target: a target that is down is
    what its `up` series shows."""
    config_file = dict((t, s) for s, t in mounts(services(stack)["prometheus"]))
    config = yaml.safe_load((ROOT / config_file["/etc/prometheus/prometheus.yml"]).read_text())
    targets = {
        target
        for job in config["scrape_configs"]
        for group in job["static_configs"]
        for target in group["targets"]
    }
    for target in targets:
        host, port = split_host_port(target)
        assert port in listen_ports(stack, host), f"prometheus scrapes {target}"
    assert {"controller", *routers(stack)} <= {split_host_port(t)[0] for t in targets}


def test_health_checks_and_published_ports_use_ports_the_service_listens_on(
    stack: dict[str, Any],
) -> None:
    for name, service in services(stack).items():
        if is_one_shot(service):
            continue
        test = " ".join(service["healthcheck"]["test"])
        ports = {int(p) for p in re.findall(r"(?:127\.0\.0\.1|localhost):(\d+)", test)}
        # our images' checker probes the address a listen setting holds
        for setting in re.findall(r"srv6pm\.common\.healthcheck (SRV6PM_\w+)", test):
            image = dockerfile(service)
            assert image is not None, f"{name}: srv6pm.common.healthcheck is in our images only"
            ports.add(split_host_port(merged_env(image, service)[setting])[1])
        assert ports and ports <= listen_ports(stack, name), f"{name}: health check {test}"
        for published in service.get("ports", []):
            address, _, container = str(published).rpartition(":")
            assert int(container) in listen_ports(stack, name)
            # only this machine reaches the stack unless SRV6PM_PUBLISH_ADDRESS says otherwise
            assert address.rsplit(":", 1)[0] == "127.0.0.1", f"{name}: {published}"


def registration() -> list[list[str]]:
    """The `ensure KIND NAME OPTIONS...` lines of compose-up.sh, as words."""
    text = SCRIPT.read_text().replace("\\\n", " ")
    return [shlex.split(line)[1:] for line in text.splitlines() if line.startswith("ensure ")]


def options(words: list[str], flag: str) -> list[str]:
    return [b for a, b in itertools.pairwise(words) if a == flag]


def test_the_setup_registers_each_router_at_its_service_and_address(
    stack: dict[str, Any],
) -> None:
    text = SCRIPT.read_text()
    # registration runs once every health check passed
    assert text.index("up -d --build --wait") < text.index("\nensure ")
    nodes = {words[1]: words for words in registration() if words[0] == "nodes"}
    assert set(nodes) == set(routers(stack))
    for node, words in nodes.items():
        (endpoint,) = options(words, "--endpoint")
        host, port = split_host_port(endpoint)
        # the host is what the node's certificate names (SRV6PM_TLS_SERVER_NAME '')
        assert host == node and port in listen_ports(stack, node)
        (probe,) = options(words, "--probe-address")
        addresses = [n.get("ipv6_address") for n in routers(stack)[node]["networks"].values() if n]
        assert probe in addresses, f"{node}: STAMP address {probe} is not one of {addresses}"


def router_routes(service: dict[str, Any]) -> list[tuple[ipaddress.IPv6Network, str]]:
    command = service["command"]
    specs = command[: command.index("--")]
    return [(ipaddress.IPv6Network(s.split("=")[0]), s.split("=")[1]) for s in specs]


def test_every_router_routes_the_other_routers_sids_through_a_neighbour(
    stack: dict[str, Any],
) -> None:
    lab = routers(stack)
    sids = {words[1]: options(words, "--node")[0] for words in registration() if words[0] == "sids"}
    address_of = {
        n["ipv6_address"]: (router, network)
        for router, service in lab.items()
        for network, n in service["networks"].items()
        if n and n.get("ipv6_address")
    }
    for router, service in lab.items():
        assert service["command"][-1] == "srv6pm-node-manager"
        routes = router_routes(service)
        for sid, node in sids.items():
            if node == router:
                continue
            via = [gw for prefix, gw in routes if ipaddress.IPv6Address(sid) in prefix]
            assert via, f"{router} has no route to {sid} ({node})"
            neighbour, network = address_of[via[0]]
            assert neighbour != router and network in service["networks"], (
                f"{router}: {sid} via {via[0]} is not a neighbour on a shared link"
            )
    for network in {n for s in lab.values() for n in s["networks"] if n != "default"}:
        config = stack["networks"][network]
        assert config["enable_ipv6"] is True and config["internal"] is True
        subnet = ipaddress.IPv6Network(config["ipam"]["config"][0]["subnet"])
        assert subnet.is_private
        for address, (_, on) in address_of.items():
            if on == network:
                # Docker's bridge takes the subnet's first address
                assert ipaddress.IPv6Address(address) in subnet
                assert ipaddress.IPv6Address(address) != subnet.network_address + 1


# 4. Security


def test_routers_have_exactly_the_capabilities_the_data_plane_needs(
    stack: dict[str, Any],
) -> None:
    lab = routers(stack)
    assert len(lab) == 3
    bpf_dirs, states = set(), set()
    for name, service in lab.items():
        assert set(service["cap_add"]) == ROUTER_CAPS, name
        assert service["cap_drop"] == ["ALL"], name
        assert service.get("network_mode") is None, f"{name}: its own network namespace"
        assert {k: str(v) for k, v in service["sysctls"].items()} == ROUTER_SYSCTLS
        env = environment(service)
        assert env["SRV6PM_NODE_ID"] == name
        assert env["SRV6PM_BPF_DIR"] == f"/sys/fs/bpf/srv6pm/{name}"
        assert ("/sys/fs/bpf", "/sys/fs/bpf") in mounts(service)
        bpf_dirs.add(env["SRV6PM_BPF_DIR"])
        (state,) = [s for s, t in mounts(service) if t == "/var/lib/srv6pm/node"]
        assert state in (stack.get("volumes") or {}), f"{name}: the state is a named volume"
        states.add(state)
        assert ("tls-" + name, "/etc/srv6pm/tls") in mounts(service)
    assert len(bpf_dirs) == len(states) == len(lab), "routers share pins or state"


def test_no_service_is_privileged_or_reaches_the_host(stack: dict[str, Any]) -> None:
    for name, service in services(stack).items():
        assert not service.get("privileged"), name
        assert service.get("network_mode") in (None, "none"), name
        assert service.get("pid") is None and service.get("ipc") is None, name
        assert "SYS_ADMIN" not in service.get("cap_add", []), name
        assert "no-new-privileges:true" in service.get("security_opt", []), name
        for source, _ in mounts(service):
            assert "docker.sock" not in source, name
            assert not source.startswith("/") or source == "/sys/fs/bpf", f"{name}: {source}"
    for name in ("controller", "collector"):
        service = services(stack)[name]
        assert service["read_only"] is True and "/tmp" in service["tmpfs"]
        assert service["cap_drop"] == ["ALL"] and not service.get("cap_add")


def test_every_service_is_health_checked_restarted_and_waited_for(
    stack: dict[str, Any],
) -> None:
    """Long-running services restart and have a health check; one-shot ones (restart "no")
    are waited for with service_completed_successfully, which `up --wait` also accepts."""
    all_services = services(stack)
    adopted = set()
    for name, service in all_services.items():
        if not is_one_shot(service):
            assert service["restart"] == "unless-stopped", name
            assert service["healthcheck"]["test"], name
        depends = service.get("depends_on", {})
        assert isinstance(depends, dict), f"{name}: depends_on needs conditions"
        for dep, spec in depends.items():
            wanted = (
                "service_completed_successfully"
                if is_one_shot(all_services[dep])
                else "service_healthy"
            )
            assert spec["condition"] == wanted, f"{name} -> {dep}"
            if wanted == "service_completed_successfully":
                adopted.add(dep)
    assert adopted == {n for n, s in all_services.items() if is_one_shot(s)}


def test_every_secret_volume_is_installed_for_the_user_that_reads_it(
    stack: dict[str, Any],
) -> None:
    init = services(stack)["secrets-init"]
    owners = dict(spec.split("=") for spec in init["command"])
    assert owners == {"controller": CONTROLLER_UID, **dict.fromkeys(routers(stack), "0")}
    filled = {s for s, t in mounts(init) if t.startswith("/out/")}
    used = {s for n, svc in services(stack).items() if n != "secrets-init" for s, _ in mounts(svc)}
    assert {v for v in used if v.startswith(("tls-", "stamp-"))} == filled
    for name in owners:
        depends = services(stack)[name]["depends_on"]
        assert depends["secrets-init"]["condition"] == "service_completed_successfully"


def test_the_stacks_secrets_are_never_committed() -> None:
    for path in (".env", "deploy/compose/tls/r1/tls.key", "deploy/compose/stamp/hmac.key"):
        done = subprocess.run(
            ["git", "check-ignore", "-q", path], cwd=ROOT, capture_output=True, check=False
        )
        assert done.returncode == 0, f"{path} is not in .gitignore"


# 5. Grafana


def grafana_file(stack: dict[str, Any], container_path: str) -> Path:
    mount = mount_of(services(stack)["grafana"], container_path)
    assert mount is not None, f"grafana has nothing at {container_path}"
    source, target = mount
    return ROOT / source / posixpath.relpath(container_path, target)


def test_grafana_reads_the_srv6pm_database_of_the_influxdb_service(
    stack: dict[str, Any],
) -> None:
    folder = grafana_file(stack, "/etc/grafana/provisioning/datasources")
    sources = [
        source
        for file in sorted(folder.glob("*.y*ml"))
        for source in yaml.safe_load(file.read_text())["datasources"]
    ]
    (influx,) = [s for s in sources if s["type"] == "influxdb"]
    url = urlparse(influx["url"])
    assert url.hostname == "influxdb" and url.port in listen_ports(stack, "influxdb")
    influx_env = environment(services(stack)["influxdb"])
    assert influx["jsonData"]["dbName"] == influx_env["INFLUXDB_DB"] == "srv6pm"
    assert influx["user"] == influx_env["INFLUXDB_READ_USER"]
    # Grafana expands $VAR from its environment; compose fills that from the same .env value
    variable = influx["secureJsonData"]["password"].strip("${}")
    grafana_env = environment(services(stack)["grafana"])
    assert grafana_env[variable] == influx_env["INFLUXDB_READ_USER_PASSWORD"]
    grafana_depends = services(stack)["grafana"]["depends_on"]
    for source in sources:
        host = urlparse(source["url"]).hostname
        assert host in services(stack) and host in grafana_depends, source["name"]


def test_grafana_has_every_data_source_dashboard_and_alert_rule_it_is_given(
    stack: dict[str, Any],
) -> None:
    folder = grafana_file(stack, "/etc/grafana/provisioning/datasources")
    uids = {
        source["uid"]
        for file in folder.glob("*.y*ml")
        for source in yaml.safe_load(file.read_text())["datasources"]
    }
    provider = yaml.safe_load(
        grafana_file(stack, "/etc/grafana/provisioning/dashboards/srv6pm.yaml").read_text()
    )
    dashboards = grafana_file(stack, provider["providers"][0]["options"]["path"])
    wanted = set()
    for file in dashboards.glob("*.json"):
        wanted |= set(
            re.findall(r'"datasource":\s*\{[^}]*"uid":\s*"([^"$][^"]*)"', file.read_text())
        )
    # the alert rules are a link Grafana follows inside the container
    link = "/etc/grafana/provisioning/alerting/srv6pm.yaml"
    target = os.readlink(grafana_file(stack, link))
    rules = grafana_file(stack, posixpath.normpath(posixpath.join(posixpath.dirname(link), target)))
    for group in yaml.safe_load(rules.read_text())["groups"]:
        for rule in group["rules"]:
            wanted |= {d["datasourceUid"] for d in rule["data"]} - {"__expr__"}
    assert wanted and wanted <= uids, f"not provisioned: {wanted - uids}"


# 6. The PKI compose-up.sh makes with `srv6pm pki`: cli/tests/test_cli_pki.py


# 7. The scripts


def test_scripts_pass_shellcheck() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.fail("shellcheck is not installed: scripts/install-deps.sh installs it")
    done = subprocess.run(
        [shellcheck, *map(str, SHELL_SCRIPTS)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_compose_up_stops_with_a_clear_message_without_docker_compose(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "docker").write_text(
        "#!/bin/sh\necho \"docker: 'compose' is not a command\" >&2\nexit 1\n"
    )
    (fake / "docker").chmod(0o755)
    done = subprocess.run(
        ["bash", str(SCRIPT)],
        env={**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "docker compose version" in done.stderr and "docs/DEPLOY.md" in done.stderr
    assert done.stdout == "", "nothing is made before Docker is known to be there"


def test_makefile_runs_the_script() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^compose-up:\n\tbash scripts/compose-up.sh$", makefile, re.M)
    assert re.search(r"^compose-down:\n\tdocker compose down$", makefile, re.M)
    assert {"SRV6PM_BOOTSTRAP_TOKEN", "GRAFANA_ADMIN_PASSWORD"} <= set(env_file_names())
