#!/usr/bin/env python3
"""The crawler as a regular install runs it (compiled by mypyc), for the benchmarks.

    .venv/bin/python bench/compiled.py            # builds, prints a Python to pass on
    .venv/bin/python bench/run.py --crawler-python "$(.venv/bin/python bench/compiled.py)"

``make dev`` installs the checkout editable, as plain Python (setup.py), so
``.venv/bin/crawler`` is not what ``pip install`` gives a user. This builds the
checkout's wheel as pip does, unpacks its compiled modules beside a copy of
the sources in ``bench/.tools/compiled``, and writes a ``python`` there that
runs this checkout's venv with that copy first on the path; every benchmark
with ``--crawler-python`` takes it. Built again when a source file changed.
"""

from __future__ import annotations

import compileall
import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from measure import ROOT, VENV_BIN, log

TARGET = ROOT / "bench" / ".tools" / "compiled"


def _sources_digest() -> str:
    digest = hashlib.sha256()
    sources = [*(ROOT / "crawler").rglob("*.py"), *(ROOT / "migrations").rglob("*.sql")]
    for path in sorted([ROOT / "setup.py", *sources]):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def build() -> Path:
    """The wrapper Python of a compiled copy of this checkout, built if stale."""
    python = TARGET / "python"
    stamp = TARGET / "digest"
    digest = _sources_digest()
    if python.exists() and stamp.exists() and stamp.read_text() == digest:
        _write_wrapper(python)
        return python
    shutil.rmtree(TARGET, ignore_errors=True)
    # pip builds in the checkout's build/, whose earlier compiled modules would
    # go into the wheel too (a module taken out of setup.py's list, say).
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    wheels = TARGET / "wheel"
    log(f"building the compiled wheel into {TARGET} (a minute or two)")
    subprocess.run(
        [str(VENV_BIN / "python"), "-m", "pip", "wheel", "--quiet", "--no-deps",
         "-w", str(wheels), str(ROOT)],
        check=True,
    )  # fmt: skip
    site = TARGET / "site"
    (wheel,) = wheels.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    if not any(site.rglob("*.so")):
        raise SystemExit("the wheel holds no compiled module: is there a C compiler?")
    # As pip leaves an install: the modules left in Python byte-compiled, or each
    # start compiles them again (PYTHONDONTWRITEBYTECODE=1 on benchmark machines).
    compileall.compile_dir(site, quiet=2)
    _write_wrapper(python)
    stamp.write_text(digest)
    return python


def _write_wrapper(python: Path) -> None:
    """The ``python`` that runs the compiled copy; a ``PYTHONPATH`` given to it comes
    after the copy (``bench/engine_stalls.py`` puts its probe there)."""
    site = python.parent / "site"
    python.write_text(
        f'#!/bin/sh\nPYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" '
        f'exec "{VENV_BIN / "python"}" "$@"\n',
        encoding="utf-8",
    )
    python.chmod(0o755)


if __name__ == "__main__":
    print(build())
    sys.exit(0)
