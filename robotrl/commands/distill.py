"""``robotrl distill``: teacher checkpoint + episode store -> one-step student checkpoint, and
teacher vs student in sim (success, per-chunk latency) as JSON."""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig

from policies.checkpoint import execute_horizon, load_policy, save_policy
from policies.diffusion import DiffusionPolicy
from policies.distillation import DistillConfig, distill, match_error
from policies.flow_matching import FlowMatchingPolicy
from robotrl.benchmarks.policy_latency import chunk_latency
from robotrl.chunk_runner import policy_keys
from robotrl.datasets import SequenceDataset, make_dataloader, split_episodes
from robotrl.datasets.episode_store import open_intact
from robotrl.metrics import MetricsLogger
from robotrl.policy_env import env_kwargs, rollout_policy
from robotrl.run import make_run_dir, save_config


def run_distill(cfg: DictConfig) -> dict[str, Any]:
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    teacher, meta = load_policy(cfg.checkpoint)
    if teacher.policy_type not in ("flow", "diffusion") or not isinstance(
        teacher, FlowMatchingPolicy | DiffusionPolicy
    ):
        raise ValueError(
            f"the teacher must be a flow or diffusion policy, got {teacher.policy_type}"
        )
    dataset = cfg.dataset or meta.get("dataset")
    if not dataset:
        raise ValueError("the checkpoint names no dataset: give dataset=...")
    store, intact = open_intact(
        dataset, exclude_damaged=bool(cfg.exclude_damaged), who="robotrl distill"
    )
    keys = policy_keys(teacher)
    train_mask, val_mask = split_episodes(store.num_episodes, cfg.val_ratio, seed=cfg.seed)
    train_mask, val_mask = train_mask & intact, val_mask & intact
    horizons = (teacher.obs_horizon, teacher.action_horizon)
    train_ds = SequenceDataset(store, keys, *horizons, episode_mask=train_mask)
    loader = make_dataloader(train_ds, cfg.batch_size, seed=cfg.seed)
    val_loader = loader
    if val_mask.any():
        val_ds = SequenceDataset(store, keys, *horizons, episode_mask=val_mask)
        val_loader = make_dataloader(val_ds, cfg.batch_size, shuffle=False, drop_last=False)

    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    logger = MetricsLogger(run_dir / "metrics.csv")
    dcfg = DistillConfig(steps=cfg.steps, lr=cfg.lr, train_encoder=cfg.train_encoder, seed=cfg.seed)
    student, summary = distill(
        teacher, loader, cfg=dcfg, log=lambda row: logger.log(**row), progress=cfg.progress
    )
    val_error = match_error(student, teacher, val_loader)
    store.close()
    te = execute_horizon(meta, teacher.action_horizon, cfg.execute_horizon)
    ckpt = save_policy(
        student,
        run_dir / "checkpoint",
        meta={
            **meta,
            "execute_horizon": te,
            "teacher_checkpoint": str(cfg.checkpoint),
            "distill_dataset": str(dataset),
            "distill_steps": summary["steps"],
        },
    )

    obs = {k: v[:1] for k, v in next(iter(val_loader))["obs"].items()}
    report: dict[str, dict[str, Any]] = {}
    task = meta.get("task")
    for name, policy in (("teacher", teacher), ("student", student)):
        row: dict[str, Any] = {"latency": chunk_latency(policy, obs, cfg.latency_calls)}
        if cfg.eval_episodes > 0 and task:
            res = rollout_policy(
                policy,
                task,
                env_kwargs(meta),
                episodes=cfg.eval_episodes,
                num_envs=cfg.num_envs,
                execute_horizon=te,
                seed=cfg.eval_seed,
                progress=cfg.progress,
                desc=name,
            )
            row.update(res.summary())
        report[name] = row
    t_ms, s_ms = (
        report["teacher"]["latency"]["median_ms"],
        report["student"]["latency"]["median_ms"],
    )
    return {
        "command": "distill",
        "task": task,
        "teacher_type": teacher.policy_type,
        "teacher_steps": teacher.num_steps,
        "steps": summary["steps"],
        "train_wall_s": summary["train_wall_s"],
        "final_loss": round(summary["final_loss"], 6),
        "val_match_mse": round(val_error, 6),
        "teacher": report["teacher"],
        "student": report["student"],
        "speedup": round(t_ms / s_ms, 2) if s_ms > 0 else None,
        "checkpoint": str(ckpt),
        "run_dir": str(run_dir),
    }
