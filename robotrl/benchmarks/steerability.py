"""How far the base's initial noise can steer it: the ceiling of RL in its noise space (DSRL).

Every initial state (env seed) is run from the sampler's mean noise (0) and from each of
``noises`` random draws, one draw held for every chunk of the episode and the same draws for
every state. A state that fails from the mean is *rescued* when some draw succeeds there. From
the same episodes:

- ``ceiling``: the share of states that succeed from the mean or are rescued, what an agent
  choosing one of these noises per episode from the initial state could reach (one choosing per
  chunk has more freedom);
- ``held_noise_success``: each draw's success over all states. A draw far above the mean's is a
  direction the base follows everywhere, which a latent agent finds from any state; if none is,
  the rescuing noise differs from state to state and the agent has to learn that map;
- ``neighbour_choice_success``: how far these episodes themselves teach that map. At each state
  the plan (mean or draw) that succeeded most often at its ``neighbours`` nearest other states
  is chosen (initial observations' state entries, standardised; ties to the mean noise) and
  scored by its outcome there. Near the mean's success, the rescues are not predictable from
  nearby states: a learner with this much data has no map to learn, only a lottery.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from robotrl.chunk_runner import SingleEnvPolicy


class FixedNoise:
    """``base`` planning every chunk from the same initial noise ``noise`` (1, Ta, Da)."""

    def __init__(self, base: Any, noise: torch.Tensor) -> None:
        self.base, self.noise = base, noise
        self.config, self.obs_horizon = base.config, base.obs_horizon
        self.action_horizon, self.action_dim = base.action_horizon, base.action_dim

    def reset(self) -> None:
        self.base.reset()

    def predict_chunk(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        b = next(iter(obs.values())).shape[0]
        return self.base.predict_chunk(obs, noise=self.noise.expand(b, -1, -1))


def succeeds(env: Any, policy: Any, seed: int, te: int) -> bool:
    """Whether one episode of ``policy`` (a chunk policy, Te ``te``) from ``seed`` succeeds."""
    runner = SingleEnvPolicy(policy, te)
    obs, _ = env.reset(seed=seed)
    runner.reset()
    while True:
        obs, _, terminated, truncated, info = env.step(runner(obs))
        if info.get("success"):
            return True
        if terminated or truncated:
            return False


def steerability(
    env: Any,
    base: Any,
    te: int,
    *,
    states: int,
    noises: int,
    seed: int = 100_000,
    noise_seed: int = 0,
    neighbours: int = 5,
    on_episode: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run ``base`` (a chunk policy with ``predict_chunk(obs, noise=)``) from ``states`` env
    seeds ``seed + i``, each from the mean noise and from ``noises`` held draws (torch
    generator ``noise_seed``); see the module docstring for the figures returned.
    ``on_episode``: called after every episode (a progress bar)."""
    if states < 1 or noises < 1:
        raise ValueError(f"states and noises must be >= 1, got {states} and {noises}")
    shape = (1, int(base.action_horizon), int(base.action_dim))
    gen = torch.Generator().manual_seed(noise_seed)
    draws = [torch.randn(shape, generator=gen) for _ in range(noises)]
    plans = [FixedNoise(base, torch.zeros(shape))] + [FixedNoise(base, w) for w in draws]
    wins: list[list[bool]] = []  # (states, 1 + noises)
    features = []  # (states, F) the initial observations' state entries
    with torch.no_grad():
        for i in range(states):
            obs, _ = env.reset(seed=seed + i)
            features.append(
                np.concatenate([np.ravel(obs[k]) for k in sorted(obs) if k.startswith("state/")])
            )
            row = []
            for plan in plans:
                row.append(succeeds(env, plan, seed + i, te))
                if on_episode is not None:
                    on_episode()
            wins.append(row)
    return summary(wins, seed, np.stack(features), neighbours)


def neighbour_choice(features: np.ndarray, wins: np.ndarray, neighbours: int) -> float:
    """Leave-one-out success of choosing, at each state, the plan that succeeded most often at
    its ``neighbours`` nearest other states. ``features`` (S, F) per state (standardised here;
    constant entries dropped), ``wins`` (S, P) bool outcomes, column 0 the mean noise (ties
    choose the lowest column)."""
    if neighbours < 1:
        raise ValueError(f"neighbours must be >= 1, got {neighbours}")
    x = np.asarray(features, np.float64)
    varies = x.std(axis=0) > 1e-9
    x = x[:, varies]
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    w = np.asarray(wins, np.float64)
    d = ((x[:, None] - x[None]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    near = np.argsort(d, axis=1)[:, : min(neighbours, len(w) - 1)]
    chosen = w[near].mean(axis=1).argmax(axis=1)
    return float(w[np.arange(len(w)), chosen].mean())


def summary(
    wins: Sequence[Sequence[bool]],
    seed: int = 100_000,
    features: np.ndarray | None = None,
    neighbours: int = 5,
) -> dict[str, Any]:
    """The figures of :func:`steerability` from its outcomes ``wins`` (states, 1 + noises):
    column 0 the mean noise, the others the held draws; row ``i`` is env seed ``seed + i``.
    ``features`` (states, F): the states' initial features, for ``neighbour_choice_success``
    (None: not reported)."""
    n = len(wins)
    from_mean = sum(bool(row[0]) for row in wins)
    failed = [(i, row) for i, row in enumerate(wins) if not row[0]]
    rescued = sum(any(row[1:]) for _, row in failed)
    held = [sum(bool(row[j]) for row in wins) / n for j in range(1, len(wins[0]))]
    return {
        "states": n,
        "noises_per_state": len(wins[0]) - 1,
        "mean_noise_success": from_mean / n,
        "failed_from_mean_noise": len(failed),
        "rescued_by_some_noise": rescued,
        "ceiling": (from_mean + rescued) / n,
        "held_noise_success": held,
        "best_held_noise_success": max(held),
        **(
            {"neighbour_choice_success": neighbour_choice(features, np.asarray(wins), neighbours)}
            if features is not None and n > 1
            else {}
        ),
        "per_failed_state": [
            {"seed": seed + i, "successes": int(sum(map(bool, row[1:])))} for i, row in failed
        ],
    }
