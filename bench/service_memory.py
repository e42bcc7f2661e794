"""What one page costs in memory when parsed: the figures behind crawler/service/budget.py.

Each case runs in a fresh interpreter (peak RSS, ``ru_maxrss``, is per
process): a page of text, a page dense with links, parsed by
``outcome.parse_body`` as a parse helper does (with and without the
links-per-page cap), the reply pickled as the helper sends it, and the reply
turned back into frontier rows as the crawling process does.

    .venv/bin/python bench/service_memory.py

Prints, per case, the peak above the interpreter's own size, per byte of body
and per link. Load-independent: memory, not time.
"""

from __future__ import annotations

import subprocess
import sys

CASES = {
    "text 10 MB": ("text", None),
    "350,000 links in 12 MB": ("links", None),
    "350,000 links in 12 MB, capped at 50,000": ("links", 50_000),
}

CHILD = r"""
import pickle, resource, sys
from crawler.config import CrawlSettings
from crawler.engine import parse_child, parse_pool
from crawler.fetch_types import Fetched
from crawler.models import LeasedUrl, UrlKind
from crawler.outcome import parse_body
from crawler.scope import Scope

kind, cap = sys.argv[1], (None if sys.argv[2] == "none" else int(sys.argv[2]))
if kind == "text":
    body = b"<html><body><p>" + b"lorem ipsum dolor sit amet " * 370_000 + b"</p></body></html>"
else:
    links = b"".join(b'<a href="/l/%d">x</a>' % i for i in range(350_000))
    body = b"<html><body>" + links + b"</body></html>"
    body += b" " * max(0, 12_000_000 - len(body))
scope = Scope.build(CrawlSettings(), ["http://127.0.0.1:1/"])
leased = LeasedUrl(1, "http://127.0.0.1:1/", "127.0.0.1:1", UrlKind.PAGE, 0, 0, 0)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
fetched = Fetched(method="GET", status=200, content_type="text/html", body=body)
parsed = parse_body(leased, fetched, scope, False, cap)
reply = parse_child.encode((1, [parse_child.as_tuple(c) for c in parsed.children], None, None, 0))
helper = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
del parsed, fetched
rows = [parse_pool._discovered(c) for c in pickle.loads(reply[4:])[1]]
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(len(body), len(rows), (helper - base) * 1024, (peak - base) * 1024)
"""


def main() -> None:
    print(f"{'case':44} {'body MB':>8} {'links':>8} {'peak MiB':>9} {'B/body B':>9} {'B/link':>7}")
    for name, (kind, cap) in CASES.items():
        out = subprocess.run(
            [sys.executable, "-c", CHILD, kind, str(cap).lower()],
            capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        body, links, _helper, peak = (int(v) for v in out)
        per_link = f"{peak / links:7.0f}" if links else "      -"
        print(
            f"{name:44} {body / 1e6:8.1f} {links:8d} {peak / 2**20:9.0f} "
            f"{peak / body:9.1f} {per_link}"
        )


if __name__ == "__main__":
    main()
