"""Fixtures of the service tests: loopback sites and one shared service process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.serve_site import ThreadedSite
from kit.service_sites import slow_site, small_site
from kit.servicekit import ServiceProcess


@pytest.fixture(scope="module")
def site() -> Iterator[ThreadedSite]:
    with ThreadedSite(small_site()) as server:
        yield server


@pytest.fixture(scope="module")
def slow() -> Iterator[ThreadedSite]:
    with ThreadedSite(slow_site()) as server:
        yield server


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """One service for a module: token set, private addresses allowed (sites are on loopback)."""
    data: Path = tmp_path_factory.mktemp("service") / "data"
    with ServiceProcess(
        data, ["--allow-private", "--max-running", "2", "--shutdown-timeout", "2"]
    ) as process:
        yield process
