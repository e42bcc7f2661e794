"""The build: the modules every page goes through, compiled to C by mypyc when it can be.

The typed Python of the per-page path (resolving, scoping and placing ~50 links
a page, the parse helper, the engine's loop, the SQLite writer's rows, the
PostgreSQL store's completion: its URL lookups and array literals) runs
compiled in a regular install, with the same source and the same semantics:
mypyc is mypy's compiler, and ``mypy --strict`` already holds these modules to
the types it compiles by. Everything else stays plain Python.

Plain Python instead, the same package otherwise:

- an editable install (``make dev``): compiled files beside the sources would
  run instead of an edited source;
- no C compiler or no Python headers on the machine (a slim container);
- ``CRAWLER_PURE_PYTHON=1`` in the environment.

``make test-compiled`` runs the test suite on a build made by this file.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

from setuptools import setup

COMPILED = [
    "crawler/urls.py",
    "crawler/scope.py",
    "crawler/models.py",
    "crawler/extract.py",
    "crawler/positions.py",
    "crawler/outcome.py",
    "crawler/politeness.py",
    "crawler/net/fetch.py",
    "crawler/net/http1.py",
    "crawler/net/pool.py",
    "crawler/net/heads.py",
    "crawler/engine/loop.py",
    "crawler/engine/workers.py",
    "crawler/engine/parse_child.py",
    "crawler/engine/parse_pool.py",
    "crawler/store/url_cache.py",
    "crawler/store/sqlite/bulk.py",
    "crawler/store/sqlite/links.py",
    "crawler/store/sqlite/completion.py",
    "crawler/store/sqlite/frontier.py",
    "crawler/store/sqlite/store.py",
    "crawler/store/postgres/arrays.py",
    "crawler/store/postgres/complete.py",
    "crawler/store/postgres/discover.py",
]


# Commands that read or pack the project's files only: nothing to compile for them.
METADATA_ONLY = {"egg_info", "dist_info", "sdist"}


def _why_not_compiled() -> str | None:
    if os.environ.get("CRAWLER_PURE_PYTHON"):
        return "CRAWLER_PURE_PYTHON is set"
    if "editable_wheel" in sys.argv:
        return "an editable install runs its sources"
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler})"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        return "no Python headers (Python.h)"
    return None


def _ext_modules() -> list[Any]:
    if METADATA_ONLY.intersection(sys.argv[1:]):
        return []
    why_not = _why_not_compiled()
    if why_not is not None:
        print(f"crawler: plain Python build: {why_not}", file=sys.stderr)
        return []
    from mypyc.build import mypycify

    # The same compiled code whatever else the build's Python has installed: the
    # crawler's dependencies are never read (their types are Any, which compiles
    # to the dynamic calls plain Python makes), so their stubs' strictness is off.
    flags = [
        "--no-site-packages",
        "--ignore-missing-imports",
        "--no-warn-unused-ignores",
        "--allow-subclassing-any",
        "--allow-untyped-decorators",
        "--allow-untyped-calls",
        "--no-warn-return-any",
    ]
    return list(mypycify([*flags, *COMPILED], opt_level="3", group_name="crawler"))


# Asked for only when compiling (setuptools hands it to pip as a build requirement).
COMPILER = "mypy>=1.19,<3"

setup(
    setup_requires=[COMPILER] if _why_not_compiled() is None else [],
    ext_modules=_ext_modules(),
)
