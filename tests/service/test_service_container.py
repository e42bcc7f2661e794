"""The image's command line works: ENTRYPOINT + CMD and HEALTHCHECK, read from the Dockerfile.

There is no Docker engine here, so the test runs the exact command the image
would, with the image's ``CRAWLER_*`` environment, a temporary directory for
``/data`` and a free port.
"""

from __future__ import annotations

import functools
import json
import shlex
import subprocess
import sys
from pathlib import Path

from kit.servicekit import TOKEN, ServiceProcess

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
BIN = Path(sys.executable).parent


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the final stage, continuation lines joined."""
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    stages: list[list[tuple[str, str]]] = [[]]
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition(" ")
        if name.upper() == "FROM":
            stages.append([])
        stages[-1].append((name.upper(), rest.strip()))
    return stages[-1]


def _exec_form(instruction: str) -> list[str]:
    values = [rest for name, rest in _instructions() if name == instruction]
    assert values, f"no {instruction} in the final stage"
    command = json.loads(values[-1])  # exec form: a JSON array
    assert isinstance(command, list)
    return [str(part) for part in command]


def _image_env() -> dict[str, str]:
    env = {}
    for name, rest in _instructions():
        if name == "ENV":
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                if key.startswith("CRAWLER_"):
                    env[key] = value
    return env


def _healthcheck() -> list[str]:
    for name, rest in _instructions():
        if name == "HEALTHCHECK":
            _, _, command = rest.partition("CMD ")
            return [str(part) for part in json.loads(command)]
    raise AssertionError("no HEALTHCHECK")


@functools.cache
def _serve_is_wired() -> bool:
    """Does ``crawler`` know ``serve`` yet? (cli.py adds it with service_cli.add_serve_command.)"""
    probe = subprocess.run(
        [str(BIN / "crawler"), "serve", "--help"], capture_output=True, timeout=30
    )
    return probe.returncode == 0


def _command_line(data_dir: Path) -> list[str]:
    """ENTRYPOINT + CMD, with /data replaced and the entry point found in this venv.

    Until cli.py wires ``serve``, ``crawler serve ARGS`` runs as the equivalent
    ``python -m crawler.service ARGS``; once it does, the real entry point is used.
    """
    entrypoint, cmd = _exec_form("ENTRYPOINT"), _exec_form("CMD")
    assert entrypoint == ["crawler"]
    assert cmd[0] == "serve"
    assert "/data" in cmd
    args = [str(data_dir) if part == "/data" else part for part in cmd]
    if _serve_is_wired():
        return [str(BIN / entrypoint[0]), *args]
    return [sys.executable, "-m", "crawler.service", *args[1:]]


def test_the_image_runs_as_a_non_root_user_with_a_data_volume() -> None:
    instructions = dict(_instructions())
    assert instructions["USER"] not in ("root", "0", "0:0")
    assert "/data" in instructions["VOLUME"]
    assert _exec_form("CMD")[:3] == ["serve", "--host", "0.0.0.0"]


def test_the_image_command_line_serves_with_a_token(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {**_image_env(), "CRAWLER_PORT": "0"}  # a free port instead of the image's 8080
    with ServiceProcess(data, command=_command_line(data), env=env, token=TOKEN) as service:
        assert service.get("/healthz").json() == {"status": "ok"}
        assert service.get("/readyz").status == 200
        assert service.request("POST", "/crawls", {"seeds": []}, auth=False).status == 401
        health = [sys.executable, *_healthcheck()[1:]]
        assert _healthcheck()[0] == "python"
        probe = subprocess.run(
            health, env={"CRAWLER_PORT": str(service.port)}, capture_output=True, timeout=10
        )
        assert probe.returncode == 0, probe.stderr
        assert service.terminate() == 0
    probe = subprocess.run(
        health, env={"CRAWLER_PORT": str(service.port)}, capture_output=True, timeout=10
    )
    assert probe.returncode != 0  # the health check notices a dead service


def test_the_image_command_line_refuses_to_listen_without_a_token(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {**_image_env(), "CRAWLER_PORT": "0", "PATH": str(BIN)}
    result = subprocess.run(
        _command_line(data), env=env, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 3
    assert "CRAWLER_TOKEN" in result.stderr
    assert "0.0.0.0" in result.stderr
