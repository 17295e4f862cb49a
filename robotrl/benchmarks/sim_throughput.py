"""Simulation throughput: vector-env scaling against one env, and camera frames/s.

Every figure is a ratio measured in one run. The configurations run round-robin in short
time slices for ``rounds`` rounds and each ratio is the median over rounds of the
configuration against the single env of the same round: the machine is shared, and
interleaving makes load changes hit every configuration alike.

- ``scaling``: env steps/s of ``sim.make_vec(task, n)`` (random actions, autoreset) for each n,
  over one env stepped in this process.
- ``gym_async``: Gymnasium's ``AsyncVectorEnv`` (one process per env) over the same env.
- ``ceiling``: two independent processes, each stepping one env, over one env alone: what
  ``workers`` cores deliver on this machine when nothing is shared.
- ``raw bound``: ``mj_step`` calls/s on the env's own model over the physics ticks per env step.
- ``cameras``: frames/s of one camera as observations are rendered (no shadows, reflections,
  skybox or multisampling) against MuJoCo's full look (what videos use) at each size, and env
  steps/s with two such cameras: one env, and the largest vector env.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
from omegaconf import DictConfig

import sim
from sim.vector_env import usable_cores


def vec_env_steps_per_second(venv: Any, steps: int, seed: int) -> float:
    """Total env steps/s of a vector env (autoreset) over ``steps`` steps per env."""
    rng = np.random.default_rng(seed)
    venv.reset(seed=seed)
    for _ in range(3):  # let worker processes warm up
        venv.step(rng.uniform(-1, 1, (venv.num_envs, 7)).astype(np.float32))
    return _timed_vector(venv, rng, steps=steps)


def _timed_single(
    env: Any, rng: np.random.Generator, *, steps: int = 0, seconds: float = 0.0
) -> float:
    """Steps/s of ``env`` for ``steps`` steps, or for ``seconds`` when ``steps`` is 0."""
    done, start = 0, time.perf_counter()
    while (done < steps) if steps else (time.perf_counter() - start < seconds):
        _, _, terminated, truncated, _ = env.step(rng.uniform(-1, 1, 7).astype(np.float32))
        done += 1
        if terminated or truncated:
            env.reset()
    return done / (time.perf_counter() - start)


def _timed_vector(
    venv: Any, rng: np.random.Generator, *, steps: int = 0, seconds: float = 0.0
) -> float:
    n, done, start = venv.num_envs, 0, time.perf_counter()
    while (done < steps) if steps else (time.perf_counter() - start < seconds):
        venv.step(rng.uniform(-1, 1, (n, 7)).astype(np.float32))
        done += 1
    return done * n / (time.perf_counter() - start)


def raw_mj_steps_per_second(model: mujoco.MjModel, data: mujoco.MjData, steps: int) -> float:
    """``mj_step`` calls/s on the env's own model and state (one call per step)."""
    t0 = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(model, data)
    return steps / (time.perf_counter() - t0)


def _solo_worker(conn: Connection, task: str, kwargs: dict[str, Any]) -> None:
    """A second process with its own env: steps it for the requested seconds, sends the rate."""
    env = sim.make(task, **kwargs)
    env.reset(seed=1)
    rng = np.random.default_rng(1)
    conn.send("ready")
    while (seconds := conn.recv()) is not None:
        conn.send(_timed_single(env, rng, seconds=seconds))
    env.close()


class _Partner:
    """A process that steps its own env while this one steps another (the 2-core ceiling)."""

    def __init__(self, task: str, kwargs: dict[str, Any]) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_solo_worker, args=(child, task, kwargs), daemon=True)
        self.proc.start()
        child.close()
        self.conn.recv()

    def run_with(self, local: Callable[[], float], seconds: float) -> float:
        """Both at once for ``seconds``: the summed env steps/s."""
        self.conn.send(seconds)
        mine = local()
        return mine + float(self.conn.recv())

    def close(self) -> None:
        self.conn.send(None)
        self.proc.join(timeout=10)


def _median_ratios(rows: list[dict[str, float]], base: str) -> dict[str, float]:
    keys = [k for k in rows[0] if k != base]
    return {k: round(float(np.median([r[k] / r[base] for r in rows])), 3) for k in keys}


def scaling(cfg: DictConfig, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Round-robin rates of one env, the two-process ceiling and each vector size."""
    rng = np.random.default_rng(cfg.seed)
    env = sim.make(cfg.task, **kwargs)
    env.reset(seed=cfg.seed)
    partner = _Partner(cfg.task, kwargs)
    venvs = {int(n): sim.make_vec(cfg.task, int(n), **kwargs) for n in cfg.num_envs}
    gym_async = {  # Gymnasium's one process per env, as sim.make_vec was before
        int(n): gym.vector.AsyncVectorEnv(
            [functools.partial(sim.make, cfg.task, **kwargs)] * int(n),
            context="spawn",
            shared_memory=False,
        )
        for n in cfg.gym_async_envs
    }
    rows: list[dict[str, float]] = []
    try:
        for venv in [*venvs.values(), *gym_async.values()]:
            vec_env_steps_per_second(venv, 3, cfg.seed)  # warm up every worker
        for _ in range(cfg.rounds):
            row = {"one": _timed_single(env, rng, seconds=cfg.slice_s)}
            row["ceiling"] = partner.run_with(
                lambda: _timed_single(env, rng, seconds=cfg.slice_s), cfg.slice_s
            )
            for n, venv in venvs.items():
                row[f"n{n}"] = _timed_vector(venv, rng, seconds=cfg.slice_s)
            for n, venv in gym_async.items():
                row[f"gym{n}"] = _timed_vector(venv, rng, seconds=cfg.slice_s)
            rows.append(row)
    finally:
        partner.close()
        for venv in [*venvs.values(), *gym_async.values()]:
            venv.close()
    ratios = _median_ratios(rows, "one")
    workers = {n: venv.workers for n, venv in venvs.items()}
    return {
        "env_steps_per_s_1env": round(float(np.median([r["one"] for r in rows])), 1),
        "ceiling_2procs_over_1env": ratios["ceiling"],
        "speedup_over_1env": {n: ratios[f"n{n}"] for n in venvs},
        "gym_async_speedup_over_1env": {n: ratios[f"gym{n}"] for n in gym_async},
        "workers": workers,
        "env_steps_per_s": {
            n: round(float(np.median([r[f"n{n}"] for r in rows])), 1) for n in venvs
        },
    }


def cameras(cfg: DictConfig, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Frames/s of observation rendering vs the full look, and env steps/s with two cameras."""
    out: dict[str, Any] = {}
    rng = np.random.default_rng(cfg.seed)
    for size in cfg.camera_sizes:
        env = sim.make(cfg.task, cameras=("front", "wrist"), image_size=(size, size), **kwargs)
        env.reset(seed=cfg.seed)
        plain = sim.make(cfg.task, **kwargs)
        plain.reset(seed=cfg.seed)

        def frames(video: bool, env: Any = env) -> float:
            n, start = 0, time.perf_counter()
            while time.perf_counter() - start < cfg.slice_s:
                env.render_camera("front", video=video)
                n += 1
            return n / (time.perf_counter() - start)

        n_vec = max(int(n) for n in cfg.num_envs)
        cam_kw = {**kwargs, "cameras": ("front", "wrist"), "image_size": (size, size)}
        venv = sim.make_vec(cfg.task, n_vec, **cam_kw)
        vec_env_steps_per_second(venv, 2, cfg.seed)
        rows = []
        try:
            for _ in range(cfg.rounds):
                rows.append(
                    {
                        "full": frames(True),
                        "obs": frames(False),
                        "steps_2cams": _timed_single(env, rng, seconds=cfg.slice_s),
                        "steps_no_cam": _timed_single(plain, rng, seconds=cfg.slice_s),
                        "steps_2cams_vec": _timed_vector(venv, rng, seconds=cfg.slice_s),
                    }
                )
        finally:
            venv.close()
            env.close()
            plain.close()
        med = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
        out[str(size)] = {
            "frames_per_s_obs": round(med["obs"], 1),
            "frames_per_s_full": round(med["full"], 1),
            "obs_over_full": _median_ratios(rows, "full")["obs"],
            "env_steps_per_s_2cams": round(med["steps_2cams"], 1),
            "env_steps_per_s_no_camera": round(med["steps_no_cam"], 1),
            f"env_steps_per_s_2cams_{n_vec}envs": round(med["steps_2cams_vec"], 1),
            "vec_over_1env_2cams": _median_ratios(rows, "steps_2cams")["steps_2cams_vec"],
        }
    return out


def plot_scaling(result: dict[str, Any], path: Path) -> None:
    """Speed-up over one env against the number of envs, with the two-process ceiling."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sp = result["speedup_over_1env"]
    ns = sorted(int(n) for n in sp)
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(ns, [sp[n] for n in ns], "o-", label="sim.make_vec (slices)")
    ga = result.get("gym_async_speedup_over_1env", {})
    if ga:
        gn = sorted(int(n) for n in ga)
        ax.plot(gn, [ga[n] for n in gn], "s--", c="tab:red", label="gymnasium AsyncVectorEnv")
    ax.axhline(result["ceiling_2procs_over_1env"], ls="--", c="gray", label="2 free processes")
    ax.axhline(1.0, ls=":", c="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xlabel("envs")
    ax.set_ylabel("env steps/s over one env")
    ax.set_title(f"{result['task']}, {result['controller']} controller, {usable_cores()} cores")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_sim_benchmark(cfg: DictConfig) -> dict[str, Any]:
    kwargs = {"controller": cfg.controller.name}
    env = sim.make(cfg.task, **kwargs)
    env.reset(seed=cfg.seed)
    raw = raw_mj_steps_per_second(env.model, env.data, cfg.raw_steps)
    bound = raw / env.n_substeps
    out: dict[str, Any] = {
        "benchmark": "sim",
        "task": cfg.task,
        "controller": cfg.controller.name,
        "cores": usable_cores(),
        "control_hz": env.control_hz,
        "physics_hz": round(env.n_substeps * env.control_hz),
        "rounds": cfg.rounds,
        "slice_s": cfg.slice_s,
        "raw_mj_steps_per_s": round(raw, 1),
        "raw_bound_env_steps_per_s": round(bound, 1),
    }
    env.close()
    out.update(scaling(cfg, kwargs))
    out["ratio_1env_to_raw_bound"] = round(out["env_steps_per_s_1env"] / bound, 3)
    if cfg.camera_sizes:
        out["cameras"] = cameras(cfg, kwargs)
    if cfg.plot:
        plot_scaling(out, Path(cfg.plot))
        out["plot"] = str(cfg.plot)
    return out
