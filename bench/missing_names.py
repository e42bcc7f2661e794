#!/usr/bin/env python3
"""Benchmark: a site whose external links name hosts that do not resolve.

    .venv/bin/python bench/missing_names.py [--lookup-ms 100] [--docs DIR]

A CI runner without outside DNS checking the Python docs (python3-doc, served
on loopback as by bench/pydocs.py) meets ~4,100 links to ~40 external hosts,
and every lookup says "Name or service not known". The script crawls the docs
twice in one run, external links included, with the crawler's resolver memo
of missing names (``crawler.net.missing_names``) and with it switched off,
and prints each run's wall time, the lookups asked and the broken links
found (the two reports must list the same links with the same errors).

No lookup leaves this machine: in the crawler's process, the system's
resolver (``crawler.net.resolver.SystemResolver``) is replaced by a stand-in
that blocks a thread of the event loop's pool for ``--lookup-ms`` (as
``getaddrinfo`` does; one failing lookup took ~100 ms on this project's
machines) and then refuses the name. Every request
the crawler sends goes to the loopback server.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
from pathlib import Path

import measure
import serve
from measure import OUT, log
from pydocs import find_docs

BOOT = """
import asyncio, atexit, socket, sys, time
import crawler.net.resolver

LOOKUP_S, MEMO, COUNT = float(sys.argv[1]), sys.argv[2] == "on", sys.argv[3]
asked = []

class StandIn:
    def __init__(self, *args, **kwargs):
        pass
    async def resolve(self, host, port=0, family=socket.AF_INET):
        asked.append(host)
        await asyncio.get_running_loop().run_in_executor(None, time.sleep, LOOKUP_S)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    async def close(self):
        pass

crawler.net.resolver.SystemResolver = StandIn  # the system's resolver, replaced
if not MEMO:
    from crawler.net import missing_names

    async def passthrough(self, host, port=0, family=socket.AF_INET):
        return await self._inner.resolve(host, port, family)

    missing_names.MissingNames.resolve = passthrough


def tell():
    with open(COUNT, "w") as out:
        out.write(f"{len(asked)} {len(set(asked))}")

atexit.register(tell)
from crawler.cli import main
sys.exit(main.main(sys.argv[4:]))
"""


def crawl(url: str, run_dir: Path, memo: bool, lookup_s: float) -> dict[str, object]:
    name = "memo" if memo else "no-memo"
    count, report = run_dir / f"{name}.lookups", run_dir / f"{name}.json"
    cmd = [sys.executable, "-c", BOOT, str(lookup_s), "on" if memo else "off", str(count)]
    cmd += ["crawl", url, "--db", str(run_dir / f"{name}.db"), "-n", "-f", "json"]
    cmd += ["-o", str(report), "--max-retries", "0"]
    log(f"{name}: crawl {url}")
    m = measure.run_measured(
        cmd,
        timeout_s=1800,
        stdout=run_dir / f"{name}.stdout",
        stderr=run_dir / f"{name}.stderr",
        env=measure.loopback_env(),
        cwd=run_dir,
    )
    broken = json.loads(report.read_text())["broken"] if report.exists() else []
    lookups, hosts = count.read_text().split() if count.exists() else (None, None)
    return {
        "wall_s": round(m.wall_s, 2),
        "cpu_s": round(m.cpu_s, 2),
        "exit": m.returncode,
        "lookups": lookups,
        "hosts": hosts,
        "broken": len(broken),
        "errors": {(b["url"], b.get("source")): b.get("error") for b in broken},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--docs", type=Path, help="HTML tree to crawl (default: python3-doc's)")
    parser.add_argument("--lookup-ms", type=float, default=100.0, help="each failing lookup")
    parser.add_argument("--server", choices=("auto", "nginx", "python"), default="auto")
    args = parser.parse_args(argv)
    measure.install_signal_exit()
    docs = args.docs or find_docs()
    if docs is None:
        log("python3-doc is not installed (bench/pydocs.py installs it): nothing to crawl")
        return 1
    run_dir = OUT / "missing-names"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    measure.compile_package()
    runs = {}
    with serve.Server([docs.resolve()], kind=args.server, workdir=run_dir / "server") as server:
        for memo in (False, True):
            runs[memo] = crawl(server.origins[0] + "/", run_dir, memo, args.lookup_ms / 1000)
    same = runs[True].pop("errors") == runs[False].pop("errors")
    print(f"\n== the Python docs, every external name missing ({args.lookup_ms:g} ms a lookup)")
    for memo, fig in runs.items():
        label = "memo of missing names" if memo else "memo switched off"
        lookups = f"{fig['lookups']} lookups of {fig['hosts']} hosts"
        print(
            f"  {label:<24} {fig['wall_s']} s wall, {fig['cpu_s']} s CPU, {lookups}, "
            f"{fig['broken']} broken, exit {fig['exit']}"
        )
    print(f"  same broken links and errors: {same}")
    measure.append_result(
        {
            "bench": "missing_names",
            "lookup_ms": args.lookup_ms,
            "runs": {"memo": runs[True], "no_memo": runs[False]},
            "same_report": same,
            "rev": measure.git_rev(),
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
    )
    shutil.rmtree(run_dir, ignore_errors=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
