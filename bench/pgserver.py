"""A private PostgreSQL server for one benchmark: its writes and CPU are the crawl's alone.

The machine's server (127.0.0.1:5432) is shared: other databases' traffic
lands in its WAL, its processes' ``write_bytes`` and its CPU. ``Private``
runs a cluster of its own (``initdb`` once into ``bench/out/pgdata``, then
``postgres`` on a free loopback port) with the shared server's settings that
matter here (``autovacuum = off``, ``fsync = on``), sized for the machine as
PostgreSQL's documentation advises for a dedicated server: shared buffers a
quarter of the memory (a 1,000,000-page crawl's ``url`` and its key outgrow
the default 128 MB, and every lookup then went to the kernel for its
blocks), and checkpoints spaced by 4 GB of WAL (each checkpoint makes the
next change of every page write the whole page to the WAL). Statements over
a second are logged with their time (``pgdata.log``), to place the end of a
crawl. Debian's binaries refuse to run as root, so as root the cluster
belongs to the ``postgres`` user.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from measure import OUT, log

BIN = Path("/usr/lib/postgresql/15/bin")
READY_TIMEOUT_S = 30.0
# A quarter of the memory, within PostgreSQL's default and 8 GB.
SHARED_BUFFERS_MB = max(
    128, min(8192, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4 // 2**20)
)
SETTINGS = {
    "autovacuum": "off",
    "fsync": "on",
    "shared_buffers": f"{SHARED_BUFFERS_MB}MB",
    "effective_cache_size": f"{2 * SHARED_BUFFERS_MB}MB",
    "max_wal_size": "4GB",
    "log_min_duration_statement": "1000",
    "listen_addresses": "127.0.0.1",
    "max_connections": "100",
    # per-statement time, calls and WAL (SELECT * FROM pg_stat_statements)
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "all",
}


def _as_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def private(datadir: Path = OUT / "pgdata") -> Iterator[str]:
    """Run a private server; yield its admin URL; stop it on exit."""
    if not (datadir / "PG_VERSION").exists():
        shutil.rmtree(datadir, ignore_errors=True)
        datadir.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(datadir, "postgres", "postgres")
        log(f"initdb {datadir}")
        subprocess.run(
            _as_owner([str(BIN / "initdb"), "-D", str(datadir), "-U", "postgres", "-A", "trust"]),
            check=True,
            stdout=subprocess.DEVNULL,
        )
    port = _free_port()
    flags = [f"-c{k}={v}" for k, v in SETTINGS.items()]
    cmd = [str(BIN / "postgres"), "-D", str(datadir), "-p", str(port), "-k", str(datadir), *flags]
    proc = subprocess.Popen(
        _as_owner(cmd), stdout=subprocess.DEVNULL, stderr=(datadir.parent / "pgdata.log").open("w")
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while subprocess.run(
            [str(BIN / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            check=False,
        ).returncode:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"private PostgreSQL did not start (see {datadir}.log)")
            time.sleep(0.2)
        log(
            f"private PostgreSQL on 127.0.0.1:{port} ({datadir}, "
            f"shared_buffers {SHARED_BUFFERS_MB} MB)"
        )
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            _as_owner([str(BIN / "pg_ctl"), "-D", str(datadir), "stop", "-m", "fast", "-s"]),
            check=False,
        )
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
