#!/usr/bin/env python3
"""Deterministic synthetic website for benchmarks, with its ground truth.

``generate(out_dir, pages, seed)`` writes::

    out_dir/site/   the main host's document root (served on 127.0.0.1)
    out_dir/ext/    a second loopback host's root (served on 127.0.0.2)
    out_dir/truth.json

Page 0 is ``/`` (``index.html``); page i >= 1 is ``/p/<i // 1000>/<i>.html``, so
no directory holds more than 1,000 pages. Every page has about 50 links:

- navigation (15, shared by every page) and a footer with fragment links;
- about 25 body links: to pages i+1, 2i and 2i+1 (a chain and a binary tree, so
  every page is reachable from ``/``), the rest random (half near i, half
  anywhere), written in mixed forms (relative, ``../``, absolute path), some
  with a ``#fragment`` that exists on the target;
- 7 assets: 4 shared by all pages, a theme CSS (1 of 8), a per-directory image
  and a per-page image;
- on about 0.5% of pages, a link to a page that does not exist (some shared
  by several pages);
- on a few pages, links to the second host, some of which are 404.

The second host's origin (its port) is only known when it is served, so the
generated site is never rewritten for it: the few pages that link to the second
host are rendered per run into an overlay directory (``render_overlay``), which
``serve.Server`` serves in their place. The cached site is read-only once
written, so concurrent runs can share it.

The ground truth lists every broken URL with its source pages (as paths),
the number of pages, and how many distinct URLs a perfect crawler requests.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import time
from pathlib import Path

PAGES_PER_DIR = 1000
NAV_LINKS = 15
BODY_LINKS = 25
THEMES = 8
BROKEN_RATE = 0.005
SHARED_MISSING = 5  # /old/removed-<k>.html, linked from several pages
EXT_EVERY = 250  # one page in EXT_EVERY links to the second host
EXT_OK_PAGES = 5
PLACEHOLDER_ORIGIN = "http://127.0.0.2:1"
_EXT_LINK = re.compile(r'"http://127\.0\.0\.2:[0-9]+/')
TRUTH = "truth.json"
FORMAT_VERSION = 1

# A 1x1 transparent PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
)
_WORDS_TEXT = (
    "link crawler frontier page host queue lease commit index table sqlite network "
    "socket request response header status redirect anchor fragment document parser "
    "element attribute resolve normalize scheme authority path query encoding charset "
    "memory bounded batch group writer reader snapshot checkpoint journal durable "
    "the a of and to in is that for it as with was on be by this are or from at which "
    "but not have has had were all can will one more when there been their if would "
    "about so what up out them into some than only other new time could these two may "
    "first then do any like my now over such our man me even most made after also did "
    "many before must through back years where much your way well down should because "
    "each just those people how too little state good very make world still own see "
    "men work long get here between both life being under never day same another know "
    "while last might us great old year off come since against go came right used take"
)
WORDS = _WORDS_TEXT.split()


def page_path(i: int) -> str:
    """URL path of page ``i``."""
    return "/" if i == 0 else f"/p/{i // PAGES_PER_DIR}/{i}.html"


def page_file(i: int) -> str:
    """File of page ``i``, relative to the site root."""
    return "index.html" if i == 0 else f"p/{i // PAGES_PER_DIR}/{i}.html"


def href(src: int, dst: int, form: int) -> str:
    """A link from page ``src`` to page ``dst``, written in one of a few forms."""
    if dst == 0:
        return "/" if src == 0 or form % 2 else "../../"
    if src == 0:
        return page_path(dst) if form % 2 else page_path(dst)[1:]
    same_dir = src // PAGES_PER_DIR == dst // PAGES_PER_DIR
    form %= 3
    if form == 0:
        return page_path(dst)
    if form == 1 and same_dir:
        return f"{dst}.html"
    return f"../{dst // PAGES_PER_DIR}/{dst}.html"


def _paragraphs(rng: random.Random, count: int) -> list[str]:
    pool = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(40, 90))]
        words[0] = words[0].capitalize()
        pool.append(" ".join(words) + ".")
    return pool


# Page sizes drawn per page (bytes of HTML). "small" keeps the links, a few
# words around each, and little filler: a 1,000,000-page site of 10-20 KB pages (2,000,000
# files, ~20 GB on disk) does not fit the page cache of a 24 GB machine, and
# nginx then waits on the disk for a file in three, so the crawler is not what
# a run measures.
PAGE_SIZES = {"normal": (10_000, 20_000), "small": (3_000, 3_500)}


def site_name(pages: int, seed: int, size: str = "normal") -> str:
    """The folder a site is generated in under bench/out (one per variant)."""
    return f"site-n{pages}-s{seed}" + ("" if size == "normal" else f"-{size}")


class _Generator:
    def __init__(self, pages: int, seed: int, size: str = "normal") -> None:
        self.sizes = PAGE_SIZES[size]
        self.small = size == "small"
        self.n = pages
        self.seed = seed
        self.rng = random.Random(seed)
        self.pool = _paragraphs(random.Random(seed + 1), 512)
        self.nav = "".join(
            f'<li><a href="{page_path(k)}">Section {k}</a></li>'
            for k in range(min(NAV_LINKS, pages))
        )
        self.broken: dict[tuple[str, str], set[str]] = {}  # (origin, path) -> sources
        self.ext_sources: list[str] = []  # files (relative to site/) linking to ext
        self.ext_targets: set[str] = set()
        self.bytes = 0

    def page(self, i: int) -> str:
        rng = self.rng
        n = self.n
        targets = [j for j in (i + 1, 2 * i, 2 * i + 1) if 0 < j < n and j != i]
        while len(targets) < BODY_LINKS and n > 1:
            if rng.random() < 0.5:
                j = min(max(i + rng.randint(-50, 50), 0), n - 1)
            else:
                j = rng.randrange(n)
            if j != i:
                targets.append(j)
        links = []
        for j in targets:
            frag = f"#s{rng.randint(1, 3)}" if rng.random() < 0.1 else ""
            links.append(f'<a href="{href(i, j, rng.randrange(6))}{frag}">page {j}</a>')
        if rng.random() < BROKEN_RATE or i == n // 2:
            if rng.random() < 0.3:
                path = f"/old/removed-{rng.randrange(SHARED_MISSING)}.html"
            else:
                path = f"/p/{i // PAGES_PER_DIR}/gone-{i}.html"
            self.broken.setdefault(("main", path), set()).add(page_path(i))
            links.append(f'<a href="{path}">an old page</a>')
        if i % EXT_EVERY == EXT_EVERY // 2 or (n < EXT_EVERY and i == n - 1):
            k = len(self.ext_sources)
            self.ext_sources.append(page_file(i))
            ok = f"/ext/{k % EXT_OK_PAGES}.html"
            self.ext_targets.add(ok)
            links.append(f'<a href="{PLACEHOLDER_ORIGIN}{ok}">partner site</a>')
            if k % 2 == 0:
                bad = f"/ext/missing-{k % 3}.html"
                self.ext_targets.add(bad)
                self.broken.setdefault(("ext", bad), set()).add(page_path(i))
                links.append(f'<a href="{PLACEHOLDER_ORIGIN}{bad}">partner archive</a>')
        rng.shuffle(links)
        target_size = rng.randint(*self.sizes)
        d = i // PAGES_PER_DIR
        head = (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f"<title>Page {i}</title>\n"
            '<link rel="stylesheet" href="/static/site.css">\n'
            f'<link rel="stylesheet" href="/static/theme-{i % THEMES}.css">\n'
            '<link rel="icon" href="/favicon.ico">\n'
            '<script src="/static/app.js" defer></script>\n'
            "</head><body>\n"
            f'<header><img src="/static/logo.svg" alt="logo"><nav><ul>{self.nav}</ul></nav>'
            "</header>\n"
            f'<main><h1 id="top">Page {i}</h1>\n'
            f'<img src="/img/{d}/section.png" alt="section {d}">\n'
        )
        parts = [head]
        size = len(head)
        pool = self.pool
        per_section = max(1, (len(links) + 2) // 3)
        section = 0
        for idx, link in enumerate(links):
            if idx % per_section == 0 and section < 3:
                section += 1
                parts.append(f'<h2 id="s{section}">Section {section}</h2>\n')
            text = pool[rng.randrange(len(pool))]
            cut = text.find(" ", len(text) // 2)
            if self.small:  # a few words around each link, not a paragraph
                text = text[cut - 40 : cut + 40].strip()
                cut = text.find(" ", len(text) // 2)
            chunk = f"<p>{text[:cut]} {link}{text[cut:]}</p>\n"
            parts.append(chunk)
            size += len(chunk)
            if idx == len(links) // 2:
                parts.append(f'<p><img src="/img/{d}/{i}.png" alt="figure {i}"></p>\n')
        while section < 3:
            section += 1
            parts.append(f'<h2 id="s{section}">Section {section}</h2>\n')
        tail = (
            '</main>\n<footer><a href="#top">Back to top</a> '
            f'<a href="{href(i, min(1, n - 1), 0)}#s2">Contact</a></footer>\n</body></html>\n'
        )
        while size + len(tail) < target_size:
            chunk = f"<p>{pool[rng.randrange(len(pool))]}</p>\n"
            parts.append(chunk)
            size += len(chunk)
        parts.append(tail)
        return "".join(parts)

    def write(self, site: Path) -> None:
        made: set[int] = set()
        for i in range(self.n):
            d = i // PAGES_PER_DIR
            if i and d not in made:
                (site / "p" / str(d)).mkdir(parents=True, exist_ok=True)
                (site / "img" / str(d)).mkdir(parents=True, exist_ok=True)
                (site / "img" / str(d) / "section.png").write_bytes(PNG)
                made.add(d)
            text = self.page(i)
            self.bytes += len(text)
            (site / page_file(i)).write_text(text, encoding="ascii")
            (site / "img" / str(d) / f"{i}.png").write_bytes(PNG)


def generate(
    out_dir: str | Path, pages: int, seed: int = 1, size: str = "normal"
) -> dict[str, object]:
    """Write the site and its ground truth (once: a finished ``out_dir`` is reused)."""
    out = Path(out_dir)
    truth_file = out / TRUTH
    if truth_file.exists():
        truth: dict[str, object] = json.loads(truth_file.read_text())
        if truth.get("format") == FORMAT_VERSION:
            return truth
    if pages < 1:
        raise ValueError("pages must be >= 1")
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)  # an unfinished earlier attempt
    site = tmp / "site"
    (site / "static").mkdir(parents=True)
    (site / "img" / "0").mkdir(parents=True)
    (site / "img" / "0" / "section.png").write_bytes(PNG)
    (site / "static" / "site.css").write_text("body{font-family:sans-serif}\n" * 40)
    (site / "static" / "app.js").write_text("document.documentElement.className='js';\n" * 40)
    (site / "static" / "logo.svg").write_text(
        '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>\n'
    )
    (site / "favicon.ico").write_bytes(PNG)
    for k in range(THEMES):
        (site / "static" / f"theme-{k}.css").write_text(f".t{k}{{color:#{k}{k}{k}}}\n" * 40)
    gen = _Generator(pages, seed, size)
    started = time.monotonic()
    gen.write(site)
    ext = tmp / "ext"
    (ext / "ext").mkdir(parents=True)
    for k in range(EXT_OK_PAGES):
        (ext / "ext" / f"{k}.html").write_text(
            f"<!DOCTYPE html><html><head><title>Partner {k}</title></head>"
            f"<body><p>Partner page {k}</p></body></html>\n"
        )
    (ext / "index.html").write_text("<!DOCTYPE html><html><body>partner</body></html>\n")
    main_assets = 4 + min(THEMES, pages) + (pages - 1) // PAGES_PER_DIR + 1 + pages
    main_broken = sum(1 for origin, _ in gen.broken if origin == "main")
    truth = {
        "format": FORMAT_VERSION,
        "pages": pages,
        "seed": seed,
        "page_bytes": gen.bytes,
        "broken": [
            {"origin": origin, "path": path, "sources": sorted(sources)}
            for (origin, path), sources in sorted(gen.broken.items())
        ],
        "ext_sources": gen.ext_sources,  # pages linking to the second host
        "ext_origin": PLACEHOLDER_ORIGIN,  # as written in the cached pages
        # Distinct URLs a crawler that checks every link requests exactly once.
        "expected_requests": {
            "main": pages + main_assets + main_broken,
            "ext": len(gen.ext_targets),
        },
        "generate_s": round(time.monotonic() - started, 1),
    }
    (tmp / TRUTH).write_text(json.dumps(truth, indent=1))
    try:
        os.rename(tmp, out)
    except OSError:  # another process generated the same site meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
        if not truth_file.exists():
            raise
    return truth


def is_site(root: Path) -> bool:
    """Is ``root`` the main document root of a generated site?"""
    return root.name == "site" and (root.parent / TRUTH).is_file()


def render_overlay(out_dir: str | Path, overlay_dir: Path, ext_origin: str) -> list[str]:
    """Write the pages that link to the second host, pointing at ``ext_origin``.

    Returns their paths relative to the document root. The cached site itself
    is left alone, so runs sharing it never see each other's ports.
    """
    out = Path(out_dir)
    truth = json.loads((out / TRUTH).read_text())
    rels: list[str] = truth["ext_sources"]
    for rel in rels:
        text = (out / "site" / rel).read_text()
        target = overlay_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_EXT_LINK.sub(f'"{ext_origin}/', text))
    return rels


def set_ext_origin(out_dir: str | Path, origin: str) -> None:
    """Kept for callers of the first version: ``serve.Server`` now renders the
    pages linking to the second host per run (``render_overlay``); nothing to do."""


def broken_urls(
    truth: dict[str, object], main_origin: str, ext_origin: str
) -> dict[str, list[str]]:
    """Planted broken URL -> its source pages, as full URLs."""
    origins = {"main": main_origin.rstrip("/"), "ext": ext_origin.rstrip("/")}
    base = origins["main"]
    entries = truth["broken"]
    assert isinstance(entries, list)
    return {origins[e["origin"]] + e["path"]: [base + s for s in e["sources"]] for e in entries}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--page-size", choices=sorted(PAGE_SIZES), default="normal")
    args = parser.parse_args(argv)
    truth = generate(args.out_dir, args.pages, args.seed, args.page_size)
    json.dump({k: v for k, v in truth.items() if k != "broken"}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
