"""Launch the actor and the learner of split residual RL as two processes on one machine.

:class:`RoleProcess` runs a command whose stdout is JSON lines (read on a thread, so the parent
never blocks on a full pipe); :func:`run_split` starts a learner and an actor command, waits
for the actor to finish, stops the learner with SIGTERM (it checkpoints and reports) and returns
both final JSON lines. ``robotrl train-rl role=split`` and the toy demonstration
(``tests/residual_demo.py``) use it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any


class RoleProcess:
    """A child process whose stdout lines that parse as JSON objects are collected in
    :attr:`lines` (other lines are ignored; stderr is inherited)."""

    def __init__(
        self,
        cmd: Sequence[str],
        name: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.lines: list[dict[str, Any]] = []
        self._ended = False  # stdout reached its end (the process closed it or exited)
        self._cond = threading.Condition()  # notified on every new line and at the end
        self.proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, text=True, cwd=cwd, env=env)
        self._reader = threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None  # set by Popen(stdout=PIPE)
        for line in self.proc.stdout:
            if line.startswith("{"):
                try:
                    parsed = json.loads(line)
                except json.JSONDecodeError:
                    continue
                with self._cond:
                    self.lines.append(parsed)
                    self._cond.notify_all()
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float
    ) -> dict[str, Any]:
        """The first line satisfying ``predicate``, waiting up to ``timeout`` s (woken by each
        new line, not by polling).

        Raises:
            RuntimeError: the process ended its output without such a line, or the time ran out.
        """
        deadline, seen = time.monotonic() + timeout, 0
        with self._cond:
            while True:
                for line in self.lines[seen:]:
                    if predicate(line):
                        return line
                seen = len(self.lines)
                if self._ended:
                    code = self.proc.wait()
                    raise RuntimeError(f"{self.name} exited (code {code}) before the awaited line")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RuntimeError(f"{self.name}: awaited line not seen within {timeout} s")
                self._cond.wait(remaining)

    def kill(self) -> None:
        """SIGKILL (no cleanup in the child) and reap."""
        self.proc.kill()
        self.proc.wait()
        self._reader.join(1.0)

    def stop(self, timeout: float) -> int:
        """SIGTERM, then SIGKILL after ``timeout`` s; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(1.0)
        return int(self.proc.returncode)

    def wait(self, timeout: float) -> int:
        """Wait for the exit (SIGKILL after ``timeout`` s); the exit code."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(1.0)
        return int(self.proc.returncode)

    @property
    def last(self) -> dict[str, Any]:
        """The last JSON line (empty if none)."""
        return self.lines[-1] if self.lines else {}


def run_split(
    learner_cmd: Sequence[str],
    actor_cmd: Callable[[dict[str, Any]], Sequence[str]],
    *,
    timeout: float = 24 * 3600.0,
    start_timeout: float = 600.0,
    stop_timeout: float = 60.0,
) -> dict[str, Any]:
    """Run the learner command; once it prints its ``{"event": "ready", "address", ...}``
    line, run ``actor_cmd(that line)``; when the actor exits, SIGTERM the learner. Returns
    ``{"learner": its last JSON line, "actor": ..., "learner_rc", "actor_rc"}``."""
    learner = RoleProcess(learner_cmd, "learner")
    try:
        ready = learner.wait_for(lambda line: line.get("event") == "ready", start_timeout)
        actor = RoleProcess(actor_cmd(ready), "actor")
        try:
            actor_rc = actor.wait(timeout)
        finally:
            if actor.proc.poll() is None:
                actor.kill()
    finally:
        learner_rc = learner.stop(stop_timeout)
    return {
        "learner": learner.last,
        "actor": actor.last,
        "learner_rc": learner_rc,
        "actor_rc": actor_rc,
    }
