#!/usr/bin/env python3
"""Benchmark: generate a synthetic site, serve it on loopback, crawl it, print the figures.

    .venv/bin/python bench/run.py --pages 100000        # or: make bench N=100000
    .venv/bin/python bench/run.py --pages 1000 --check --server python   # smoke test

The site is generated once per (pages, seed) under bench/out/site-n<N>-s<seed>/
and reused. The crawler runs as a subprocess (``.venv/bin/crawler crawl``)
while this script samples its process tree's RSS and the WAL's size every
100 ms; a hard timeout kills everything. The figures are printed and appended
as one JSON line to bench/out/results.jsonl.

With ``--check`` the exit status is 1 unless the crawl finished, found every
page, found exactly the planted broken links (with their sources), and made
no duplicate request. ``--profile`` runs the crawler under py-spy and prints
the top functions.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import measure
import serve
import sitegen
from measure import OUT, VENV_BIN, log, mb

EXIT_CHECK_FAILED = 1
PROFILE_TOP = 15


def crawler_command(
    url: str,
    db: Path,
    report: Path,
    concurrency: int,
    extra: list[str],
    python: str | None = None,
) -> list[str]:
    """The crawl; with ``python``, run as ``python -m crawler.cli`` (another checkout's)."""
    return [
        *([python, "-P", "-m", "crawler.cli"] if python else [str(VENV_BIN / "crawler")]),
        "crawl",
        url,
        "--db",
        str(db),
        "-n",
        "-f",
        "json",
        "-o",
        str(report),
        "--max-concurrency",
        str(concurrency),
        "--host-concurrency",
        str(concurrency),
        *extra,
    ]


def _crawler_env(python: str | None) -> dict[str, str]:
    """The crawl's environment; another checkout's crawler must not import this one.

    ``python -m`` puts the working directory (this checkout, when the
    benchmark runs from it) first on ``sys.path``, before ``PYTHONPATH``:
    a "before" run would measure the code after. ``PYTHONSAFEPATH`` keeps it
    off, for the parse helpers too.
    """
    env = measure.loopback_env()
    if python:
        env["PYTHONSAFEPATH"] = "1"
    return env


def ensure_py_spy() -> str:
    exe = VENV_BIN / "py-spy"
    if not exe.exists():
        log("installing py-spy into .venv")
        subprocess.run(
            [str(VENV_BIN / "python"), "-m", "pip", "install", "--quiet", "py-spy"], check=True
        )
    return str(exe)


def crawl_and_measure(
    url: str,
    *,
    server: serve.Server,
    run_dir: Path,
    concurrency: int,
    timeout_s: float,
    extra_args: list[str],
    profile: bool = False,
    profile_native: bool = False,
    python: str | None = None,
) -> dict[str, object]:
    """Crawl ``url`` (served by ``server``), stop the server, and gather the figures."""
    db = run_dir / "crawl.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    report_path = run_dir / "report.json"
    report_path.unlink(missing_ok=True)
    measure.compile_package()
    cmd = crawler_command(url, db, report_path, concurrency, extra_args, python)
    profile_path = run_dir / "profile.txt"
    if profile:
        cmd = [
            ensure_py_spy(),
            "record",
            # Native frames need the process paused while sampled.
            *([] if profile_native else ["--nonblocking"]),
            "--threads",
            "--subprocesses",  # the parse helpers too
            *(["--native"] if profile_native else []),
            "--rate",
            "100",
            "--format",
            "raw",
            "-o",
            str(profile_path),
            "--",
            *cmd,
        ]
    log(f"crawling {url} (concurrency {concurrency}, timeout {timeout_s:.0f}s)")
    m = measure.run_measured(
        cmd,
        timeout_s=timeout_s,
        stdout=run_dir / "crawler.stdout",
        stderr=run_dir / "crawler.stderr",
        watch_file=Path(f"{db}-wal"),
        env=_crawler_env(python),
        cwd=run_dir,  # `python -m` puts its cwd first: not this checkout's crawler
    )
    server.stop()
    with (run_dir / "samples.csv").open("w") as handle:
        handle.write("seconds,rss_bytes,wal_bytes\n")
        handle.writelines(f"{t},{rss},{wal}\n" for t, rss, wal in m.timeline)
    entries = list(server.entries())
    stats = measure.log_stats(entries)
    try:
        report = json.loads(report_path.read_text())
    except (OSError, ValueError):
        report = {}
        err = (run_dir / "crawler.stderr").read_text(errors="replace")[-3000:]
        log(f"no JSON report from the crawler (exit {m.returncode}); stderr tail:\n{err}")
    summary = report.get("summary", {})
    # Pages as the server saw them (HTML fetched with GET, found), the same for
    # every tool; the crawler's own count is kept beside it.
    host = url.removeprefix("http://").split("/", 1)[0]
    pages = measure.pages_fetched(entries, host)
    size = measure.db_bytes(db)
    figures: dict[str, object] = {
        "url": url,
        "server": server.kind,
        "concurrency": concurrency,
        "returncode": m.returncode,
        "timed_out": m.timed_out,
        "state": report.get("crawl", {}).get("state"),
        "pages": pages,
        "crawler_pages": summary.get("pages"),
        "links": summary.get("links"),
        "elapsed_s": round(m.wall_s, 2),
        "crawler_elapsed_s": report.get("crawl", {}).get("elapsed_s"),
        "pages_per_s": round(pages / m.wall_s, 1) if m.wall_s > 0 else 0.0,
        "cpu_s": m.cpu_s,
        "cpu_ms_per_page": round(1000 * m.cpu_s / pages, 3) if pages else None,
        "pages_per_s_by_tenth": measure.page_rate_by_tenth(entries, host),
        "peak_rss_mb": round(m.peak_rss_bytes / 1e6, 1),
        "write_bytes": m.write_bytes,
        "written_per_page": round(m.write_bytes / pages) if pages else None,
        "written_per_page_by_tenth": measure.written_per_page_by_tenth(
            entries, host, m.writes, m.started_at
        ),
        "rss_mb_by_quarter": m.rss_by_quarter(),
        "db_bytes": size,
        "db_bytes_per_page": round(size / pages) if pages else None,
        "max_wal_mb": round(m.max_file_bytes / 1e6, 2),
        "requests": stats.requests,
        "requests_by_host": stats.by_host,
        "requests_by_status": stats.by_status,
        "requests_per_s": round(stats.requests / m.wall_s, 1) if m.wall_s > 0 else 0.0,
        "duplicate_requests": stats.duplicate_requests,
        "duplicates_sample": dict(list(stats.duplicates.items())[:10]),
        "last_response_to_exit_s": (
            round(m.exited_at - stats.last_at, 3) if stats.last_at is not None else None
        ),
        "start_to_first_request_s": (
            round(stats.first_at - m.started_at, 3) if stats.first_at is not None else None
        ),
        "broken_found": {b["url"]: b.get("sources", []) for b in report.get("broken", [])},
        "samples": m.samples,
    }
    if profile:
        figures["profile"] = summarize_profile(profile_path)
    return figures


def _frame_name(frame: str) -> str:
    # py-spy raw frames look like "function (path/to/file.py:123)": drop the line.
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    path = where.rsplit(":", 1)[0]
    for marker in ("site-packages/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    else:
        path = path.split("/work/main/", 1)[-1]
    return f"{name} ({path})" if path else name


def summarize_profile(path: Path) -> dict[str, list[tuple[str, float]]]:
    """Top functions by own time, the crawler's functions by total time, thread shares.

    Percentages are of all samples (py-spy leaves idle threads out).
    """
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    samples = 0
    if not path.exists():
        return {}
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        thread = "?"
        if frames[0].startswith("thread ("):
            label = frames.pop(0).partition(": ")[2] or "unnamed"
            thread = label.rstrip("0123456789").rstrip("_") or label
        if not frames:
            continue
        samples += count
        threads[thread] += count
        names = [_frame_name(f) for f in frames]
        own[names[-1]] += count
        for name in set(names):
            if "(crawler/" in name and not name.startswith(("main ", "run ", "_crawl ", "_run")):
                total[name] += count
    if not samples:
        return {}

    def top(counter: Counter[str], n: int = PROFILE_TOP) -> list[tuple[str, float]]:
        return [(k, round(100 * c / samples, 1)) for k, c in counter.most_common(n)]

    return {
        "self": top(own),
        "total (crawler code)": top(total),
        "threads": top(threads, 6),
        "samples": [("samples", samples)],
    }


def print_figures(title: str, fig: dict[str, object], extra_lines: list[str]) -> None:
    rows = [
        ("pages crawled", f"{fig['pages']} (crawler's summary says {fig['crawler_pages']})"),
        ("elapsed", f"{fig['elapsed_s']} s (crawler's own: {fig['crawler_elapsed_s']} s)"),
        ("pages/s", f"{fig['pages_per_s']}"),
        ("pages/s by tenth of pages", f"{fig['pages_per_s_by_tenth']}"),
        ("CPU (user+sys, all processes)", f"{fig['cpu_s']} s, {fig['cpu_ms_per_page']} ms/page"),
        ("requests", f"{fig['requests']} ({fig['requests_per_s']}/s) {fig['requests_by_status']}"),
        (
            "written to disk/page",
            f"{fig['written_per_page']} B ({mb(int(fig['write_bytes']))} MB, "  # type: ignore[call-overload]
            "write_bytes summed over the crawler's processes)",
        ),
        ("written/page by tenth", f"{fig['written_per_page_by_tenth']}"),
        ("peak RSS (process tree)", f"{fig['peak_rss_mb']} MB"),
        ("peak RSS per quarter of run", f"{fig['rss_mb_by_quarter']} MB"),
        (
            "DB bytes/page",
            f"{fig['db_bytes_per_page']} ({mb(int(fig['db_bytes']))} MB total)",  # type: ignore[call-overload]
        ),
        ("max WAL", f"{fig['max_wal_mb']} MB"),
        ("duplicate requests", f"{fig['duplicate_requests']}"),
        ("last response -> exit", f"{fig['last_response_to_exit_s']} s"),
        ("start -> first request", f"{fig['start_to_first_request_s']} s"),
        (
            "crawler exit",
            f"{fig['returncode']} (state {fig['state']}, timed out: {fig['timed_out']})",
        ),
        ("server", f"{fig['server']}, crawler concurrency {fig['concurrency']}"),
    ]
    print(f"\n== {title}")
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    for line in extra_lines:
        print(f"  {line}")
    dups = fig.get("duplicates_sample") or {}
    assert isinstance(dups, dict)
    for request, count in list(dups.items())[:5]:
        print(f"    duplicate x{count}: {request}")
    prof = fig.get("profile")
    if isinstance(prof, dict):
        for kind in ("threads", "self", "total (crawler code)"):
            print(f"  profile: {kind} (% of samples):")
            for name, pct in prof.get(kind, []):
                print(f"    {pct:5.1f}%  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--page-size",
        choices=sorted(sitegen.PAGE_SIZES),
        default="normal",
        help="small: ~3.5 KB pages (for 1,000,000 pages on a 24 GB machine)",
    )
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--keep", action="store_true", help="keep the crawl DB and logs")
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="hard timeout of the crawl")
    parser.add_argument("--server", choices=("auto", "nginx", "python"), default="auto")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the crawl is exact")
    parser.add_argument("--profile", action="store_true", help="run the crawler under py-spy")
    parser.add_argument(
        "--crawler-python",
        metavar="PYTHON",
        help="run `PYTHON -m crawler.cli` instead of .venv/bin/crawler: the crawler of another "
        "checkout, for a before/after in one session",
    )
    parser.add_argument("--native", action="store_true", help="with --profile: native frames too")
    parser.add_argument(
        "--crawler-arg", action="append", default=[], help="extra crawler flag (repeatable)"
    )
    args = parser.parse_args(argv)
    measure.install_signal_exit()
    OUT.mkdir(parents=True, exist_ok=True)
    site_dir = measure.SITES / sitegen.site_name(args.pages, args.seed, args.page_size)
    # One directory per run: concurrent runs share the cached site, nothing else.
    run_dir = OUT / f"run-n{args.pages}-s{args.seed}-{os.getpid()}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    t0 = time.monotonic()
    cached = (site_dir / sitegen.TRUTH).exists()
    log(f"{'reusing' if cached else 'generating'} {args.pages} pages in {site_dir}")
    sitegen.generate(site_dir, args.pages, args.seed, args.page_size)
    gen_s = time.monotonic() - t0
    try:
        with serve.Server(
            [site_dir / "site", site_dir / "ext"], kind=args.server, workdir=run_dir / "server"
        ) as server:
            main_origin, ext_origin = server.origins
            fig = crawl_and_measure(
                main_origin + "/",
                server=server,
                run_dir=run_dir,
                concurrency=args.concurrency,
                timeout_s=args.timeout_s,
                extra_args=args.crawler_arg,
                profile=args.profile,
                profile_native=args.native,
                python=args.crawler_python,
            )
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    truth = json.loads((site_dir / sitegen.TRUTH).read_text())
    planted = sitegen.broken_urls(truth, main_origin, ext_origin)
    found = fig.pop("broken_found")
    assert isinstance(found, dict)
    verdict = measure.compare_broken(found, planted)
    expected = truth["expected_requests"]
    fig.update(
        {
            "bench": "synthetic",
            "n": args.pages,
            "seed": args.seed,
            "site_mb": round(truth["page_bytes"] / 1e6, 1),
            "generate_s": round(gen_s, 1),
            "expected_requests": expected["main"] + expected["ext"],
            "broken": verdict,
            "rev": measure.git_rev(),
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
    )
    problems = []
    if fig["returncode"] not in (0, 2) or fig["timed_out"]:
        problems.append(f"crawler exit {fig['returncode']}, timed out: {fig['timed_out']}")
    if fig["pages"] != args.pages:
        problems.append(f"pages crawled {fig['pages']} != {args.pages}")
    if not verdict["ok"]:
        problems.append("broken links found != planted")
    if fig["duplicate_requests"]:
        problems.append(f"{fig['duplicate_requests']} duplicate requests")
    fig["problems"] = problems
    lines = [
        f"site: {args.pages} pages, {fig['site_mb']} MB of HTML, "
        f"{'cached' if cached else f'generated in {gen_s:.1f} s'}",
        f"distinct URLs a perfect crawl requests: {fig['expected_requests']} "
        "(+ /robots.txt per host if read)",
        f"broken found {verdict['found']} vs planted {verdict['planted']}: "
        + ("exact, with sources" if verdict["ok"] else "MISMATCH"),
    ]
    for key in ("missing", "extra"):
        items = verdict[key]
        assert isinstance(items, list)
        for url in items[:5]:
            lines.append(f"    {key}: {url}  (planted sources: {planted.get(url, '-')})")
    wrong = verdict["wrong_sources"]
    assert isinstance(wrong, dict)
    for url, sources in list(wrong.items())[:5]:
        lines.append(f"    wrong sources: {url}: {sources}")
    for problem in problems:
        lines.append(f"PROBLEM: {problem}")
    print_figures(f"crawler on a synthetic site of {args.pages} pages", fig, lines)
    path = measure.append_result(fig)
    print(f"  (appended to {path.relative_to(measure.ROOT)})")
    if args.keep:
        print(f"  (crawl DB, report, access log and RSS samples kept in {run_dir})")
    else:
        shutil.rmtree(run_dir, ignore_errors=True)
    if args.check and problems:
        return EXIT_CHECK_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
