"""``crawler crawl ./public``: a directory of built HTML, crawled as a site rooted there.

The directory is served under the origin ``http://local.invalid`` (a name that
can never resolve, so nothing leaks onto the network): root-relative links such
as ``/about/`` resolve as they will once deployed, a directory answers with its
``index.html``, and a missing file answers 404. External links are checked as
usual over the network.
"""

from __future__ import annotations

import asyncio
import mimetypes
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from crawler.fetch_types import Fetched

LOCAL_HOST = "local.invalid"
LOCAL_ORIGIN = f"http://{LOCAL_HOST}"
INDEX_FILES = ("index.html", "index.htm")
STREAM_CHUNK = 64 * 1024


def is_local_seed(seed: str) -> bool:
    """A seed naming an existing directory rather than a URL."""
    return "://" not in seed and Path(seed).is_dir()


def is_local_url(url: str) -> bool:
    """Does this URL belong to the local site?"""
    return url.startswith(LOCAL_ORIGIN + "/")


def file_for(root: Path, url: str) -> Path | None:
    """The file a local URL names, or None when there is none (or it escapes the root)."""
    path = unquote(urlsplit(url).path)
    candidate = (root / path.lstrip("/")).resolve()
    if candidate != root and root not in candidate.parents:
        return None
    if candidate.is_dir():
        for name in INDEX_FILES:
            index = candidate / name
            if index.is_file():
                return index
        return None
    return candidate if candidate.is_file() else None


async def fetch(root: Path, url: str, method: str, *, read_html: bool, cap: int) -> Fetched:
    """Answer a request for a local URL from the file system."""
    started = time.monotonic()
    fetched = Fetched(method=method)
    found = await asyncio.to_thread(file_for, root, url)
    if found is None:
        fetched.status, fetched.reason = 404, "Not Found"
    else:
        fetched.status, fetched.reason = 200, "OK"
        media, _ = mimetypes.guess_type(found.name)
        fetched.content_type = media or "application/octet-stream"
        fetched.size = found.stat().st_size
        if read_html and method == "GET" and fetched.is_html:
            data = await asyncio.to_thread(_read_capped, found, cap)
            fetched.body = data
            fetched.truncated = fetched.size > cap
    fetched.elapsed_ms = int((time.monotonic() - started) * 1000)
    return fetched


async def stream(root: Path, url: str, feed: Callable[[bytes], bool], cap: int) -> Fetched:
    """Hand a local file to ``feed`` chunk by chunk, as ``Fetcher.fetch_stream`` does."""
    fetched = Fetched(method="GET")
    found = await asyncio.to_thread(file_for, root, url)
    if found is None:
        fetched.status, fetched.reason = 404, "Not Found"
        return fetched
    fetched.status, fetched.reason = 200, "OK"
    handle = await asyncio.to_thread(found.open, "rb")
    size = 0
    try:
        while chunk := await asyncio.to_thread(handle.read, STREAM_CHUNK):
            size += len(chunk)
            if size > cap:
                fetched.truncated = True
                break
            if not feed(chunk):
                break
    finally:
        handle.close()
    fetched.size = size
    return fetched


def _read_capped(path: Path, cap: int) -> bytes:
    with path.open("rb") as handle:
        return handle.read(cap)
