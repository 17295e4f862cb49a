"""A minutes-long stand-in for base a's residual run (``bench/timed_grasp.py`` prints the JSON).

:class:`TimedGrasp` keeps what makes lift base a hard for the residual and drops the physics: a
2-D point (the gripper) moves ``step`` per unit action towards a goal (the cube) drawn in
``[-reach, reach]^2``; the gripper closes at env step ``close_step`` whatever the policy does,
and the episode succeeds (reward 1, terminated) ``hold`` steps later if the point was within
``tol`` of the goal when it closed; otherwise it runs to ``horizon`` (truncated) with reward 0.
:class:`AimingBase` is a chunked P-controller that aims at ``shrink * goal``: like base a, which
barely reacts to where the cube is, it misses far goals by a distance that depends on the goal,
so the residual that fixes it depends on the state, and one step's residual (within the default
bound 0.1) moves the point by at most an eighth of the tolerance.

Two presets: ``lift`` (base a's timing: 100-step episodes, closing at step 45, reward 20 steps
later) and ``short`` (the same task in half the steps, from a closer goal range).
:func:`train_and_evaluate` runs :func:`~robotrl.algos.residual_training.train_residual` on it
with any :class:`~robotrl.algos.residual.ResidualConfig`, optionally with episodes of the scripted
expert (:func:`expert_action`) in the demo buffer, and re-evaluates the final residual on 100
fresh episodes. The base was not cloned from those demos, so they hold the corrections it lacks
(unlike base a's own demos).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from robotrl.algos.residual import ResidualConfig, StateFeaturizer
from robotrl.algos.residual_ppo import ResidualPPOConfig
from robotrl.algos.residual_ppo_training import PPOResult, PPORunConfig, train_residual_ppo
from robotrl.algos.residual_training import (
    TrainConfig,
    TrainResult,
    demo_buffer,
    evaluate_residual,
    train_residual,
)
from robotrl.chunk_runner import SingleEnvPolicy
from robotrl.datasets import EpisodeStore
from robotrl.evaluation import evaluate

KEYS = ("state/pos", "state/goal", "state/t", "state/closed")


@dataclass(frozen=True)
class GraspTiming:
    """Geometry and timing of :class:`TimedGrasp` (lengths in the point's units, times in env
    steps). ``shrink``: where :class:`AimingBase` aims, as a fraction of the goal."""

    horizon: int = 100
    close_step: int = 45
    hold: int = 20
    reach: float = 0.6
    step: float = 0.03
    tol: float = 0.025
    shrink: float = 0.95


PRESETS: dict[str, GraspTiming] = {
    "lift": GraspTiming(),
    "short": GraspTiming(horizon=50, close_step=25, hold=10, reach=0.35),
}


class TimedGrasp(gym.Env):
    """The task of the module docstring; observations ``state/pos`` (2,), ``state/goal`` (2,),
    ``state/t`` (1,) (steps / horizon) and ``state/closed`` (1,) (0 or 1), float32."""

    def __init__(self, timing: GraspTiming = GraspTiming()) -> None:
        self.timing = timing
        box = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        one = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.observation_space = gym.spaces.Dict(
            {"state/pos": box, "state/goal": box, "state/t": one, "state/closed": one}
        )
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._rng = np.random.default_rng()
        self.pos, self.goal = np.zeros(2), np.zeros(2)
        self.t, self.closed, self.grasped = 0, False, False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        r = self.timing.reach
        self.pos, self.goal = np.zeros(2), self._rng.uniform(-r, r, 2)
        self.t, self.closed, self.grasped = 0, False, False
        return self._obs(), {"success": False}

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "state/pos": self.pos.astype(np.float32),
            "state/goal": self.goal.astype(np.float32),
            "state/t": np.array([self.t / self.timing.horizon], np.float32),
            "state/closed": np.array([float(self.closed)], np.float32),
        }

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        a = np.asarray(action, float)
        if a.shape != (2,) or not np.isfinite(a).all():
            raise ValueError(f"action must be finite with shape (2,), got {a}")
        tm = self.timing
        if not self.closed:
            self.pos = self.pos + tm.step * np.clip(a, -1.0, 1.0)
        self.t += 1
        if self.t == tm.close_step:
            self.closed = True
            self.grasped = bool(np.linalg.norm(self.pos - self.goal) < tm.tol)
        success = self.grasped and self.t >= tm.close_step + tm.hold
        truncated = not success and self.t >= tm.horizon
        return self._obs(), float(success), success, truncated, {"success": success}

    def close(self) -> None:
        """Nothing to release."""


class AimingBase:
    """A chunked P-controller towards ``shrink * goal`` (a frozen ChunkPolicy): every chunk
    repeats ``clip(gain * (shrink * goal - pos) * 0.03 / step)`` ``action_horizon`` times."""

    obs_horizon, action_horizon, action_dim = 1, 16, 2

    def __init__(self, timing: GraspTiming = GraspTiming(), gain: float = 2.0) -> None:
        self.timing, self.gain = timing, gain
        self.config = {"state_dims": {"state/pos": 2, "state/goal": 2}, "image_keys": []}

    def reset(self) -> None:
        """Stateless."""

    def eval(self) -> AimingBase:
        return self

    def predict_chunk(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """(B, Ta, 2) from ``state/pos`` and ``state/goal`` of shape (B, To, 2)."""
        aim = self.timing.shrink * obs["state/goal"][:, -1] - obs["state/pos"][:, -1]
        a = torch.clamp(self.gain * aim * (0.03 / self.timing.step), -1.0, 1.0)
        return a[:, None].expand(-1, self.action_horizon, -1)


def expert_action(env: TimedGrasp, gain: float = 4.0) -> np.ndarray:
    """The scripted expert: a P-controller towards the true goal (succeeds from every goal)."""
    return np.clip(gain * (env.goal - env.pos) * (0.03 / env.timing.step), -1.0, 1.0)


def record_demos(path: str | Path, timing: GraspTiming, episodes: int, seed: int) -> EpisodeStore:
    """``episodes`` expert episodes (env seeds ``seed + i``) in a new store at ``path``."""
    store = EpisodeStore.create(Path(path), fps=20.0, robot="point")
    env = TimedGrasp(timing)
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        with store.begin_episode(task="timed_grasp") as w:
            done = False
            while not done:
                a = expert_action(env).astype(np.float32)
                nxt, r, terminated, truncated, info = env.step(a)
                w.add(obs, a, reward=r)
                obs, done = nxt, terminated or truncated
            w.commit(success=bool(info["success"]), terminated=terminated, final_obs=obs)
    return store


def featurizer(timing: GraspTiming) -> StateFeaturizer:
    """Standardised :data:`KEYS` (the goal's spread for positions, time and flag around 0.5)."""
    spread = np.full(2, timing.reach / np.sqrt(3.0))
    stats = {
        "state/pos": {"mean": np.zeros(2), "std": spread},
        "state/goal": {"mean": np.zeros(2), "std": spread},
        "state/t": {"mean": np.array([0.5]), "std": np.array([0.3])},
        "state/closed": {"mean": np.array([0.5]), "std": np.array([0.5])},
    }
    return StateFeaturizer(list(KEYS), stats)


def train_and_evaluate(
    timing: GraspTiming,
    cfg: ResidualConfig | ResidualPPOConfig,
    train: TrainConfig | PPORunConfig,
    *,
    demos: int = 0,
    execute_horizon: int = 8,
    episodes: int = 100,
    eval_seed: int = 200_000,
) -> dict[str, Any]:
    """Train a residual on :class:`AimingBase` in :class:`TimedGrasp`: off-policy (a
    :class:`ResidualConfig` with a :class:`TrainConfig`), with ``demos`` expert episodes (env
    seeds from 300 000) in its demo buffer, or by PPO (a :class:`ResidualPPOConfig` with a
    :class:`PPORunConfig`; no demo buffer). Returns the base's and the final residual's success
    over ``episodes`` fresh episodes (seeds from ``eval_seed``) and the run's evaluations
    (``env_steps``, ``success``, ``train_success``: the last 20 training episodes)."""
    base = AimingBase(timing)
    feats = featurizer(timing)

    def make_env() -> TimedGrasp:
        return TimedGrasp(timing)

    env = make_env()
    before = evaluate(
        env, SingleEnvPolicy(base, execute_horizon), episodes, seed=eval_seed, progress=False
    )
    env.close()
    res: TrainResult | PPOResult
    if isinstance(cfg, ResidualPPOConfig) and isinstance(train, PPORunConfig):
        if demos > 0:
            raise ValueError("residual PPO learns on-policy: it has no demo buffer (demos=0)")
        res = train_residual_ppo(
            base, make_env, feats, cfg, train, execute_horizon=execute_horizon, progress=False
        )
    elif isinstance(cfg, ResidualConfig) and isinstance(train, TrainConfig):
        buffer = None
        if demos > 0:
            with tempfile.TemporaryDirectory() as tmp:
                store = record_demos(Path(tmp) / "demos.zarr", timing, demos, seed=300_000)
                buffer = demo_buffer(store, base, feats, cfg, seed=train.seed)
                store.close()
        res = train_residual(
            base, make_env, feats, cfg, train, demos=buffer, execute_horizon=execute_horizon,
            progress=False,
        )  # fmt: skip
    else:
        raise TypeError("give a ResidualConfig with a TrainConfig, or a ResidualPPOConfig "
                        "with a PPORunConfig")  # fmt: skip
    after = evaluate_residual(
        res.agent, base, feats, make_env, episodes, eval_seed, execute_horizon
    )
    return {
        "base_success": before.success_rate,
        "success": after["success_rate"],
        "evaluations": [
            {
                "env_steps": int(e["env_steps"]),
                "success": round(float(e["success_rate"]), 3),
                "train_success": round(float(e["train_success"]), 3),
            }
            for e in res.evaluations
        ],
        "kept_step": res.kept_step,
        "wall_s": round(res.wall_s, 1),
    }
