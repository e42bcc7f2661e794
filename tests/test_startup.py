"""Start-up: a command imports only what it uses.

``crawler --version`` and ``crawler --help`` answer before any of the crawl's
machinery is imported: no HTTP client, no HTML parser, no logging setup, no
database driver, no event loop. This holds the behaviour (which modules are
loaded), not a time; ``hyperfine '.venv/bin/crawler --version'`` measures the
time (bench/RESULTS.md).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# What a crawl needs and these answers do not.
CRAWL_MODULES = (
    "aiohttp",
    "yarl",
    "multidict",
    "selectolax",
    "structlog",
    "rich",
    "re2",
    "idna",
    "sqlite3",
    "asyncpg",
    "asyncio",
    "crawler.engine",
    "crawler.net",
    "crawler.store",
    "crawler.cli.commands",
)

PROBE = """
import json, sys
sys.argv = ["crawler", *sys.argv[1:]]
from crawler.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def loaded_by(*args: str) -> tuple[int, str, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], done.stdout, set(report["modules"])


def imported(modules: set[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_imports_nothing_of_the_cli(flag: str) -> None:
    code, out, modules = loaded_by(flag)

    assert (code, out) == (0, "crawler 0.1.0\n")
    assert [m for m in CRAWL_MODULES if imported(modules, m)] == []
    # Not even the option table (pydantic) or argparse: the version is known without them.
    assert not imported(modules, "pydantic")
    assert not imported(modules, "crawler.cli.parser")


@pytest.mark.parametrize("args", [["--help"], ["crawl", "--help"], ["serve", "--help"]])
def test_help_imports_none_of_the_crawl(args: list[str]) -> None:
    code, out, modules = loaded_by(*args)

    assert code == 0
    assert "usage: crawler" in out
    assert [m for m in CRAWL_MODULES if imported(modules, m)] == []


def test_a_usage_error_imports_none_of_the_crawl() -> None:
    code, _, modules = loaded_by("crawl", "--no-such-flag")

    assert code == 3
    assert [m for m in CRAWL_MODULES if imported(modules, m)] == []


def test_the_format_names_are_the_registry_s() -> None:
    # FORMATS is a literal so --help need not import the formats' modules.
    from crawler import report

    assert tuple(report.registry()) == report.FORMATS
    assert report.registry() == report.REGISTRY
