"""The residual PPO loop: the frozen base in chunk mode, a Gaussian residual on every step, a PPO
update after every rollout.

Per iteration, for ``num_envs`` envs stepped in this process
(:class:`~robotrl.algos.residual_rollout.ResidualRollout`):
1. ``rollout_steps`` env steps per env: the agent samples ``u`` for every env from its features
   and base action (with ``noise_correlation``, given its previous step in the episode), the
   envs step ``clip(a_b + scale * clip(u), -1, 1)``; episodes end anywhere
   and their envs reset;
2. GAE(lambda) over the rollout (bootstrapping truncated episodes and the rollout's end from
   the value head);
3. ``epochs`` passes of PPO over the rollout's ``num_envs * rollout_steps`` env steps.

The deterministic agent (the mean residual) is evaluated every ``eval_every`` env steps, first
before any update (the base's own success), and the run keeps the weights of its best evaluation
(:class:`~robotrl.algos.kept_agent.KeptAgent`). Seeds: env ``e`` resets with
``seed + 1000 * e + episode``; evaluations use ``eval_seed + i``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from robotrl.algos.agent_run import AgentRun, finish_run, record_evaluation
from robotrl.algos.kept_agent import KeptAgent
from robotrl.algos.residual import Featurizer
from robotrl.algos.residual_ppo import ResidualPPOAgent, ResidualPPOConfig, gae
from robotrl.algos.residual_rollout import ResidualRollout, ResidualTransition
from robotrl.algos.residual_training import evaluate_residual, freeze, recent_episode_rates
from robotrl.metrics import MetricsLogger


@dataclass
class PPORunConfig:
    """What the run shares with the other learners of ``robotrl train-rl``: its evaluations and
    seed (the budget and rollout sizes are :class:`ResidualPPOConfig`'s).

    Attributes:
        eval_episodes, eval_seed: episodes per evaluation and the first one's seed.
        seed: every RNG. target_success: stop once an evaluation reaches it (None: run on).
        keep_best: return the weights of the best evaluation (False: the last).
    """

    eval_episodes: int = 20
    eval_seed: int = 100_000
    seed: int = 0
    target_success: float | None = None
    keep_best: bool = True


PPOResult = AgentRun[ResidualPPOAgent]


class _Rollout:
    """One iteration's arrays, (T, N) per step; transitions fill the step they belong to."""

    def __init__(self, steps: int, num_envs: int, obs_dim: int, act_dim: int) -> None:
        t, n = steps, num_envs
        self.obs = np.zeros((t, n, obs_dim), np.float32)
        self.base = np.zeros((t, n, act_dim), np.float32)
        self.u = np.zeros((t, n, act_dim), np.float32)
        self.log_prob = np.zeros((t, n), np.float32)
        self.value = np.zeros((t, n), np.float32)
        self.reward = np.zeros((t, n), np.float32)
        self.terminated = np.zeros((t, n), bool)
        self.truncated = np.zeros((t, n), bool)
        self.final_obs = np.zeros((t, n, obs_dim), np.float32)
        self.final_base = np.zeros((t, n, act_dim), np.float32)
        self.t = 0

    def _rows(self, t: slice | int) -> dict[str, np.ndarray]:
        """What the step after row(s) ``t`` reads as its previous one; an episode starts
        after a step that ended one."""
        return {
            "prev_obs": self.obs[t], "prev_base": self.base[t], "prev_u": self.u[t],
            "first": self.terminated[t] | self.truncated[t],
        }  # fmt: skip

    def step_before(self, t: int, before: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The previous step of step ``t`` for every env, (N, ...) as
        :meth:`~robotrl.algos.residual_ppo.ResidualPPOAgent.previous` reads it: row ``t - 1``
        (complete once step ``t`` is observed), ``before`` at ``t = 0`` (the step before this
        rollout's first); ``t = T`` gives the next rollout's ``before``."""
        return before if t == 0 else self._rows(t - 1)

    def previous_steps(self, before: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """:meth:`step_before` of every step, flat over (T * N): the rollout's own arrays
        shifted by one step, ``before`` in front."""
        return {
            key: np.concatenate([before[key][None], rows[:-1]]).reshape(
                rows.shape[0] * rows.shape[1], *rows.shape[2:]
            )
            for key, rows in self._rows(slice(None)).items()
        }

    def store(self, tr: ResidualTransition) -> None:
        """A transition of the current step ``t`` (ResidualRollout emits each once)."""
        t, i = self.t, tr.env_id
        self.reward[t, i] = tr.reward
        self.terminated[t, i] = tr.terminated
        self.truncated[t, i] = tr.truncated and not tr.terminated
        if self.truncated[t, i]:
            self.final_obs[t, i], self.final_base[t, i] = tr.next_features, tr.next_base_action


def train_residual_ppo(
    base: Any,
    make_env: Callable[[], Any],
    featurizer: Featurizer,
    cfg: ResidualPPOConfig,
    run: PPORunConfig,
    *,
    execute_horizon: int = 8,
    logger: MetricsLogger | None = None,
    progress: bool = True,
    eval_venv: Any | None = None,
    stop: threading.Event | None = None,
) -> PPOResult:
    """Train a Gaussian residual by PPO on the frozen ``base``; see the module docstring.
    ``eval_venv``: a vector env (next-step autoreset) the evaluations run on (None: one env
    from ``make_env``). ``stop``: once set, the run ends after the current env step or
    evaluation, keeps its agent as at the end of a full run and sets ``interrupted``."""
    torch.manual_seed(run.seed)
    gen = torch.Generator().manual_seed(run.seed)
    freeze(base)
    n, steps = cfg.num_envs, cfg.rollout_steps
    agent = ResidualPPOAgent(featurizer.dim, base.action_dim, cfg, seed=run.seed)
    rollout = ResidualRollout(
        base, make_env, featurizer, num_envs=n, execute_horizon=execute_horizon, seed=run.seed
    )
    result = PPOResult(agent=agent, episodes=rollout.episodes, safety=rollout.safety)
    kept = KeptAgent(agent, run.keep_best)
    start = time.perf_counter()
    bar = tqdm(total=cfg.total_steps, desc="residual_ppo", disable=not progress)
    last_logs: dict[str, float] = {}

    def evaluate_now() -> None:
        bar.set_postfix(phase="eval")
        ev = evaluate_residual(
            agent, base, featurizer, make_env, run.eval_episodes, run.eval_seed,
            execute_horizon, venv=eval_venv,
        )  # fmt: skip
        row = {
            "env_steps": rollout.env_steps,
            "wall_s": time.perf_counter() - start,
            **ev,
            **recent_episode_rates(result.episodes),
            **last_logs,
        }
        record_evaluation(result, row, kept, logger, run.target_success)
        bar.set_postfix(phase="train", success=f"{ev['success_rate']:.2f}")

    evaluate_now()  # the base alone (the mean residual starts at zero)
    next_eval = cfg.eval_every
    buf = _Rollout(steps, n, featurizer.dim, base.action_dim)
    correlated = cfg.noise_correlation > 0
    before = {  # the step before a rollout's first: none yet, every env starts an episode
        "prev_obs": np.zeros((n, featurizer.dim), np.float32),
        "prev_base": np.zeros((n, base.action_dim), np.float32),
        "prev_u": np.zeros((n, base.action_dim), np.float32),
        "first": np.ones(n, bool),
    }
    try:
        feats, a_b = rollout.observe(buf.store)
        while rollout.env_steps < cfg.total_steps and result.steps_to_target is None:
            buf = _Rollout(steps, n, featurizer.dim, base.action_dim)
            for t in range(steps):
                if stop is not None and stop.is_set():
                    result.interrupted = True
                    break
                buf.t = t
                prev = buf.step_before(t, before) if correlated else None
                u, log_prob, value = agent.sample(feats, a_b, gen, prev)
                buf.obs[t], buf.base[t], buf.u[t] = feats, a_b, u
                buf.log_prob[t], buf.value[t] = log_prob, value
                rollout.step(agent.executed(a_b, u)[0], buf.store)  # terminal transitions
                feats, a_b = rollout.observe(buf.store)  # the others, now that s' is known
                bar.update(n)
            if result.interrupted:
                break
            final_v = agent.values(
                buf.final_obs.reshape(steps * n, -1), buf.final_base.reshape(steps * n, -1)
            ).reshape(steps, n)
            adv, ret = gae(
                buf.reward, buf.value, buf.terminated, buf.truncated, final_v,
                agent.values(feats, a_b), cfg.gamma, cfg.lam,
            )  # fmt: skip
            flat = {
                "obs": buf.obs.reshape(steps * n, -1),
                "base": buf.base.reshape(steps * n, -1),
                "u": buf.u.reshape(steps * n, -1),
                "log_prob": buf.log_prob.reshape(-1),
                "advantage": adv.reshape(-1),
                "ret": ret.reshape(-1),
            }
            if correlated:
                flat |= buf.previous_steps(before)
            before = buf.step_before(steps, before)
            last_logs = agent.update(flat, gen)
            if rollout.env_steps >= next_eval or rollout.env_steps >= cfg.total_steps:
                evaluate_now()
                while next_eval <= rollout.env_steps:
                    next_eval += cfg.eval_every
    finally:
        bar.close()
        rollout.close()
    finish_run(result, kept, rollout.env_steps, start)
    return result
