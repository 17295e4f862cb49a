"""Env throughput against the raw physics bound of the same MuJoCo model.

The raw bound is ``mj_step`` calls/s divided by the physics ticks per env step: no env can
step faster than that. Random actions in [-1, 1]; episodes reset when they end.
"""

from __future__ import annotations

import time
from typing import Any

import mujoco
import numpy as np
from omegaconf import DictConfig

import sim


def env_steps_per_second(env: Any, steps: int, seed: int) -> float:
    """Steps/s of one env under uniform random actions (including resets and observations)."""
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    t0 = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(rng.uniform(-1, 1, 7).astype(np.float32))
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - t0)


def vec_env_steps_per_second(venv: Any, steps: int, seed: int) -> float:
    """Total env steps/s of a vector env (autoreset) over ``steps`` steps per env."""
    rng = np.random.default_rng(seed)
    venv.reset(seed=seed)
    n = venv.num_envs
    for _ in range(5):  # let worker processes warm up
        venv.step(rng.uniform(-1, 1, (n, 7)).astype(np.float32))
    t0 = time.perf_counter()
    for _ in range(steps):
        venv.step(rng.uniform(-1, 1, (n, 7)).astype(np.float32))
    return steps * n / (time.perf_counter() - t0)


def raw_mj_steps_per_second(model: mujoco.MjModel, data: mujoco.MjData, steps: int) -> float:
    """``mj_step`` calls/s on the env's own model and state (one call per step)."""
    t0 = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(model, data)
    return steps / (time.perf_counter() - t0)


def run_sim_benchmark(cfg: DictConfig) -> dict[str, Any]:
    kw = {"controller": cfg.controller.name}
    env = sim.make(cfg.task, **kw)
    one = env_steps_per_second(env, cfg.steps, cfg.seed)
    env.reset(seed=cfg.seed)
    raw = raw_mj_steps_per_second(env.model, env.data, cfg.raw_steps)
    bound = raw / env.n_substeps
    per_env = max(cfg.steps // cfg.num_envs, 50)
    venv = sim.make_vec(cfg.task, cfg.num_envs, **kw)
    try:
        many = vec_env_steps_per_second(venv, per_env, cfg.seed)
    finally:
        venv.close()
    sync = sim.make_vec(cfg.task, cfg.num_envs, asynchronous=False, **kw)
    many_sync = vec_env_steps_per_second(sync, per_env, cfg.seed)
    sync.close()
    return {
        "benchmark": "sim",
        "task": cfg.task,
        "controller": cfg.controller.name,
        "control_hz": env.control_hz,
        "physics_hz": round(env.n_substeps * env.control_hz),
        "env_steps_per_s_1env": round(one, 1),
        f"env_steps_per_s_{cfg.num_envs}envs": round(many, 1),
        f"env_steps_per_s_{cfg.num_envs}envs_one_process": round(many_sync, 1),
        "raw_mj_steps_per_s": round(raw, 1),
        "raw_bound_env_steps_per_s": round(bound, 1),
        "ratio_1env_to_raw_bound": round(one / bound, 3),
        "parallel_speedup": round(many / one, 3),
        "speedup_vs_robosuite_lift_osc_60": round(one / 60.0, 1),
    }
