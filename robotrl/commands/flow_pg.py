"""``robotrl train-rl algo=flow_noise|flow_sde|grpo``: fine-tune a flow BC checkpoint by policy
gradients through its denoising chain in ``num_envs`` env processes; evaluate with the ODE
sampler; write the checkpoint, metrics CSV, curves PNG, MP4s and a JSON summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gymnasium.vector import AutoresetMode
from omegaconf import DictConfig

import sim
from policies.checkpoint import execute_horizon, load_policy, save_module, save_policy
from policies.flow_matching import FlowChainPolicy
from robotrl.algos.flow_pg import ALGOS, FlowPGConfig
from robotrl.algos.flow_pg_training import FlowTrainConfig, check_budget, train_flow_pg
from robotrl.chunk_runner import ChunkRunner
from robotrl.evaluation import evaluate_vector
from robotrl.metrics import MetricsLogger, learner_summary
from robotrl.policy_env import record_videos, run_env_kwargs
from robotrl.run import config_dict, make_run_dir, save_config
from robotrl.stop_request import KEEPS_BEST, stop_notice, stop_request, stop_summary

FLOW_ALGOS = ALGOS


def _plot(logger: MetricsLogger, run_dir: Path) -> list[str]:
    panels = [["success_rate", "train_success"], ["value_loss"], ["approx_kl", "clip_frac"]]
    titles = ["success vs env steps", "value loss", "PPO ratio"]
    return [
        str(logger.plot(run_dir / "learning_curves.png", "env_steps", panels, titles)),
        str(
            logger.plot(
                run_dir / "success_vs_wall.png", "wall_s", [["success_rate"]], ["success vs wall s"]
            )
        ),
    ]


def run_flow_pg(cfg: DictConfig) -> dict[str, Any]:
    """The ``train-rl`` path of the flow algorithms (``cfg.algo`` in :data:`FLOW_ALGOS`)."""
    if cfg.role != "single":
        raise ValueError(f"algo={cfg.algo} runs in one process: role must be 'single'")
    if cfg.human != "none":
        raise ValueError(f"algo={cfg.algo} has no human-in-the-loop path: human must be 'none'")
    policy, meta = load_policy(cfg.checkpoint)
    if not isinstance(policy, FlowChainPolicy):
        raise ValueError(
            f"algo={cfg.algo} needs a flow policy (flow or vla), got {type(policy).__name__}"
        )
    task = cfg.task or meta.get("task")
    if not task:
        raise ValueError("the checkpoint names no task: give task=...")
    fcfg = FlowPGConfig(algo=cfg.algo, **config_dict(cfg.flow_pg))
    te = execute_horizon(meta, policy.action_horizon, fcfg.execute_horizon)
    train = FlowTrainConfig(
        total_steps=cfg.total_steps,
        eval_every=cfg.eval_every,
        target_success=cfg.target_success,
        seed=cfg.seed,
        keep_best=bool(cfg.keep_best),
    )
    check_budget(fcfg, train, cfg.num_envs, cli=True)  # before a run dir or env process exists
    # training, evaluations and videos alike; a robot is not num_envs env processes
    kw = run_env_kwargs(cfg, meta, sim_only=f"algo={cfg.algo}")
    safety = str(cfg.get("safety", "off"))
    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    logger = MetricsLogger(run_dir / "metrics.csv")
    if fcfg.num_steps is not None:  # the saved config must rebuild the K that RL tuned
        policy.num_steps = policy.config["num_steps"] = int(fcfg.num_steps)
    eval_venv = sim.make_vec(task, cfg.num_envs, **kw)
    venv = sim.make_vec(task, cfg.num_envs, autoreset_mode=AutoresetMode.DISABLED, **kw)

    def evaluate(p: Any) -> dict[str, float]:
        res = evaluate_vector(
            eval_venv,
            ChunkRunner(p, cfg.num_envs, te),
            cfg.eval_episodes,
            seed=100_000,
            progress=False,
        )
        lo, hi = res.success_ci95
        return {"success_rate": res.success_rate, "success_lo": lo, "success_hi": hi}

    try:
        with stop_request(stop_notice("robotrl train-rl", KEEPS_BEST)) as stop:
            result = train_flow_pg(
                policy,
                venv,
                evaluate,
                fcfg,
                train,
                execute_horizon=te,
                logger=logger,
                progress=cfg.progress,
                stop=stop,
            )
    finally:
        eval_venv.close()
    rl = {"algo": cfg.algo, "base_checkpoint": str(cfg.checkpoint), "env_steps": result.env_steps}
    new_meta = {**meta, "execute_horizon": te, "rl": rl}
    ckpt = save_policy(policy, run_dir / "checkpoint", new_meta)
    if fcfg.algo != "grpo":
        doc = {"feature_dim": result.learner.value[0].in_features, "hidden": fcfg.value_hidden}
        save_module(result.learner.value, run_dir / "value_head", doc)
    plots = _plot(logger, run_dir)
    count = 0 if result.interrupted else int(cfg.videos)
    videos = record_videos(policy, task, kw, run_dir, count=count, seed=200_000, execute_horizon=te)
    return {
        "command": "train-rl",
        "algo": cfg.algo,
        "task": task,
        "num_envs": cfg.num_envs,
        "num_steps": policy.num_steps,
        "execute_horizon": te,
        **learner_summary(result),
        "wall_to_target_s": result.wall_to_target,
        "episodes": len(result.train_success),
        "checkpoint": str(ckpt),
        "metrics": str(logger.path),
        "plots": plots,
        "videos": videos,
        **result.safety.summary(safety),
        **stop_summary(result.interrupted),
        "run_dir": str(run_dir),
    }
