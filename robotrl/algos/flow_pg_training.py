"""The Flow-Noise / Flow-SDE / GRPO training loop: collect chunk-level episodes in a vector env,
build a batch, update, evaluate with the deterministic ODE sampler every ``eval_every`` env
steps. A function so the CLI, tests and benchmarks share it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from robotrl.algos.agent_run import finish_run, record_evaluation
from robotrl.algos.flow_pg import FlowPG, FlowPGConfig
from robotrl.algos.flow_rollout import FlowRollout
from robotrl.algos.kept_agent import KeptAgent
from robotrl.metrics import MetricsLogger
from robotrl.safety_tally import SafetyTally


@dataclass
class FlowTrainConfig:
    """Schedule of :func:`train_flow_pg`.

    Attributes:
        total_steps: env steps summed over envs (at least one rollout, see
        :func:`check_budget`). eval_every: env steps between evaluations.
        target_success: stop once an evaluation reaches it (None: run to the end).
        seed: RNGs and the first episode seed.
        keep_best: the policy returned is the one of the best evaluation
            (:class:`~robotrl.algos.kept_agent.KeptAgent`); False: the last.
    """

    total_steps: int = 20_000
    eval_every: int = 2_000
    target_success: float | None = None
    seed: int = 0
    keep_best: bool = True


@dataclass
class FlowTrainResult:
    learner: FlowPG
    evaluations: list[dict[str, float]] = field(default_factory=list)
    env_steps: int = 0
    wall_s: float = 0.0
    steps_to_target: int | None = None
    wall_to_target: float | None = None
    train_success: list[float] = field(default_factory=list)
    kept_step: int = 0  # env steps at the evaluation whose weights were kept
    safety: SafetyTally = field(default_factory=SafetyTally)  # the training steps' violations
    interrupted: bool = False  # the stop event ended the run before total_steps


def check_budget(
    cfg: FlowPGConfig, train: FlowTrainConfig, num_envs: int, *, cli: bool = False
) -> None:
    """Raise ValueError when ``train.total_steps`` cannot update the policy: it is smaller
    than one rollout, or it ends within the critic-only warm-up rollouts. ``cli``: name the
    settings as ``robotrl train-rl`` spells them (``flow_pg.*``)."""
    prefix = "flow_pg." if cli else ""
    total, rollout = int(train.total_steps), int(cfg.rollout_env_steps)
    # a rollout stops at the first whole vector step past rollout_env_steps
    per_rollout = -(-max(rollout, 1) // max(num_envs, 1)) * max(num_envs, 1)
    if total < max(rollout, 1):
        raise ValueError(
            f"total_steps={total} is smaller than one rollout "
            f"({prefix}rollout_env_steps={rollout}): give total_steps >= {rollout}, "
            f"or lower {prefix}rollout_env_steps"
        )
    warm = int(cfg.critic_warmup_iters) if cfg.uses_critic else 0
    if total <= warm * per_rollout:
        raise ValueError(
            f"total_steps={total} ends before the policy is updated: the first "
            f"{prefix}critic_warmup_iters={warm} rollouts of {per_rollout} env steps train only "
            f"the value head; give total_steps > {warm * per_rollout}, e.g. "
            f"total_steps={(warm + 1) * per_rollout}, or lower {prefix}critic_warmup_iters"
        )


def train_flow_pg(
    policy: Any,
    venv: Any,
    evaluate: Callable[[Any], dict[str, float]],
    cfg: FlowPGConfig,
    train: FlowTrainConfig,
    *,
    execute_horizon: int,
    logger: MetricsLogger | None = None,
    progress: bool = True,
    stop: threading.Event | None = None,
) -> FlowTrainResult:
    """Fine-tune ``policy`` in place by flow policy gradients.

    Args:
        policy: flow policy (its ``num_steps`` is set to ``cfg.num_steps`` when given).
        venv: vector env with autoreset disabled (see :class:`FlowRollout`); closed at the end.
        evaluate: ``evaluate(policy) -> {"success_rate": ..., ...}``, with the ODE sampler.
        execute_horizon: Te actions executed per chunk.
        stop: once set, the run ends after the current rollout or evaluation, keeps
            its weights as at the end of a full run and sets ``interrupted``.

    The progress bar counts env steps as they are taken; its postfix shows the phase
    (``rollout``, ``update``, ``eval``) and the latest evaluation's success rate. Raises
    ValueError (see :func:`check_budget`) before any env step when the budget cannot update
    the policy.
    """
    check_budget(cfg, train, int(venv.num_envs))
    torch.manual_seed(train.seed)
    if cfg.num_steps is not None:
        policy.num_steps = int(cfg.num_steps)
    group = cfg.group_size if cfg.algo == "grpo" else 1
    rollout = FlowRollout(
        policy, venv, cfg.mode, execute_horizon, train.seed, group, cfg.noise_level
    )
    learner = FlowPG(policy, rollout.feature_dim, cfg)  # sets cfg's K and noise bounds
    result = FlowTrainResult(learner=learner, safety=rollout.safety)
    kept = KeptAgent(policy, train.keep_best)
    start = time.perf_counter()
    bar = tqdm(total=train.total_steps, desc=cfg.algo, disable=not progress)
    postfix: dict[str, str] = {}

    def show(**values: str) -> None:  # called on phase changes only: each call redraws
        postfix.update(values)
        bar.set_postfix(postfix)

    last_logs: dict[str, float] = {}
    recent: list[bool] = []

    def evaluate_now() -> None:
        show(phase="eval")
        ev = evaluate(policy)
        row = {
            "env_steps": rollout.env_steps,
            "wall_s": time.perf_counter() - start,
            **ev,
            **last_logs,
        }
        if recent:
            row["train_success"] = float(np.mean(recent[-100:]))
        reached = record_evaluation(result, row, kept, logger, train.target_success)
        show(success=f"{ev['success_rate']:.2f}")
        if reached:
            result.wall_to_target = row["wall_s"]

    def stopped() -> bool:
        result.interrupted = stop is not None and stop.is_set()
        return result.interrupted

    evaluate_now()  # the BC policy before RL
    next_eval = train.eval_every
    it = 0
    try:
        while rollout.env_steps < train.total_steps and result.steps_to_target is None:
            if stopped():
                break
            show(phase="rollout")
            groups = rollout.collect(cfg.rollout_env_steps, on_step=bar.update)
            if stopped():  # no update that no evaluation would see
                break
            recent += [ep.success for g in groups for ep in g]
            show(phase="update")
            batch = learner.make_batch(groups)
            if batch is not None:
                warm = cfg.uses_critic and it < cfg.critic_warmup_iters
                last_logs = learner.update(batch, seed=train.seed + it, update_actor=not warm)
                last_logs["kept_chunks"] = last_logs.pop("batch_chunks")
            it += 1
            if rollout.env_steps >= next_eval:
                next_eval += train.eval_every
                evaluate_now()
    finally:
        bar.close()
        rollout.close()
    finish_run(result, kept, rollout.env_steps, start)
    result.train_success = [float(x) for x in recent]
    return result
