"""A host whose name does not exist is looked up once, not once a link (``MissingNames``).

No test here asks a real DNS server: the resolvers are stand-ins that refuse
every name, and every address the crawler connects to is a loopback literal.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from crawler.net.missing_names import MAX_MISSING, MissingNames
from crawler.net.resolver import Address, Resolver

from kit.clikit import run_command
from kit.serve_site import ThreadedSite
from kit.sitekit import Page


class Refusing:
    """Answers every name with ``errno``, counting the lookups per host."""

    def __init__(self, errno: int = socket.EAI_NONAME) -> None:
        self.errno = errno
        self.asked: list[str] = []
        self.closed = False

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[Address]:
        self.asked.append(host)
        raise socket.gaierror(self.errno, f"refused {host}")

    async def close(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def lookup_error(resolver: Resolver, host: str) -> socket.gaierror:
    with pytest.raises(socket.gaierror) as caught:
        await resolver.resolve(host, 443)
    return caught.value


async def test_a_missing_name_fails_at_once_with_the_same_error_until_its_time_is_up() -> None:
    inner, clock = Refusing(), Clock()
    names = MissingNames(inner, ttl_s=60.0, clock=clock)
    first = await lookup_error(names, "gone.invalid")
    again = await lookup_error(names, "GONE.invalid.")
    assert inner.asked == ["gone.invalid"]
    assert (again.errno, again.strerror) == (first.errno, first.strerror)
    clock.now += 59.0
    await lookup_error(names, "gone.invalid")
    assert inner.asked == ["gone.invalid"]
    clock.now += 2.0
    await lookup_error(names, "gone.invalid")
    assert inner.asked == ["gone.invalid", "gone.invalid"]


async def test_other_hosts_and_temporary_failures_are_asked_each_time() -> None:
    names = MissingNames(Refusing())
    await lookup_error(names, "a.invalid")
    await lookup_error(names, "b.invalid")
    again = MissingNames(flaky := Refusing(socket.EAI_AGAIN))
    await lookup_error(again, "c.invalid")
    await lookup_error(again, "c.invalid")
    assert flaky.asked == ["c.invalid", "c.invalid"]


async def test_the_memo_is_bounded_and_close_reaches_the_inner_resolver() -> None:
    inner = Refusing()
    names = MissingNames(inner)
    for i in range(MAX_MISSING + 1):
        await lookup_error(names, f"h{i}.invalid")
    await lookup_error(names, "h0.invalid")  # forgotten when the memo was emptied
    assert inner.asked.count("h0.invalid") == 2
    await names.close()
    assert inner.closed


# The CLI in a subprocess whose system resolver refuses every name and logs each
# lookup: nothing leaves loopback.
BOOT = """
import socket, sys
import crawler.net.resolver

LOOKUPS = sys.argv[1]

class Refusing:
    def __init__(self, *args, **kwargs):
        pass
    async def resolve(self, host, port=0, family=socket.AF_INET):
        with open(LOOKUPS, "a") as log:
            log.write(host + "\\n")
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    async def close(self):
        pass

crawler.net.resolver.SystemResolver = Refusing  # the system's resolver, replaced
from crawler.cli import main
sys.exit(main.main(sys.argv[2:]))
"""

LINKS_TO_MISSING_HOST = 40


@pytest.mark.parametrize("guarded", [False, True], ids=["plain", "exclude-all-private"])
def test_a_crawl_looks_a_missing_host_up_once_and_reports_each_of_its_links(
    tmp_path: Path, guarded: bool
) -> None:
    missing = [f"http://gone.invalid/p{i}.html" for i in range(LINKS_TO_MISSING_HOST)]
    site = {"/": Page(links=[*missing, "/a"]), "/a": Page(links=["http://other.invalid/"])}
    lookups = tmp_path / "lookups.txt"
    report = tmp_path / "report.json"
    with ThreadedSite(site) as server:
        args = [server.url("/"), "--db", str(tmp_path / "c.db"), "-n", "-f", "json"]
        args += ["-o", str(report), "--host-concurrency", "4", "--max-retries", "0"]
        if guarded:  # the guard's resolver is the one wrapped; loopback stays reachable
            args += ["--exclude-all-private", "--allow-network", "127.0.0.0/8"]
        command = [sys.executable, "-c", BOOT, str(lookups), "crawl", *args]
        result = run_command(command, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    asked = lookups.read_text().split()
    # robots.txt and the first links in flight may share the first answer or not;
    # what must not happen is a lookup per link.
    assert 1 <= asked.count("gone.invalid") <= 4 + 1, asked
    assert asked.count("other.invalid") >= 1
    errors = {entry["url"]: entry["error"] for entry in json.loads(report.read_text())["broken"]}
    assert {url for url in errors if "gone.invalid" in url} == set(missing)
    assert len({errors[url] for url in missing}) == 1
    assert errors[missing[0]].startswith("DNS lookup failed")
    assert "robots_unavailable" not in result.stderr  # the report says it, once a link
    assert "Name or service not known" in errors[missing[0]]
