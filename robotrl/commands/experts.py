"""``robotrl experts``: every task's scripted expert, evaluated over seeded episodes.

Shows that the arm, controller, tasks and experts work on this machine, with a video per task
(the quickstart's first stage).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

import sim
from robotrl.evaluation import evaluate
from robotrl.run import config_list, make_run_dir, save_config
from robotrl.video import write_mp4


def _stiffness(cfg: DictConfig) -> list[float] | None:
    k = cfg.controller.get("stiffness")
    return None if k is None else config_list(k)


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
            stiffness=OmegaConf.to_object(cfg.controller.stiffness)
            if cfg.controller.stiffness
            else None,
            image_size=tuple(cfg.image_size),
        )
        expert = sim.make_expert(task, env, noise=cfg.expert_noise, seed=cfg.seed)
        t0 = time.perf_counter()
        res = evaluate(env, expert, cfg.episodes, seed=cfg.seed, progress=cfg.progress, desc=task)
        summary = res.summary()
        summary["wall_s"] = round(time.perf_counter() - t0, 2)
        videos = []
        for v in range(cfg.videos):
            frames: list[np.ndarray] = []

            def grab(e: Any, frames: list[np.ndarray] = frames) -> None:
                frames.append(e.render_camera("front", video=True))

            evaluate(env, expert, 1, seed=cfg.seed + v, progress=False, on_step=grab)
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
