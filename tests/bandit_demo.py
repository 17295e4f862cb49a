"""Two-process actor/learner demonstration on a toy problem, with a learner kill -9 mid-run.

Problem (a contextual bandit, one step per episode): context x ~ N(0, I_4), action a in R^2,
reward r = -|a - W* x|^2. The actor acts with a = W x + sigma * noise, W from the learner's
weight broadcasts. The learner fits the reward model

    r + |a|^2 = 2 a^T M x + x^T Q x + b        (linear in M (2, 4), Q (4, 4), b)

by SGD on minibatches of a FIFO replay and publishes ``{"W": M}``; at the optimum M = W*.
Greedy regret |W - W*|_F^2 (the expected reward lost by acting with W) measures learning.

    python tests/bandit_demo.py run [--duration 12 --kill-at 3 --down 2]

starts a learner and an actor process on loopback, kills the learner with SIGKILL ``kill-at`` s
after its first weight broadcast, restarts it on the same address ``down`` s later (it resumes
from its checkpoint; its replay is gone), and prints one JSON line: the regret curve, the
transport counters, and the exact
accounting ``sent == delivered + dropped`` (delivered: unique batches written by the learners).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from robotrl.algos.residual_split import RoleProcess
from robotrl.distributed.actor_client import ActorClient
from robotrl.distributed.learner_server import LearnerServer
from robotrl.distributed.transitions import TransitionBatch, decode_arrays, encode_arrays

CONTEXT_DIM, ACTION_DIM = 4, 2
SIGMA = 0.3  # exploration noise of the actor
STEP_HZ = 200.0  # actor env steps per second
UPDATE_HZ = 400.0  # learner SGD steps per second (caps CPU use)
LR, MINIBATCH, WARMUP, REPLAY = 0.003, 64, 128, 20_000


class ReachBandit:
    """One-step episodes; obs ``{"state/context": (4,) float32}``; actions (2,) float32."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.w_star = np.random.default_rng(1234).normal(0, 0.5, (ACTION_DIM, CONTEXT_DIM))
        self._x = self._context()

    def _context(self) -> dict[str, np.ndarray]:
        return {"state/context": self.rng.normal(size=CONTEXT_DIM).astype(np.float32)}

    def reset(self) -> dict[str, np.ndarray]:
        self._x = self._context()
        return self._x

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        err = action - self.w_star @ self._x["state/context"]
        self._x = self._context()
        return self._x, -float(err @ err), True, False, {}

    def regret(self, w: np.ndarray) -> float:
        """Expected reward lost by the greedy policy a = W x: |W - W*|_F^2."""
        return float(np.sum((w - self.w_star) ** 2))


class BanditActor:
    """Gaussian linear policy; weights come from the learner (``load_state_dict``)."""

    def __init__(self, seed: int = 0) -> None:
        self.w = np.zeros((ACTION_DIM, CONTEXT_DIM), np.float32)
        self.rng = np.random.default_rng(seed)

    def load_state_dict(self, state_dict: Mapping[str, np.ndarray]) -> None:
        self.w = np.asarray(state_dict["W"], np.float32).reshape(ACTION_DIM, CONTEXT_DIM)

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        noise = self.rng.normal(0, SIGMA, ACTION_DIM)
        return (self.w @ obs["state/context"] + noise).astype(np.float32)


class BanditLearner:
    """SGD on the quadratic reward model over a FIFO replay of (x, a, r)."""

    def __init__(self, seed: int = 0) -> None:
        self.theta = np.zeros(ACTION_DIM * CONTEXT_DIM + CONTEXT_DIM**2 + 1)
        self.rng = np.random.default_rng(seed)
        self._x = np.zeros((REPLAY, CONTEXT_DIM))
        self._a = np.zeros((REPLAY, ACTION_DIM))
        self._r = np.zeros(REPLAY)
        self.size = self._next = 0

    def on_transitions(self, batch: TransitionBatch) -> None:
        for x, a, r in zip(batch.obs["state/context"], batch.action, batch.reward, strict=True):
            self._x[self._next], self._a[self._next], self._r[self._next] = x, a, r
            self._next = (self._next + 1) % REPLAY
            self.size = min(self.size + 1, REPLAY)

    @staticmethod
    def features(x: np.ndarray, a: np.ndarray) -> np.ndarray:
        """(B, 25): vec(2 a x^T), vec(x x^T), 1."""
        ax = 2 * (a[:, :, None] * x[:, None, :]).reshape(len(x), -1)
        xx = (x[:, :, None] * x[:, None, :]).reshape(len(x), -1)
        return np.concatenate([ax, xx, np.ones((len(x), 1))], axis=1)

    def update(self) -> float:
        """One SGD step; the minibatch squared error before it."""
        i = self.rng.integers(0, self.size, MINIBATCH)
        phi = self.features(self._x[i], self._a[i])
        target = self._r[i] + np.sum(self._a[i] ** 2, axis=1)
        err = phi @ self.theta - target
        self.theta -= LR * phi.T @ err / MINIBATCH
        return float(np.mean(err**2))

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"W": self.theta[: ACTION_DIM * CONTEXT_DIM].reshape(ACTION_DIM, CONTEXT_DIM)}


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def run_learner(address: str, checkpoint: Path, deliveries: Path | None) -> None:
    """Learner process: serve until SIGTERM; resume from ``checkpoint`` if it exists."""
    learner, version = BanditLearner(), 0
    if checkpoint.exists():
        state = decode_arrays(checkpoint.read_bytes())
        learner.theta, version = state["theta"].copy(), int(state["version"])
    log = deliveries.open("a") if deliveries else None
    if log is not None:
        on_transitions = learner.on_transitions

        def logged(batch: TransitionBatch) -> None:  # written before the ack goes out
            on_transitions(batch)
            log.write(f"{batch.actor_id} {batch.epoch} {batch.seq} {len(batch)}\n")
            log.flush()

        learner.on_transitions = logged  # type: ignore[method-assign]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server = LearnerServer(learner, address, publish_every_updates=50, publish_every_s=0.5,
                           initial_version=version, peer_timeout=1.0)  # fmt: skip
    _emit(event="ready", address=server.address, version=version, pid=os.getpid())
    while not stop.is_set():
        server.deliver(timeout=0.0 if learner.size >= WARMUP else 0.01)
        if learner.size >= WARMUP:
            learner.update()
            if server.updated() is not None:  # checkpoint what was just published, atomically
                tmp = checkpoint.with_suffix(".tmp")
                state = {"theta": learner.theta, "version": np.array(server.version)}
                tmp.write_bytes(encode_arrays(state))
                os.replace(tmp, checkpoint)
            stop.wait(1.0 / UPDATE_HZ)  # the update rate; SIGTERM ends it at once
    stats = server.stats()
    server.close()
    _emit(event="exit", **stats.__dict__)


def run_actor(address: str, duration: float, outbox_batches: int, batch_size: int) -> None:
    """Actor process: step the env at STEP_HZ for ``duration`` s, then flush and report."""
    env, actor = ReachBandit(), BanditActor()
    client = ActorClient(address, "robot0", batch_size=batch_size, batch_max_age=0.05,
                         outbox_batches=outbox_batches, max_in_flight=4, ack_timeout=1.0,
                         heartbeat_interval=0.1, peer_timeout=1.0)  # fmt: skip
    obs, t0, step, next_log = env.reset(), time.monotonic(), 0, 0.0
    while (now := time.monotonic() - t0) < duration:
        client.sync(actor)
        action = actor.act(obs)
        next_obs, reward, term, trunc, _ = env.step(action)
        client.add(obs, action, reward, next_obs, term, trunc)
        obs, step = next_obs, step + 1
        if now >= next_log:
            s = client.stats()
            _emit(event="progress", t=round(now, 2), step=step, regret=env.regret(actor.w),
                  version=s.weights_version, connected=s.connected, sent=s.sent,
                  acked=s.acked, dropped=s.dropped)  # fmt: skip
            next_log += 0.5
        time.sleep(max(0.0, t0 + step / STEP_HZ - time.monotonic()))
    flushed = client.flush(timeout=15.0)
    s = client.stats()
    client.close()
    _emit(event="done", flushed=flushed, regret=env.regret(actor.w), **s.__dict__)


def _start_learner(address: str, checkpoint: Path, deliveries: Path) -> RoleProcess:
    cmd = [sys.executable, __file__, "learner", "--address", address,
           "--checkpoint", str(checkpoint), "--deliveries", str(deliveries)]  # fmt: skip
    proc = RoleProcess(cmd, "learner")
    proc.wait_for(lambda m: m.get("event") == "ready", 60)  # bound and serving
    return proc


def demo(
    duration: float = 12.0,
    kill_at: float = 3.0,
    down: float = 2.0,
    outbox_batches: int = 8,
    batch_size: int = 16,
) -> dict[str, Any]:
    """Run actor + learner processes for ``duration`` s, SIGKILL the learner once the actor has
    run ``kill_at`` s on weights, restart it once the actor has seen it gone for ``down`` s (both
    read from the actor's progress lines), on the same address; returns the summary (see
    module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        ckpt, deliveries = Path(tmp) / "learner.safetensors", Path(tmp) / "deliveries.txt"
        learner = _start_learner("tcp://127.0.0.1:*", ckpt, deliveries)
        address = learner.lines[0]["address"]  # the restarted learner binds the same port
        actor = RoleProcess(
            [sys.executable, __file__, "actor", "--address", address,
             "--duration", str(duration), "--outbox-batches", str(outbox_batches),
             "--batch-size", str(batch_size)],
            "actor",
        )  # fmt: skip
        try:
            # learning has started: the actor acts on published weights
            first = actor.wait_for(lambda m: m.get("version", 0) > 0, 60)
            actor.wait_for(lambda m: m.get("t", 0) >= first["t"] + kill_at, 60)
            learner.kill()  # SIGKILL: no goodbye, queued batches never acknowledged
            t_kill = max(m.get("t", 0) for m in actor.lines)
            gone = actor.wait_for(lambda m: m.get("t", 0) > t_kill and not m["connected"], 60)
            actor.wait_for(lambda m: m.get("t", 0) >= gone["t"] + down, 60)
            learner = _start_learner(address, ckpt, deliveries)
            ready2 = learner.lines[0]
            actor.wait_for(lambda m: m.get("event") == "done", duration + 60)
        except BaseException:
            actor.kill()
            learner.kill()
            raise
        actor_lines = actor.lines
        learner.stop(60)  # SIGTERM: it checkpoints and reports
        learner_exit = learner.wait_for(lambda m: m.get("event") == "exit", 60)
        unique: dict[tuple[str, ...], int] = {}
        lines = deliveries.read_text().splitlines()
        for line in lines:
            actor_id, epoch, seq, n = line.split()
            unique[(actor_id, epoch, seq)] = int(n)
    done = actor_lines[-1]
    progress = [p for p in actor_lines if p["event"] == "progress"]
    first_down = next((i for i, p in enumerate(progress) if i and not p["connected"]), None)
    back = next((i for i, p in enumerate(progress) if first_down and i > first_down
                 and p["connected"]), None)  # fmt: skip
    delivered = sum(unique.values())
    return {
        "kill_at_s": kill_at,
        "down_s": down,
        "regret_start": progress[0]["regret"],
        "regret_before_kill": progress[first_down - 1]["regret"] if first_down else None,
        "regret_at_restart": progress[back]["regret"] if back else None,
        "regret_end": done["regret"],
        "resumed_version": ready2["version"],
        "final_version": learner_exit["version"],
        "curve": [[p["t"], round(p["regret"], 5), p["version"], p["connected"]] for p in progress],
        "actor": {
            k: done[k]
            for k in ("sent", "acked", "dropped", "rejected", "resent", "reconnects", "flushed")
        },
        "delivered_unique": delivered,
        "redelivered_batches": len(lines) - len(unique),
        "accounting_exact": done["sent"] == delivered + done["dropped"] + done["rejected"],
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="role", required=True)
    lp = sub.add_parser("learner")
    lp.add_argument("--address", required=True)
    lp.add_argument("--checkpoint", type=Path, required=True)
    lp.add_argument("--deliveries", type=Path)
    ap = sub.add_parser("actor")
    ap.add_argument("--address", required=True)
    ap.add_argument("--duration", type=float, default=12.0)
    ap.add_argument("--outbox-batches", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=16)
    rp = sub.add_parser("run")
    rp.add_argument("--duration", type=float, default=12.0)
    rp.add_argument("--kill-at", type=float, default=3.0)
    rp.add_argument("--down", type=float, default=2.0)
    rp.add_argument("--outbox-batches", type=int, default=8)
    rp.add_argument("--batch-size", type=int, default=16)
    a = p.parse_args(argv)
    if a.role == "learner":
        run_learner(a.address, a.checkpoint, a.deliveries)
    elif a.role == "actor":
        run_actor(a.address, a.duration, a.outbox_batches, a.batch_size)
    else:
        _emit(**demo(a.duration, a.kill_at, a.down, a.outbox_batches, a.batch_size))


if __name__ == "__main__":
    main()
