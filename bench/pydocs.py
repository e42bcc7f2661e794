#!/usr/bin/env python3
"""Benchmark on a real site: the Python documentation from Debian's python3-doc.

    .venv/bin/python bench/pydocs.py [--server python] [--keep] [--linkinator]

Installs python3-doc with apt-get when missing (as root), serves its HTML
tree on loopback the same way as bench/run.py, crawls it with the crawler and
prints the same figures, plus the broken links found. Links leaving the
loopback server are not requested (``--internal-only``): all traffic stays
on loopback. ``--linkinator`` also runs linkinator (installed by
bench/compare's installer) on the same server in the same run, so the two
are timed on one machine. ``--lychee`` does the same with lychee (installed
by bench/compare's installer), given every page of the tree as a URL
(``--files-from``, as for the synthetic sites) and told to check only URLs on
the loopback server (``--exclude`` every http(s) URL, ``--include`` the
server's origin: lychee's includes win over its excludes), and prints each
figure as a ratio to the crawler's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import compare
import measure
import serve
from measure import OUT, log
from run import crawl_and_measure, print_figures

DOC_DIRS = (
    "/usr/share/doc/python3/html",
    "/usr/share/doc/python3-doc/html",
    *sorted(glob.glob("/usr/share/doc/python3.*/html"), reverse=True),
)


def find_docs() -> Path | None:
    for candidate in DOC_DIRS:
        path = Path(candidate)
        if (path / "index.html").is_file():
            return path
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--docs", type=Path, help="HTML tree to crawl (default: python3-doc's)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--keep", action="store_true", help="keep the crawl DB and logs")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="hard timeout of the crawl")
    parser.add_argument("--server", choices=("auto", "nginx", "python"), default="auto")
    parser.add_argument("--profile", action="store_true", help="run the crawler under py-spy")
    parser.add_argument("--show", type=int, default=30, help="broken links listed (default 30)")
    parser.add_argument(
        "--linkinator", action="store_true", help="also run linkinator on the same server"
    )
    parser.add_argument(
        "--lychee", action="store_true", help="also run lychee on the same docs, same run"
    )
    parser.add_argument(
        "--crawler-python",
        metavar="PYTHON",
        help="run `PYTHON -m crawler.cli` instead of .venv/bin/crawler (another checkout's)",
    )
    args = parser.parse_args(argv)
    measure.install_signal_exit()
    docs = args.docs
    if docs is None:
        if not serve.apt_install(("python3-doc",), lambda: find_docs() is not None):
            log("python3-doc is not installed and cannot be: nothing to crawl")
            return 1
        docs = find_docs()
        assert docs is not None
    docs = docs.resolve()
    html_files = sum(1 for _ in docs.rglob("*.html"))
    run_dir = OUT / f"run-pydocs-{os.getpid()}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    started = time.monotonic()
    try:
        with serve.Server([docs], kind=args.server, workdir=run_dir / "server") as server:
            fig = crawl_and_measure(
                server.origins[0] + "/",
                server=server,
                run_dir=run_dir,
                concurrency=args.concurrency,
                timeout_s=args.timeout_s,
                extra_args=["--internal-only"],
                profile=args.profile,
                python=args.crawler_python,
            )
        other = []
        if args.linkinator:  # a server of its own: the crawl's is stopped by now
            with serve.Server([docs], kind=args.server, workdir=run_dir / "server2") as again:
                other = run_linkinator(again.origins[0] + "/", run_dir, args)
        if args.lychee:
            with serve.Server([docs], kind=args.server, workdir=run_dir / "server3") as again:
                other += run_lychee(again, docs, run_dir, args, fig)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    found = fig.pop("broken_found")
    assert isinstance(found, dict)
    report = json.loads((run_dir / "report.json").read_text()) if found else {}
    reasons = {b["url"]: b.get("error") or b.get("status") for b in report.get("broken", [])}
    fig.update(
        {
            "bench": "pydocs",
            "docs": str(docs),
            "html_files": html_files,
            "broken_count": len(found),
            "broken_sample": dict(list(found.items())[:50]),
            "total_s": round(time.monotonic() - started, 1),
            "rev": measure.git_rev(),
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
    )
    origin = fig["url"]
    assert isinstance(origin, str)
    lines = [
        f"docs: {docs} ({html_files} .html files in the tree)",
        f"broken links found: {len(found)}",
    ]
    for url, sources in list(found.items())[: args.show]:
        short = url.replace(origin, "/")
        where = ", ".join(s.replace(origin, "/") for s in sources[:3])
        more = f" (+{len(sources) - 3} more)" if len(sources) > 3 else ""
        lines.append(f"    {short}  [{reasons.get(url)}]  <- {where}{more}")
    if len(found) > args.show:
        lines.append(f"    ... and {len(found) - args.show} more (--show N)")
    print_figures("crawler on the Python docs (python3-doc)", fig, lines + other)
    path = measure.append_result(fig)
    print(f"  (appended to {path.relative_to(measure.ROOT)})")
    if args.keep:
        print(f"  (crawl DB, report, access log and RSS samples kept in {run_dir})")
    else:
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0


def run_linkinator(url: str, run_dir: Path, args: argparse.Namespace) -> list[str]:
    """linkinator on the same docs and server: its time, memory and broken links."""
    problem = compare.install_linkinator()
    if problem is not None:
        return [f"linkinator: not run ({problem})"]
    work = run_dir / "linkinator"
    work.mkdir()
    cmd = compare.linkinator_cmd(url, work, args.concurrency)
    m = measure.run_measured(
        cmd,
        timeout_s=args.timeout_s,
        stdout=work / "stdout",
        stderr=work / "stderr",
        env=measure.loopback_env(),
        cwd=work,
    )
    try:
        found = compare.linkinator_broken(work / "stdout")
    except (OSError, ValueError) as exc:
        return [f"linkinator: cannot read its output: {exc}"]
    internal = sorted(u.replace(url, "/") for u in found if u.startswith(url))
    return [
        f"linkinator, same server: {m.wall_s:.2f} s, peak RSS {m.peak_rss_bytes / 1e6:.1f} MB, "
        f"{len(internal)} broken on the docs' host: {', '.join(internal[:5])}"
    ]


def run_lychee(
    server: serve.Server,
    docs: Path,
    run_dir: Path,
    args: argparse.Namespace,
    crawler: dict[str, object],
) -> list[str]:
    """lychee on every page of the docs, loopback only: its figures and their ratios to ours."""
    problem = compare.install_lychee()
    if problem is not None:
        return [f"lychee: not run ({problem})"]
    url = server.origins[0] + "/"
    work = run_dir / "lychee"
    work.mkdir()
    listing = work / "pages.txt"
    listing.write_text(
        "".join(
            f"{url}{page.relative_to(docs).as_posix()}\n" for page in sorted(docs.rglob("*.html"))
        )
    )
    only_here = ["--exclude", "^https?://", "--include", "^" + re.escape(url)]
    cmd = [*compare.lychee_args([f"--files-from={listing}"], args.concurrency), *only_here]
    log(f"lychee: {' '.join(cmd)}")
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
    try:
        found = compare.lychee_broken(work / "stdout")
    except (OSError, ValueError) as exc:
        return [f"lychee: cannot read its output: {exc}"]
    # lychee lists each fragment of a broken page as a URL of its own: count pages.
    broken = {u.partition("#")[0] for u in found}
    outside = [u for u in broken if not u.startswith(url)]
    ours = (
        float(crawler["elapsed_s"]),  # type: ignore[arg-type]
        float(crawler["cpu_s"]),  # type: ignore[arg-type]
        float(crawler["peak_rss_mb"]),  # type: ignore[arg-type]
        int(crawler["requests"]),  # type: ignore[call-overload]
    )
    theirs = (m.wall_s, m.cpu_s, m.peak_rss_bytes / 1e6, stats.requests)
    ratios = ", ".join(f"{t / o:.2f}" if o else "-" for t, o in zip(theirs, ours, strict=True))
    crawler["lychee"] = {
        "version": compare.lychee_version(),
        "wall_s": round(m.wall_s, 2),
        "cpu_s": m.cpu_s,
        "peak_rss_mb": round(m.peak_rss_bytes / 1e6, 1),
        "requests": stats.requests,
        "duplicate_requests": stats.duplicate_requests,
        "broken_found": len(broken),
        "returncode": m.returncode,
    }
    return [
        f"{compare.lychee_version()}, same docs, another server of the same kind: "
        f"{m.wall_s:.2f} s, CPU {m.cpu_s:.2f} s, peak RSS {m.peak_rss_bytes / 1e6:.1f} MB, "
        f"{stats.requests} requests ({stats.duplicate_requests} repeated), "
        f"{len(broken)} broken ({len(outside)} off the server), exit {m.returncode}",
        f"lychee / crawler: wall, CPU, RSS, requests = {ratios}",
    ]


if __name__ == "__main__":
    sys.exit(main())
