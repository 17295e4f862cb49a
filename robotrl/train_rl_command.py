"""``robotrl train-rl``: config -> base, envs, demos, human, learner; curves, videos, JSON."""

from __future__ import annotations

from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

import sim
from policies.checkpoint import load_policy
from robotrl.algos.hil import DeviceIntervener, ScriptedHuman
from robotrl.algos.residual import ResidualAgent, ResidualConfig, StateFeaturizer, save_agent
from robotrl.algos.residual_training import TrainConfig, demo_buffer, train_residual
from robotrl.datasets import EpisodeStore, compute_stats
from robotrl.metrics import MetricsLogger
from robotrl.policy_env import env_kwargs
from robotrl.run import make_run_dir, save_config
from robotrl.video import write_mp4


def _human(cfg: DictConfig, task: str, make_env: Any) -> Any:
    if cfg.human == "none":
        return None
    if cfg.human == "scripted":
        env = make_env()
        return ScriptedHuman(
            lambda: sim.make_expert(task, env), cfg.num_envs, threshold=cfg.human_threshold
        )
    if cfg.num_envs != 1:
        raise ValueError("a human operator drives one env: set num_envs=1")
    from hardware.devices import make_device

    device = make_device(cfg.human)
    device.start()
    return DeviceIntervener(device)


def _plot(logger: MetricsLogger, run_dir: Any) -> str:
    return str(
        logger.plot(
            run_dir / "learning_curves.png",
            "env_steps",
            [["success_rate", "train_success"], ["intervention_rate"], ["residual_abs_mean"]],
            titles=["success vs env steps", "intervention rate", "|residual|"],
        )
    )


def _video(
    agent: ResidualAgent,
    base: Any,
    feat: StateFeaturizer,
    task: str,
    kw: dict,
    run_dir: Any,
    seed: int,
    te: int,
) -> list[str]:
    from robotrl.chunk_runner import ChunkRunner

    env = sim.make(task, **{**kw, "image_size": (240, 320)})
    runner = ChunkRunner(base, 1, te)
    obs, _ = env.reset(seed=seed)
    frames, done, success = [env.render_camera("front")], False, False
    while not done:
        batch = {k: np.asarray(v)[None] for k, v in obs.items()}
        a, _ = agent.act(feat(batch), runner.act(batch), explore=False)
        obs, _, term, trunc, info = env.step(a[0])
        frames.append(env.render_camera("front"))
        success |= bool(info.get("success"))
        done = term or trunc
    env.close()
    tag = "success" if success else "failure"
    return [str(write_mp4(frames, run_dir / f"residual_{tag}.mp4", env.control_hz))]


def run_train_rl(cfg: DictConfig) -> dict[str, Any]:
    if cfg.algo != "residual":
        raise ValueError(f"unknown algo {cfg.algo!r}; available: ['residual']")
    base, meta = load_policy(cfg.checkpoint)
    task = cfg.task or meta.get("task")
    if not task:
        raise ValueError("the checkpoint names no task: give task=...")
    te = int(meta.get("execute_horizon", base.action_horizon // 2))
    kw = env_kwargs(meta)

    def make_env() -> Any:
        return sim.make(task, **kw)

    keys = list(cfg.obs_keys) if cfg.obs_keys else list(base.config["state_dims"])
    demos_store = EpisodeStore.open(cfg.demos) if cfg.demos else None
    if demos_store is not None:
        stats = compute_stats(demos_store, keys)
    else:  # no demos: standardise as the base's own normaliser does
        affine = {k: base.normalizer.affine(k) for k in keys}
        stats = {k: {"mean": off, "std": 1.0 / scale} for k, (off, scale) in affine.items()}
    featurizer = StateFeaturizer(keys, stats)
    rcfg = ResidualConfig(**OmegaConf.to_object(cfg.residual))
    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    demos = demo_buffer(demos_store, base, featurizer, rcfg) if demos_store is not None else None
    train = TrainConfig(
        total_steps=cfg.total_steps,
        warmup_steps=cfg.warmup_steps,
        warmup_noise=cfg.warmup_noise,
        critic_warmup_updates=cfg.critic_warmup_updates,
        eval_every=cfg.eval_every,
        eval_episodes=cfg.eval_episodes,
        seed=cfg.seed,
        target_success=cfg.target_success,
        realtime_hz=0.0 if cfg.human in ("none", "scripted") else 20.0,
    )
    logger = MetricsLogger(run_dir / "metrics.csv")
    human = _human(cfg, task, make_env)
    try:
        result = train_residual(
            base,
            make_env,
            featurizer,
            rcfg,
            train,
            demos=demos,
            num_envs=cfg.num_envs,
            execute_horizon=te,
            intervener=human,
            logger=logger,
            progress=cfg.progress,
        )
    finally:
        if isinstance(human, DeviceIntervener):
            human.device.stop()
    ckpt = save_agent(
        result.agent,
        run_dir / "checkpoint",
        {
            "base_checkpoint": str(cfg.checkpoint),
            "task": task,
            "obs_keys": keys,
            "execute_horizon": te,
            "featurizer": {
                k: {s: np.asarray(v).tolist() for s, v in st.items() if s in ("mean", "std")}
                for k, st in stats.items()
            },
        },
    )
    plot = _plot(logger, run_dir)
    videos = (
        _video(result.agent, base, featurizer, task, kw, run_dir, 100_000, te) if cfg.videos else []
    )
    first, last = result.evaluations[0], result.evaluations[-1]
    return {
        "command": "train-rl",
        "algo": cfg.algo,
        "task": task,
        "base_success": first["success_rate"],
        "final_success": last["success_rate"],
        "best_success": max(e["success_rate"] for e in result.evaluations),
        "env_steps": result.env_steps,
        "steps_to_target": result.steps_to_target,
        "wall_s": round(result.wall_s, 1),
        "episodes": len(result.episodes),
        "intervention_rate_first_20": float(
            np.mean([e["intervention_rate"] for e in result.episodes[:20]])
        )
        if result.episodes
        else 0.0,
        "intervention_rate_last_20": float(
            np.mean([e["intervention_rate"] for e in result.episodes[-20:]])
        )
        if result.episodes
        else 0.0,
        "checkpoint": str(ckpt),
        "plot": plot,
        "videos": videos,
        "run_dir": str(run_dir),
    }
