#!/usr/bin/env python3
"""Benchmark: a re-crawl of the synthetic site after 1% of its pages changed.

    .venv/bin/python bench/recrawl.py --pages 10000
    .venv/bin/python bench/recrawl.py --pages 1000 --check      # smoke test

The site (``sitegen``) is hard-linked into a working directory and served by nginx
(``serve.Server``), which answers conditional requests for static files
(ETag from mtime and size, Last-Modified from mtime). The script crawls it
(``crawler crawl``), changes 1% of the pages, half of them each way:

- a broken link added (``/new-missing/<i>.html``): expected newly broken,
  with that page as its one source;
- a link removed: the planted broken link of a page that is its only source
  (expected fixed), else the page's own image (no change in the diff);

then re-crawls (``crawler recrawl --max-cache-age 1h``: images and other
links checked OK by the first crawl are not asked again) and prints: the re-crawl's wall time as
a fraction of the first crawl's (target <= 25%), the share of page requests
answered 304 (target >= 95%), whether ``crawler diff`` lists exactly the
planted changes, and each crawl's peak RSS. Figures are appended as one
JSON line to bench/out/results.jsonl. ``--check`` exits 1 unless the diff is
exact and both crawls finished.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import measure
import serve
import sitegen
from measure import OUT, VENV_BIN, log

EXIT_CHECK_FAILED = 1
CHANGED_SHARE = 0.01
_HREF = re.compile(r'<a href="([^"]*)"[^>]*>[^<]*</a>')
_OWN_IMG = re.compile(r'<img src="([^"]*/img/[0-9]+/[0-9]+\.png)"[^>]*>')


def page_paths(pages: int) -> list[str]:
    return ["/" if i == 0 else "/" + sitegen.page_file(i) for i in range(pages)]


def plant_changes(site: Path, truth: dict[str, object], pages: int, seed: int) -> dict[str, object]:
    """Change 1% of the pages in ``site``; what the diff should then say (paths)."""
    rng = random.Random(seed)
    count = max(2, int(pages * CHANGED_SHARE))
    # Pages linking to the second host are served from an overlay rendered when the
    # server starts (serve.Server): a change to their copy here would never be served.
    overlaid = set(truth.get("ext_sources") or ())  # type: ignore[call-overload]
    chosen = rng.sample([i for i in range(pages) if sitegen.page_file(i) not in overlaid], count)
    adders, removers = chosen[: count // 2], chosen[count // 2 :]
    broken = truth["broken"]
    assert isinstance(broken, list)
    single = {  # page file -> the planted broken path it alone links to
        (e["sources"][0].lstrip("/") or "index.html"): e["path"]
        for e in broken
        if e["origin"] == "main" and len(e["sources"]) == 1
    }
    new_broken: dict[str, list[str]] = {}
    fixed: list[str] = []
    for i in adders:
        file = site / sitegen.page_file(i)
        target = f"/new-missing/{i}.html"
        text = file.read_text()
        replace(file, text.replace("</body>", f'<a href="{target}">new</a></body>', 1))
        new_broken[target] = [page_paths(pages)[i]]
    singles = [
        source
        for source in single
        if source not in {sitegen.page_file(i) for i in adders} and source not in overlaid
    ]
    rng.shuffle(singles)
    for i in removers:
        file = site / sitegen.page_file(i)
        text = file.read_text()
        if singles:  # the only link to a planted broken URL goes: it is fixed
            source = singles.pop()
            file = site / source
            text = file.read_text()
            page_url = "http://h/" + ("" if source == "index.html" else source)
            if sitegen.page_file(0) == source:
                page_url = "http://h/"
            dead = single[source]

            def drop(match: re.Match[str], page_url: str = page_url, dead: str = dead) -> str:
                target = urlsplit(urljoin(page_url, match.group(1))).path
                return "" if target == dead else match.group(0)

            changed = _HREF.sub(drop, text)
            if changed != text:
                replace(file, changed)
                fixed.append(dead)
                continue
        file = site / sitegen.page_file(i)
        text = file.read_text()
        replace(file, _OWN_IMG.sub("", text, count=1))
    return {"changed_pages": count, "new_broken": new_broken, "fixed": sorted(fixed)}


def replace(file: Path, text: str) -> None:
    """Write a changed page as a new file: the old one is a hard link into the cached site."""
    fresh = file.with_name(file.name + ".new")
    fresh.write_text(text)
    os.replace(fresh, file)


def children_cpu_s() -> float:
    """CPU seconds (user + sys) of every child reaped so far: a load-independent cost."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def crawl(
    cmd: list[str], run_dir: Path, name: str, db: Path | str, timeout_s: float
) -> measure.Measurement:
    log(f"{name}: {' '.join(cmd[1:3])}")
    return measure.run_measured(
        cmd,
        timeout_s=timeout_s,
        stdout=run_dir / f"{name}.stdout",
        stderr=run_dir / f"{name}.stderr",
        watch_file=Path(f"{db}-wal") if isinstance(db, Path) else None,
        env=measure.loopback_env(),
    )


def diff_exact(db: Path | str, origin: str, planted: dict[str, object]) -> dict[str, object]:
    done = subprocess.run(
        [str(VENV_BIN / "crawler"), "diff", "--db", str(db), "-f", "json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=measure.loopback_env(),
    )
    doc = json.loads(done.stdout)
    new_broken = planted["new_broken"]
    assert isinstance(new_broken, dict)
    want_new = {origin + url: [origin + s for s in sources] for url, sources in new_broken.items()}
    fixed = planted["fixed"]
    assert isinstance(fixed, list)
    want_fixed = sorted(origin + url for url in fixed)
    got_new = {link["url"]: link["sources"] for link in doc["new_broken"]}
    got_fixed = sorted(link["url"] for link in doc["fixed"])
    return {
        "counts": doc["counts"],
        "new_broken_exact": got_new == want_new,
        "fixed_exact": got_fixed == want_fixed,
        "no_pages_changed": not doc["pages_added"] and not doc["pages_removed"],
        "exact": got_new == want_new
        and got_fixed == want_fixed
        and not doc["pages_added"]
        and not doc["pages_removed"],
    }


def page_requests(
    entries: list[serve.LogEntry], host: str, since: float, until: float
) -> dict[str, int]:
    page = [
        e
        for e in entries
        if since <= e.at <= until
        and e.host == host
        and e.method == "GET"
        and e.uri.endswith((".html", "/"))
    ]
    return {
        "page_requests": len(page),
        "answered_304": sum(1 for e in page if e.status == 304),
        "requests": sum(1 for e in entries if since <= e.at <= until),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=900.0, help="per crawl, seconds")
    parser.add_argument("--server", default="auto", choices=("auto", "nginx", "python"))
    parser.add_argument(
        "--max-cache-age",
        default="1h",
        help="the re-crawl's --max-cache-age: links checked OK this recently are not asked again",
    )
    parser.add_argument(
        "--db",
        help="a PostgreSQL URL of an empty database (default: a SQLite file in the run folder)",
    )
    parser.add_argument("--check", action="store_true")
    parser.add_argument(
        "--crawler-python",
        help="run both crawls as PYTHON -P -m crawler.cli (another checkout's or a compiled build)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run the re-crawl under py-spy (folded stacks in the run folder; times include it)",
    )
    parser.add_argument(
        "--threads",
        action="store_true",
        help="print the re-crawl's CPU time by thread (bench/thread_cpu.py, in recrawl.stdout)",
    )
    args = parser.parse_args(argv)
    measure.install_signal_exit()

    cached = measure.SITES / sitegen.site_name(args.pages, args.seed)
    truth = sitegen.generate(cached, args.pages, args.seed)
    run_dir = OUT / f"recrawl-n{args.pages}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    # Beside the cached site: hard links do not cross file systems (BENCH_SITES).
    work = cached.parent / f"recrawl-copy-n{args.pages}"
    shutil.rmtree(work, ignore_errors=True)
    log(f"copying the site to {work}")
    # Hard links, not copies (a 100,000-page site is ~100,000 files): the cached
    # site is shared and read-only, and ``replace`` gives a changed page a file of its own.
    shutil.copytree(cached, work, copy_function=os.link)
    db: Path | str = args.db or run_dir / "crawl.db"
    flags = ["-n", "--max-concurrency", str(args.concurrency)]
    flags += ["--host-concurrency", str(args.concurrency)]
    with serve.Server([work / "site", work / "ext"], kind=args.server) as server:
        origin = server.origins[0]
        host = origin.removeprefix("http://")
        crawler = (
            [args.crawler_python, "-P", "-m", "crawler.cli"]
            if args.crawler_python
            else [str(VENV_BIN / "crawler")]
        )
        cpu_before = children_cpu_s()
        first = crawl(
            [
                *crawler,
                "crawl",
                origin + "/",
                "--db",
                str(db),
                *flags,
                "-f",
                "json",
                "-o",
                str(run_dir / "first.json"),
            ],
            run_dir,
            "first",
            db,
            args.timeout,
        )
        first_cpu = children_cpu_s() - cpu_before
        time.sleep(1.1)  # mtimes: a changed page must not keep its old second
        planted = plant_changes(work / "site", truth, args.pages, args.seed)
        cpu_before = children_cpu_s()
        spy = [str(VENV_BIN / "py-spy"), "record", "--subprocesses", "--threads", "--format", "raw"]
        spy += ["-o", str(run_dir / "recrawl.folded"), "--"]
        threads = [sys.executable, str(Path(__file__).with_name("thread_cpu.py")), "--"]
        second = crawl(
            [
                *(spy if args.profile else []),
                *(threads if args.threads and not args.profile else []),
                *crawler,
                "recrawl",
                "--db",
                str(db),
                *flags,
                "--max-cache-age",
                args.max_cache_age,
                "-f",
                "json",
                "-o",
                str(run_dir / "second.json"),
            ],
            run_dir,
            "recrawl",
            db,
            args.timeout,
        )
        second_cpu = children_cpu_s() - cpu_before
        server.stop()
        entries = list(server.entries())
        kind = server.kind
    first_requests = page_requests(entries, host, first.started_at - 1, first.exited_at + 1)
    second_requests = page_requests(entries, host, second.started_at, second.exited_at + 1)
    diff = diff_exact(db, origin, planted)
    share_304 = second_requests["answered_304"] / max(1, second_requests["page_requests"])
    states = [
        json.loads((run_dir / f"{name}.json").read_text()).get("crawl", {}).get("state")
        for name in ("first", "second")
    ]
    figures: dict[str, object] = {
        "bench": "recrawl",
        "pages": args.pages,
        "server": kind,
        "concurrency": args.concurrency,
        "max_cache_age": args.max_cache_age,
        "backend": "postgresql" if args.db else "sqlite",
        "commit": measure.git_rev(),
        "changed_pages": planted["changed_pages"],
        "first_s": round(first.wall_s, 2),
        "recrawl_s": round(second.wall_s, 2),
        "recrawl_fraction": round(second.wall_s / first.wall_s, 3) if first.wall_s else None,
        "first_cpu_s": round(first_cpu, 2),
        "recrawl_cpu_s": round(second_cpu, 2),
        "recrawl_cpu_fraction": round(second_cpu / first_cpu, 3) if first_cpu else None,
        "first": first_requests,
        "recrawl": second_requests,
        "share_304": round(share_304, 4),
        "diff": diff,
        "first_peak_rss_mb": round(first.peak_rss_bytes / 1e6, 1),
        "recrawl_peak_rss_mb": round(second.peak_rss_bytes / 1e6, 1),
        "recrawl_rss_mb_by_quarter": second.rss_by_quarter(),
        "states": states,
        "exit_codes": [first.returncode, second.returncode],
    }
    measure.append_result(figures)
    backend = figures["backend"]
    print(
        f"\n== re-crawl of {args.pages} pages, "
        f"{planted['changed_pages']} changed ({kind}, {backend})"
    )
    for name, key in (("first crawl", "first"), ("re-crawl", "recrawl")):
        wall, rss = figures[f"{key}_s"], figures[f"{key}_peak_rss_mb"]
        print(f"  {name:<22} {wall} s, peak RSS {rss} MB")
    print(f"  re-crawl / first       {figures['recrawl_fraction']} (target <= 0.25)")
    print(
        f"  CPU (user+sys)         first {figures['first_cpu_s']} s, re-crawl "
        f"{figures['recrawl_cpu_s']} s = {figures['recrawl_cpu_fraction']}"
    )
    print(
        f"  page requests 304      {second_requests['answered_304']} of "
        f"{second_requests['page_requests']} = {share_304:.1%} (target >= 95%)"
    )
    all_first, all_second = first_requests["requests"], second_requests["requests"]
    print(f"  requests (all)         first {all_first}, re-crawl {all_second}")
    print(f"  diff exact             {diff['exact']} {diff['counts']}")
    print(f"  crawl states           {states}, exits {figures['exit_codes']}")
    if args.threads and not args.profile:
        print("  re-crawl by thread (exit: thread_cpu's)")
        for line in (run_dir / "recrawl.stdout").read_text().splitlines():
            print("  " + line)
    if args.check and not (diff["exact"] and states == ["finished", "finished"]):
        return EXIT_CHECK_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
