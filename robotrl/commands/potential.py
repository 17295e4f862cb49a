"""``robotrl train-rl algo=potential``: improve a frozen peg_insert base by policy iteration on a
success potential learnt from its own rollouts (:mod:`robotrl.algos.success_potential`); write
the kept actor as a residual checkpoint on the base (``robotrl eval`` rolls it out), the metrics
CSV, the learning curve, the episodes' log, MP4s and a JSON summary."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

import sim
from policies.checkpoint import execute_horizon, load_policy
from policies.registry import has_noise_scale, set_noise_scale
from robotrl.algos.residual import StateFeaturizer, stats_meta
from robotrl.algos.residual_policy import ResidualPolicy
from robotrl.algos.success_potential import (
    STATE_KEYS,
    STATE_SIZES,
    PotentialConfig,
    PotentialResidual,
    policy_iteration,
    save_potential,
    state_vector,
)
from robotrl.chunk_runner import as_episode_policy
from robotrl.metrics import MetricsLogger, episodes_summary, learner_summary
from robotrl.policy_env import record_videos, run_env_kwargs
from robotrl.run import make_run_dir, save_config
from robotrl.safety_tally import SafetyTally
from robotrl.stop_request import KEEPS_BEST, stop_notice, stop_request, stop_summary

EVAL_SEED = 100_000  # the training evaluations' first episode seed, as every learner's


def run_potential(cfg: DictConfig) -> dict[str, Any]:
    """The ``train-rl`` path of ``algo=potential`` (one process, one env)."""
    refused = {
        "role": (cfg.role, "single"),
        "human": (cfg.human, "none"),
        "num_envs": (cfg.num_envs, 1),
        "obs_keys": (cfg.obs_keys, None),
    }
    for key, (given, needed) in refused.items():
        if given != needed:
            raise ValueError(f"algo=potential runs one env in one process: {key} must be {needed}")
    config = PotentialConfig(**OmegaConf.to_container(cfg.potential))  # type: ignore[arg-type]
    if cfg.total_steps < 1:
        raise ValueError(
            f"total_steps={cfg.total_steps}: algo=potential needs env steps to learn from"
        )
    if cfg.demos:
        print(
            "robotrl train-rl: algo=potential learns from the base's own rollouts; "
            f"demos={cfg.demos} is not read",
            file=sys.stderr,
        )
    base: Any
    base, meta = load_policy(cfg.checkpoint)
    task = cfg.task or meta.get("task")
    if not task:
        raise ValueError("the checkpoint names no task: give task=...")
    noise_scale = cfg.get("base_noise_scale")
    if noise_scale is None:  # as the residual: a deterministic base where it has a sampler
        noise_scale = 0.0 if has_noise_scale(base) else 1.0
    set_noise_scale(base, noise_scale, "base_noise_scale")
    te = execute_horizon(meta, base.action_horizon)
    kw = run_env_kwargs(cfg, meta, sim_only="algo=potential")
    safety = str(cfg.get("safety", "off"))
    env = sim.make(task, **kw)
    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    logger = MetricsLogger(run_dir / "metrics.csv")
    tally = SafetyTally()
    try:
        state_vector(env.reset(seed=EVAL_SEED)[0])  # a task without a peg: refused here
        with stop_request(stop_notice("robotrl train-rl", KEEPS_BEST)) as stop:
            run = policy_iteration(
                env, as_episode_policy(base, te), config, eval_episodes=cfg.eval_episodes,
                eval_seed=EVAL_SEED, seed=cfg.seed, total_steps=cfg.total_steps,
                target_success=cfg.target_success, keep_best=bool(cfg.keep_best), stop=stop,
                on_step=tally.add, progress=cfg.progress, report=lambda row: logger.log(**row),
            )  # fmt: skip
    finally:
        env.close()
    agent = PotentialResidual(run.agent, base.action_dim)
    identity = {k: {"mean": np.zeros(n), "std": np.ones(n)} for k, n in STATE_SIZES.items()}
    ckpt = save_potential(
        agent,
        run_dir / "checkpoint",
        {
            "base_checkpoint": str(cfg.checkpoint),
            "task": task,
            "obs_keys": list(STATE_KEYS),
            "features": "state",
            "execute_horizon": te,
            "featurizer": stats_meta(identity),  # the actor standardises its own inputs
            "base_noise_scale": float(noise_scale),
        },
    )
    plot = logger.plot(
        run_dir / "learning_curves.png",
        "env_steps",
        [["success_rate", "rollout_success"]],
        titles=["success vs env steps (rollouts: Φ's newest data)"],
    )
    policy = ResidualPolicy(agent, base, StateFeaturizer(STATE_KEYS, identity), te)
    videos = record_videos(
        policy, task, kw, run_dir, count=0 if run.interrupted else int(cfg.videos),
        seed=EVAL_SEED, execute_horizon=te, prefix="potential",
    )  # fmt: skip
    return {
        "command": "train-rl",
        "algo": "potential",
        "task": task,
        **learner_summary(run),
        "iterations": len(run.actors),
        **episodes_summary(run.episodes, run_dir),
        "checkpoint": str(ckpt),
        "plot": str(plot),
        "videos": videos,
        **tally.summary(safety),
        **stop_summary(run.interrupted),
        "run_dir": str(run_dir),
    }
