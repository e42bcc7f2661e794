#!/usr/bin/env python3
"""Serve document roots on loopback for benchmarks: nginx, or a pure-Python fallback.

``Server`` is a context manager serving one or more roots, each on its own
loopback address and port, and writing one access-log line per request::

    <unix time> <addr:port> <METHOD> <request URI> <status>

nginx comes from Debian's packages (``nginx-light``, else ``nginx``), installed
with apt-get when missing and when we are root; it runs in the foreground with
a generated configuration in a temporary directory (one worker). When nginx
cannot be had, or ``kind="python"`` is asked, an aiohttp server runs in a
subprocess instead. Either way the server is always stopped on exit.

Run directly, it serves roots until interrupted::

    python bench/serve.py ROOT [ROOT2] [--server python]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import mimetypes
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import sitegen

NGINX_PACKAGES = ("nginx-light", "nginx")
NGINX_PATHS = ("/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx")
INSTALL_TIMEOUT_S = 600
READY_TIMEOUT_S = 15.0
# LinkChecker limits itself to 10 requests/s per host unless the server answers
# with this header (see bench/compare.py); harmless for the other tools.
EXTRA_HEADERS = {"LinkChecker": "bench"}


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One access-log line."""

    at: float
    host: str
    method: str
    uri: str
    status: int


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def free_port(address: str) -> int:
    """A TCP port free on ``address`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def find_nginx() -> str | None:
    found = shutil.which("nginx")
    if found:
        return found
    return next((p for p in NGINX_PATHS if os.access(p, os.X_OK)), None)


def _apt_get(args: list[str], env: dict[str, str]) -> bool:
    try:
        done = subprocess.run(
            ["apt-get", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log(f"apt-get {' '.join(args)}: {exc}")
        return False
    if done.returncode != 0:
        log(f"apt-get {' '.join(args)} failed: {done.stderr.strip().splitlines()[-1:]}")
    return done.returncode == 0


def apt_install(packages: tuple[str, ...], present: Callable[[], bool]) -> bool:
    """Install the first of ``packages`` that apt-get can, without starting services."""
    if present():
        return True
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        log(f"cannot install {packages[0]}: not root or no apt-get")
        return False
    with tempfile.TemporaryDirectory(prefix="bench-apt-") as tmp:
        # invoke-rc.d asks $POLICYRCD whether it may start a service: 101 says no,
        # so installing nginx does not leave a daemon listening on port 80.
        policy = Path(tmp) / "policy-rc.d"
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive", "POLICYRCD": str(policy)}
        for attempt in range(2):
            for package in packages:
                log(f"installing {package} with apt-get")
                if _apt_get(["install", "-y", "--no-install-recommends", package], env) and (
                    present()
                ):
                    return True
            if attempt == 0 and not _apt_get(["update"], env):
                break
    return present()


class Server:
    """Serve ``roots`` (first one on 127.0.0.1, the next on 127.0.0.2, ...)."""

    def __init__(self, roots: list[Path], *, kind: str = "auto", workdir: Path | None = None):
        self.roots = [Path(r).resolve() for r in roots]
        self.requested = kind
        self.kind = ""
        self._own_tmp = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix="bench-serve-")) if workdir is None else workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.access_log = self.workdir / "access.log"
        self.addresses = [(f"127.0.0.{k + 1}", 0) for k in range(len(self.roots))]
        # Per-run files served instead of the root's (URI path -> file).
        self.overlay: dict[str, Path] = {}
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def origins(self) -> list[str]:
        return [f"http://{a}:{p}" for a, p in self.addresses]

    def __enter__(self) -> Server:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        self.access_log.unlink(missing_ok=True)
        self.addresses = [(addr, free_port(addr)) for addr, _ in self.addresses]
        self._render_overlay()
        nginx = None
        if self.requested in ("auto", "nginx"):
            if apt_install(NGINX_PACKAGES, lambda: find_nginx() is not None):
                nginx = find_nginx()
            if nginx is None:
                if self.requested == "nginx":
                    raise RuntimeError("nginx is not available")
                log("nginx not available: falling back to the pure-Python server")
        if nginx is not None:
            self.kind = "nginx"
            self._start_nginx(nginx)
        else:
            self.kind = "python"
            self._start_python()
        self._wait_ready()

    def _render_overlay(self) -> None:
        """A generated site links to its second host, whose port is ours to choose:
        render those pages for this run (the cached site is shared, never rewritten)."""
        if len(self.roots) < 2 or not sitegen.is_site(self.roots[0]):
            return
        overlay_dir = self.workdir / "overlay"
        shutil.rmtree(overlay_dir, ignore_errors=True)
        rels = sitegen.render_overlay(self.roots[0].parent, overlay_dir, self.origins[1])
        self.overlay = {"/" + rel: overlay_dir / rel for rel in rels}
        if "/index.html" in self.overlay:
            self.overlay["/"] = self.overlay["/index.html"]

    def _start_nginx(self, nginx: str) -> None:
        conf = self.workdir / "nginx.conf"
        overlay = "".join(
            f"    location = {uri} {{ alias {path}; }}\n" for uri, path in self.overlay.items()
        )
        servers = "\n".join(
            f"""
  server {{
    listen {addr}:{port} default_server;
    server_name _;
    root {root};
    index index.html;
    location / {{ try_files $uri $uri/ =404; }}
{overlay if k == 0 else ""}  }}"""
            for k, ((addr, port), root) in enumerate(zip(self.addresses, self.roots, strict=True))
        )
        headers = "".join(f"  add_header {k} {v} always;\n" for k, v in EXTRA_HEADERS.items())
        user = "user root root;\n" if os.geteuid() == 0 else ""
        # Some clients (linkinator) open a connection per request and keep it:
        # let nginx hold many rather than recycle them under the client's feet.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        nofile = min(hard if os.geteuid() == 0 else soft, 1 << 20)
        if nofile == resource.RLIM_INFINITY or nofile < 0:
            nofile = 1 << 20
        limit = f"worker_rlimit_nofile {nofile};\n" if os.geteuid() == 0 else ""
        conns = max(512, nofile - 512)
        for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.workdir / sub).mkdir(exist_ok=True)
        conf.write_text(
            f"""{user}worker_processes 1;
{limit}daemon off;
pid {self.workdir}/nginx.pid;
error_log {self.workdir}/error.log warn;
events {{ worker_connections {conns}; }}
http {{
  types {{
    text/html html htm; text/css css; application/javascript js; image/png png;
    image/svg+xml svg; image/x-icon ico; application/json json; text/plain txt;
    image/jpeg jpg jpeg; image/gif gif; font/woff2 woff2; font/woff woff;
  }}
  default_type application/octet-stream;
  log_format bench '$msec $server_addr:$server_port $request_method $request_uri $status';
  access_log {self.access_log} bench buffer=256k flush=1s;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_timeout 120s;
  keepalive_requests 1000000;
  server_tokens off;
  client_body_temp_path {self.workdir}/client_body;
  proxy_temp_path {self.workdir}/proxy;
  fastcgi_temp_path {self.workdir}/fastcgi;
  uwsgi_temp_path {self.workdir}/uwsgi;
  scgi_temp_path {self.workdir}/scgi;
{headers}{servers}
}}
"""
        )
        error_log = str(self.workdir / "error.log")
        self._proc = subprocess.Popen(
            [nginx, "-p", str(self.workdir), "-e", error_log, "-c", str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.workdir / "nginx.stderr", "wb"),  # noqa: SIM115
            start_new_session=True,
        )

    def _start_python(self) -> None:
        # The project's venv has aiohttp; the interpreter running us may not.
        venv_python = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "python"
        python = str(venv_python) if venv_python.exists() else sys.executable
        args = [python, str(Path(__file__).resolve()), "--child", str(self.access_log)]
        for (addr, port), root in zip(self.addresses, self.roots, strict=True):
            args += ["--bind", f"{addr}:{port}={root}"]
        if self.overlay:
            overlay_file = self.workdir / "overlay.json"
            overlay_file.write_text(json.dumps({u: str(p) for u, p in self.overlay.items()}))
            args += ["--overlay", str(overlay_file)]
        self._proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.workdir / "python-server.stderr", "wb"),  # noqa: SIM115
            start_new_session=True,
        )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        pending = list(self.addresses)
        while pending:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(f"{self.kind} server exited at start: {self._errors()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.kind} server not ready: {self._errors()}")
            try:
                with socket.create_connection(pending[0], timeout=0.5):
                    pending.pop(0)
            except OSError:
                time.sleep(0.05)

    def _errors(self) -> str:
        texts = []
        for name in ("error.log", "nginx.stderr", "python-server.stderr"):
            path = self.workdir / name
            if path.exists():
                texts.append(path.read_text(errors="replace")[-2000:])
        return "\n".join(texts).strip()

    def stop(self) -> None:
        """Stop the server (flushing its log); safe to call twice."""
        proc = self._proc
        self._proc = None
        if proc is not None and proc.poll() is None:
            # nginx: QUIT is a graceful stop that flushes the buffered access log.
            sig = signal.SIGQUIT if self.kind == "nginx" else signal.SIGTERM
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, sig)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        # nginx's worker is in the master's process group: make sure none is left.
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    def cleanup(self) -> None:
        if self._own_tmp:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def entries(self) -> Iterator[LogEntry]:
        """Parse the access log (call after ``stop``)."""
        if not self.access_log.exists():
            return
        with self.access_log.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                parts = line.split()
                if len(parts) != 5:
                    continue
                yield LogEntry(float(parts[0]), parts[1], parts[2], parts[3], int(parts[4]))


# -- the pure-Python server (runs in a child process) -------------------------


def _child(log_path: str, binds: list[str], overlay_file: str | None) -> None:
    import asyncio

    from aiohttp import web

    overlay: dict[str, str] = json.loads(Path(overlay_file).read_text()) if overlay_file else {}

    mimetypes.add_type("image/svg+xml", ".svg")
    log_file = open(log_path, "a", buffering=256 * 1024, encoding="utf-8")  # noqa: SIM115
    extra = dict(EXTRA_HEADERS)

    def make_handler(root: str, label: str, first: bool):  # type: ignore[no-untyped-def]
        root = os.path.realpath(root)
        replaced = overlay if first else {}

        async def handler(request: web.BaseRequest) -> web.StreamResponse:
            status, response = _respond(request, root, extra, web, replaced)
            line = f"{time.time():.3f} {label} {request.method} {request.raw_path} {status}\n"
            log_file.write(line)
            return response

        return handler

    async def serve() -> None:
        runners = []
        for k, bind in enumerate(binds):
            where, root = bind.split("=", 1)
            addr, port = where.rsplit(":", 1)
            server = web.Server(make_handler(root, where, k == 0), access_log=None)
            runner = web.ServerRunner(server, handle_signals=False)
            await runner.setup()
            await web.TCPSite(runner, addr, int(port), backlog=1024).start()
            runners.append(runner)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        for runner in runners:
            await runner.cleanup()

    try:
        asyncio.run(serve())
    finally:
        log_file.close()


def _respond(request, root: str, extra: dict[str, str], web, overlay: dict[str, str]):  # type: ignore[no-untyped-def]
    from urllib.parse import unquote

    if request.method not in ("GET", "HEAD"):
        return 405, web.Response(status=405, headers=extra)
    path = unquote(request.path)
    target = os.path.normpath(os.path.join(root, path.lstrip("/")))
    if path in overlay:
        target = overlay[path]
    elif target != root and not target.startswith(root + os.sep):
        return 404, web.Response(status=404, text="not found", headers=extra)
    elif os.path.isdir(target):
        if not path.endswith("/"):
            location = path + "/"
            return 301, web.Response(status=301, headers={**extra, "Location": location})
        target = os.path.join(target, "index.html")
    try:
        with open(target, "rb") as handle:
            body = handle.read()
    except OSError:
        return 404, web.Response(status=404, text="not found", headers=extra)
    ctype = mimetypes.guess_type(target)[0] or "application/octet-stream"
    if ctype.startswith("text/"):
        ctype += "; charset=utf-8"
    headers = {**extra, "Content-Type": ctype}
    return 200, web.Response(body=body, headers=headers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve directories on loopback.")
    parser.add_argument("roots", nargs="*", type=Path)
    parser.add_argument("--server", choices=("auto", "nginx", "python"), default="auto")
    parser.add_argument("--child", metavar="LOG", help=argparse.SUPPRESS)
    parser.add_argument("--bind", action="append", default=[], help=argparse.SUPPRESS)
    parser.add_argument("--overlay", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.bind, args.overlay)
        return 0
    if not args.roots:
        parser.error("give at least one root")

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # A shell's background job ignores SIGINT: take both back, so the server stops.
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    with Server(args.roots, kind=args.server) as server:
        for origin, root in zip(server.origins, server.roots, strict=True):
            print(f"{server.kind}: {origin}/ -> {root}", flush=True)
        print(f"access log: {server.access_log}  (Ctrl-C stops)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
