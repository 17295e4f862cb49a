"""Env steps/s through Ray rollout workers (1 and 2) against the same env stepped in this
process, measured in one run; prints JSON.

Usage: python bench/ray_rollout.py [rounds=12] [slice=0.5] [backends=mujoco,pybullet] [task=lift]

Each worker is a Ray actor owning one env (``RayVectorEnv(num_workers=w, envs_per_worker=1)``);
the driver sends random actions to all workers and waits for all (lockstep, as the residual
trainer steps). The three configurations (in process, 1 worker, 2 workers) run round-robin in
``slice``-second slices for ``rounds`` rounds and report the median rate: the machine is shared,
and interleaving makes load changes hit each configuration alike. ``mujoco`` runs the native
in-simulator impedance law (fast: IPC dominates), ``pybullet`` the numpy impedance controller
every physics tick (a slower, compute-bound env).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from typing import Any

import numpy as np

import sim
from robotrl.distributed.ray_rollout import RayVectorEnv, init_ray


class _Local:
    """The env stepped in this process (the baseline)."""

    def __init__(self, env_fn: Any) -> None:
        self.env, self.n = env_fn(), 1
        self.env.reset(seed=0)

    def run(self, seconds: float, rng: np.random.Generator) -> float:
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            _, _, term, trunc, _ = self.env.step(rng.uniform(-1, 1, 7).astype(np.float32))
            steps += 1
            if term or trunc:
                self.env.reset()
        return steps / (time.perf_counter() - start)

    def close(self) -> None:
        self.env.close()


class _Pool:
    """``workers`` Ray workers of one env each, stepped in lockstep."""

    def __init__(self, env_fn: Any, workers: int) -> None:
        self.venv, self.n = RayVectorEnv(env_fn, num_workers=workers, cpus_per_worker=0.5), workers
        self.venv.reset(seed=0)

    def run(self, seconds: float, rng: np.random.Generator) -> float:
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            a = rng.uniform(-1, 1, (self.n, 7)).astype(np.float32)
            _, _, term, trunc, _ = self.venv.step(a)
            steps += self.n
            done = term | trunc
            if done.any():
                self.venv.reset(options={"reset_mask": done})
        return steps / (time.perf_counter() - start)

    def close(self) -> None:
        self.venv.close()


def main(argv: list[str]) -> dict[str, Any]:
    args = dict(a.split("=", 1) for a in argv)
    rounds, slice_s = int(args.get("rounds", 12)), float(args.get("slice", 0.5))
    task = args.get("task", "lift")
    backends = args.get("backends", "mujoco,pybullet").split(",")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    init_ray(num_cpus=2)
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {"task": task, "rounds": rounds, "slice_s": slice_s}
    for backend in backends:
        kw = {"controller": "native"} if backend == "mujoco" else {"backend": backend}
        env_fn = functools.partial(sim.make, task, **kw)
        runners = {
            "in_process": _Local(env_fn),
            "ray_1": _Pool(env_fn, 1),
            "ray_2": _Pool(env_fn, 2),
        }
        rates: dict[str, list[float]] = {k: [] for k in runners}
        try:
            for r in runners.values():
                r.run(0.2, rng)  # warm up
            # Round-robin slices: load changes from other jobs hit every configuration alike.
            for _ in range(rounds):
                for name, r in runners.items():
                    rates[name].append(r.run(slice_s, rng))
        finally:
            for r in runners.values():
                r.close()
        med = {k: float(np.median(v)) for k, v in rates.items()}
        out[backend] = {
            "in_process_steps_per_s": round(med["in_process"], 1),
            "ray_1_worker_steps_per_s": round(med["ray_1"], 1),
            "ray_2_workers_steps_per_s": round(med["ray_2"], 1),
            "ray_1_over_in_process": round(med["ray_1"] / med["in_process"], 2),
            "ray_2_over_ray_1": round(med["ray_2"] / med["ray_1"], 2),
            "ray_2_over_in_process": round(med["ray_2"] / med["in_process"], 2),
            "ray_2_over_ray_1_per_round_min_max": [
                round(min(np.divide(rates["ray_2"], rates["ray_1"])), 2),
                round(max(np.divide(rates["ray_2"], rates["ray_1"])), 2),
            ],
        }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
