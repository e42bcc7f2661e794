"""A repository's local links checked by the crawler and by lychee, side by side.

    .venv/bin/python bench/repo_links.py DIR [DIR ...]

For each directory (a checkout: Markdown, HTML), both tools check every
document's local links and fragments without the network (the crawler with
``--internal-only``, lychee with ``--offline``), and the broken links they
report are compared as (source file, target) pairs: found by both, by the
crawler only, by lychee only, with each tool's wall time. A pair only one
tool reports is a bug of one of them, or a difference of reading worth a
look (lychee cannot resolve a root-relative link without ``--root-dir``, and
reads ``.txt`` files; the crawler reads ``<script src>``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

from compare import LYCHEE, install_lychee, lychee_broken, lychee_version
from measure import VENV_BIN

Pairs = set[tuple[str, str]]
SHOWN = 20  # differing pairs printed per side


def crawler_pairs(directory: Path, work: Path) -> tuple[Pairs, float]:
    started = time.monotonic()
    command = [str(VENV_BIN / "crawler"), "crawl", ".", "--internal-only", "--include-fragments"]
    command += ["--db", str(work / "crawl.db"), "-n", "-f", "json"]
    done = subprocess.run(command, cwd=directory, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - started
    if done.returncode not in (0, 2):
        sys.exit(f"crawler failed ({done.returncode}): {done.stderr[-2000:]}")
    pairs = {
        (where["source"], entry["url"].rstrip("/"))
        for entry in json.loads(done.stdout)["broken"]
        for where in entry["locations"]
    }
    return pairs, elapsed


def lychee_pairs(lychee: str, directory: Path, work: Path, ours: Pairs) -> tuple[Pairs, float]:
    started = time.monotonic()
    command = [lychee, "--offline", "--include-fragments", "--no-progress", "--format", "json"]
    output = work / "lychee.json"
    with output.open("w") as out:
        subprocess.run([*command, "."], cwd=directory, stdout=out, check=False)
    elapsed = time.monotonic() - started
    prefix = f"file://{directory}/"
    pairs = set()
    for url, sources in lychee_broken(output).items():
        url = urllib.parse.unquote(url.replace(prefix, ""))
        bare = url.split("#", 1)[0]
        for source in sources:
            source = source.replace(f"{directory}/", "").removeprefix("./")
            # a missing page, not its fragment
            shown = bare if "#" in url and (source, bare) in ours else url
            pairs.add((source, shown.rstrip("/")))
    return pairs, elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directories", nargs="+", type=Path)
    args = parser.parse_args(argv)
    problem = install_lychee()
    if problem is not None:
        sys.exit(f"lychee: {problem}")
    lychee = str(LYCHEE)
    print(f"lychee {lychee_version()}")
    for directory in (d.resolve() for d in args.directories):
        with tempfile.TemporaryDirectory() as work:
            ours, our_time = crawler_pairs(directory, Path(work))
            theirs, their_time = lychee_pairs(lychee, directory, Path(work), ours)
        print(f"== {directory}")
        print(f"  crawler {our_time:.2f} s, lychee {their_time:.2f} s")
        print(f"  broken (source, target) pairs: both {len(ours & theirs)}, ", end="")
        print(f"crawler only {len(ours - theirs)}, lychee only {len(theirs - ours)}")
        for label, pairs in (("crawler only", ours - theirs), ("lychee only", theirs - ours)):
            for source, target in sorted(pairs)[:SHOWN]:
                print(f"    {label}: {source} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
