"""Build the sim env a checkpoint was trained for, load a checkpoint as an RL run's frozen
base, and roll policies out (shared by train-bc, eval and the RL commands)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import sim
from policies.checkpoint import execute_horizon, load_policy
from policies.registry import has_noise_scale, set_noise_scale
from robotrl.chunk_runner import ChunkRunner, as_episode_policy
from robotrl.evaluation import EpisodePolicy, EvalResult, evaluate, evaluate_vector
from robotrl.video import write_mp4


def env_kwargs(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``sim.make`` keyword arguments recorded in a checkpoint's metadata."""
    env = dict(meta.get("env") or {})
    kw: dict[str, Any] = {"controller": env.get("controller", "native")}
    if env.get("cameras"):
        kw["cameras"] = tuple(env["cameras"])
        kw["image_size"] = tuple(env.get("image_size", (96, 96)))
    return kw


@dataclass
class FrozenBase:
    """The base an RL run acts on (:func:`frozen_base`)."""

    policy: Any  # the chunk policy, its initial-noise scale set
    meta: dict[str, Any]  # its checkpoint's metadata
    task: str  # the run's task
    execute_horizon: int  # Te: actions run per planned chunk
    noise_scale: float  # the initial-noise scale it samples with (the checkpoint records it)


def frozen_base(cfg: Mapping[str, Any], wrap: Callable[[Any], Any] | None = None) -> FrozenBase:
    """``cfg.checkpoint``'s policy as an RL run's frozen base: ``wrap``-ped when given (e.g. a
    zero base with its keys), sampling with ``cfg.base_noise_scale`` (null: 0, its mean noise,
    where it has a sampler, else 1), on ``cfg.task`` (null: the checkpoint's) with the
    checkpoint's Te.

    Raises:
        ValueError: neither names a task.
        policies.checkpoint.CheckpointError: the checkpoint does not load.
    """
    policy, meta = load_policy(cfg["checkpoint"])
    base = wrap(policy) if wrap is not None else policy
    scale = cfg.get("base_noise_scale")
    if scale is None:
        scale = 0.0 if has_noise_scale(base) else 1.0
    set_noise_scale(base, scale, "base_noise_scale")
    task = cfg.get("task") or meta.get("task")
    if not task:
        raise ValueError("the checkpoint names no task: give task=...")
    te = execute_horizon(meta, base.action_horizon)
    return FrozenBase(base, meta, str(task), te, float(scale))


def with_backend(
    kwargs: dict[str, Any], backend: str, ros2: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``kwargs`` for ``sim.make`` on another simulator (``sim.registry.BACKENDS``). Those have
    no in-simulator ("native") impedance law, so a checkpoint's ``native`` controller becomes
    the numpy ``impedance`` controller: the same law, as it runs on hardware. ``backend=ros2``
    (a robot over ROS 2, ``robotrl/nodes/robot_backend.py``) also takes the non-null entries of
    ``ros2`` (``profile``, ``domain_id``, ``params_file``, ``reward_classifier``)."""
    if backend == "mujoco":
        return kwargs
    out = {**kwargs, "backend": backend}
    if out.get("controller") == "native":
        out["controller"] = "impedance"
    if backend == "ros2":
        out.update({k: v for k, v in (ros2 or {}).items() if v is not None})
    return out


def run_env_kwargs(
    cfg: Mapping[str, Any], meta: Mapping[str, Any], sim_only: str | None = None
) -> dict[str, Any]:
    """``sim.make`` keyword arguments of a command's run: the checkpoint's env settings
    (``meta``) on ``cfg.backend`` (with its ``ros2`` section) under ``cfg.safety``. ``sim_only``:
    the command (e.g. ``"algo=dsrl"``) trains in simulation only, so ``backend=ros2`` is a
    ValueError that names it."""
    backend = str(cfg.get("backend", "mujoco"))
    if sim_only and backend == "ros2":
        raise ValueError(f"{sim_only} trains in simulation: backend must be mujoco or pybullet")
    kw = with_backend(env_kwargs(meta), backend, cfg.get("ros2"))
    safety = str(cfg.get("safety", "off"))
    kw.update(safety_env_kwargs(safety, cfg.get("safety_critic"), cfg.get("safety_threshold")))
    return kw


def check_one_robot(backend: str, num_envs: int, workers: int = 0) -> None:
    """``backend=ros2`` steps one robot: one env, in this process (ValueError otherwise)."""
    if backend == "ros2" and (num_envs != 1 or workers > 0):
        raise ValueError(
            f"backend=ros2 drives one robot: expected num_envs=1 and no ray workers, got "
            f"num_envs={num_envs}, ray.workers={workers}"
        )


SAFETY_MODES = ("off", "monitor", "reflex")


def safety_env_kwargs(
    safety: str, critic: str | None = None, threshold: float | None = None
) -> dict[str, Any]:
    """``sim.make`` keyword arguments of a ``safety=off|monitor|reflex`` option (off: the
    deterministic filter only, the default; reflex needs the exported ``critic`` .npz)."""
    if safety not in SAFETY_MODES:
        raise ValueError(f"safety must be one of {SAFETY_MODES}, got {safety!r}")
    if safety == "off":
        return {}
    kw: dict[str, Any] = {}
    if safety == "reflex":
        if not critic:
            raise ValueError("safety=reflex needs safety_critic=<exported .npz>")
        with np.load(critic, allow_pickle=False) as z:
            names = [str(x) for x in z["feature_names"]]
        kw["critic"] = str(critic)
        kw["task_keys"] = tuple(n.split("/", 1)[1] for n in names if n.startswith("task/"))
        if threshold is not None:
            kw["threshold"] = float(threshold)
    return {"safety": safety, "safety_kwargs": kw}


def rollout_policy(
    policy: Any,
    task: str,
    kwargs: dict[str, Any],
    *,
    episodes: int,
    num_envs: int = 1,
    execute_horizon: int = 8,
    seed: int = 0,
    progress: bool = True,
    desc: str = "eval",
    safety_counts: dict[str, int] | None = None,
) -> EvalResult:
    """Success statistics of ``policy`` over ``episodes`` seeded episodes of ``task``.

    ``policy`` is a chunk policy, a policy with a ``vector_runner(num_envs)`` (a residual on
    its base, :class:`robotrl.algos.residual_policy.ResidualPolicy`), or with one env any
    ``EpisodePolicy``.

    With one env and a guarded env (``safety`` monitor/reflex), its counters (reflex steps,
    violations) are added into ``safety_counts``."""
    if num_envs > 1:
        venv = sim.make_vec(task, num_envs, **kwargs)
        try:
            runner = (
                policy.vector_runner(num_envs)
                if hasattr(policy, "vector_runner")
                else ChunkRunner(policy, num_envs, execute_horizon)
            )
            return evaluate_vector(venv, runner, episodes, seed=seed, progress=progress, desc=desc)
        finally:
            venv.close()
    env = sim.make(task, **kwargs)
    try:
        return evaluate(
            env,
            as_episode_policy(policy, execute_horizon),
            episodes,
            seed=seed,
            progress=progress,
            desc=desc,
        )
    finally:
        if safety_counts is not None and getattr(env, "guard", None) is not None:
            for k, v in env.guard.counts.items():
                safety_counts[k] = safety_counts.get(k, 0) + v
            for k, v in env.safety.counts.items():
                safety_counts[f"filter_{k}"] = safety_counts.get(f"filter_{k}", 0) + v
        env.close()


def filmed_episode(
    env: Any, policy: EpisodePolicy, seed: int
) -> tuple[list[np.ndarray], EvalResult]:
    """One episode of ``policy`` on ``env`` from ``seed``, with the front camera's video frame
    after every step: (frames, the episode's result)."""
    frames: list[np.ndarray] = []
    res = evaluate(
        env,
        policy,
        1,
        seed=seed,
        progress=False,
        on_step=lambda e: frames.append(e.render_camera("front", video=True)),
    )
    return frames, res


def record_videos(
    policy: Any,
    task: str,
    kwargs: dict[str, Any],
    out_dir: Path,
    *,
    count: int,
    seed: int,
    execute_horizon: int,
    size: tuple[int, int] = (240, 320),
    prefix: str = "rollout",
) -> list[str]:
    """``count`` MP4s of single episodes (front camera at ``size``), seeds ``seed + i``."""
    if count <= 0:
        return []
    kw = {**kwargs}
    if "cameras" not in kw:
        kw["image_size"] = size
    env = sim.make(task, **kw)
    paths = []
    try:
        for i in range(count):
            frames, res = filmed_episode(env, as_episode_policy(policy, execute_horizon), seed + i)
            tag = "success" if res.successes[0] else "failure"
            path = write_mp4(frames, out_dir / f"{prefix}_{i}_{tag}.mp4", env.control_hz)
            paths.append(str(path))
    finally:
        env.close()
    return paths
