"""Real-time chunking in sim: a slowed policy at 20 Hz, synchronous vs asynchronous; prints JSON.

Simulated time: the policy is "artificially slowed" to a fixed ``--latency`` [s], i.e.
``D = ceil(latency * control_hz)`` control ticks pass between a request and its chunk (the
real compute time, a few ms, is hidden inside it; fixing D keeps the run deterministic on a
busy machine). While a chunk is computed the env keeps being stepped at ``control_hz`` with
whatever the control loop sends, as a robot would be.

Modes, same episode seeds:
- ``sync_ideal``: the ChunkRunner with the world paused during inference (what ``robotrl eval``
  measures; unattainable on a robot);
- ``sync_realtime``: the blocking loop on a robot: while the policy computes, no new command
  arrives (the arm holds: zero delta pose, gripper kept); every such tick is a missed deadline;
- ``async``: :class:`robotrl.async_runner.AsyncChunkRunner`, lookahead covering the latency;
- ``async_short_lookahead``: lookahead below the latency, to show stalls being counted.

Usage: python bench/realtime_chunking.py CHECKPOINT [--episodes 30] [--latency 0.15]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from typing import Any

import numpy as np
import torch

import sim
from policies.checkpoint import execute_horizon, load_policy
from robotrl.async_runner import AsyncChunkRunner, lookahead_for
from robotrl.chunk_runner import ChunkRunner, SingleEnvPolicy
from robotrl.evaluation import evaluate
from robotrl.inference_worker import SimulatedTimeWorker
from robotrl.policy_env import env_kwargs


class BlockingChunkLoop:
    """The synchronous loop in real time: when the queue is empty the policy runs on the
    current observation and, for the ticks its latency lasts, the arm gets the hold command."""

    def __init__(self, policy: Any, execute_horizon: int, delay_ticks: int):
        self.runner = ChunkRunner(policy, 1, execute_horizon)
        self.delay = delay_ticks
        self.missed = 0
        self._hold_left = 0
        self._last = np.zeros(policy.action_dim, np.float32)
        self._pending: np.ndarray | None = None

    def reset(self) -> None:
        self.runner.reset()
        self._hold_left, self._pending = 0, None
        self._last[:] = 0.0
        self._last[-1] = -1.0  # gripper open, as the env starts

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        if self._hold_left == 0 and self._pending is None and not self.runner.queues[0]:
            self._pending = self.runner.act({k: np.asarray(v)[None] for k, v in obs.items()})[0]
            self._hold_left = self.delay
        if self._hold_left > 0:
            self._hold_left -= 1
            self.missed += 1
            hold = np.zeros_like(self._last)
            hold[-1] = self._last[-1]
            return hold
        if self._pending is not None:
            a, self._pending = self._pending, None
        else:
            a = self.runner.act({k: np.asarray(v)[None] for k, v in obs.items()})[0]
        self._last[:] = a
        return a


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--episodes", type=int, default=30)
    ap.add_argument("--latency", type=float, default=0.15, help="policy latency [s]")
    ap.add_argument("--seed", type=int, default=100000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    policy, meta = load_policy(args.checkpoint)
    te = execute_horizon(meta, policy.action_horizon)
    env = sim.make(meta["task"], **env_kwargs(meta))
    hz = env.control_hz
    delay = max(1, math.ceil(args.latency * hz - 1e-9))
    gripper_open = np.zeros(policy.action_dim, np.float32)
    gripper_open[-1] = -1.0
    out: dict[str, Any] = {
        "checkpoint": args.checkpoint,
        "task": meta["task"],
        "control_hz": hz,
        "latency_s": args.latency,
        "delay_ticks": delay,
        "episodes": args.episodes,
        "execute_horizon": te,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }

    def run(name: str, pol: Any) -> dict[str, Any]:
        t0 = time.perf_counter()
        res = evaluate(env, pol, args.episodes, seed=args.seed, progress=False)
        row = {**res.summary(), "wall_s": round(time.perf_counter() - t0, 1)}
        out[name] = row
        return row

    run("sync_ideal", SingleEnvPolicy(policy, te))
    loop = BlockingChunkLoop(policy, te, delay)
    row = run("sync_realtime", loop)
    row["missed_deadlines"] = loop.missed
    d = lookahead_for(args.latency, hz, margin=1)  # one tick of margin over D
    for name, lookahead in (("async", d), ("async_short_lookahead", max(0, delay - 2))):
        worker = SimulatedTimeWorker(delay_ticks=delay)
        with AsyncChunkRunner(
            policy, te, lookahead, worker=worker, initial_action=gripper_open
        ) as runner:
            row = run(name, runner)
        row.update(lookahead=lookahead, blend_steps=runner.b, **runner.stats.summary())
    env.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
