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
every episode so far, fit the actor on the new Φ. ``robotrl train-rl algo=potential`` runs it
on a peg_insert base; its checkpoint is the kept actor as a residual on that base
(:class:`PotentialResidual`), which ``robotrl eval`` rolls out like any residual.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from policies.checkpoint import CONFIG, CheckpointError, load_into, read_doc, save_module
from robotrl.algos.kept_agent import best_evaluation
from robotrl.evaluation import EpisodePolicy, evaluate, seeded_torch

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
        self.hidden = int(hidden)
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
        what = "succeeded" if True in outcomes else "failed"
        raise ValueError(
            f"Φ needs successful and failed episodes; all {len(episodes)} {what} (more "
            "episodes, or a base that succeeds now and then)"
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
class PotentialConfig:
    """``robotrl train-rl algo=potential``'s settings (the ``potential`` section).

    Attributes:
        iterations: policy-iteration steps (each: fit Φ and the actor, evaluate and, but
            for the last, roll the improved policy out).
        base_episodes: the base's own rollouts Φ is first fitted on.
        episodes_per_iteration: rollouts of each improved policy added to the data.
        noise_std: independent Gaussian noise on every rollout action [action units].
        potential_steps: AdamW steps of each Φ fit (batches of 1 024 states).
        bound: the largest x-y correction per axis [action units].
        kappa: the price of a correction, per action unit over ``bound`` (an L1 term:
            corrections where Φ's predicted gain is smaller stay at zero).
        actor_steps, batch, lr: Adam's, for the actor.
    """

    iterations: int = 4
    base_episodes: int = 200
    episodes_per_iteration: int = 150
    noise_std: float = 0.005
    potential_steps: int = 4000
    bound: float = 0.05
    kappa: float = 0.02
    actor_steps: int = 3000
    batch: int = 512
    lr: float = 3e-4

    def __post_init__(self) -> None:
        counts = (self.iterations, self.base_episodes, self.episodes_per_iteration,
                  self.potential_steps, self.actor_steps, self.batch)  # fmt: skip
        reals = (self.noise_std, self.bound, self.kappa, self.lr)
        if (
            not all(map(math.isfinite, reals))
            or min(counts) < 1
            or self.bound <= 0
            or (self.lr <= 0 or self.kappa < 0 or self.noise_std < 0)
        ):
            raise ValueError(
                "potential: need counts >= 1 and finite bound > 0, lr > 0, kappa >= 0, "
                f"noise_std >= 0: {self}"
            )


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
    fit: PotentialConfig = PotentialConfig(),
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
        for _ in range(fit.actor_steps):
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


class PotentialResidual(nn.Module):
    """A :class:`PotentialActor` as a residual on its base (the
    :class:`robotrl.algos.residual_policy.ResidualActor` interface): it reads (B, STATE_DIM)
    state vectors and adds its x-y correction to the first two entries of the base's (B,
    act_dim) actions."""

    def __init__(self, actor: PotentialActor, act_dim: int) -> None:
        super().__init__()
        if act_dim < 2:
            raise ValueError(
                f"an x-y correction needs actions of at least 2 entries, not {act_dim}"
            )
        self.actor, self.obs_dim, self.act_dim = actor, STATE_DIM, int(act_dim)

    @torch.no_grad()
    def act(
        self,
        obs: np.ndarray,
        base: np.ndarray,
        *,
        explore: bool = False,
        rng: np.random.Generator | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Executed actions (B, act_dim) in [-1, 1] and residuals (B, act_dim); deterministic
        (``explore`` and ``rng`` are not used)."""
        residual = np.zeros(np.shape(base), np.float32)
        residual[:, :2] = self.actor(torch.as_tensor(np.asarray(obs, np.float32))).numpy()
        return np.clip(base + residual, -1.0, 1.0).astype(np.float32), residual


def save_potential(
    agent: PotentialResidual, directory: str | os.PathLike[str], meta: dict[str, Any]
) -> Path:
    """The actor as a robotrl checkpoint (``meta`` names the base, as a residual's does)."""
    config = {"act_dim": agent.act_dim, "bound": agent.actor.bound, "hidden": agent.actor.hidden}
    return save_module(agent, directory, {"agent": "potential", "config": config, "meta": meta})


def load_potential(directory: str | os.PathLike[str]) -> tuple[PotentialResidual, dict[str, Any]]:
    """Rebuild a saved actor; returns ``(agent, meta)``."""
    doc = read_doc(directory, "success-potential checkpoint")
    if doc.get("agent") != "potential":
        raise CheckpointError(f"{Path(directory) / CONFIG} is not a success-potential checkpoint")
    cfg = doc["config"]
    actor = _untrained(float(cfg["bound"]), int(cfg["hidden"]))  # its statistics: the weights'
    agent = PotentialResidual(actor, int(cfg["act_dim"]))
    load_into(agent, directory)
    return agent.eval(), dict(doc.get("meta") or {})


def still_actor(actor: PotentialActor) -> PotentialActor:
    """``actor`` with its last layer zeroed: it corrects nothing (the base alone)."""
    last = actor.net[-1]
    assert isinstance(last, nn.Linear)
    with torch.no_grad():
        last.weight.zero_()
        last.bias.zero_()
    return actor


class ImprovedPolicy:
    """One env's ``EpisodePolicy``: ``policy`` plus ``actor``'s x-y correction (None: none),
    clipped to [-1, 1]."""

    def __init__(self, policy: EpisodePolicy, actor: PotentialActor | None) -> None:
        self.policy, self.actor = policy, actor

    def reset(self) -> None:
        self.policy.reset()

    def unclipped(self, obs: dict[str, np.ndarray], state: np.ndarray | None = None) -> np.ndarray:
        """(Da,) float32 action before the clip; ``state``: ``obs``'s :func:`state_vector`
        when the caller has it."""
        action = np.array(self.policy(obs), np.float32)
        if self.actor is not None:
            action[:2] += self.actor.correction(state if state is not None else state_vector(obs))
        return action

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.clip(self.unclipped(obs), -1.0, 1.0)


def run_episode(
    env: Any,
    policy: EpisodePolicy,
    seed: int,
    *,
    actor: PotentialActor | None = None,
    noise_std: float = 0.0,
    rng: np.random.Generator | None = None,
    on_step: Callable[[Mapping[str, Any]], None] | None = None,
) -> Episode:
    """One episode of ``policy`` plus ``actor``'s x-y correction (:class:`ImprovedPolicy`) and
    independent noise of ``noise_std`` action units per entry, clipped: its states and
    ``info["success"]``. ``on_step`` gets every step's ``info``."""
    rng = rng if rng is not None else np.random.default_rng(seed)
    improved = ImprovedPolicy(policy, actor)
    obs, _ = env.reset(seed=seed)
    improved.reset()
    states, success, done = [], False, False
    while not done:
        state = state_vector(obs)
        states.append(state)
        action = improved.unclipped(obs, state)
        if noise_std > 0:
            action += rng.normal(0.0, noise_std, action.shape).astype(np.float32)
        obs, _, terminated, truncated, info = env.step(np.clip(action, -1.0, 1.0))
        if on_step is not None:
            on_step(info)
        success |= bool(info.get("success"))
        done = bool(terminated or truncated)
    return np.stack(states), success


def rollouts(
    env: Any,
    policy: EpisodePolicy,
    episodes: int,
    seed: int,
    *,
    actor: PotentialActor | None = None,
    noise_std: float = 0.0,
    max_steps: int | None = None,
    stop: threading.Event | None = None,
    on_step: Callable[[Mapping[str, Any]], None] | None = None,
    progress: bool = False,
    desc: str = "episodes",
) -> list[Episode]:
    """``episodes`` episodes of :func:`run_episode` seeded ``seed + i``; fewer when their steps
    reach ``max_steps`` (no episode starts after that; the last may pass it) or ``stop`` is
    set."""
    rng = np.random.default_rng(seed)
    out: list[Episode] = []
    steps = 0
    for i in tqdm(range(episodes), desc=desc, disable=not progress, leave=False):
        if (max_steps is not None and steps >= max_steps) or (stop is not None and stop.is_set()):
            break
        out.append(
            run_episode(
                env, policy, seed + i, actor=actor, noise_std=noise_std, rng=rng,
                on_step=on_step,
            )
        )  # fmt: skip
        steps += len(out[-1][0])
    return out


@dataclass
class PotentialRun:
    """A policy iteration's result (a :class:`robotrl.metrics.LearnerRun`).

    ``evaluations``: ``env_steps`` (the rollouts' steps so far), ``success_rate`` and, from the
    first iteration on, ``iteration`` and ``rollout_success`` (of the newest rollouts Φ was
    fitted on); the first row is the base's. ``actors``: each iteration's. ``agent``: the kept
    one (the best evaluation's with ``keep_best``, the latest among equals; a still actor when
    none beats the base; the last without). ``episodes``: the rollouts' log rows.
    """

    evaluations: list[dict[str, float]]
    actors: list[PotentialActor]
    agent: PotentialActor
    episodes: list[dict[str, float]]
    env_steps: int
    wall_s: float
    steps_to_target: int | None
    kept_step: int
    interrupted: bool = False
    ended: str = ""  # why the run ended before its last iteration ("": it ran them all)


def policy_iteration(
    env: Any,
    policy: EpisodePolicy,
    config: PotentialConfig = PotentialConfig(),
    *,
    eval_episodes: int = 100,
    eval_seed: int = 200_000,
    seed: int = 0,
    total_steps: int | None = None,
    target_success: float | None = None,
    keep_best: bool = True,
    stop: threading.Event | None = None,
    on_step: Callable[[Mapping[str, Any]], None] | None = None,
    progress: bool = False,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> PotentialRun:
    """Improve ``policy`` (one env's) by ``config.iterations`` steps of policy iteration on Φ.

    Each iteration fits Φ on every episode so far, fits the actor on Φ, evaluates the improved
    policy on ``eval_episodes`` episodes seeded from ``eval_seed``
    (:func:`robotrl.evaluation.evaluate`) and rolls it out for the next iteration's data.
    Rollouts are seeded from ``300 000 + 100 000 * seed`` (clear of ``eval_seed``'s), torch's
    draws too; iteration i's from ``10 000 * i`` on, so runs of seeds s and s + 1 share
    episodes only past nine iterations or 10 000 episodes per iteration. The run ends early,
    saying why in ``ended``, once the rollouts' env steps reach ``total_steps`` (the data ends
    there; the last episode may pass it), an evaluation reaches ``target_success``, ``stop`` is
    set, or the data holds only successes or only failures (Φ has nothing to tell apart).
    ``env.max_dpos``: the env's translation per action unit [m]. ``on_step`` gets every rollout
    step's ``info`` (not the evaluations'); ``report`` every evaluation row as soon as it is
    measured.

    Raises:
        ValueError: ``eval_episodes`` < 1.
    """
    if eval_episodes < 1:
        raise ValueError(f"eval_episodes must be >= 1, got {eval_episodes}")
    start = time.perf_counter()
    data_seed, max_dpos = 300_000 + 100_000 * seed, float(env.max_dpos)
    report = report or (lambda row: None)
    target = float("inf") if target_success is None else float(target_success)

    def evaluated(actor: PotentialActor | None, row: dict[str, Any]) -> bool:
        """Evaluate, report; True when the target is reached."""
        res = evaluate(env, ImprovedPolicy(policy, actor), eval_episodes, seed=eval_seed,
                       progress=progress)  # fmt: skip
        rows.append({**row, "success_rate": res.success_rate})
        report(rows[-1])
        return res.success_rate >= target

    def collect(actor: PotentialActor | None, episodes: int, it: int) -> list[Episode]:
        budget = None if total_steps is None else total_steps - _steps(data)
        with seeded_torch(data_seed + 10_000 * it):
            return rollouts(
                env, policy, episodes, data_seed + 10_000 * it, noise_std=config.noise_std,
                actor=actor, max_steps=budget,
                stop=stop, on_step=on_step, progress=progress,
                desc="base rollouts" if actor is None else f"iteration {it + 1}",
            )  # fmt: skip

    rows: list[dict[str, Any]] = []
    data: list[Episode] = []
    actors: list[PotentialActor] = []
    ended = ""
    if evaluated(None, {"env_steps": 0}):
        ended = "the base met target_success"
    newest = [] if ended else collect(None, config.base_episodes, 0)
    data += newest
    for it in range(1, config.iterations + 1):
        outcomes = {ok for _, ok in data}
        if stop is not None and stop.is_set():
            ended = ended or "stopped on request"
        elif not ended and outcomes != {True, False}:
            what = "succeeded" if outcomes == {True} else "failed"
            cut = total_steps is not None and _steps(data) >= total_steps
            ended = f"all {len(data)} rollouts {what}: Φ has nothing to tell apart" + (
                f" (raise total_steps={total_steps})" if cut else ""
            )
        if ended:
            break
        phi = fit_potential(data, config.potential_steps, seed)
        actors.append(fit_actor(phi, data, max_dpos, config, seed))
        row = {"iteration": it, "env_steps": _steps(data), "rollout_success": _rate(newest)}
        if evaluated(actors[-1], row):
            ended = f"iteration {it} met target_success"
        elif it < config.iterations and total_steps is not None and _steps(data) >= total_steps:
            ended = f"total_steps={total_steps} spent after {it} of {config.iterations} iterations"
        if ended or it == config.iterations:
            break
        newest = collect(actors[-1], config.episodes_per_iteration, it + 1)
        data += newest
    rates = [r["success_rate"] for r in rows]
    kept = best_evaluation(rates) if keep_best else len(rates) - 1
    agent = actors[kept - 1] if kept > 0 else still_actor(_untrained(config.bound))
    log, steps = [], 0
    for states, ok in data:
        steps += len(states)
        log.append({"env_steps": steps, "success": float(ok), "length": len(states),
                    "intervention_rate": 0.0})  # fmt: skip
    hit = next((r["env_steps"] for r in rows if r["success_rate"] >= target), None)
    return PotentialRun(
        evaluations=rows, actors=actors, agent=agent, episodes=log, env_steps=steps,
        wall_s=time.perf_counter() - start, steps_to_target=hit,
        kept_step=int(rows[kept]["env_steps"]),
        interrupted=stop is not None and stop.is_set(), ended=ended,
    )  # fmt: skip


def _untrained(bound: float, hidden: int = 256) -> PotentialActor:
    ones = np.ones(FEATURE_DIM, np.float32)
    return PotentialActor(0 * ones, ones, bound, hidden)


def _states(episodes: Sequence[Episode]) -> torch.Tensor:
    """(N, STATE_DIM) float32: every state of ``episodes``, in order."""
    return torch.from_numpy(np.concatenate([s for s, _ in episodes]).astype(np.float32))


def _steps(episodes: Sequence[Episode]) -> int:
    return int(sum(len(s) for s, _ in episodes))


def _rate(episodes: Sequence[Episode]) -> float:
    return float(np.mean([ok for _, ok in episodes])) if episodes else 0.0
