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
from robotrl.config_help import config_keys
from robotrl.metrics import MetricsLogger, episodes_summary, learner_summary
from robotrl.policy_env import frozen_base, record_videos, run_env_kwargs
from robotrl.run import make_run_dir, save_config
from robotrl.safety_tally import SafetyTally
from robotrl.stop_request import KEEPS_BEST, stop_notice, stop_request, stop_summary

EVAL_SEED = 100_000  # the training evaluations' first episode seed, as every learner's
# settings that must stay as they are: (key, the value it needs, why)
REFUSED = (
    ("role", "single", "it runs in one process"),
    ("num_envs", 1, "it rolls out one env"),
    ("human", "none", "it learns from the base's own rollouts, without an operator"),
    ("obs_keys", None, "it reads the peg and the hole (success_potential.STATE_KEYS)"),
)
# train-rl keys it does not read (a changed value is named on stderr)
UNREAD = ("eval_every", "eval_envs", "warmup_steps", "warmup_noise", "critic_warmup_updates",
          "features", "exclude_damaged")  # fmt: skip


def run_potential(cfg: DictConfig) -> dict[str, Any]:
    """The ``train-rl`` path of ``algo=potential`` (one process, one env). Settings it cannot
    honour are refused before anything loads; ``demos`` and the keys of :data:`UNREAD`, which it
    does not read, are named on stderr when given."""
    for key, needed, why in REFUSED:
        if cfg.get(key) != needed:
            shown = "null" if needed is None else needed
            raise ValueError(f"algo=potential needs {key}={shown}: {why}")
    if cfg.eval_episodes < 1:
        raise ValueError(
            f"eval_episodes={cfg.eval_episodes}: algo=potential evaluates each iteration"
        )
    config = PotentialConfig(**OmegaConf.to_container(cfg.potential))  # type: ignore[arg-type]
    if cfg.total_steps < 1:
        raise ValueError(
            f"total_steps={cfg.total_steps}: algo=potential needs env steps to learn from"
        )
    defaults = config_keys("train_rl")
    unread = [f"{k}={cfg.get(k)}" for k in UNREAD if cfg.get(k) != defaults.get(k)]
    unread += [f"demos={cfg.demos}"] if cfg.demos else []
    if unread:
        print(
            f"robotrl train-rl: algo=potential learns from the base's own rollouts, one "
            f"evaluation per iteration; it does not read {', '.join(unread)}",
            file=sys.stderr,
        )
    frozen = frozen_base(cfg)
    base, meta, task, te = frozen.policy, frozen.meta, frozen.task, frozen.execute_horizon
    kw = run_env_kwargs(cfg, meta, sim_only="algo=potential")
    safety = str(cfg.get("safety", "off"))
    env = sim.make(task, **kw)
    try:
        state_vector(env.reset(seed=EVAL_SEED)[0])  # a task without a peg: refused here
    except ValueError:
        env.close()
        raise
    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    logger = MetricsLogger(run_dir / "metrics.csv")
    tally = SafetyTally()
    try:
        with stop_request(stop_notice("robotrl train-rl", KEEPS_BEST)) as stop:
            run = policy_iteration(
                env, as_episode_policy(base, te), config, eval_episodes=cfg.eval_episodes,
                eval_seed=EVAL_SEED, seed=cfg.seed, total_steps=cfg.total_steps,
                target_success=cfg.target_success, keep_best=bool(cfg.keep_best), stop=stop,
                on_step=tally.add, progress=cfg.progress, report=lambda row: logger.log(**row),
            )  # fmt: skip
    finally:
        env.close()
    if run.ended:
        print(f"robotrl train-rl: algo=potential ended early: {run.ended}", file=sys.stderr)
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
            "base_noise_scale": frozen.noise_scale,
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
        "ended": run.ended or None,
        **episodes_summary(run.episodes, run_dir),
        "checkpoint": str(ckpt),
        "plot": str(plot),
        "videos": videos,
        **tally.summary(safety),
        **stop_summary(run.interrupted),
        "run_dir": str(run_dir),
    }
