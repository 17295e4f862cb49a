"""SAC from scratch (stable-baselines3) on a robotrl sim task: the baseline residual RL is
measured against, on the same env, the same sparse reward and the same env-step budget."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

import sim


class FlattenState(gym.ObservationWrapper):
    """Concatenates ``state/*`` entries (in ``keys`` order) into one float32 Box."""

    def __init__(self, env: gym.Env, keys: Sequence[str]) -> None:
        super().__init__(env)
        self.keys = list(keys)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Dict):
            raise ValueError(f"FlattenState needs dict observations, got {space}")
        dim = 0
        for k in self.keys:
            shape = space[k].shape
            if shape is None:
                raise ValueError(f"{k}: a space without a shape cannot be flattened")
            dim += int(np.prod(shape))
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (dim,), np.float32)

    def observation(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([np.ravel(observation[k]) for k in self.keys]).astype(np.float32)


def success_rate(model: Any, env: gym.Env, episodes: int, seed: int) -> float:
    wins = 0
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        done, ok = False, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, term, trunc, info = env.step(action)
            ok |= bool(info.get("success"))
            done = term or trunc
        wins += ok
    return wins / episodes


def run_sac(
    task: str,
    keys: Sequence[str],
    total_steps: int,
    *,
    eval_every: int = 5000,
    eval_episodes: int = 20,
    seed: int = 0,
    learning_starts: int = 1000,
) -> dict[str, Any]:
    """Train SAC for ``total_steps`` env steps; success evaluated every ``eval_every``."""
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback

    env = FlattenState(sim.make(task), keys)
    eval_env = FlattenState(sim.make(task), keys)
    curve: list[dict[str, float]] = []
    start = time.perf_counter()

    class Evaluate(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % eval_every == 0:
                curve.append(
                    {
                        "env_steps": self.num_timesteps,
                        "success_rate": success_rate(self.model, eval_env, eval_episodes, 100_000),
                        "wall_s": time.perf_counter() - start,
                    }
                )
            return True

    model = SAC(
        "MlpPolicy",
        env,
        learning_starts=learning_starts,
        seed=seed,
        verbose=0,
        policy_kwargs={"net_arch": [256, 256]},
    )
    model.learn(total_timesteps=total_steps, callback=Evaluate())
    env.close()
    eval_env.close()
    return {
        "algo": "sac_from_scratch",
        "task": task,
        "env_steps": total_steps,
        "wall_s": round(time.perf_counter() - start, 1),
        "curve": curve,
        "final_success": curve[-1]["success_rate"] if curve else None,
    }
