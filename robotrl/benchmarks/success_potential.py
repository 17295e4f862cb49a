"""A peg_insert policy's success potential, learnt from its episodes, and greedy x-y steps on it.

Φ(s) is a classifier of whether the episode a state belongs to succeeds: the Monte Carlo value
of the policy that produced the episodes under the sparse success reward. It reads where the
peg is relative to the hole, in metres and as ``tanh((peg - hole) / 5 mm)`` per axis (which
resolves the millimetres an insertion depends on), and the TCP's twist: nothing that stays
constant through an episode, such as where the hole is or the arm's joint angles, by which a
classifier of a few hundred episodes could tell them apart and memorise their outcomes.

:class:`Greedy` improves a policy by one step of policy iteration on Φ: among a grid of x-y
corrections within ``±bound`` action units it takes the one whose predicted next state has the
highest Φ, if that beats Φ now by more than ``margin``. The prediction moves the peg by the
correction times the env's translation per action unit (``env.max_dpos``); nothing else
changes. :func:`policy_iteration` repeats it: roll the current policy out, refit Φ on every
episode so far, act greedily on the new Φ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from robotrl.evaluation import EpisodePolicy

# the state vector: these peg_insert entries, in this order, with their sizes
STATE_SIZES = {"state/ee_twist": 6, "state/peg_pos": 3, "state/hole_pos": 3}
STATE_KEYS = tuple(STATE_SIZES)
STATE_DIM = sum(STATE_SIZES.values())
_START = dict(zip(STATE_KEYS, np.cumsum([0, *STATE_SIZES.values()]).tolist(), strict=False))
TWIST, PEG, HOLE = (slice(_START[k], _START[k] + n) for k, n in STATE_SIZES.items())
# TWIST: the TCP's [m/s, rad/s]; PEG, HOLE: positions [m, base frame]
OFFSET_UNIT_M = 0.005  # the peg-hole offset input is also tanh(offset / this)
FEATURE_DIM = 3 + 3 + 6


def features(states: torch.Tensor) -> torch.Tensor:
    """(..., FEATURE_DIM) Φ's inputs of (..., STATE_DIM) states: peg - hole [m], its tanh of
    ``OFFSET_UNIT_M`` and the TCP's twist."""
    offset = states[..., PEG] - states[..., HOLE]
    return torch.cat([offset, torch.tanh(offset / OFFSET_UNIT_M), states[..., TWIST]], -1)


Episode = tuple[np.ndarray, bool]  # (T, STATE_DIM) states, success


def state_vector(obs: Mapping[str, Any]) -> np.ndarray:
    """(STATE_DIM,) float32: the entries of :data:`STATE_KEYS` of one observation."""
    missing = [k for k in STATE_KEYS if k not in obs]
    if missing:
        raise ValueError(f"the observation has no {missing}: a success potential is peg_insert's")
    state = np.concatenate([np.asarray(obs[k], np.float32).ravel() for k in STATE_KEYS])
    if state.shape != (STATE_DIM,):
        sizes = {k: np.size(obs[k]) for k in STATE_KEYS}
        raise ValueError(f"the state entries have sizes {sizes}, expected {STATE_SIZES}")
    return state


class SuccessPotential(nn.Module):
    """Φ: (..., STATE_DIM) states -> (...,) probability that their episode succeeds."""

    mean: torch.Tensor  # (FEATURE_DIM,) of the features of the states it was fitted on
    std: torch.Tensor

    def __init__(self, mean: np.ndarray, std: np.ndarray, hidden: int = 256) -> None:
        super().__init__()
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.as_tensor(std, dtype=torch.float32))
        self.net = nn.Sequential(
            nn.Linear(FEATURE_DIM, hidden), nn.LayerNorm(hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.ReLU(), nn.Linear(hidden, 1),
        )  # fmt: skip

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        return self.net((features(states) - self.mean) / self.std).squeeze(-1)

    @torch.no_grad()
    def probability(self, states: np.ndarray) -> np.ndarray:
        """(...,) Φ of (..., STATE_DIM) states."""
        x = torch.as_tensor(np.asarray(states, np.float32))
        return torch.sigmoid(self.logits(x)).numpy()


def fit_potential(
    episodes: Sequence[Episode], steps: int = 4000, seed: int = 0
) -> SuccessPotential:
    """Φ fitted to every state of ``episodes``, each labelled with its episode's success
    (AdamW at 1e-3, batches of 1 024 states)."""
    outcomes = {bool(ok) for _, ok in episodes}
    if outcomes != {True, False}:
        raise ValueError(
            f"Φ needs successful and failed episodes; all {len(episodes)} are {outcomes}"
        )
    x = np.concatenate([s for s, _ in episodes]).astype(np.float32)
    y = np.concatenate([np.full(len(s), float(ok), np.float32) for s, ok in episodes])
    torch.manual_seed(seed)
    f = features(torch.from_numpy(x)).numpy()
    model = SuccessPotential(f.mean(0), f.std(0) + 1e-6)
    opt = torch.optim.AdamW(model.parameters(), 1e-3, weight_decay=1e-4)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        idx = torch.randint(0, len(xt), (1024,), generator=gen)
        loss = nn.functional.binary_cross_entropy_with_logits(model.logits(xt[idx]), yt[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@dataclass(frozen=True)
class Greedy:
    """The x-y correction of one greedy step on Φ.

    Attributes:
        bound: the largest correction per axis [action units]. grid: candidates per axis.
        margin: the least predicted gain in Φ for a correction to be taken.
    """

    bound: float = 0.05
    grid: int = 5
    margin: float = 0.02

    def __post_init__(self) -> None:
        if self.bound <= 0 or self.grid < 2 or self.margin < 0:
            raise ValueError(f"need bound > 0, grid >= 2 and margin >= 0, got {self}")

    @cached_property
    def candidates(self) -> np.ndarray:
        """(grid², 2) the x-y corrections tried [action units]."""
        axis = np.linspace(-self.bound, self.bound, self.grid, dtype=np.float32)
        return np.stack(np.meshgrid(axis, axis, indexing="ij"), -1).reshape(-1, 2)

    def correction(
        self, potential: SuccessPotential, state: np.ndarray, max_dpos: float
    ) -> np.ndarray:
        """(2,) x-y correction [action units] at a (STATE_DIM,) state (zeros: none gains);
        ``max_dpos``: the env's translation per action unit [m]."""
        cand = self.candidates
        moved = np.repeat(state[None].astype(np.float32), len(cand), 0)
        shift = cand * max_dpos  # (C, 2) [m]
        moved[:, PEG.start : PEG.start + 2] += shift
        values = potential.probability(np.concatenate([state[None], moved]))
        best = int(np.argmax(values[1:]))
        if values[1 + best] - values[0] <= self.margin:
            return np.zeros(2, np.float32)
        return cand[best]


def run_episode(
    env: Any,
    policy: EpisodePolicy,
    seed: int,
    *,
    noise_std: float = 0.0,
    rng: np.random.Generator | None = None,
    improve: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Episode:
    """One episode of ``policy`` (plus ``improve(state)``'s x-y correction and independent
    noise of ``noise_std`` action units per entry): its states and ``info["success"]``."""
    rng = rng if rng is not None else np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    policy.reset()
    states, success, done = [], False, False
    while not done:
        state = state_vector(obs)
        states.append(state)
        action = np.array(policy(obs), np.float32)
        if improve is not None:
            action[:2] += improve(state)
        if noise_std > 0:
            action += rng.normal(0.0, noise_std, action.shape).astype(np.float32)
        obs, _, terminated, truncated, info = env.step(np.clip(action, -1.0, 1.0))
        success |= bool(info.get("success"))
        done = bool(terminated or truncated)
    return np.stack(states), success


def rollouts(
    env: Any,
    policy: EpisodePolicy,
    episodes: int,
    seed: int,
    *,
    noise_std: float = 0.0,
    improve: Callable[[np.ndarray], np.ndarray] | None = None,
    progress: bool = False,
    desc: str = "episodes",
) -> list[Episode]:
    """``episodes`` episodes seeded ``seed + i``."""
    rng = np.random.default_rng(seed)
    return [
        run_episode(env, policy, seed + i, noise_std=noise_std, rng=rng, improve=improve)
        for i in tqdm(range(episodes), desc=desc, disable=not progress, leave=False)
    ]


def policy_iteration(
    env: Any,
    policy: EpisodePolicy,
    *,
    iterations: int = 4,
    base_episodes: int = 200,
    episodes_per_iteration: int = 150,
    eval_episodes: int = 100,
    noise_std: float = 0.005,
    greedy: Greedy = Greedy(),
    seed: int = 0,
    eval_seed: int = 200_000,
    fit_steps: int = 4000,
    progress: bool = False,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """One row per iteration (0: ``policy`` alone): the env steps Φ was fitted on, the success
    of the greedy policy over ``eval_episodes`` episodes seeded from ``eval_seed``, and the
    success of the newest rollouts it was fitted on. Rollouts are seeded from ``300 000 +
    100 000 * seed`` (clear of ``eval_seed``'s). ``env.max_dpos``: the env's translation per
    action unit [m]. ``report`` gets each row as soon as it is measured."""
    data_seed, max_dpos = 300_000 + 100_000 * seed, float(env.max_dpos)
    report = report or (lambda row: None)
    evaluation = rollouts(env, policy, eval_episodes, eval_seed, progress=progress, desc="eval")
    rows = [{"iteration": 0, "env_steps": 0, "success": _rate(evaluation)}]
    report(rows[0])
    newest = rollouts(
        env, policy, base_episodes, data_seed, noise_std=noise_std, progress=progress,
        desc="base rollouts",
    )  # fmt: skip
    data = list(newest)
    for it in range(1, iterations + 1):
        potential = fit_potential(data, fit_steps, seed)

        def improve(state: np.ndarray, p: SuccessPotential = potential) -> np.ndarray:
            return greedy.correction(p, state, max_dpos)

        evaluation = rollouts(
            env, policy, eval_episodes, eval_seed, improve=improve, progress=progress, desc="eval"
        )
        rows.append(
            {
                "iteration": it,
                "env_steps": int(sum(len(s) for s, _ in data)),
                "rollout_success": _rate(newest),
                "success": _rate(evaluation),
            }
        )
        report(rows[-1])
        if it < iterations:  # the next iteration's data: this greedy policy's rollouts
            newest = rollouts(
                env, policy, episodes_per_iteration, data_seed + 10_000 * (it + 1),
                noise_std=noise_std, improve=improve, progress=progress,
                desc=f"iteration {it + 1}",
            )  # fmt: skip
            data += newest
    return rows


def _rate(episodes: Sequence[Episode]) -> float:
    return float(np.mean([ok for _, ok in episodes])) if episodes else 0.0
