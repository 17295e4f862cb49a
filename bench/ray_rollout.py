"""Env steps/s through Ray rollout workers (1 and 2, each with k envs) against the same env
stepped in this process, measured in one run, and the cost model fitted to them; prints JSON.

Usage: python bench/ray_rollout.py [rounds=12] [slice=0.5] [backends=mujoco,pybullet]
    [task=lift] [envs_per_worker=1,4] [predict_workers=16,32,64]

Each worker is a Ray actor owning k envs (``RayVectorEnv(num_workers=w, envs_per_worker=k)``);
the driver sends random actions to all workers and waits for all (lockstep, as the trainers
step). The configurations run round-robin in ``slice``-second slices for ``rounds`` rounds and
report the median rate: the machine is shared, and interleaving makes load changes hit each
configuration alike. ``mujoco`` runs the native in-simulator impedance law (fast: IPC
dominates), ``pybullet`` the numpy impedance controller every physics tick (compute-bound).

The model of one lockstep step of w workers with k envs each, every worker on its own core:
``T(w, k) = k * t_env + c_trip + w * (c_worker + k * c_env)``: ``t_env`` is one env step in
process; ``c_trip`` the fixed cost of a lockstep round; ``c_worker`` the driver's serial cost
per worker and ``c_env`` per env (its action out, its observation and info back). The overhead
terms are fitted (least squares) to the same lockstep with envs that cost nothing (they return
a cached observation of the real env, so the transfer is the real one) on w = 1, 2, 4 workers,
which measures the driver's side without the workers competing with it for the 2 cores; the
model then predicts ``w * k / T`` env steps/s on a cluster of w cores.
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
from robotrl.distributed.cluster import connect
from robotrl.distributed.ray_rollout import RayVectorEnv


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
    """``workers`` Ray workers of ``envs_per_worker`` envs each, stepped in lockstep."""

    def __init__(self, env_fn: Any, workers: int, envs_per_worker: int = 1) -> None:
        self.venv = RayVectorEnv(
            env_fn, num_workers=workers, envs_per_worker=envs_per_worker, cpus_per_worker=0.1
        )
        self.n = workers * envs_per_worker
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


class CachedObsEnv:
    """An env that costs nothing to step: it returns a cached observation of the real env."""

    def __init__(self, env_fn: Any) -> None:
        env = env_fn()
        self.observation_space, self.action_space = env.observation_space, env.action_space
        self._obs, self._info = env.reset(seed=0)
        _, _, _, _, self._step_info = env.step(np.zeros(7, np.float32))
        env.close()

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, Any]:
        return self._obs, self._info

    def step(self, action: np.ndarray) -> tuple[Any, ...]:
        return self._obs, 0.0, False, False, self._step_info

    def close(self) -> None:
        pass


def fit_overheads(rates: dict[tuple[int, int], float]) -> tuple[float, float, float]:
    """(c_trip, c_worker, c_env) [s] from zero-cost lockstep rates keyed by (workers, k)."""
    rows, times = [], []
    for (w, k), rate in rates.items():
        rows.append([1.0, w, w * k])
        times.append(w * k / rate)
    coef, *_ = np.linalg.lstsq(np.array(rows), np.array(times), rcond=None)
    c_trip, c_worker, c_env = (max(float(c), 0.0) for c in coef)
    return c_trip, c_worker, c_env


def model(t_env: float, overheads: tuple[float, float, float], args: dict[str, str]) -> dict:
    """The fitted terms [ms] and predicted env steps/s for w workers of k envs."""
    c_trip, c_worker, c_env = overheads
    ws = [int(w) for w in str(args.get("predict_workers", "16,32,64")).split(",")]
    predict = {
        f"envs_per_worker_{k}": {
            w: round(w * k / (k * t_env + c_trip + w * (c_worker + k * c_env))) for w in ws
        }
        for k in (1, 4, 16)
    }
    return {
        "t_env_ms": round(1e3 * t_env, 3),
        "c_trip_ms": round(1e3 * c_trip, 3),
        "c_worker_ms": round(1e3 * c_worker, 3),
        "c_env_ms": round(1e3 * c_env, 3),
        "predicted_steps_per_s": predict,
    }


def zero_cost_rates(env_fn: Any, rounds: int, slice_s: float) -> dict[tuple[int, int], float]:
    """Median lockstep rates of cached-observation envs on 1, 2, 4 workers of 1 and 4 envs."""
    cached = functools.partial(CachedObsEnv, env_fn)
    pools = {(w, k): _Pool(cached, w, k) for w in (1, 2, 4) for k in (1, 4)}
    rates: dict[tuple[int, int], list[float]] = {key: [] for key in pools}
    rng = np.random.default_rng(1)
    try:
        for p in pools.values():
            p.run(0.1, rng)
        for _ in range(max(rounds // 2, 3)):
            for key, p in pools.items():
                rates[key].append(p.run(slice_s / 2, rng))
    finally:
        for p in pools.values():
            p.close()
    return {key: float(np.median(v)) for key, v in rates.items()}


def main(argv: list[str]) -> dict[str, Any]:
    args = dict(a.split("=", 1) for a in argv)
    rounds, slice_s = int(args.get("rounds", 12)), float(args.get("slice", 0.5))
    task = args.get("task", "lift")
    backends = args.get("backends", "mujoco,pybullet").split(",")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    connect(None, num_cpus=2)
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {"task": task, "rounds": rounds, "slice_s": slice_s}
    for backend in backends:
        kw = {"controller": "native"} if backend == "mujoco" else {"backend": backend}
        env_fn = functools.partial(sim.make, task, **kw)
        ks = [int(k) for k in str(args.get("envs_per_worker", "1,4")).split(",")]
        runners: dict[str, Any] = {"in_process": _Local(env_fn)}
        for k in ks:
            runners[f"ray_1x{k}"] = _Pool(env_fn, 1, k)
            runners[f"ray_2x{k}"] = _Pool(env_fn, 2, k)
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
        res: dict[str, Any] = {"in_process_steps_per_s": round(med["in_process"], 1)}
        for k in ks:
            one, two = med[f"ray_1x{k}"], med[f"ray_2x{k}"]
            res[f"envs_per_worker_{k}"] = {
                "ray_1_worker_steps_per_s": round(one, 1),
                "ray_2_workers_steps_per_s": round(two, 1),
                "ray_2_over_ray_1": round(two / one, 2),
                "ray_2_over_in_process": round(two / med["in_process"], 2),
                "ray_2_over_ray_1_per_round_min_max": [
                    round(min(np.divide(rates[f"ray_2x{k}"], rates[f"ray_1x{k}"])), 2),
                    round(max(np.divide(rates[f"ray_2x{k}"], rates[f"ray_1x{k}"])), 2),
                ],
            }
        zero = zero_cost_rates(env_fn, rounds, slice_s)
        res["zero_cost_steps_per_s"] = {f"{w}x{k}": round(r, 1) for (w, k), r in zero.items()}
        res["model"] = model(1.0 / med["in_process"], fit_overheads(zero), args)
        out[backend] = res
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
