"""Env steps/s through Ray rollout workers (1 and 2) against the same env stepped in this
process, measured in one run; prints JSON.

Usage: python bench/ray_rollout.py [seconds=4] [backends=mujoco,pybullet] [task=lift]

Each worker is a Ray actor owning one env (``RayVectorEnv(num_workers=w, envs_per_worker=1)``);
the driver sends random actions to all workers and waits for all (lockstep, as the residual
trainer steps). ``mujoco`` runs the native in-simulator impedance law (fast: IPC dominates),
``pybullet`` the numpy impedance controller every physics tick (a slower, compute-bound env).
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


def _rate_local(env_fn: Any, seconds: float, rng: np.random.Generator) -> float:
    env = env_fn()
    env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, term, trunc, _ = env.step(rng.uniform(-1, 1, 7).astype(np.float32))
        steps += 1
        if term or trunc:
            env.reset()
    rate = steps / (time.perf_counter() - start)
    env.close()
    return rate


def _rate_ray(env_fn: Any, workers: int, seconds: float, rng: np.random.Generator) -> float:
    venv = RayVectorEnv(env_fn, num_workers=workers)
    try:
        venv.reset(seed=0)
        venv.step(rng.uniform(-1, 1, (workers, 7)).astype(np.float32))  # warm the workers
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            _, _, term, trunc, _ = venv.step(rng.uniform(-1, 1, (workers, 7)).astype(np.float32))
            steps += workers
            done = term | trunc
            if done.any():
                venv.reset(options={"reset_mask": done})
        return steps / (time.perf_counter() - start)
    finally:
        venv.close()


def main(argv: list[str]) -> dict[str, Any]:
    args = dict(a.split("=", 1) for a in argv)
    seconds = float(args.get("seconds", 4))
    task = args.get("task", "lift")
    backends = args.get("backends", "mujoco,pybullet").split(",")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    init_ray(num_cpus=2)
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {"task": task, "seconds_per_point": seconds, "cpus": os.cpu_count()}
    for backend in backends:
        kw = {"controller": "native"} if backend == "mujoco" else {"backend": backend}
        env_fn = functools.partial(sim.make, task, **kw)
        local = _rate_local(env_fn, seconds, rng)
        one = _rate_ray(env_fn, 1, seconds, rng)
        two = _rate_ray(env_fn, 2, seconds, rng)
        out[backend] = {
            "in_process_steps_per_s": round(local, 1),
            "ray_1_worker_steps_per_s": round(one, 1),
            "ray_2_workers_steps_per_s": round(two, 1),
            "ray_1_over_in_process": round(one / local, 2),
            "ray_2_over_ray_1": round(two / one, 2),
            "ray_2_over_in_process": round(two / local, 2),
        }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
