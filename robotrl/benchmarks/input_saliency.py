"""What a residual reads: how much its correction moves with each of its inputs.

A residual's network reads the state features and the base's action. :func:`record_inputs`
runs a residual policy on seeded episodes and keeps the inputs its agent read at every step;
:func:`input_sensitivity` moves one input entry at a time by a fraction of that entry's spread
over those inputs and measures the mean change of the residual by central differences through
the agent's own ``act``, so every :class:`~robotrl.algos.residual_policy.ResidualActor` works,
differentiable or not; :func:`input_shares` sums the entries of each input key and normalises.
A key with a large share is one the correction changes with over the states the policy visits;
a key with a share near zero could be left out of the agent's inputs.

The spread is the interquartile range / 1.349 (the standard deviation of a normal with that
range), not the standard deviation: contact makes the wrist wrench spike to hundreds of the
demos' standard deviations for a few steps, which would otherwise dominate.

Units: inputs are the agent's features (standardised state, objects relative to the TCP) and
the base's action in normalised action units; a sensitivity is residual action units per
spread of its input, averaged over the action dimensions and the recorded steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from robotrl.algos.relative_features import TCP_KEY
from robotrl.algos.residual_policy import ResidualActor, ResidualPolicy
from robotrl.evaluation import EvalResult, evaluate

BASE_ACTION = "base_action"


def input_names(featurizer: Any, action_dim: int) -> list[str]:
    """The key each entry of the agent's input (features, then the base's action) comes from:
    a state key per entry, ``<object key> - <TCP key>`` for relative positions,
    ``perceived`` for a VLA's scene estimate, ``base_action`` for the last ``action_dim``."""
    state = getattr(featurizer, "state", featurizer)
    names = [k for k in state.keys for _ in range(state.dims[k])]
    names += [f"{k} - {TCP_KEY}" for k in getattr(featurizer, "objects", []) for _ in range(3)]
    names += ["perceived"] * (int(featurizer.dim) - len(names))
    return names + [BASE_ACTION] * action_dim


class _Recording:
    """A residual agent that keeps every (features, base action) batch it is asked to act on."""

    def __init__(self, agent: ResidualActor) -> None:
        self.agent, self.obs_dim, self.act_dim = agent, agent.obs_dim, agent.act_dim
        self.obs: list[np.ndarray] = []
        self.base: list[np.ndarray] = []

    def act(
        self,
        obs: np.ndarray,
        base: np.ndarray,
        *,
        explore: bool,
        rng: np.random.Generator | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        self.obs.append(np.array(obs, np.float32))
        self.base.append(np.array(base, np.float32))
        return self.agent.act(obs, base, explore=explore, rng=rng)


def record_inputs(
    policy: ResidualPolicy, env: Any, episodes: int, *, seed: int = 0, progress: bool = False
) -> tuple[np.ndarray, np.ndarray, EvalResult]:
    """Evaluate ``policy`` (deterministic) on ``env`` for ``episodes`` episodes, episode i reset
    with ``seed + i`` (:func:`robotrl.evaluation.evaluate`), keeping what its agent read.

    Returns:
        the agent's features (N, O) and base actions (N, A) at every step of every episode,
        and the evaluation's result.
    """
    recording = _Recording(policy.agent)
    runner = ResidualPolicy(recording, policy.base, policy.featurizer, policy.execute_horizon)
    result = evaluate(env, runner, episodes, seed=seed, progress=progress, desc="saliency")
    return np.concatenate(recording.obs), np.concatenate(recording.base), result


def spread(x: np.ndarray) -> np.ndarray:
    """(D,) robust spread of each column of ``x`` (N, D): interquartile range / 1.349."""
    q25, q75 = np.percentile(x, [25.0, 75.0], axis=0)
    return (q75 - q25) / 1.349


def input_sensitivity(
    agent: ResidualActor, obs: np.ndarray, base: np.ndarray, step: float = 0.1
) -> np.ndarray:
    """(O + A,) mean |change of the residual| per input entry when that entry alone moves by
    ``step`` of its spread either way, divided by ``2 * step``: residual action units per
    spread. Entries without spread (constant over the recorded steps) get 0.

    Args:
        obs: (N, O) features and base: (N, A) base actions the agent acted on.
    """
    if obs.ndim != 2 or base.ndim != 2 or len(obs) != len(base) or len(obs) == 0:
        raise ValueError(
            f"need obs (N, O) and base (N, A) with the same N > 0, got {obs.shape} and {base.shape}"
        )
    if not step > 0:
        raise ValueError(f"step must be > 0, got {step}")
    x = np.concatenate([obs, base], axis=-1).astype(np.float32)
    o, width = obs.shape[1], spread(x)
    out = np.zeros(x.shape[1])
    for j in np.flatnonzero(width > 0):
        column, moved = x[:, j].copy(), []
        for sign in (1.0, -1.0):
            x[:, j] = column + sign * step * width[j]
            moved.append(agent.act(x[:, :o], x[:, o:], explore=False)[1])
        x[:, j] = column
        out[j] = float(np.mean(np.abs(moved[0] - moved[1]))) / (2.0 * step)
    return out


def input_shares(sensitivity: np.ndarray, names: Sequence[str]) -> dict[str, float]:
    """Each name's share of the summed sensitivity (its entries summed), largest first; all
    zero when the residual moves with no input."""
    if len(names) != len(sensitivity):
        raise ValueError(f"{len(names)} names for {len(sensitivity)} input entries")
    per: dict[str, float] = {}
    for name, s in zip(names, sensitivity, strict=True):
        per[name] = per.get(name, 0.0) + float(s)
    total = sum(per.values())
    shares = {k: (v / total if total > 0 else 0.0) for k, v in per.items()}
    return dict(sorted(shares.items(), key=lambda kv: -kv[1]))
