"""Distributed roles of ``robotrl train-rl`` (``role=learner|actor|split``) and the learning-curve
plot they share with the single-process run."""

from __future__ import annotations

import json
import sys
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from robotrl.algos.residual import (
    Featurizer,
    ResidualAgent,
    ResidualConfig,
    load_agent,
    save_agent,
)
from robotrl.algos.residual_actor import run_actor
from robotrl.algos.residual_learner import ResidualLearner, latest_checkpoint
from robotrl.algos.residual_rollout import ResidualRollout
from robotrl.algos.residual_split import run_split
from robotrl.algos.residual_training import TrainConfig, evaluate_residual, freeze
from robotrl.distributed import ActorClient
from robotrl.distributed.cluster import connect
from robotrl.distributed.learner_service import serve_learner
from robotrl.metrics import MetricsLogger
from robotrl.run import make_run_dir, save_config
from robotrl.stop_request import stop_notice, stop_request


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


def learn(
    cfg: DictConfig,
    base: Any,
    featurizer: Featurizer,
    rcfg: ResidualConfig,
    train: TrainConfig,
    demos: Any,
    meta: dict[str, Any],
    run_dir: Any,
) -> dict[str, Any]:
    """role=learner: run the learner as a restartable Ray actor until SIGTERM / SIGINT; it
    resumes from learner_state. Prints ``{"event": "ready", "address", ...}`` once it answers
    (the address actors join with ``ray.address=``)."""

    d = cfg.dist
    obs_dim, act_dim, seed = featurizer.dim, base.action_dim, int(cfg.seed)

    def make_learner() -> ResidualLearner:  # runs in the learner's Ray actor (again on restart)
        torch.manual_seed(seed)
        return ResidualLearner(ResidualAgent(obs_dim, act_dim, rcfg, seed=seed), train, demos=demos)

    def ready(info: dict[str, Any]) -> None:
        print(json.dumps({"event": "ready", **info}), flush=True)

    state_dir = d.learner_state or str(run_dir / "learner_state")
    address = cfg.ray.get("address") or None
    connect(address)  # before our handlers: joining Ray installs its own SIGTERM handler
    notice = stop_notice("robotrl train-rl role=learner", "it checkpoints its state")
    with stop_request(notice) as stop:
        out = serve_learner(
            make_learner,
            name=str(d.learner),
            address=address,
            state_dir=state_dir,
            meta=meta,
            stop=stop,
            publish_every_updates=d.publish_every_updates,
            publish_every_s=d.publish_every_s,
            checkpoint_every_s=d.checkpoint_every_s,
            threads=cfg.get("threads") or 1,
            on_ready=ready,
        )
    last = latest_checkpoint(state_dir)  # the learner's final state (None: never ready)
    agent = load_agent(last)[0] if last else ResidualAgent(obs_dim, act_dim, rcfg, seed=seed)
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
    featurizer: Featurizer,
    rcfg: ResidualConfig,
    train: TrainConfig,
    human: Any,
    te: int,
    logger: MetricsLogger,
    run_dir: Any,
    make_eval_env: Any = None,
) -> dict[str, Any]:
    """role=actor: act with the learner's newest weights for total_steps env steps
    (evaluations on ``make_eval_env``'s envs; None: ``make_env``'s)."""

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
            a,
            base,
            featurizer,
            make_eval_env or make_env,
            train.eval_episodes,
            train.eval_seed,
            te,
        )

    def progress(row: dict[str, Any]) -> None:
        if row["event"] == "eval":
            logger.log(**{k: v for k, v in row.items() if k != "event"})
        if cfg.progress:
            print(json.dumps(row), file=sys.stderr, flush=True)

    client = ActorClient(
        d.actor_id,
        str(d.learner),
        address=cfg.ray.get("address") or None,
        batch_size=d.batch_size,
        batch_max_age=d.batch_max_age,
        outbox_batches=d.outbox_batches,
        peer_timeout=d.peer_timeout,
    )
    # after joining Ray, which installs its own handlers
    notice = stop_notice("robotrl train-rl role=actor", "it sends what it has to the learner")
    try:
        with stop_request(notice) as stop:
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
    """role=split: a learner subprocess (its own local Ray instance unless ``ray.address`` names
    a cluster) and an actor subprocess that joins it."""

    run_dir = make_run_dir(cfg.output_dir, cfg.name)
    save_config(cfg, run_dir)
    state = cfg.dist.learner_state or str(run_dir / "learner_state")
    common = [
        o
        for o in overrides(cfg)
        if not o.startswith(("role=", "output_dir=", "dist.learner_state=", "ray.address="))
    ]
    cmd = [sys.executable, "-m", "robotrl.cli", "train-rl", *common, f"output_dir={run_dir}"]
    address = json.dumps(cfg.ray.get("address"))
    out = run_split(
        [*cmd, "role=learner", f"dist.learner_state={json.dumps(state)}", f"ray.address={address}"],
        lambda ready: [*cmd, "role=actor", f"ray.address={json.dumps(ready['address'])}"],
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
