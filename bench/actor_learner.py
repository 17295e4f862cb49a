"""Actor/learner transport on a local Ray instance, the learner a Ray actor; prints JSON.

- throughput: transitions/s from ``ActorClient.add`` to the learner's acknowledgement, for a
  state-only transition and an 84x84 RGB image transition (obs + next_obs), batch 64; plus the
  control-loop cost of ``add`` (p50/p99 us);
- weights: publish -> actor receipt latency of a ~1 MB float32 state dict (object store);
- restart: learner process SIGKILL -> Ray has restarted it (its constructor ran again) -> the
  actor's first batch acknowledged by the new one.

Usage: python bench/actor_learner.py [--seconds 3] [--weights-mb 1]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from robotrl.distributed import ActorClient
from robotrl.distributed.cluster import connect
from robotrl.distributed.learner_service import serving


class Sink:
    """Learner that counts transitions, owes one update per batch (so it publishes whenever
    something arrived) and serves a fixed state dict of ``mb`` MB."""

    def __init__(self, mb: float) -> None:
        n = int(mb * 2**20 / 4)
        self.sd = {f"layer{i}.weight": np.ones(n // 4, np.float32) for i in range(4)}
        self.n = self.owed = 0

    def on_transitions(self, batch: Any) -> None:
        self.n += len(batch)
        self.owed += 1

    def work(self, max_updates: int = 4) -> int:
        done, self.owed = min(self.owed, max_updates), max(self.owed - max_updates, 0)
        return done

    def state_dict(self) -> dict[str, np.ndarray]:
        return self.sd


def learner(
    name: str, mb: float = 0.01, publish_s: float = 1e9
) -> contextlib.AbstractContextManager[dict[str, Any]]:
    """A Sink learner served as the Ray actor ``name`` while the block runs (see
    :func:`~robotrl.distributed.learner_service.serving`; checkpoints in a temporary dir)."""
    return serving(
        lambda: Sink(mb), name=name, state_dir=Path(tempfile.mkdtemp()), poll_s=0.05,
        publish_every_updates=0, publish_every_s=publish_s, threads=None,
    )  # fmt: skip


def _transition(kind: str, rng: np.random.Generator) -> dict[str, Any]:
    obs: dict[str, np.ndarray] = {"state/proprio": rng.normal(size=32).astype(np.float32)}
    if kind == "image":
        obs["images/front"] = rng.integers(0, 256, (84, 84, 3), dtype=np.uint8)
    return dict(
        obs=obs,
        action=rng.uniform(-1, 1, 7).astype(np.float32),
        reward=0.0,
        next_obs=obs,
        terminated=False,
        truncated=False,
    )


def throughput(kind: str, seconds: float) -> dict[str, Any]:
    t = _transition(kind, np.random.default_rng(0))
    per = sum(v.nbytes for v in t["obs"].values()) * 2 + 7 * 4 + 6
    lat: list[float] = []
    with learner(f"bench-{kind}"), ActorClient("bench", f"bench-{kind}", batch_size=64) as client:
        client.add(**t)
        client.flush(timeout=60)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            a = time.perf_counter()
            client.add(**t)
            lat.append(time.perf_counter() - a)
            if client.stats().pending * per > 64 << 20:  # keep within the outbox: no drops
                client.flush(timeout=60)
        ok = client.flush(timeout=120)
        dt = time.perf_counter() - t0
        s = client.stats()
    us = np.array(lat) * 1e6
    return {
        "transition_bytes": per,
        "transitions_per_s": round(len(lat) / dt),
        "MB_per_s": round(len(lat) * per / dt / 2**20, 1),
        "add_us_p50": round(float(np.percentile(us, 50)), 1),
        "add_us_p99": round(float(np.percentile(us, 99)), 1),
        "all_acked": ok and s.dropped == 0 and s.acked == s.sent,
    }


def weights_latency(mb: float, rounds: int = 20) -> dict[str, Any]:
    lat: list[float] = []
    t = _transition("state", np.random.default_rng(0))
    with learner("bench-w", mb=mb, publish_s=0.05), ActorClient("bench", "bench-w") as client:
        w = client.wait_weights(0, timeout=60)
        while w is not None and len(lat) < rounds:
            client.add(**t)  # something new: the learner publishes within publish_s
            client.flush(timeout=30)
            w = client.wait_weights(w.version + 1, timeout=30)
            if w is not None:
                lat.append(w.received_at - w.published_at)
        size = sum(v.nbytes for v in w.state_dict.values()) if w else 0
    ms = np.array(lat) * 1e3
    return {
        "state_dict_MB": round(size / 2**20, 2),
        "latency_ms_p50": round(float(np.percentile(ms, 50)), 2),
        "latency_ms_p90": round(float(np.percentile(ms, 90)), 2),
        "latency_ms_max": round(float(ms.max()), 2),
        "rounds": len(lat),
    }


def restart() -> dict[str, Any]:
    t = _transition("state", np.random.default_rng(0))
    with learner("bench-r") as box, ActorClient("bench", "bench-r", batch_size=1) as client:
        client.add(**t)
        client.flush(timeout=60)
        box["ready"].clear()
        t_kill = time.monotonic()
        os.kill(box["pid"], signal.SIGKILL)
        for _ in range(100):  # sent while it is dead
            client.add(**t)
        box["ready"].wait(120)
        t_back = box["t"]
        flushed = client.flush(timeout=120)
        t_flushed = time.monotonic()
        s = client.stats()
    return {
        "restarted_by_ray_s": round(t_back - t_kill, 3),
        "backlog_acked_after_restart_s": round(t_flushed - t_back, 3),
        "reconnects": s.reconnects,
        "sent_eq_acked_plus_dropped": flushed and s.sent == s.acked + s.dropped,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--weights-mb", type=float, default=1.0)
    a = p.parse_args()
    connect(None)
    out = {
        "throughput_state": throughput("state", a.seconds),
        "throughput_image_84": throughput("image", a.seconds),
        "weights": weights_latency(a.weights_mb),
        "restart": restart(),
    }
    print(json.dumps(out), file=sys.stdout)


if __name__ == "__main__":
    main()
