"""A peg_insert policy's success potential, learnt from its episodes, and x-y corrections on it.

Φ(s) is a classifier of whether the episode a state belongs to succeeds: the Monte Carlo value
of the policy that produced the episodes under the sparse success reward. It reads where the
peg is relative to the hole, in metres and as ``tanh((peg - hole) / 5 mm)`` per axis (which
resolves the millimetres an insertion depends on), and the TCP's twist: nothing that stays
constant through an episode, such as where the hole is or the arm's joint angles, by which a
classifier of a few hundred episodes could tell them apart and memorise their outcomes.

:class:`PotentialActor` improves a policy by one step of policy iteration on Φ: a network whose
x-y correction, within ``±bound`` action units, maximises Φ of the state it moves the peg to
(the correction times the env's translation per action unit, ``env.max_dpos``; nothing else of
the state changes) less an L1 price on the correction, so that it stays at zero where Φ's
predicted gain is small. The gradient comes through Φ and that known effect of the action,
not from a critic. :func:`policy_iteration` repeats it: roll the current policy out, refit Φ on
every episode so far, fit the actor on the new Φ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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


class _FeatureNet(nn.Module):
    """An MLP (two hidden layers with LayerNorm) on standardised :func:`features` of states."""

    mean: torch.Tensor  # (FEATURE_DIM,) of the features of the states it was fitted on
    std: torch.Tensor

    def __init__(self, mean: np.ndarray, std: np.ndarray, outputs: int, hidden: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.as_tensor(std, dtype=torch.float32))
        self.net = nn.Sequential(
            nn.Linear(FEATURE_DIM, hidden), nn.LayerNorm(hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.ReLU(), nn.Linear(hidden, outputs),
        )  # fmt: skip

    def head(self, states: torch.Tensor) -> torch.Tensor:
        """(..., outputs) of (..., STATE_DIM) states."""
        return self.net((features(states) - self.mean) / self.std)


class SuccessPotential(_FeatureNet):
    """Φ: (..., STATE_DIM) states -> (...,) probability that their episode succeeds."""

    def __init__(self, mean: np.ndarray, std: np.ndarray, hidden: int = 256) -> None:
        super().__init__(mean, std, 1, hidden)

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        return self.head(states).squeeze(-1)

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
    xt = _states(episodes)
    yt = torch.from_numpy(
        np.concatenate([np.full(len(s), float(ok), np.float32) for s, ok in episodes])
    )
    torch.manual_seed(seed)
    f = features(xt).numpy()
    model = SuccessPotential(f.mean(0), f.std(0) + 1e-6)
    opt = torch.optim.AdamW(model.parameters(), 1e-3, weight_decay=1e-4)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        idx = torch.randint(0, len(xt), (1024,), generator=gen)
        loss = nn.functional.binary_cross_entropy_with_logits(model.logits(xt[idx]), yt[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@dataclass(frozen=True)
class ActorFit:
    """How a :class:`PotentialActor` is fitted to Φ.

    Attributes:
        bound: the largest correction per axis [action units]. kappa: the price of a
        correction, per action unit over ``bound`` (an L1 term: corrections where Φ's predicted
        gain is smaller stay at zero). steps, batch, lr: Adam's.
    """

    bound: float = 0.05
    kappa: float = 0.02
    steps: int = 3000
    batch: int = 512
    lr: float = 3e-4

    def __post_init__(self) -> None:
        if self.bound <= 0 or self.kappa < 0 or self.steps < 1 or self.batch < 1 or self.lr <= 0:
            raise ValueError(f"need bound > 0, kappa >= 0 and positive steps, batch, lr: {self}")


class PotentialActor(_FeatureNet):
    """(..., STATE_DIM) states -> (..., 2) x-y corrections within ``±bound`` [action units]."""

    def __init__(self, mean: np.ndarray, std: np.ndarray, bound: float, hidden: int = 256):
        super().__init__(mean, std, 2, hidden)
        self.bound = float(bound)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return self.bound * torch.tanh(self.head(states))

    @torch.no_grad()
    def correction(self, state: np.ndarray) -> np.ndarray:
        """(2,) x-y correction [action units] at a (STATE_DIM,) state."""
        return self(torch.as_tensor(np.asarray(state, np.float32))).numpy()


def moved(states: torch.Tensor, correction: torch.Tensor, max_dpos: float) -> torch.Tensor:
    """(..., STATE_DIM) states with the peg moved by an x-y ``correction`` (..., 2) [action
    units] times ``max_dpos``, the env's translation per action unit [m]."""
    out = states.clone()
    out[..., PEG.start : PEG.start + 2] = states[..., PEG.start : PEG.start + 2] + (
        correction * max_dpos
    )
    return out


def fit_actor(
    potential: SuccessPotential,
    episodes: Sequence[Episode],
    max_dpos: float,
    fit: ActorFit = ActorFit(),
    seed: int = 0,
) -> PotentialActor:
    """The actor whose corrections maximise Φ of the state they move the peg to, minus ``kappa
    |a| / bound``, over every state of ``episodes``: Φ's gradient through the action's known
    effect, no critic."""
    x = _states(episodes)
    f = features(x)
    torch.manual_seed(seed)
    actor = PotentialActor(f.mean(0).numpy(), f.std(0).numpy() + 1e-6, fit.bound)
    opt = torch.optim.Adam(actor.parameters(), fit.lr)
    gen = torch.Generator().manual_seed(seed)
    potential.requires_grad_(False)  # Φ is fixed: its gradient reaches only the actor
    try:
        for _ in range(fit.steps):
            s = x[torch.randint(0, len(x), (fit.batch,), generator=gen)]
            a = actor(s)
            gain = torch.sigmoid(potential.logits(moved(s, a, max_dpos))) - torch.sigmoid(
                potential.logits(s)
            )
            loss = -gain.mean() + fit.kappa * a.abs().sum(-1).mean() / fit.bound
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        potential.requires_grad_(True)
    return actor.eval()


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
    actor: ActorFit = ActorFit(),
    seed: int = 0,
    eval_seed: int = 200_000,
    fit_steps: int = 4000,
    progress: bool = False,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """One row per iteration (0: ``policy`` alone): the env steps Φ was fitted on, the success
    of the improved policy over ``eval_episodes`` episodes seeded from ``eval_seed``, and the
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
        improved = fit_actor(fit_potential(data, fit_steps, seed), data, max_dpos, actor, seed)

        evaluation = rollouts(
            env, policy, eval_episodes, eval_seed, improve=improved.correction, progress=progress,
            desc="eval",
        )  # fmt: skip
        rows.append(
            {
                "iteration": it,
                "env_steps": int(sum(len(s) for s, _ in data)),
                "rollout_success": _rate(newest),
                "success": _rate(evaluation),
            }
        )
        report(rows[-1])
        if it < iterations:  # the next iteration's data: this improved policy's rollouts
            newest = rollouts(
                env, policy, episodes_per_iteration, data_seed + 10_000 * (it + 1),
                noise_std=noise_std, improve=improved.correction, progress=progress,
                desc=f"iteration {it + 1}",
            )  # fmt: skip
            data += newest
    return rows


def _states(episodes: Sequence[Episode]) -> torch.Tensor:
    """(N, STATE_DIM) float32: every state of ``episodes``, in order."""
    return torch.from_numpy(np.concatenate([s for s, _ in episodes]).astype(np.float32))


def _rate(episodes: Sequence[Episode]) -> float:
    return float(np.mean([ok for _, ok in episodes])) if episodes else 0.0
