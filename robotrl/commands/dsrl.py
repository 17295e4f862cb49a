"""``robotrl train-rl algo=dsrl``: steer a frozen flow / diffusion / VLA checkpoint by RL in its
initial-noise space (:mod:`robotrl.algos.dsrl`); write the agent checkpoint, metrics CSV,
learning curves, MP4s and a JSON summary."""

from __future__ import annotations

from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

import sim
from policies.checkpoint import execute_horizon, load_policy
from robotrl.algos.dsrl import DSRLConfig, SteeredPolicy, save_dsrl
from robotrl.algos.dsrl_training import DSRLTrainConfig, train_dsrl
from robotrl.algos.perception_features import featurizer_for
from robotrl.algos.residual import StateFeaturizer, feature_stats, stats_meta
from robotrl.algos.residual_training import check_budget
from robotrl.datasets.episode_store import open_intact
from robotrl.metrics import MetricsLogger, episodes_summary, learner_summary
from robotrl.policy_env import record_videos, run_env_kwargs
from robotrl.run import make_run_dir, save_config
from robotrl.stop_request import KEEPS_BEST, stop_notice, stop_request, stop_summary


def state_featurizer(
    cfg: DictConfig, base: Any
) -> tuple[StateFeaturizer, dict[str, dict[str, np.ndarray]]]:
    """Standardised state features: ``obs_keys`` (default: the base's state keys), with the
    statistics of the demos when given (their intact episodes), else the base's normaliser.
    Returns the featurizer and its per-key statistics."""
    keys = list(cfg.obs_keys) if cfg.obs_keys else list(base.config["state_dims"])
    store, intact = (
        open_intact(cfg.demos, exclude_damaged=bool(cfg.exclude_damaged), who="robotrl train-rl")
        if cfg.demos
        else (None, None)
    )
    stats = feature_stats(keys, base, store, intact)
    return StateFeaturizer(keys, stats), stats


def run_dsrl(cfg: DictConfig) -> dict[str, Any]:
    """The ``train-rl`` path of ``algo=dsrl`` (one process, ``num_envs`` in-process envs)."""
    if cfg.role != "single":
        raise ValueError("algo=dsrl runs in one process: role must be 'single'")
    if cfg.human != "none":
        raise ValueError("algo=dsrl has no human-in-the-loop path: human must be 'none'")
    dcfg = DSRLConfig(**OmegaConf.to_container(cfg.dsrl))  # type: ignore[arg-type]
    train = DSRLTrainConfig(
        total_steps=cfg.total_steps,
        warmup_steps=cfg.warmup_steps,
        eval_every=cfg.eval_every,
        eval_episodes=cfg.eval_episodes,
        seed=cfg.seed,
        target_success=cfg.target_success,
        keep_best=bool(cfg.keep_best),
    )
    check_budget(train.total_steps, train.warmup_steps, train.eval_every)  # before any env
    base: Any
    base, meta = load_policy(cfg.checkpoint)
    task = cfg.task or meta.get("task")
    if not task:
        raise ValueError("the checkpoint names no task: give task=...")
    te = execute_horizon(meta, base.action_horizon)
    kw = run_env_kwargs(cfg, meta, sim_only="algo=dsrl")
    safety = str(cfg.get("safety", "off"))
    extra = [k for k in (cfg.obs_keys or []) if k not in base.config["state_dims"]]
    if extra:  # the agent sees the observation window the base is planning from
        raise ValueError(f"algo=dsrl reads the base's state keys only; {extra} are not among them")
    state, stats = state_featurizer(cfg, base)
    featurizer = featurizer_for(str(cfg.features), state, base)
    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    logger = MetricsLogger(run_dir / "metrics.csv")
    with stop_request(stop_notice("robotrl train-rl", KEEPS_BEST)) as stop:
        result = train_dsrl(
            base,
            lambda: sim.make(task, **kw),
            featurizer,
            dcfg,
            train,
            num_envs=cfg.num_envs,
            execute_horizon=te,
            logger=logger,
            progress=cfg.progress,
            stop=stop,
        )
    meta_ckpt = {
        "base_checkpoint": str(cfg.checkpoint),
        "task": task,
        "obs_keys": state.keys,
        "features": str(cfg.features),
        "execute_horizon": te,
        "featurizer": stats_meta(stats),
    }
    ckpt = save_dsrl(result.agent, run_dir / "checkpoint", meta_ckpt)
    plot = logger.plot(
        run_dir / "learning_curves.png",
        "env_steps",
        [["success_rate", "train_success"], ["q_mean"], ["entropy_per_dim"]],
        titles=["success vs env steps", "Q (mean over batch)", "latent entropy per dim"],
    )
    videos = record_videos(
        SteeredPolicy(result.agent, base, featurizer, explore=False),
        task,
        kw,
        run_dir,
        count=0 if result.interrupted else int(cfg.videos),
        seed=100_000,
        execute_horizon=te,
        prefix="dsrl",
    )
    return {
        "command": "train-rl",
        "algo": "dsrl",
        "task": task,
        **learner_summary(result),
        **episodes_summary(result.episodes, run_dir),
        "checkpoint": str(ckpt),
        "plot": str(plot),
        "videos": videos,
        **result.safety.summary(safety),
        **stop_summary(result.interrupted),
        "run_dir": str(run_dir),
    }
