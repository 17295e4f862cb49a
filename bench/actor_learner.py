"""Actor/learner transport on loopback, learner in its own process; prints JSON.

- throughput: transitions/s from ``ActorClient.add`` to the learner's acknowledgement, for a
  state-only transition and an 84x84 RGB image transition (obs + next_obs), batch 64; plus the
  control-loop cost of ``add`` (p50/p99 us);
- weight broadcast: publish -> actor receipt latency of a ~1 MB float32 state dict;
- reconnect: learner SIGKILL -> actor notices (``connected`` false); restarted learner bound ->
  actor connected again; -> first new batch acknowledged.

Usage: python bench/actor_learner.py [--seconds 3] [--weights-mb 1]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np

from robotrl.distributed import ActorClient, LearnerServer

FAST: dict[str, Any] = {"heartbeat_interval": 0.1, "peer_timeout": 1.0}


class _Sink:
    """Learner that counts transitions and serves a fixed state dict of ``mb`` MB."""

    def __init__(self, mb: float) -> None:
        n = int(mb * 2**20 / 4)
        self.sd = {f"layer{i}.weight": np.ones(n // 4, np.float32) for i in range(4)}
        self.n = 0

    def on_transitions(self, batch) -> None:
        self.n += len(batch)

    def state_dict(self) -> dict:
        return self.sd


def learner_main(address: str, weights_mb: float, publish_s: float) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    sink = _Sink(weights_mb)
    server = LearnerServer(
        sink, address, publish_every_updates=0, publish_every_s=publish_s, **FAST
    )
    print(json.dumps({"address": server.address, "t": time.monotonic()}), flush=True)
    while not stop.is_set():
        server.deliver(timeout=0.01)
        if publish_s < 1e6:
            server.updated()
    server.close()


def _learner(address: str, weights_mb: float = 0.01, publish_s: float = 1e9):
    cmd = [
        sys.executable,
        __file__,
        "--role",
        "learner",
        "--address",
        address,
        "--weights-mb",
        str(weights_mb),
        "--publish-s",
        str(publish_s),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    return proc, json.loads(proc.stdout.readline())  # type: ignore[union-attr]


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)


def _transition(kind: str, rng: np.random.Generator) -> dict:
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


def throughput(kind: str, seconds: float) -> dict:
    proc, info = _learner("tcp://127.0.0.1:*")
    t = _transition(kind, np.random.default_rng(0))
    lat: list[float] = []
    try:
        with ActorClient(
            info["address"], "bench", batch_size=64, max_in_flight=16, **FAST
        ) as client:
            client.add(**t)
            client.flush(timeout=30)
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                a = time.perf_counter()
                client.add(**t)
                lat.append(time.perf_counter() - a)
                if client.stats().pending > 20_000:  # keep within the outbox: no drops
                    client.flush(timeout=30)
            ok = client.flush(timeout=60)
            dt = time.perf_counter() - t0
            s = client.stats()
    finally:
        _stop(proc)
    per = sum(v.nbytes for v in t["obs"].values()) * 2 + 7 * 4 + 6
    us = np.array(lat) * 1e6
    return {
        "transition_bytes": per,
        "transitions_per_s": round(len(lat) / dt),
        "MB_per_s": round(len(lat) * per / dt / 2**20, 1),
        "add_us_p50": round(float(np.percentile(us, 50)), 1),
        "add_us_p99": round(float(np.percentile(us, 99)), 1),
        "all_acked": ok and s.dropped == 0 and s.acked == s.sent,
    }


def weights_latency(mb: float, rounds: int = 20) -> dict:
    proc, info = _learner("tcp://127.0.0.1:*", weights_mb=mb, publish_s=0.2)
    lat: list[float] = []
    t_end = time.monotonic() + 60
    try:
        with ActorClient(info["address"], "bench", **FAST) as client:
            while len(lat) < rounds and time.monotonic() < t_end:
                w = client.poll_weights()
                if w is not None and w.version > 1:  # the first may predate our connection
                    lat.append(w.received_at - w.published_at)
                time.sleep(0.0005)
            size = sum(v.nbytes for v in w.state_dict.values()) if w else 0
    finally:
        _stop(proc)
    ms = np.array(lat) * 1e3
    return {
        "state_dict_MB": round(size / 2**20, 2),
        "latency_ms_p50": round(float(np.percentile(ms, 50)), 2),
        "latency_ms_p90": round(float(np.percentile(ms, 90)), 2),
        "latency_ms_max": round(float(ms.max()), 2),
        "rounds": len(lat),
    }


def reconnect(peer_timeout: float = 1.0) -> dict:
    proc, info = _learner("tcp://127.0.0.1:*")
    address = info["address"]
    t = _transition("state", np.random.default_rng(0))
    client = ActorClient(
        address, "bench", batch_size=1, heartbeat_interval=0.1, peer_timeout=peer_timeout
    )

    def until(cond, timeout: float = 30.0) -> float:
        t0 = time.monotonic()
        while not cond() and time.monotonic() - t0 < timeout:
            client.add(**t)
            time.sleep(0.001)
        return time.monotonic()

    try:
        until(lambda: client.connected and client.stats().acked > 10)
        proc.kill()
        t_kill = time.monotonic()
        proc.wait()
        t_detect = until(lambda: not client.connected)
        t_spawn = time.monotonic()
        proc, info = _learner(address)
        t_conn = until(lambda: client.connected)
        acked = client.stats().acked
        t_ack = until(lambda: client.stats().acked > acked)
        flushed = client.flush(timeout=30)
        s = client.stats()
    finally:
        _stop(proc)
        client.close()
    return {
        "peer_timeout_s": peer_timeout,
        "detect_dead_learner_s": round(t_detect - t_kill, 3),
        "learner_process_start_s": round(info["t"] - t_spawn, 3),
        "reconnect_after_bind_s": round(t_conn - info["t"], 3),
        "first_new_ack_after_bind_s": round(t_ack - info["t"], 3),
        "sent_eq_acked_plus_dropped": flushed and s.sent == s.acked + s.dropped,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--role", default="bench", choices=["bench", "learner"])
    p.add_argument("--address", default="")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--weights-mb", type=float, default=1.0)
    p.add_argument("--publish-s", type=float, default=1e9)
    a = p.parse_args()
    if a.role == "learner":
        learner_main(a.address, a.weights_mb, a.publish_s)
        return
    out = {
        "throughput_state": throughput("state", a.seconds),
        "throughput_image_84": throughput("image", a.seconds),
        "weights_broadcast": weights_latency(a.weights_mb),
        "reconnect": reconnect(),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
