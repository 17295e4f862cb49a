"""The DSRL loop: the frozen base in chunk mode, its initial noise chosen by a latent SAC agent.

Per env step, for N envs stepped in this process:
1. an env whose action queue is empty gets a new chunk: the agent samples the noise ``w`` from
   the current observation's features and the base plans from it (one latent step starts);
2. the chunk's actions run open loop for Te env steps; rewards are summed with discount;
3. the latent transition ``(s, w, R, s')`` is stored when the chunk ends (Te steps, or the
   episode's end, which resets the env);
4. after ``warmup_steps`` env steps, ``utd`` SAC updates per stored latent transition.

Seeds: env ``e`` resets with ``seed + 1000 * e + episode``; evaluations use ``eval_seed + i``.
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
from robotrl.algos.dsrl import DSRLAgent, DSRLConfig, SteeredPolicy
from robotrl.algos.kept_agent import KeptAgent
from robotrl.algos.residual import Featurizer
from robotrl.algos.residual_training import check_budget, freeze, recent_episode_rates
from robotrl.chunk_runner import ChunkRunner, SingleEnvPolicy
from robotrl.datasets import ReplayBuffer
from robotrl.evaluation import evaluate
from robotrl.metrics import MetricsLogger


@dataclass
class DSRLTrainConfig:
    """Schedule of :func:`train_dsrl` (env steps are summed over envs).

    Attributes:
        total_steps: env-step budget. warmup_steps: env steps before the first update (the
            untrained agent samples noise like the base's prior meanwhile).
        eval_every, eval_episodes, eval_seed: evaluations of the deterministic agent.
        buffer_size: latent transitions kept. seed: every RNG.
        target_success: stop once an evaluation reaches it (None: run to the end).
        keep_best: the agent returned is the one of the best evaluation
            (:class:`~robotrl.algos.kept_agent.KeptAgent`); False: the last.
    """

    total_steps: int = 20_000
    warmup_steps: int = 1_000
    eval_every: int = 2_000
    eval_episodes: int = 20
    eval_seed: int = 100_000
    buffer_size: int = 100_000
    seed: int = 0
    target_success: float | None = None
    keep_best: bool = True


DSRLResult = AgentRun[DSRLAgent]


def evaluate_dsrl(
    agent: DSRLAgent,
    base: Any,
    featurizer: Featurizer,
    make_env: Callable[[], Any],
    episodes: int,
    seed: int,
    execute_horizon: int,
) -> dict[str, float]:
    """The base steered by the agent's mean noise: success rate and mean length."""
    env = make_env()
    policy = SingleEnvPolicy(SteeredPolicy(agent, base, featurizer, explore=False), execute_horizon)
    try:
        res = evaluate(env, policy, episodes, seed=seed, progress=False)
    finally:
        env.close()
    return {"success_rate": res.success_rate, "mean_length": res.mean_length}


class _Open:
    """A latent step in progress in one env."""

    __slots__ = ("features", "k", "noise", "ret")

    def __init__(self, features: np.ndarray, noise: np.ndarray) -> None:
        self.features, self.noise, self.ret, self.k = features, noise, 0.0, 0


def train_dsrl(
    base: Any,
    make_env: Callable[[], Any],
    featurizer: Featurizer,
    cfg: DSRLConfig,
    train: DSRLTrainConfig,
    *,
    num_envs: int = 1,
    execute_horizon: int = 8,
    logger: MetricsLogger | None = None,
    progress: bool = True,
    stop: threading.Event | None = None,
) -> DSRLResult:
    """Train a latent-noise agent on the frozen ``base``; see the module docstring.
    ``stop``: once set, the run ends after the current env step or evaluation, keeps its agent
    as at the end of a full run and sets ``interrupted``.

    Raises ValueError, before any env is made, when ``train.total_steps`` does not exceed
    ``train.warmup_steps`` or the base's sampler takes no initial noise."""
    check_budget(train.total_steps, train.warmup_steps, train.eval_every)
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    # any chunk policy whose sampler takes an initial noise (a Policy, or a test's toy base)
    if not hasattr(base, "predict_chunk") or not hasattr(base, "action_horizon"):
        raise ValueError("DSRL steers a chunk policy with predict_chunk(obs, noise=...)")
    rng = np.random.default_rng(train.seed)
    torch.manual_seed(train.seed)
    freeze(base)
    shape = (int(base.action_horizon), int(base.action_dim))
    agent = DSRLAgent(featurizer.dim, shape, cfg, seed=train.seed)
    buffer = ReplayBuffer(
        train.buffer_size,
        {"features": ((featurizer.dim,), np.float32)},
        agent.latent_dim,
        n_step=1,
        gamma=cfg.gamma**execute_horizon,
        num_envs=num_envs,
    )
    steered = SteeredPolicy(agent, base, featurizer, explore=True)
    runner = ChunkRunner(steered, num_envs, execute_horizon)
    envs = [make_env() for _ in range(num_envs)]
    episode = [0] * num_envs
    obs = [env.reset(seed=train.seed + 1000 * i)[0] for i, env in enumerate(envs)]
    stats = [{"len": 0, "success": False} for _ in range(num_envs)]
    open_steps: list[_Open | None] = [None] * num_envs
    result = DSRLResult(agent=agent)
    kept = KeptAgent(agent, train.keep_best)
    start = time.perf_counter()
    env_steps = 0
    last_logs: dict[str, float] = {}
    bar = tqdm(total=train.total_steps, desc="dsrl", disable=not progress)

    def evaluate_now() -> None:
        bar.set_postfix(phase="eval")
        ev = evaluate_dsrl(
            agent, base, featurizer, make_env, train.eval_episodes, train.eval_seed,
            execute_horizon,
        )  # fmt: skip
        row = {
            "env_steps": env_steps,
            "wall_s": time.perf_counter() - start,
            **ev,
            **recent_episode_rates(result.episodes),
            **last_logs,
        }
        record_evaluation(result, row, kept, logger, train.target_success)
        phase = "train" if env_steps >= train.warmup_steps else "warm-up"
        bar.set_postfix(phase=phase, success=f"{ev['success_rate']:.2f}")

    evaluate_now()  # the base from the untrained agent's mean noise (w = 0)
    gamma = cfg.gamma
    try:
        while env_steps < train.total_steps:
            if stop is not None and stop.is_set():
                result.interrupted = True
                break
            need = [i for i in range(num_envs) if not runner.queues[i]]
            batch_obs = {k: np.stack([o[k] for o in obs]) for k in obs[0]}
            actions = runner.act(batch_obs)
            for j, i in enumerate(need):  # a chunk was planned for these envs, in this order
                open_steps[i] = _Open(steered.last_features[j], steered.last_latent[j])
            stored = 0
            for i, env in enumerate(envs):
                next_obs, reward, terminated, truncated, info = env.step(actions[i])
                result.safety.add(info)
                env_steps += 1
                st, step = stats[i], open_steps[i]
                assert step is not None
                st["len"] += 1
                st["success"] |= bool(info.get("success"))
                step.ret += gamma**step.k * float(reward)
                step.k += 1
                done = bool(terminated or truncated)
                if done or step.k == execute_horizon:
                    next_feat = featurizer({k: np.asarray(v)[None] for k, v in next_obs.items()})
                    buffer.add(
                        {"features": step.features},
                        step.noise,
                        step.ret,
                        {"features": next_feat[0]},
                        bool(terminated),
                        bool(truncated) and not terminated,
                        env_id=i,
                    )
                    open_steps[i] = None
                    stored += 1
                if done:
                    result.episodes.append(
                        {
                            "env_steps": env_steps,
                            "success": float(st["success"]),
                            "length": st["len"],
                            "intervention_rate": 0.0,
                        }
                    )
                    episode[i] += 1
                    stats[i] = {"len": 0, "success": False}
                    next_obs = env.reset(seed=train.seed + 1000 * i + episode[i])[0]
                    runner.reset([i])
                obs[i] = next_obs
            bar.update(num_envs)
            if env_steps >= train.warmup_steps:
                for _ in range(cfg.utd * stored):
                    last_logs = agent.update(buffer.sample(cfg.batch_size, rng))
            every = max(train.eval_every, 1)
            if env_steps // every != (env_steps - num_envs) // every:
                evaluate_now()
                if result.steps_to_target is not None:
                    break
    finally:
        bar.close()
        for env in envs:
            env.close()
    finish_run(result, kept, env_steps, start)
    return result
