"""A trained residual on its frozen base as one policy: what ``robotrl eval`` rolls out for a
``robotrl train-rl`` checkpoint, and what the training run records its videos with.

The executed action is ``clip(a_b + a_r(s, a_b), -1, 1)`` with the base's chunk queue giving
``a_b`` (Da,) and the deterministic residual (no exploration noise) giving ``a_r``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import torch

from policies.registry import set_noise_scale
from robotrl.algos.agent_checkpoint import checkpoint_kind, load_context
from robotrl.algos.residual import Featurizer, load_agent
from robotrl.algos.residual_ppo import load_residual_ppo
from robotrl.algos.success_potential import load_potential
from robotrl.chunk_runner import ChunkRunner


class ResidualActor(Protocol):
    """What acts as a residual on a base: the off-policy
    :class:`~robotrl.algos.residual.ResidualAgent` and the on-policy
    :class:`~robotrl.algos.residual_ppo.ResidualPPOAgent`, and the success potential's actor
    :class:`~robotrl.algos.success_potential.PotentialResidual`."""

    obs_dim: int
    act_dim: int

    def act(
        self,
        obs: np.ndarray,
        base: np.ndarray,
        *,
        explore: bool,
        rng: np.random.Generator | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Executed actions (B, A) in [-1, 1] and residuals (B, A); obs (B, O), base (B, A)."""
        ...


class ZeroPolicy:
    """A chunk policy that always proposes the zero action, with the observation keys and
    horizons of ``like``: the base of a residual trained from scratch (``train-rl algo=rlpd``),
    whose actor then is the whole policy."""

    def __init__(self, like: Any) -> None:
        self.config = like.config
        self.obs_horizon, self.action_horizon = like.obs_horizon, like.action_horizon
        self.action_dim = like.action_dim

    def reset(self) -> None:
        """Stateless."""

    def eval(self) -> ZeroPolicy:
        return self

    def parameters(self) -> list[torch.nn.Parameter]:
        return []

    def predict_chunk(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        b = next(iter(obs.values())).shape[0]
        return torch.zeros(b, self.action_horizon, self.action_dim)


class ResidualRunner:
    """Base + deterministic residual for ``num_envs`` envs at once, with the
    :class:`~robotrl.chunk_runner.ChunkRunner` interface (``reset(env_ids)``,
    ``act(obs) -> (N, Da)``) that :func:`robotrl.evaluation.evaluate_vector` drives.

    Args:
        agent: the trained residual. base: the frozen chunk policy it was trained on.
        featurizer: the agent's state features. execute_horizon: actions run per base chunk.
        num_envs: N.
    """

    def __init__(
        self,
        agent: ResidualActor,
        base: Any,
        featurizer: Featurizer,
        execute_horizon: int,
        num_envs: int = 1,
    ) -> None:
        self.agent, self.base, self.featurizer = agent, base, featurizer
        self.execute_horizon = execute_horizon
        self.chunks = ChunkRunner(base, num_envs, execute_horizon)
        self.last_residuals = np.zeros((num_envs, agent.act_dim), np.float32)  # (N, Da)

    def reset(self, env_ids: Sequence[int] | None = None) -> None:
        self.chunks.reset(env_ids)

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """Executed actions (N, Da) for a batched observation ``{key: (N, ...)}``."""
        a, self.last_residuals = self.agent.act(
            self.featurizer(obs), self.chunks.act(obs), explore=False
        )
        return a

    def vector_runner(self, num_envs: int) -> ResidualRunner:
        """The same policy for ``num_envs`` envs (its own chunk queues)."""
        return ResidualRunner(
            self.agent, self.base, self.featurizer, self.execute_horizon, num_envs
        )


class ResidualPolicy(ResidualRunner):
    """One env's ``EpisodePolicy`` (``reset()``, ``__call__(obs) -> (Da,)``): base + residual,
    the :class:`ResidualRunner` of one env."""

    @property
    def last_residual(self) -> np.ndarray:
        """(Da,) residual of the last action."""
        return self.last_residuals[0]

    def __call__(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.act({k: np.asarray(v)[None] for k, v in obs.items()})[0]


RESIDUAL_KINDS = ("residual", "residual_ppo", "potential")


def is_residual_checkpoint(directory: str | os.PathLike[str]) -> bool:
    """True when ``directory`` holds a ``robotrl train-rl algo=residual|rlpd|residual_ppo|
    potential`` checkpoint."""
    return checkpoint_kind(directory) in RESIDUAL_KINDS


def load_residual_policy(
    directory: str | os.PathLike[str], base_checkpoint: str | None = None
) -> tuple[ResidualPolicy, dict[str, Any]]:
    """The residual checkpoint at ``directory`` on its base; returns ``(policy, base meta)``
    with the run's task and Te. The base samples with the initial-noise scale it was trained
    with (``base_noise_scale``: 0, its mean noise, unless the run set another).

    Args:
        base_checkpoint: the base's checkpoint (None: the path the training run recorded;
            give it when the base has moved since).
    """
    agent: ResidualActor
    kind = checkpoint_kind(directory)
    if kind == "residual_ppo":
        agent, meta = load_residual_ppo(directory)
    elif kind == "potential":
        agent, meta = load_potential(directory)
    else:
        agent, meta = load_agent(directory)
    ctx = load_context(directory, meta, agent.obs_dim, "residual", base_checkpoint)
    if meta.get("from_scratch"):  # algo=rlpd
        base: Any = ZeroPolicy(ctx.base)
    else:
        base = ctx.base  # runs written before the scale was recorded sampled their base
        set_noise_scale(base, float(meta.get("base_noise_scale", 1.0)), "base_noise_scale")
    return ResidualPolicy(agent, base, ctx.featurizer, ctx.execute_horizon), ctx.meta
