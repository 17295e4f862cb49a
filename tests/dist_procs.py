"""Helpers for the actor/learner tests: event-based waits and real learner / actor processes
(killed with SIGKILL and restarted by the tests)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

# A learner process that logs every delivered batch (before its ack goes out) as
# "actor epoch seq n first_reward last_reward" and publishes weights every 0.2 s.
LEARNER = """
import json, signal, sys, threading
import numpy as np
from robotrl.distributed import LearnerServer

class Recorder:
    def __init__(self, path):
        self.log = open(path, "a")
    def on_transitions(self, b):
        r = b.reward
        self.log.write(f"{b.actor_id} {b.epoch} {b.seq} {len(b)} {int(r[0])} {int(r[-1])}\\n")
        self.log.flush()
    def state_dict(self):
        return {"w": np.arange(4, dtype=np.float32)}

stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
server = LearnerServer(Recorder(sys.argv[2]), sys.argv[1], publish_every_s=0.2,
                       heartbeat_interval=0.1, peer_timeout=1.0)
print(json.dumps({"address": server.address}), flush=True)
while not stop.is_set():
    server.deliver(timeout=0.05)
    server.updated()
server.close()
"""

# An actor process that streams transitions (reward = running index) until killed.
ACTOR = """
import json, sys, time
import numpy as np
from robotrl.distributed import ActorClient

client = ActorClient(sys.argv[1], sys.argv[2], batch_size=8, heartbeat_interval=0.1,
                     peer_timeout=1.0)
print(json.dumps({"epoch": client.epoch}), flush=True)
i = 0
while True:
    x = np.full(3, i, np.float32)
    client.add({"x": x}, np.zeros(2, np.float32), float(i), {"x": x + 1}, False, False)
    client.poll_weights()
    i += 1
    time.sleep(0.002)
"""


def wait_until(cond: Callable[[], object], timeout: float = 20.0, every: float = 0.01) -> float:
    """Seconds until ``cond()`` was true; AssertionError after ``timeout`` s (generous: the
    machine is shared and loaded)."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(every)
    return time.monotonic() - t0


def start(script: str, *args: str) -> tuple[subprocess.Popen, dict]:
    """Run ``script`` in a fresh interpreter; returns it and its first stdout line (JSON)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(f"process exited before its first line (rc {proc.wait()})")
    return proc, json.loads(line)


def read_deliveries(path: Path) -> list[tuple[str, int, int, int, int, int]]:
    """The learner processes' delivery log."""
    rows = []
    for line in path.read_text().splitlines():
        a, *nums = line.split()
        rows.append((a, *map(int, nums)))
    return rows  # type: ignore[return-value]
