"""``robotrl eval``: a checkpoint's success rate in sim (Wilson 95 % interval) and videos."""

from __future__ import annotations

import time
from typing import Any

from omegaconf import DictConfig

from policies.checkpoint import execute_horizon as recorded_te
from policies.checkpoint import load_policy
from policies.registry import set_noise_scale
from robotrl.algos.dsrl import is_dsrl_checkpoint, load_steered_policy
from robotrl.algos.residual_policy import is_residual_checkpoint, load_residual_policy
from robotrl.policy_env import (
    check_one_robot,
    record_videos,
    rollout_policy,
    run_env_kwargs,
)
from robotrl.run import make_run_dir, save_config
from sim.registry import instruction_family


def _trained_te(meta: dict[str, Any], requested: int | None, what: str) -> int:
    """The Te an RL agent was trained with; a different ``requested`` one is refused."""
    te = int(meta["execute_horizon"])
    if requested is not None and int(requested) != te:
        raise ValueError(f"{what} was trained with execute_horizon={te}; leave it unset")
    return te


def load_checkpoint(
    checkpoint: str, base_checkpoint: str | None = None, execute_horizon: int | None = None
) -> tuple[Any, Any, dict[str, Any], int]:
    """``(policy to roll out, the flow/diffusion model whose noise is scaled, meta, Te)``: a
    train-bc checkpoint (Te: ``execute_horizon``, else its own), a train-rl residual checkpoint
    on its base or a train-rl DSRL checkpoint steering its base (both with the Te they were
    trained with; another ``execute_horizon`` is refused)."""
    if is_dsrl_checkpoint(checkpoint):
        steered, meta = load_steered_policy(checkpoint, base_checkpoint)
        return steered, steered.base, meta, _trained_te(meta, execute_horizon, "the agent")
    if not is_residual_checkpoint(checkpoint):
        policy, meta = load_policy(checkpoint)
        te = recorded_te(meta, policy.action_horizon, execute_horizon)
        return policy, policy, meta, te
    residual, meta = load_residual_policy(checkpoint, base_checkpoint)
    te = _trained_te(meta, execute_horizon, "the residual")
    return residual, residual.base, meta, te


def run_eval(cfg: DictConfig) -> dict[str, Any]:
    policy, model, meta, te = load_checkpoint(
        cfg.checkpoint, cfg.get("base_checkpoint"), cfg.execute_horizon
    )
    if cfg.get("noise_scale") is not None:  # null: the checkpoint's own
        set_noise_scale(model, cfg.noise_scale)
    task = cfg.task or meta.get("task")
    if not task:
        raise ValueError("the checkpoint names no task: give task=...")
    backend = cfg.get("backend", "mujoco")
    check_one_robot(backend, cfg.num_envs)
    kwargs = run_env_kwargs(cfg, meta)
    safety = str(cfg.get("safety", "off"))
    safety_counts: dict[str, int] = {}
    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    start = time.perf_counter()
    res = rollout_policy(
        policy,
        task,
        kwargs,
        episodes=cfg.episodes,
        num_envs=cfg.num_envs,
        execute_horizon=te,
        seed=cfg.seed,
        progress=cfg.progress,
        safety_counts=safety_counts,
    )
    wall = time.perf_counter() - start
    videos = record_videos(
        policy,
        task,
        kwargs,
        run_dir,
        count=cfg.videos if backend != "ros2" else 0,  # a robot is not rendered
        seed=cfg.seed,
        execute_horizon=te,
        size=tuple(cfg.video_size),
    )
    families = {}
    if any(res.instructions):  # an instructed task: success per instruction family
        families = res.by_group(lambda text: instruction_family(task, text))
    return {
        "command": "eval",
        "checkpoint": str(cfg.checkpoint),
        "task": task,
        "backend": backend,
        **res.summary(),
        **({"families": families} if families else {}),
        "num_envs": cfg.num_envs,
        "safety": safety,
        **({"safety_counts": safety_counts} if safety_counts else {}),
        "wall_s": round(wall, 2),
        "videos": videos,
        "run_dir": str(run_dir),
    }
