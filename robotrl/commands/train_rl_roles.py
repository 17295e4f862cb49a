"""Distributed roles of ``robotrl train-rl`` (``role=learner|actor|split``) and the learning-curve
plot they share with the single-process run."""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from robotrl.algos.residual import ResidualAgent, ResidualConfig, StateFeaturizer, save_agent
from robotrl.algos.residual_training import TrainConfig
from robotrl.metrics import MetricsLogger
from robotrl.run import make_run_dir, save_config


def plot_learning_curves(logger: MetricsLogger, run_dir: Any) -> str:
    """learning_curves.png in ``run_dir``: success, intervention rate, |residual| vs env steps."""
    return str(
        logger.plot(
            run_dir / "learning_curves.png",
            "env_steps",
            [["success_rate", "train_success"], ["intervention_rate"], ["residual_abs_mean"]],
            titles=["success vs env steps", "intervention rate", "|residual|"],
        )
    )


def stop_on_signals() -> tuple[threading.Event, Any]:
    """An event set by SIGTERM / SIGINT; and a function restoring the previous handlers."""
    stop = threading.Event()
    old = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    return stop, lambda: [signal.signal(sig, h) for sig, h in old.items()]


def learn(
    cfg: DictConfig,
    base: Any,
    featurizer: StateFeaturizer,
    rcfg: ResidualConfig,
    train: TrainConfig,
    demos: Any,
    meta: dict[str, Any],
    run_dir: Any,
) -> dict[str, Any]:
    """role=learner: serve on ``address`` until SIGTERM / SIGINT; resume from learner_state."""
    from robotrl.algos.residual_learner import ResidualLearner
    from robotrl.distributed.learner_server import serve_learner

    d = cfg.dist
    torch.manual_seed(cfg.seed)
    agent = ResidualAgent(featurizer.dim, base.action_dim, rcfg, seed=cfg.seed)
    learner = ResidualLearner(agent, train, demos=demos)
    state_dir = d.learner_state or str(run_dir / "learner_state")
    stop, restore = stop_on_signals()
    try:
        out = serve_learner(
            learner,
            str(cfg.address),
            state_dir=state_dir,
            meta=meta,
            stop=stop,
            publish_every_updates=d.publish_every_updates,
            publish_every_s=d.publish_every_s,
            checkpoint_every_s=d.checkpoint_every_s,
            peer_timeout=d.peer_timeout,
            heartbeat_interval=d.peer_timeout / 10,
        )
    finally:
        restore()
    counts = {k: out[k] for k in ("updates", "version", "received")}
    ckpt = save_agent(agent, run_dir / "checkpoint", {**meta, "learner": counts})
    return {
        "command": "train-rl",
        "algo": cfg.algo,
        "role": "learner",
        **out,
        "learner_state": state_dir,
        "checkpoint": str(ckpt),
        "run_dir": str(run_dir),
    }


def act(
    cfg: DictConfig,
    base: Any,
    make_env: Any,
    featurizer: StateFeaturizer,
    rcfg: ResidualConfig,
    train: TrainConfig,
    human: Any,
    te: int,
    logger: MetricsLogger,
    run_dir: Any,
) -> dict[str, Any]:
    """role=actor: act with the learner's newest weights for total_steps env steps."""
    from robotrl.algos.residual_actor import run_actor
    from robotrl.algos.residual_rollout import ResidualRollout
    from robotrl.algos.residual_training import evaluate_residual, freeze
    from robotrl.distributed import ActorClient

    d = cfg.dist
    freeze(base)
    agent = ResidualAgent(featurizer.dim, base.action_dim, rcfg, seed=cfg.seed)
    rollout = ResidualRollout(
        base,
        make_env,
        featurizer,
        num_envs=cfg.num_envs,
        execute_horizon=te,
        seed=cfg.seed,
        intervener=human,
    )

    def evaluate(a: ResidualAgent) -> dict[str, float]:
        return evaluate_residual(
            a, base, featurizer, make_env, train.eval_episodes, train.eval_seed, te
        )

    def progress(row: dict[str, Any]) -> None:
        if row["event"] == "eval":
            logger.log(**{k: v for k, v in row.items() if k != "event"})
        if cfg.progress:
            print(json.dumps(row), file=sys.stderr, flush=True)

    stop, restore = stop_on_signals()
    client = ActorClient(
        str(cfg.address),
        d.actor_id,
        batch_size=d.batch_size,
        batch_max_age=d.batch_max_age,
        outbox_batches=d.outbox_batches,
        peer_timeout=d.peer_timeout,
        heartbeat_interval=d.peer_timeout / 10,
    )
    try:
        out = run_actor(
            client,
            rollout,
            agent,
            train,
            actor_hz=d.actor_hz or train.realtime_hz,
            evaluate=evaluate if train.eval_episodes > 0 else None,
            stop=stop,
            on_progress=progress,
        )
    finally:
        client.close()
        rollout.close()
        restore()
    evals = out.pop("evaluations")
    return {
        "command": "train-rl",
        "algo": cfg.algo,
        "role": "actor",
        "base_success": evals[0]["success_rate"] if evals else None,
        "final_success": evals[-1]["success_rate"] if evals else None,
        "best_success": max(e["success_rate"] for e in evals) if evals else None,
        **out,
        "plot": plot_learning_curves(logger, run_dir) if evals else None,
        "run_dir": str(run_dir),
    }


def overrides(cfg: DictConfig) -> list[str]:
    """Every leaf of ``cfg`` as a ``key=value`` override (values JSON-encoded: Hydra parses
    quoted strings, lists, numbers, booleans and null alike)."""
    out: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        for k, v in node.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                out.append(f"{prefix}{k}={json.dumps(v)}")

    walk(OmegaConf.to_container(cfg, resolve=True), "")
    return out


def split(cfg: DictConfig) -> dict[str, Any]:
    """role=split: a learner and an actor subprocess talking over ``address`` (loopback)."""
    from robotrl.algos.residual_split import run_split

    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    state = cfg.dist.learner_state or str(run_dir / "learner_state")
    common = [
        o
        for o in overrides(cfg)
        if not o.startswith(("role=", "output_dir=", "dist.learner_state="))
    ]
    cmd = [sys.executable, "-m", "robotrl.cli", "train-rl", *common, f"output_dir={run_dir}"]
    out = run_split(
        [*cmd, "role=learner", f"dist.learner_state={json.dumps(state)}"],
        [*cmd, "role=actor"],
    )
    failed = out["learner_rc"] != 0 or out["actor_rc"] != 0
    return {
        "command": "train-rl",
        "algo": cfg.algo,
        "role": "split",
        **out,
        "run_dir": str(run_dir),
        "exit_code": int(failed),
    }
