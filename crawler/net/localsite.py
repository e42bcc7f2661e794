"""``crawler crawl ./public``: a directory of built HTML, crawled as a site rooted there.

The directory is served under an origin: ``http://local.invalid`` by default (a
name that can never resolve, so nothing leaks onto the network), or the
address the site will be deployed at (``--base-url https://example.org/``), so
that absolute links to the site's own pages are checked in the directory too.
Root-relative links such as ``/about/`` resolve as they will once deployed, a
directory answers with its index file (``--index-files``), ``/about`` finds
``about.html`` (``--fallback-extensions``), and a missing file answers 404.
External links are checked as usual over the network.
"""

from __future__ import annotations

import asyncio
import glob
import mimetypes
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote, urlsplit

from crawler import urls
from crawler.errors import InvalidURLError, UsageError
from crawler.fetch_types import MARKDOWN_EXTENSIONS, PLAIN_TEXT_EXTENSIONS, Fetched
from crawler.patterns import Pattern, compile_pattern

if TYPE_CHECKING:
    from crawler.config import CrawlSettings

LOCAL_HOST = "local.invalid"
LOCAL_ORIGIN = f"http://{LOCAL_HOST}"
INDEX_FILES = ("index.html", "index.htm")
STREAM_CHUNK = 64 * 1024
FOLDER_TYPE = "inode/directory"  # what a source tree's folder is answered as


@dataclass(frozen=True, slots=True)
class LocalSite:
    """A directory served under ``home`` (an origin and a path prefix ending in ``/``)."""

    root: Path
    home: str = LOCAL_ORIGIN + "/"
    index_files: tuple[str, ...] = INDEX_FILES
    fallback_extensions: tuple[str, ...] = ()
    unread: tuple[Pattern, ...] = ()  # --exclude-path: files answered, not read for links
    # A source tree (no home page at its root: a repository of Markdown), not a built
    # site: a link to a folder is fine, as on GitHub, where a web server would say 404.
    folders: bool = False

    @classmethod
    def build(cls, root: Path, settings: CrawlSettings | None = None) -> LocalSite:
        """The site for ``root`` as the settings describe it (``base_url`` and file rules)."""
        index_files = tuple(settings.index_files) if settings is not None else INDEX_FILES
        folders = not has_index(root, index_files)
        if settings is None:
            return cls(root, folders=folders)
        return cls(
            root,
            home_url(settings.base_url),
            index_files,
            tuple(settings.fallback_extensions),
            unread_patterns(settings.exclude_path),
            folders,
        )

    def reads(self, file: Path) -> bool:
        """Are its links read? Not when ``--exclude-path`` matches its path from the root."""
        return not is_unread(self.root, file, self.unread)

    def contains(self, url: str) -> bool:
        """Does this URL (a normalized key) belong to the local site?"""
        return url.startswith(self.home) or url == self.home[:-1]

    def file_for(self, url: str) -> Path | None:
        """The file a local URL names, or None (no such file, or it escapes the root).

        A folder without an index file is named itself in a source tree (``folders``).
        """
        # Escapes that are not UTF-8 name the file's bytes (``file_url``).
        path = unquote(urlsplit(url).path, errors="surrogateescape")
        prefix = urlsplit(self.home).path
        relative = path[len(prefix) :] if path.startswith(prefix) else path.lstrip("/")
        candidate = (self.root / relative).resolve()
        if candidate != self.root and self.root not in candidate.parents:
            return None
        if candidate.is_dir():
            for name in self.index_files:
                index = candidate / name
                if index.is_file():
                    return index
            return candidate if self.folders else None
        if candidate.is_file():
            # ``page.md/`` is not the file: a server answers 404, and links resolved
            # against it would point one folder too deep.
            return None if path.endswith("/") else candidate
        for extension in self.fallback_extensions:
            other = candidate.with_name(f"{candidate.name}.{extension}")
            if other.is_file():
                return other
        return None


def home_url(base_url: str | None) -> str:
    """The local site's home: the normalized ``base_url`` ending in ``/``, else the default."""
    if not base_url:
        return LOCAL_ORIGIN + "/"
    try:
        key, _ = urls.normalize(base_url)
    except InvalidURLError as exc:
        raise UsageError(f"--base-url {base_url!r}: {exc}") from exc
    key = key.split("?", 1)[0]
    return key if key.endswith("/") else key + "/"


def is_local_seed(seed: str) -> bool:
    """A seed naming an existing directory rather than a URL."""
    return "://" not in seed and Path(seed).is_dir()


def is_local_file_seed(seed: str) -> bool:
    """A seed naming an existing file (``crawler crawl public/index.html``), as lychee takes one."""
    return "://" not in seed and Path(seed).is_file()


def expand_globs(seeds: list[str]) -> list[str]:
    """Seeds with their file patterns expanded, as lychee takes ``'docs/**/*.md'`` quoted.

    A pattern (``*``, ``?`` or ``[`` in a seed that is not a URL nor an existing
    path) becomes the files it matches, in path order, ``**`` crossing folders
    and hidden names left out. UsageError when it matches none: a CI job must not
    pass having checked nothing.
    """
    expanded: list[str] = []
    for seed in seeds:
        if "://" in seed or not any(c in seed for c in "*?[") or Path(seed).exists():
            expanded.append(seed)
            continue
        files = sorted(path for path in glob.glob(seed, recursive=True) if Path(path).is_file())
        if not files:
            raise UsageError(f"seed {seed!r}: no file matches this pattern")
        expanded.extend(files)
    return expanded


def site_root(seeds: list[str], root_dir: str | None) -> Path | None:
    """The directory served as the site: ``--root-dir``, else the directory seed, else the
    directory holding every file seed. UsageError for two directories, or a file outside.

    A file seed is a page of the site, so that its root-relative links (``/about/``)
    resolve as they will once deployed: name the root with ``--root-dir`` when the
    files are in a folder below it; a directory below ``--root-dir`` is where the
    crawl starts (``start_folder``). Markdown files are pages of their repository:
    the root is the git checkout that holds them, if any (``repository_root``).
    """
    root = Path(root_dir).resolve() if root_dir is not None else None
    for seed in seeds:
        if is_local_seed(seed):
            directory = Path(seed).resolve()
            if root_dir is not None and (directory == root or root in directory.parents):
                continue  # a folder of the site to start from
            if root is not None and directory != root:
                raise UsageError("only one local directory can be crawled at a time")
            root = directory
    files = [Path(seed).resolve() for seed in seeds if is_local_file_seed(seed)]
    if root is None and files:
        root = Path(os.path.commonpath([file.parent for file in files]))
        if any(file.suffix.lower() in MARKDOWN_EXTENSIONS for file in files):
            root = repository_root(root) or root
    for file in files:
        if root is not None and root not in file.parents:
            raise UsageError(f"seed {str(file)!r}: not inside the local site {str(root)!r}")
    return root


def checkout_above(seeds: list[str], index_files: list[str]) -> Path | None:
    """The git checkout above the seeds, when they are folders of it without a home page.

    ``crawler crawl docs`` in a repository: the folder's Markdown links to
    ``../README.md`` as GitHub resolves it, so the site is the checkout (the
    CLI's ``--root-dir``), and the crawl starts from the folder's documents.
    None when a seed is not such a folder, or the checkout is the folder itself.
    """
    if not seeds or not all(is_local_seed(seed) for seed in seeds):
        return None
    folders = [Path(seed).resolve() for seed in seeds]
    if any(has_index(folder, index_files) for folder in folders):
        return None
    tops = {repository_root(folder) for folder in folders}
    if len(tops) != 1:
        return None
    (top,) = tops
    return None if top is None or top in folders else top


def has_index(root: Path, index_files: tuple[str, ...] | list[str]) -> bool:
    """Does the directory answer with a home page of its own?"""
    return any((root / name).is_file() for name in index_files)


def unread_patterns(patterns: list[str]) -> tuple[Pattern, ...]:
    """``--exclude-path`` compiled (RE2, as every pattern a user gives)."""
    return tuple(compile_pattern(pattern) for pattern in patterns)


def is_unread(root: Path, path: Path, unread: tuple[Pattern, ...]) -> bool:
    """Does an ``--exclude-path`` pattern match this path, written from the root
    (``docs/old/page.md``; a folder ends in ``/``)?"""
    if not unread:
        return False
    relative = path.relative_to(root).as_posix() + ("/" if path.is_dir() else "")
    return any(pattern.search(relative) for pattern in unread)


def media_type(path: Path) -> str:
    """The type a file is served as: by its extension, Markdown's included."""
    suffix = path.suffix.lower()
    if suffix in MARKDOWN_EXTENSIONS:
        return "text/markdown"
    if suffix in PLAIN_TEXT_EXTENSIONS:
        return "text/plain"
    media, _ = mimetypes.guess_type(path.name)
    return media or "application/octet-stream"


def repository_root(folder: Path) -> Path | None:
    """The top of the git checkout holding ``folder``, or None.

    The root of Markdown files given as seeds: GitHub resolves their
    root-relative links (``/docs/setup.md``) there, and their ``../README.md``
    must not fall outside the site because only ``docs/*.md`` were named.
    """
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def file_url(site_home: str, root: Path, file: Path) -> str:
    """The URL a file of the site is served at, under the site's home.

    A name that is not UTF-8 (its bytes kept by ``surrogateescape``) is
    escaped byte by byte, as a web server serving the folder names it.
    """
    return site_home + quote(file.relative_to(root).as_posix(), errors="surrogateescape")


def is_local_url(url: str) -> bool:
    """Does this URL belong to a local site served under the default origin?"""
    return url.startswith(LOCAL_ORIGIN + "/")


def file_for(root: Path, url: str) -> Path | None:
    """The file a default-origin local URL names (``LocalSite.file_for`` with defaults)."""
    return LocalSite.build(root).file_for(url)


async def fetch(
    site: LocalSite, url: str, method: str, *, read_html: bool, read_text: bool, cap: int
) -> Fetched:
    """Answer a request for a local URL from the file system; ``read_text``: plain text too."""
    started = time.monotonic()
    fetched = Fetched(method=method)
    found = await asyncio.to_thread(site.file_for, url)
    if found is None:
        fetched.status, fetched.reason = 404, "Not Found"
    else:
        fetched.status, fetched.reason = 200, "OK"
        is_folder = found.is_dir()  # a source tree's folder (``LocalSite.folders``)
        fetched.content_type = FOLDER_TYPE if is_folder else media_type(found)
        fetched.size = 0 if is_folder else found.stat().st_size
        readable = (
            fetched.is_html
            or fetched.is_css
            or fetched.is_markdown
            or (read_text and fetched.is_plain_text)
        )
        if read_html and method == "GET" and readable and site.reads(found):
            data = await asyncio.to_thread(_read_capped, found, cap)
            fetched.body = data
            fetched.truncated = fetched.size > cap
    fetched.elapsed_ms = int((time.monotonic() - started) * 1000)
    return fetched


async def stream(site: LocalSite, url: str, feed: Callable[[bytes], bool], cap: int) -> Fetched:
    """Hand a local file to ``feed`` chunk by chunk, as ``Fetcher.fetch_stream`` does."""
    fetched = Fetched(method="GET")
    found = await asyncio.to_thread(site.file_for, url)
    if found is None or found.is_dir():
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
