#!/usr/bin/env python3
"""CPU time of ``outcome.parse_body`` per page of the synthetic site (parse, classify, place).

    .venv/bin/python bench/parse_cost.py [--pages 2000] [--repeat 5]
    PYTHONPATH=OLD_TREE .venv/bin/python bench/parse_cost.py   # another version

The work a parse helper does for each page, in one process, best of
``--repeat`` passes (process time, so other load matters less). The site is
bench/out/site-n10000-s1 (``bench/run.py --pages 10000`` makes it).
"""

from __future__ import annotations

import argparse
import time

from measure import SITES

from crawler import outcome
from crawler.config import CrawlSettings
from crawler.fetch_types import Fetched
from crawler.models import LeasedUrl, UrlKind
from crawler.scope import Scope

SEED = "http://127.0.0.1:8000/"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    root = SITES / "site-n10000-s1" / "site"
    files = sorted(root.rglob("*.html"))[: args.pages]
    scope = Scope.build(CrawlSettings(), [SEED])
    items = [
        (
            LeasedUrl(1, SEED + f.relative_to(root).as_posix(), "127.0.0.1:8000", UrlKind.PAGE,
                      1, 0, 0),
            Fetched(method="GET", status=200, content_type="text/html; charset=utf-8",
                    body=f.read_bytes()),
        )
        for f in files
    ]  # fmt: skip
    best, children = float("inf"), 0
    for _ in range(args.repeat):
        started = time.process_time()
        children = sum(len(outcome.parse_body(r, f, scope, False).children) for r, f in items)
        best = min(best, time.process_time() - started)
    print(
        f"{best * 1e6 / len(items):.1f} us/page, {children / len(items):.1f} links/page, "
        f"{len(items)} pages, best of {args.repeat}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
