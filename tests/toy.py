"""Tiny numpy envs that prove an algorithm learns in seconds, and biased scripted bases for them.

``PointGoal``: a 2-D point moves by ``step * a`` per step (a in [-1, 1]^2) towards a random
goal; success (reward 1, termination) within ``tol``. ``BiasedPointBase`` is a chunked
proportional controller with a constant action bias: its equilibrium sits ``bias / gain`` off
the goal, so with the defaults it mostly fails; a residual equal to minus the bias fixes it.
``SteerablePointBase`` is the same controller whose chunk also moves with its sampler's initial
noise (``noise_gain * w``): its prior noise averages out, but a constant noise near
``-bias / noise_gain`` cancels the bias, which is what latent-noise RL (DSRL) has to find.
Observations follow the robotrl convention (``state/*`` float32 arrays).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch


class PointGoal(gym.Env):
    """2-D goal reaching with sparse reward.

    Args:
        tol: success radius. horizon: steps before truncation. step: displacement per unit action.
    """

    def __init__(self, tol: float = 0.2, horizon: int = 30, step: float = 0.15) -> None:
        self.tol, self.horizon, self.step_size = tol, horizon, step
        box = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.observation_space = gym.spaces.Dict({"state/pos": box, "state/goal": box})
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._rng = np.random.default_rng()
        self.pos, self.goal, self.t = np.zeros(2), np.zeros(2), 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.pos, self.goal, self.t = np.zeros(2), self._rng.uniform(-1, 1, 2), 0
        return self._obs(), {"success": False, "intervention": False}

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "state/pos": self.pos.astype(np.float32),
            "state/goal": self.goal.astype(np.float32),
        }

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        a = np.asarray(action, float)
        if a.shape != (2,) or not np.isfinite(a).all():
            raise ValueError(f"action must be finite with shape (2,), got {a}")
        self.pos = self.pos + self.step_size * np.clip(a, -1.0, 1.0)
        self.t += 1
        ok = bool(np.linalg.norm(self.pos - self.goal) < self.tol)
        return self._obs(), float(ok), ok, self.t >= self.horizon, {"success": ok}

    def close(self) -> None:
        """Nothing to release."""


STATE_STATS = {
    "state/pos": {"mean": np.zeros(2), "std": np.full(2, 0.6)},
    "state/goal": {"mean": np.zeros(2), "std": np.full(2, 0.6)},
}

# ResidualConfig fields that learn the PointGoal task within ~2000 env steps (small nets). No
# residual L2 penalty: cancelling BiasedPointBase's (0.5, -0.5) bias needs residuals at the
# scale bound (with the default 0.1 the split actor/learner run ended at 13-37 % twice).
RESIDUAL_SETTINGS: dict[str, Any] = dict(
    scale=0.5,
    hidden=64,
    ensemble=5,
    batch_size=128,
    utd=2,
    actor_lr=3e-4,
    critic_lr=3e-4,
    residual_l2=0.0,
)


class BiasedPointBase:
    """A chunked P-controller ``clip(gain * (goal - pos) + bias)`` following ChunkPolicy."""

    obs_horizon, action_horizon, action_dim = 1, 4, 2

    def __init__(self, bias: Sequence[float] = (0.5, -0.5), gain: float = 2.0) -> None:
        self.bias = torch.tensor(list(bias), dtype=torch.float32)
        self.gain = gain
        self.config = {"state_dims": {"state/pos": 2, "state/goal": 2}, "image_keys": []}

    def reset(self) -> None:
        """Stateless."""

    def eval(self) -> BiasedPointBase:
        return self

    def predict_chunk(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        d = obs["state/goal"][:, -1] - obs["state/pos"][:, -1]
        a = torch.clamp(self.gain * d + self.bias, -1.0, 1.0)
        return a[:, None].expand(-1, self.action_horizon, -1)


class SteerablePointBase(BiasedPointBase):
    """A :class:`BiasedPointBase` whose chunk adds ``noise_gain * w`` for its initial noise ``w``
    (Ta, 2) (default: a standard normal draw), following ``predict_chunk(obs, noise=...)``."""

    def __init__(
        self, bias: Sequence[float] = (0.5, -0.5), gain: float = 2.0, noise_gain: float = 0.5
    ) -> None:
        super().__init__(bias, gain)
        self.noise_gain = noise_gain

    def predict_chunk(
        self, obs: Mapping[str, torch.Tensor], noise: torch.Tensor | None = None
    ) -> torch.Tensor:
        d = obs["state/goal"][:, -1] - obs["state/pos"][:, -1]
        b = d.shape[0]
        w = noise if noise is not None else torch.randn(b, self.action_horizon, self.action_dim)
        if w.shape != (b, self.action_horizon, self.action_dim):
            raise ValueError(f"noise must be {(b, self.action_horizon, 2)}, got {tuple(w.shape)}")
        a = self.gain * d + self.bias
        return torch.clamp(a[:, None] + self.noise_gain * w, -1.0, 1.0)
