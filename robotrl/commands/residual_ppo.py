"""``robotrl train-rl algo=residual_ppo``: a Gaussian residual on a frozen flow / diffusion / VLA
checkpoint, learnt on-policy by PPO from the task's reward (:mod:`robotrl.algos.residual_ppo`);
write the agent checkpoint, metrics CSV, learning curves, MP4s and a JSON summary."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

import sim
from robotrl.algos.perception_features import featurizer_for
from robotrl.algos.residual import stats_meta
from robotrl.algos.residual_policy import ResidualPolicy
from robotrl.algos.residual_ppo import ResidualPPOConfig, save_residual_ppo
from robotrl.algos.residual_ppo_training import PPORunConfig, train_residual_ppo
from robotrl.commands.dsrl import state_featurizer
from robotrl.config_help import config_keys
from robotrl.metrics import MetricsLogger, episodes_summary, learner_summary
from robotrl.policy_env import frozen_base, record_videos, run_env_kwargs
from robotrl.run import make_run_dir, save_config
from robotrl.stop_request import KEEPS_BEST, stop_notice, stop_request, stop_summary

# top-level keys whose role residual_ppo.* takes: (key, the key that counts)
SECTION_KEYS = (("total_steps", "residual_ppo.total_steps"),
                ("eval_every", "residual_ppo.eval_every"),
                ("num_envs", "residual_ppo.num_envs"))  # fmt: skip


def run_residual_ppo(cfg: DictConfig) -> dict[str, Any]:
    """The ``train-rl`` path of ``algo=residual_ppo`` (one process, in-process envs). A
    ``total_steps``, ``eval_every`` or ``num_envs`` changed from ``train_rl.yaml``'s default is
    refused: its ``residual_ppo.*`` key is what counts."""
    defaults = config_keys("train_rl")
    if cfg.role != "single":
        raise ValueError("algo=residual_ppo runs in one process: role must be 'single'")
    if cfg.human != "none":
        raise ValueError("algo=residual_ppo learns on-policy: human must be 'none'")
    for key, section in SECTION_KEYS:
        if cfg.get(key) != defaults.get(key):
            raise ValueError(f"algo=residual_ppo takes {key} from {section}: give {section}=...")
    pcfg = ResidualPPOConfig(**OmegaConf.to_container(cfg.residual_ppo))  # type: ignore[arg-type]
    run = PPORunConfig(
        eval_episodes=cfg.eval_episodes,
        seed=cfg.seed,
        target_success=cfg.target_success,
        keep_best=bool(cfg.keep_best),
    )
    frozen = frozen_base(cfg)
    base, meta, task, te = frozen.policy, frozen.meta, frozen.task, frozen.execute_horizon
    kw = run_env_kwargs(cfg, meta, sim_only="algo=residual_ppo")
    safety = str(cfg.get("safety", "off"))
    state, stats = state_featurizer(cfg, base)
    featurizer = featurizer_for(str(cfg.features), state, base)
    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    logger = MetricsLogger(run_dir / "metrics.csv")
    with stop_request(stop_notice("robotrl train-rl", KEEPS_BEST)) as stop:
        result = train_residual_ppo(
            base,
            lambda: sim.make(task, **kw),
            featurizer,
            pcfg,
            run,
            execute_horizon=te,
            logger=logger,
            progress=cfg.progress,
            stop=stop,
        )
    meta_ckpt = {
        "base_checkpoint": str(cfg.checkpoint),
        "base_noise_scale": frozen.noise_scale,
        "task": task,
        "obs_keys": state.keys,
        "features": str(cfg.features),
        "execute_horizon": te,
        "featurizer": stats_meta(stats),
    }
    ckpt = save_residual_ppo(result.agent, run_dir / "checkpoint", meta_ckpt)
    plot = logger.plot(
        run_dir / "learning_curves.png",
        "env_steps",
        [["success_rate", "train_success"], ["value_loss"], ["residual_std"]],
        titles=["success vs env steps", "value loss", "residual std [action units]"],
    )
    videos = record_videos(
        ResidualPolicy(result.agent, base, featurizer, te),
        task,
        kw,
        run_dir,
        count=0 if result.interrupted else int(cfg.videos),
        seed=100_000,
        execute_horizon=te,
        prefix="residual_ppo",
    )
    return {
        "command": "train-rl",
        "algo": "residual_ppo",
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
