"""Build the sim env a checkpoint was trained for, and roll it out (shared by train-bc, eval
and the RL commands)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sim
from robotrl.chunk_runner import ChunkRunner, SingleEnvPolicy
from robotrl.evaluation import EvalResult, evaluate, evaluate_vector
from robotrl.video import write_mp4


def env_kwargs(meta: dict[str, Any]) -> dict[str, Any]:
    """``sim.make`` keyword arguments recorded in a checkpoint's metadata."""
    env = dict(meta.get("env") or {})
    kw: dict[str, Any] = {"controller": env.get("controller", "native")}
    if env.get("cameras"):
        kw["cameras"] = tuple(env["cameras"])
        kw["image_size"] = tuple(env.get("image_size", (96, 96)))
    return kw


def with_backend(kwargs: dict[str, Any], backend: str) -> dict[str, Any]:
    """``kwargs`` for ``sim.make`` on another simulator (``sim.registry.BACKENDS``). Those have
    no in-simulator ("native") impedance law, so a checkpoint's ``native`` controller becomes
    the numpy ``impedance`` controller: the same law, as it runs on hardware."""
    if backend == "mujoco":
        return kwargs
    out = {**kwargs, "backend": backend}
    if out.get("controller") == "native":
        out["controller"] = "impedance"
    return out


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
) -> EvalResult:
    """Success statistics of ``policy`` over ``episodes`` seeded episodes of ``task``."""
    if num_envs > 1:
        venv = sim.make_vec(task, num_envs, **kwargs)
        try:
            runner = ChunkRunner(policy, num_envs, execute_horizon)
            return evaluate_vector(venv, runner, episodes, seed=seed, progress=progress, desc=desc)
        finally:
            venv.close()
    env = sim.make(task, **kwargs)
    try:
        return evaluate(
            env,
            SingleEnvPolicy(policy, execute_horizon),
            episodes,
            seed=seed,
            progress=progress,
            desc=desc,
        )
    finally:
        env.close()


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
            frames: list[Any] = []
            res = evaluate(
                env,
                SingleEnvPolicy(policy, execute_horizon),
                1,
                seed=seed + i,
                progress=False,
                on_step=lambda e, frames=frames: frames.append(e.render_camera("front")),
            )
            tag = "success" if res.successes[0] else "failure"
            path = write_mp4(frames, out_dir / f"{prefix}_{i}_{tag}.mp4", env.control_hz)
            paths.append(str(path))
    finally:
        env.close()
    return paths
