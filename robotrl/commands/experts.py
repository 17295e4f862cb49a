"""``robotrl experts``: every task's scripted expert, evaluated over seeded episodes.

Shows that the arm, controller, tasks and experts work on this machine, with a video per task
(the quickstart's first stage).
"""

from __future__ import annotations

import time
from typing import Any

from omegaconf import DictConfig
from tqdm.auto import tqdm

import sim
from robotrl.evaluation import evaluate
from robotrl.policy_env import filmed_episode
from robotrl.run import config_list, make_run_dir, save_config
from robotrl.video import write_mp4


def _stiffness(cfg: DictConfig) -> list[float] | None:
    k = cfg.controller.get("stiffness")
    return config_list(k) if k else None  # null or []: the controller's default


def run_experts(cfg: DictConfig) -> dict[str, Any]:
    start = time.perf_counter()
    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    results: dict[str, Any] = {}
    tasks = list(cfg.tasks)
    for task in tqdm(tasks, desc="tasks", disable=not cfg.progress):
        env = sim.make(
            task,
            controller=cfg.controller.name,
            stiffness=_stiffness(cfg),
            image_size=tuple(cfg.image_size),
        )
        expert = sim.make_expert(task, env, noise=cfg.expert_noise, seed=cfg.seed)
        t0 = time.perf_counter()
        res = evaluate(env, expert, cfg.episodes, seed=cfg.seed, progress=cfg.progress, desc=task)
        summary = res.summary()
        summary["wall_s"] = round(time.perf_counter() - t0, 2)
        videos = []
        for v in range(cfg.videos):
            frames, _ = filmed_episode(env, expert, cfg.seed + v)
            videos.append(
                str(write_mp4(frames, run_dir / f"{task}_expert_{v}.mp4", env.control_hz))
            )
        summary["videos"] = videos
        results[task] = summary
        env.close()
    return {
        "command": "experts",
        "tasks": results,
        "wall_s": round(time.perf_counter() - start, 2),
        "run_dir": str(run_dir),
    }
