#!/usr/bin/env python3
"""Why a crawl's fetch slots sit free: the engine's queues sampled while it runs.

    .venv/bin/python bench/engine_stalls.py -- .venv/bin/crawler crawl URL --db /tmp/c.db -n -f json
    .venv/bin/python bench/engine_stalls.py -- PY -P -m crawler.cli crawl URL ...  # compiled

A crawl can be slower than its threads' CPU says (``bench/thread_cpu.py``):
cores sit idle while a slot waits for a lease, or while every task it may
run waits on the parse helpers. This runs the command with a
``sitecustomize`` of its own first on ``PYTHONPATH``; in the crawler's
process a thread finds the engine and reads its queues every
``--interval`` seconds (private attributes: a benchmark's view, for this
checkout's engine). It prints, over the middle 90% of the samples, the
share of time the slots were free (fewer fetches running than
``--max-concurrency``) for want of leased rows ("no row leased") or because
the tasks' limit was reached (pages waiting to be parsed), and the mean
length of each queue. The sampling thread takes the GIL: times are a little
longer than without it. Linux and CPython only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import measure

# Runs inside the measured command (in its parse helpers too, where it does nothing).
_PROBE = r"""
import atexit, gc, json, os, sys, threading, time

_OUT = os.environ.get("ENGINE_STALLS_OUT")
_INTERVAL = float(os.environ.get("ENGINE_STALLS_INTERVAL", "0.005"))
_samples = []


def _engine():
    while True:
        time.sleep(0.05)
        if "crawler.engine.loop" not in sys.modules:
            continue
        for candidate in gc.get_objects():
            if type(candidate).__name__ == "Engine":
                return candidate


def _sample():
    engine = _engine()
    limit = engine._settings.max_concurrency
    while True:
        time.sleep(_INTERVAL)
        pool = engine._parse_pool
        helpers = pool._helpers if pool is not None else []
        _samples.append((
            engine._fetching, engine._buffered, len(engine._running), len(engine._outcomes),
            engine._committing, sum(len(h.pending) for h in helpers), limit,
            engine._parsed_here, int(engine._frontier_dry),
            int(engine._leasing is not None and not engine._leasing.done()),
        ))


def _dump():
    with open(_OUT, "w") as out:
        json.dump(_samples, out)


# Not in a parse helper (``python -P -c "from crawler.engine.parse_child import main..."``):
# its argv holds only "-c", its original command line the code.
if _OUT and "parse_child" not in " ".join(sys.orig_argv):
    threading.Thread(target=_sample, daemon=True).start()
    atexit.register(_dump)
"""


def summarize(samples: list[list[int]]) -> dict[str, float]:
    """Shares of time and mean queue lengths over the middle 90% of the samples."""
    cut = len(samples) // 20
    middle = samples[cut : len(samples) - cut] or samples
    n = max(1, len(middle))
    free = [s for s in middle if s[0] < s[6]]
    # The engine runs at most two rounds of tasks (``Engine._dispatch``).
    return {
        "samples": len(middle),
        "slots free, no row leased": sum(1 for s in free if s[1] == 0) / n,
        "  of which the last lease found the frontier dry": sum(
            1 for s in free if s[1] == 0 and s[8]
        )
        / n,
        "  of which a lease is on its way": sum(1 for s in free if s[1] == 0 and s[9]) / n,
        "slots free, tasks' limit reached": sum(1 for s in free if s[1] > 0 and s[2] >= 2 * s[6])
        / n,
        "fetches running": sum(s[0] for s in middle) / n,
        "rows leased, waiting": sum(s[1] for s in middle) / n,
        "tasks": sum(s[2] for s in middle) / n,
        "outcomes waiting for a commit": sum(s[3] for s in middle) / n,
        "outcomes in a commit": sum(s[4] for s in middle) / n,
        "pages sent to helpers, unanswered": sum(s[5] for s in middle) / n,
        "pages parsed on the loop's thread": float(middle[-1][7]) if middle else 0.0,
    }


def main() -> int:
    interval, command = measure.sampler_args(__doc__.split("\n", 1)[0], 0.005, "samples")
    with tempfile.TemporaryDirectory(prefix="engine-stalls-") as scratch:
        (Path(scratch) / "sitecustomize.py").write_text(_PROBE)
        out = Path(scratch) / "samples.json"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [scratch, env.get("PYTHONPATH")]))
        env["ENGINE_STALLS_OUT"] = str(out)
        env["ENGINE_STALLS_INTERVAL"] = str(interval)
        code = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=False).returncode
        if not out.exists():
            print(f"no samples (exit {code}): did the command run a crawl?", file=sys.stderr)
            return 1
        samples = json.loads(out.read_text())
    print(f"exit {code}")
    for name, value in summarize(samples).items():
        if name.lstrip().startswith(("slots", "of which")):
            shown = f"{value:.0%}"
        elif name.startswith(("samples", "pages parsed")):
            shown = f"{value:.0f}"
        else:
            shown = f"{value:.1f}"
        print(f"  {name:36} {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
