"""Stopping a test's subprocess: the signals a crashed or a stopped container gets."""

from __future__ import annotations

import signal
import subprocess

STOP_TIMEOUT_S = 20.0


class Stoppable:
    """``kill``, ``terminate`` and ``stop`` for a class that holds its ``process``."""

    process: subprocess.Popen[bytes] | None

    def kill(self) -> None:
        """SIGKILL: no cleanup at all, as a crashed container."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(STOP_TIMEOUT_S)

    def terminate(self) -> int:
        """SIGTERM, and wait for a graceful exit; returns the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(STOP_TIMEOUT_S)

    def stop(self) -> None:
        """SIGTERM if still running; SIGKILL when it does not exit in time."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)
