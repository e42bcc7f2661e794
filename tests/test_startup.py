"""Start-up: a command imports only what it uses.

``crawler --version`` and ``crawler --help`` answer before any of the crawl's
machinery is imported: no HTTP client, no HTML parser, no logging setup, no
database driver, no event loop. This holds the behaviour (which modules are
loaded), not a time; ``hyperfine '.venv/bin/crawler --version'`` measures the
time (bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kit.sitekit import Page

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
    # Not even the option table or argparse: the version is known without them.
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
    # get() imports the one module it is asked for: the same format as the registry's.
    assert all(report.get(name) is report.registry()[name] for name in report.FORMATS)


TLS_PROBE = """
import asyncio, json, socket, ssl, sys
from crawler.config import CrawlSettings
from crawler.net.fetch import Fetcher

def loaded(fetcher):
    own = fetcher._pool._tls  # the crawl's own connections' context, made at the first https
    return None if own is None else own.cert_store_stats()["x509_ca"]

probe = socket.socket()  # bound, never listened on, held to the end: connections refused
probe.bind(("127.0.0.1", 0))
port = probe.getsockname()[1]

async def main():
    async with Fetcher(CrawlSettings(max_retries=0)) as fetcher:
        seen["opened"] = loaded(fetcher)
        plain = await fetcher.check(f"http://127.0.0.1:{port}/", f"127.0.0.1:{port}")
        seen["after http"] = [loaded(fetcher), plain.failure]
        secure = await fetcher.check(f"https://127.0.0.1:{port}/", f"127.0.0.1:{port}")
        seen["after https"] = [loaded(fetcher), secure.failure]

seen = {}
asyncio.run(main())
seen["aiohttp imported"] = "aiohttp" in sys.modules
from crawler.net import aio_client, tls  # aiohttp for a proxy, a jar or the renderer
import aiohttp.connector as connector
seen["aiohttp's contexts"] = [
    tls.deferred(), connector._SSL_CONTEXT_VERIFIED.cert_store_stats()["x509_ca"]
]
seen["system"] = ssl.create_default_context().cert_store_stats()["x509_ca"]
print(json.dumps(seen))
"""


def test_the_ca_store_is_read_at_the_first_tls_connection_not_at_import() -> None:
    """A crawl on http never reads the CA store; the first https request reads it first.

    Both requests go to a closed loopback port: the TLS context is made before
    the connection is tried, so the refused connection still shows which was
    read. A crawl without a proxy or cookies never imports aiohttp; imported
    (for those), its own contexts wait for their first use too.
    """
    done = subprocess.run(
        [sys.executable, "-c", TLS_PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])

    assert seen["opened"] is None
    assert seen["after http"] == [None, "connection"]
    assert seen["after https"] == [seen["system"], "connection"]
    assert seen["aiohttp imported"] is False
    assert seen["aiohttp's contexts"] == [2, 0]  # neither loaded


EXIT_PROBE = """
import atexit, sys, threading
from concurrent.futures import ThreadPoolExecutor
from crawler.cli.main import exit_now

def lines():
    started.wait(30)
    for number in range(2000):
        sys.stderr.write(f"{number}\\n")

started = threading.Event()
threading.Thread(target=lines).start()  # not a daemon: the exit waits for it
ThreadPoolExecutor(1).submit(print, "from the executor").result()  # stays idle: no hang
atexit.register(print, "atexit ran")
print("buffered", end=" ")
started.set()
exit_now(2)
"""


def test_the_fast_exit_still_waits_flushes_and_runs_atexit() -> None:
    """``exit_now`` skips the interpreter's teardown, not what teardown is for."""
    done = subprocess.run(
        [sys.executable, "-c", EXIT_PROBE], capture_output=True, text=True, timeout=60, check=False
    )

    assert done.returncode == 2
    assert done.stdout == "from the executor\nbuffered atexit ran\n"
    assert done.stderr.split() == [str(n) for n in range(2000)]


CRAWL_PROBE = """
import asyncio, json, sys
spawned = []
real_exec = asyncio.create_subprocess_exec

async def recorded(*args, **kwargs):
    spawned.append([str(a) for a in args[:3]])
    return await real_exec(*args, **kwargs)

asyncio.create_subprocess_exec = recorded
from crawler.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules), "spawned": spawned}),
      file=sys.stderr)
"""
# What a one-page crawl on http with a JSON report has no use for.
NOT_FOR_A_SMALL_CRAWL = (
    "crawler.engine.joiner",  # `work --service`
    "crawler.store.service",
    "crawler.cli.manpage",
    "crawler.report.text",  # the other formats
    "crawler.report.csv",
    "crawler.report.junit",
    "crawler.report.html",
    "crawler.report.sarif",
    "tomllib",  # no config file where it runs
    "html.parser",  # no page too big for the tree parser
    "aiohttp",  # no proxy, no cookie set, no rendering: the crawl's own client only
    "urllib.request",  # no *_proxy variable (the probe runs without them)
    "crawler.service.config",  # `serve`'s flags are built, its settings' model is not
    "crawler.report.diff_formats",  # `diff`
    "pydantic",  # the settings are SettingsModels; pydantic is the service API's
    "crawler.service.settings_schema",
)


async def test_a_one_page_crawl_loads_and_starts_only_what_it_uses(
    site_server, tmp_path: Path
) -> None:
    """No parse helper for 40 links, no aiohttp (nor its CA store), no other command's module."""
    links = [f"/p{i}" for i in range(40)]
    server = await site_server({"/": Page(links=links), **{link: Page() for link in links}})
    args = ["crawl", server.url("/"), "--max-depth", "0", "--db", str(tmp_path / "c.db")]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CRAWL_PROBE, *args, "-n", "--no-robots", "-f", "json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")},
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    seen = json.loads(err.decode().strip().splitlines()[-1])

    assert seen["code"] == 0
    assert json.loads(out)["summary"]["links"] == 41
    assert seen["spawned"] == []
    assert [m for m in NOT_FOR_A_SMALL_CRAWL if m in seen["modules"]] == []
    assert "crawler.report.json" in seen["modules"]
