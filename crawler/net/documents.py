"""Which files of a directory ``crawler crawl .`` checks when it has no home page.

A repository of Markdown (``README.md``, ``docs/*.md``) is checked file by
file, as lychee checks it: every HTML and Markdown file, but not what the
repository itself leaves out. In a git checkout that is what ``git ls-files``
lists (tracked, and untracked unless ``.gitignore`` ignores them), so a
Rust ``target/doc`` or a Python ``venv/`` of thousands of pages is not
crawled, as lychee honours ``.gitignore``; elsewhere, a walk of the tree.
Either way hidden files and folders (``.git``), ``node_modules`` and what
``--exclude-path`` matches are left out.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from crawler.fetch_types import MARKDOWN_EXTENSIONS
from crawler.net.localsite import is_unread
from crawler.patterns import Pattern

DOCUMENT_EXTENSIONS = frozenset((".html", ".htm", *MARKDOWN_EXTENSIONS))
SKIPPED_DIRECTORIES = frozenset({"node_modules"})  # and every hidden one (.git)
GIT_TIMEOUT_S = 60.0
# A repository's own configuration must not run a command when it is listed
# (core.fsmonitor names a program git runs): the service lists directories it
# did not write.
_GIT = ("git", "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false")


def documents(
    folder: Path, unread: tuple[Pattern, ...] = (), root: Path | None = None
) -> list[Path]:
    """Every HTML and Markdown file under ``folder`` whose links are read, in path order
    (``--exclude-path`` matches paths from the site's ``root``, the folder by default)."""
    listed = _git_listed(folder)
    candidates = listed if listed is not None else _walked(folder)
    return sorted(
        path
        for path in candidates
        if path.suffix.lower() in DOCUMENT_EXTENSIONS
        and _shown(path.relative_to(folder))
        and not is_unread(root or folder, path, unread)
        and path.is_file()
    )


def _shown(relative: Path) -> bool:
    """No hidden part and no ``node_modules`` on the way to the file."""
    return not any(part.startswith(".") or part in SKIPPED_DIRECTORIES for part in relative.parts)


def _git_listed(folder: Path) -> list[Path] | None:
    """The files git lists under ``folder``, or None outside a checkout (or without git)."""
    command = [*_GIT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    try:
        done = subprocess.run(  # noqa: S603 - a fixed command line, no shell
            command,
            cwd=folder,
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    names = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    return [folder / name for name in dict.fromkeys(names) if name]


def _walked(folder: Path) -> list[Path]:
    """Every file under ``folder``, hidden folders and ``node_modules`` not entered."""
    found: list[Path] = []
    for below, folders, files in os.walk(folder):
        folders[:] = [
            name for name in folders if not name.startswith(".") and name not in SKIPPED_DIRECTORIES
        ]
        found.extend(Path(below) / name for name in files)
    return found
