#!/usr/bin/env python3
"""Stop and restart: SIGKILL a crawl part-way, resume it, and time the restart.

    .venv/bin/python bench/restart.py --pages 100000 [--kill-at 0.5]

Serves the synthetic site (as bench/run.py does), starts ``crawler crawl``,
kills it with SIGKILL once the access log holds ``--kill-at`` of the expected
requests, then runs ``crawler resume`` and prints: seconds from launching the
resume to its first request (from nginx's ``$msec`` timestamps), seconds from
the last response to the resumed crawl's exit, requests repeated after the
kill, and whether the final report has exactly the planted broken links.
With ``--resume-for-s S`` the resumed crawl is stopped (SIGTERM) after S
seconds instead of running to the end: the restart of a 1,000,000-page crawl
is measured without crawling the rest of it, and the report is not checked.
Bounded by ``--timeout-s``; everything it starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import measure
import serve
import sitegen
from measure import OUT, VENV_BIN, log
from run import crawler_command

POLL_S = 0.05


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kill-at", type=float, default=0.5, help="fraction of requests")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--timeout-s", type=float, default=3600)
    parser.add_argument("--crawler-arg", action="append", default=[])
    parser.add_argument(
        "--resume-for-s", type=float, help="stop the resumed crawl (SIGTERM) after this long"
    )
    args = parser.parse_args(argv)
    measure.install_signal_exit()
    site_dir = measure.SITES / sitegen.site_name(args.pages, args.seed)
    sitegen.generate(site_dir, args.pages, args.seed)
    truth = json.loads((site_dir / sitegen.TRUTH).read_text())
    expected = sum(truth["expected_requests"].values())
    run_dir = OUT / f"restart-n{args.pages}-s{args.seed}-{os.getpid()}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    deadline = time.monotonic() + args.timeout_s
    roots = [site_dir / "site", site_dir / "ext"]
    with serve.Server(roots, workdir=run_dir / "server") as server:
        figures = _kill_and_resume(args, server, run_dir, expected, deadline)
        server.stop()  # flushes the access log
        entries = list(server.entries())
    first_after = min(
        (e.at for e in entries if e.at >= figures["resume_launched_at"]), default=None
    )
    last = max(e.at for e in entries)
    counts = Counter((e.method, e.uri) for e in entries if e.uri != "/robots.txt")
    report = json.loads((run_dir / "report.json").read_text())
    found = {b["url"].split("/", 3)[-1]: b["sources"] for b in report["broken"]}
    launched = figures.pop("resume_launched_at")
    exited = figures.pop("resume_exited_at")
    results: dict[str, object] = {
        **figures,
        "pages": args.pages,
        "resume_to_first_request_s": None
        if first_after is None
        else round(first_after - launched, 3),
        "last_response_to_exit_s": round(exited - last, 3),
        "repeated_requests": sum(n - 1 for n in counts.values() if n > 1),
        # Stopped early, the report is partial by design.
        "broken_found": "not checked" if args.resume_for_s is not None else len(found),
        "broken_planted": len(truth["broken"]),
    }
    measure.append_result({"bench": "restart", **results})
    for key, value in results.items():
        print(f"{key:28} {value}")
    shutil.rmtree(run_dir, ignore_errors=True)
    return 0


def _kill_and_resume(
    args: argparse.Namespace,
    server: serve.Server,
    run_dir: Path,
    expected: int,
    deadline: float,
) -> dict[str, float]:
    db = run_dir / "crawl.db"
    url = server.origins[0] + "/"
    command = crawler_command(url, db, run_dir / "report.json", args.concurrency, args.crawler_arg)
    env = measure.loopback_env()
    crawl = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    target = int(expected * args.kill_at)
    requests = _LineCounter(server.access_log)
    while requests.count() < target:
        if crawl.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the crawl ended (or time ran out) before the kill point")
        time.sleep(POLL_S * 10)
    crawl.send_signal(signal.SIGKILL)
    crawl.wait()
    log(f"killed after ~{target} requests; resuming")
    resume = [
        str(VENV_BIN / "crawler"),
        "resume",
        "--db",
        str(db),
        "-n",
        "-f",
        "json",
        "-o",
        str(run_dir / "report.json"),
    ]
    launched = time.time()
    resumed = subprocess.Popen(resume, env=env, stdout=subprocess.DEVNULL)
    if args.resume_for_s is not None:
        try:
            resumed.wait(timeout=args.resume_for_s)
        except subprocess.TimeoutExpired:
            resumed.send_signal(signal.SIGTERM)
    returncode = resumed.wait(timeout=max(1.0, deadline - time.monotonic()))
    exited = time.time()
    return {
        "resume_launched_at": launched,
        "resume_exited_at": exited,
        "resume_exit_code": float(returncode),
        "killed_after_requests": float(target),
    }


class _LineCounter:
    """Requests in the access log so far, reading only what was appended since."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = 0
        self._lines = 0

    def count(self) -> int:
        try:
            with self._path.open("rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return 0
        self._offset += len(data)
        self._lines += data.count(b"\n")
        return self._lines


if __name__ == "__main__":
    raise SystemExit(main())
