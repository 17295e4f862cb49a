"""Residual off-policy RL on a frozen chunked base policy (ResFiT; docs/algorithms.md).

The base (any :class:`robotrl.types.ChunkPolicy`, frozen) proposes ``a_b`` from its chunk
queue; a small deterministic actor adds ``a_r = scale * tanh(f(s, a_b))`` and the robot executes
``a = clip(a_b + a_r, -1, 1)``. The actor's last layer starts at zero, so before any update the
executed policy IS the base policy. A TD3-style learner trains ``f`` against an ensemble of
LayerNorm critics on the executed action:

    y = R_n + discount * min_{2 random heads} Q'(s', clip(a_b' + a_r'(s', a_b') + eps, -1, 1))
    critic loss = sum_e (Q_e(s, a) - y)^2 / E,    actor loss = -mean_e Q_e(s, clip(a_b + a_r))

with target smoothing noise ``eps ~ clip(N(0, target_noise^2), +-target_noise_clip)``,
n-step returns from the replay buffer and Polyak-averaged targets. Batches mix demo and online
transitions (RLPD symmetric sampling; see :class:`robotrl.datasets.MixedReplay`).

Observations reach the agent as flat feature vectors ``obs`` (B, O) (see
:class:`StateFeaturizer`) plus the base action ``base`` (B, A).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from policies.checkpoint import CONFIG, CheckpointError, load_into, read_doc, save_module
from robotrl.algos.networks import EnsembleCritic, mlp
from robotrl.datasets import EpisodeStore, compute_stats


@dataclass
class ResidualConfig:
    """Hyperparameters (defaults: ResFiT's, with the actor lr raised for CPU budgets).

    Attributes:
        scale: bound of the residual [action units]; ResFiT uses 0.1 (0.2 in paper runs).
        hidden: width of actor and critic MLPs. actor_layers, critic_layers: hidden layers.
        ensemble: critic heads E. target_heads: heads whose min forms the target.
        layer_norm: LayerNorm in the critics (and actor).
        gamma: discount. n_step: n of the returns (set in the replay buffer). tau: Polyak rate.
        critic_lr, actor_lr: Adam learning rates. ResFiT's actor lr is 1e-6..5e-6; the one here
            is larger so that the imitation terms below fit within a budget of thousands of env
            steps (a human's corrections are learnt too slowly at ResFiT's).
        grad_clip: max gradient norm. actor_delay: critic updates per actor update.
        explore_std: exploration noise on the executed action (truncated at 2 std).
        target_noise, target_noise_clip: TD3 target policy smoothing on the residual.
        batch_size: transitions per update. utd: updates per env step.
        demo_fraction: share of each batch from the demo buffer.
        residual_l2: weight of ``mean ||a_r||^2`` in the actor loss. Dimensions where the
            critic gives no consistent gradient then stay near the base instead of drifting
            to wherever the critic extrapolates (0 disables; ResFiT relies on a small scale
            and actor lr instead, which needs longer training than a CPU budget allows).
        intervention_bc: weight of an imitation term on human-intervention transitions,
            ``mean_h ||a_r - clip(a_h - a_b, +-scale)||^2`` (batches carry ``obs["human"]``).
            HIL-SERL leaves human data to the critic alone; with a residual actor whose
            gradient only sees actions near ``a_b + a_r``, corrections far from it are learnt
            slowly, so the actor also regresses onto them (as HG-DAgger / ConRFT do).
        demo_bc: weight of the same imitation term on demonstration transitions (batches carry
            ``obs["demo"]``): TD3+BC's behaviour-cloning regulariser, here on the residual,
            ``mean_d ||a_r - clip(a_d - a_b, +-scale)||^2``: the residual also learns how the
            demos correct the base at their states, which holds it near corrections the critic
            alone does not resolve from a sparse reward. 0 leaves demos to the critic alone, as
            ResFiT does.
        dims: action dimensions the residual may change (None: all). The others execute the
            base's action unchanged, without exploration noise: e.g. ``[0, 1, 2]`` (translation
            only) where the critic has no consistent gradient on the rotations.
        base_input: the actor reads the base action ``a_b`` next to the state (ResFiT). With
            False it reads the state only, so it cannot follow the base's sampling noise: an
            imitation target ``a_d - a_b`` then teaches it the mean correction at a state.
    """

    scale: float = 0.1
    hidden: int = 128
    actor_layers: int = 2
    critic_layers: int = 2
    ensemble: int = 10
    target_heads: int = 2
    layer_norm: bool = True
    gamma: float = 0.99
    n_step: int = 3
    tau: float = 0.005
    critic_lr: float = 1e-4
    actor_lr: float = 1e-4
    grad_clip: float = 1.0
    actor_delay: int = 2
    explore_std: float = 0.05
    target_noise: float = 0.1
    target_noise_clip: float = 0.3
    batch_size: int = 128
    utd: int = 1
    demo_fraction: float = 0.5
    residual_l2: float = 0.1
    intervention_bc: float = 10.0
    demo_bc: float = 10.0
    dims: list[int] | None = None
    base_input: bool = True


class Featurizer(Protocol):
    """What an agent reads observations through: a :class:`StateFeaturizer`, or a
    :class:`~robotrl.algos.relative_features.RelativeFeaturizer` or
    :class:`~robotrl.algos.perception_features.PerceptionFeaturizer` over one."""

    @property
    def dim(self) -> int:
        """O, the features per observation."""
        ...

    @property
    def raw_keys(self) -> list[str]:
        """The observation entries :meth:`__call__` reads."""
        ...

    def __call__(self, obs: Mapping[str, Any]) -> np.ndarray:
        """(..., O) float32 features of an observation (or a batch)."""
        ...

    def from_window(self, window: Mapping[str, Any]) -> np.ndarray:
        """(B, O) features of the latest step of a policy's observation window."""
        ...


class StateFeaturizer:
    """Concatenates chosen ``state/*`` entries of an observation dict and standardises them.

    Args:
        keys: state keys in order. stats: ``{key: {"mean", "std"}}``.
    """

    def __init__(self, keys: Sequence[str], stats: Mapping[str, Mapping[str, np.ndarray]]) -> None:
        missing = [k for k in keys if k not in stats]
        if missing:
            raise KeyError(f"no statistics for {missing}")
        self.keys = list(keys)
        self.dims = {k: int(np.size(stats[k]["mean"])) for k in keys}  # entries per key
        self.mean = np.concatenate([np.asarray(stats[k]["mean"], np.float32) for k in keys])
        std = np.concatenate([np.asarray(stats[k]["std"], np.float32) for k in keys])
        self.inv_std = 1.0 / np.maximum(std, 1e-3)

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    @property
    def raw_keys(self) -> list[str]:
        """The observation entries :meth:`__call__` reads."""
        return self.keys

    def __call__(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """(..., O) float32 features of one observation (or a batch with leading dims)."""
        x = np.concatenate([np.asarray(obs[k], np.float32) for k in self.keys], axis=-1)
        return ((x - self.mean) * self.inv_std).astype(np.float32)

    def from_window(self, window: Mapping[str, Any]) -> np.ndarray:
        """(B, O) features of the latest step of a policy's (B, To, ...) observation window."""
        return self({k: np.asarray(window[k][:, -1]) for k in self.keys})


def feature_stats(
    keys: Sequence[str], base: Any, store: EpisodeStore | None = None, episodes: Any = None
) -> dict[str, dict[str, np.ndarray]]:
    """``{key: {"mean", "std"}}`` for a :class:`StateFeaturizer`: of the demo ``store``'s
    ``episodes`` (a boolean mask; None: all) when given, else the base's own normaliser."""
    if store is not None:
        return compute_stats(store, list(keys), episodes)
    affine = {k: base.normalizer.affine(k) for k in keys}
    return {k: {"mean": off, "std": 1.0 / scale} for k, (off, scale) in affine.items()}


def stats_meta(stats: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """Feature statistics as a checkpoint's metadata keeps them (``{key: {"mean", "std"}}``
    as lists), from which :class:`StateFeaturizer` is rebuilt at load."""
    return {
        k: {s: np.asarray(v).tolist() for s, v in st.items() if s in ("mean", "std")}
        for k, st in stats.items()
    }


def _truncated_normal(shape: tuple[int, ...], std: float, rng: np.random.Generator) -> np.ndarray:
    return np.clip(rng.normal(0.0, std, shape), -2 * std, 2 * std)


class ResidualAgent(nn.Module):
    """Residual actor + critic ensemble + their targets and optimisers.

    Args:
        obs_dim: O. act_dim: A. cfg: hyperparameters. seed: torch seed for the init.
    """

    def __init__(self, obs_dim: int, act_dim: int, cfg: ResidualConfig, seed: int = 0) -> None:
        super().__init__()
        if cfg.target_heads > cfg.ensemble:
            raise ValueError(f"target_heads {cfg.target_heads} > ensemble {cfg.ensemble}")
        torch.manual_seed(seed)
        self.cfg, self.obs_dim, self.act_dim = cfg, obs_dim, act_dim
        mask = torch.ones(act_dim)
        if cfg.dims is not None:
            dims = [int(d) for d in cfg.dims]
            if not dims or any(not 0 <= d < act_dim for d in dims) or len(set(dims)) < len(dims):
                raise ValueError(f"dims must be distinct indices in [0, {act_dim}), got {dims}")
            mask = torch.zeros(act_dim)
            mask[dims] = 1.0
        self.mask = mask  # (A,) 1 where the residual acts (not a parameter: it follows cfg)
        self.actor = mlp(obs_dim + act_dim, act_dim, cfg.hidden, cfg.actor_layers, cfg.layer_norm)
        last = self.actor[-1]
        assert isinstance(last, nn.Linear)  # mlp() ends in a Linear layer
        nn.init.zeros_(last.weight)  # step 0: the executed policy is the base policy
        nn.init.zeros_(last.bias)
        self.critic = EnsembleCritic(
            obs_dim, act_dim, cfg.hidden, cfg.critic_layers, cfg.ensemble, cfg.layer_norm
        )
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        # fused: one kernel per step over every tensor (CPU too), instead of a few per tensor
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.actor_lr, fused=True)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr, fused=True)
        self.updates = 0

    def config_dict(self) -> dict[str, Any]:
        return {"obs_dim": self.obs_dim, "act_dim": self.act_dim, **asdict(self.cfg)}

    # ------------------------------------------------------------------ acting
    def residual(self, obs: torch.Tensor, base: torch.Tensor, target: bool = False) -> torch.Tensor:
        """(B, A) residual ``scale * tanh(f(obs, base))``, 0 outside ``cfg.dims``."""
        net = self.actor_target if target else self.actor
        if not self.cfg.base_input:
            base = torch.zeros_like(base)
        return self.cfg.scale * torch.tanh(net(torch.cat([obs, base], dim=-1))) * self.mask

    @torch.no_grad()
    def act(
        self,
        obs: np.ndarray,
        base: np.ndarray,
        *,
        explore: bool,
        rng: np.random.Generator | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Executed actions (B, A) in [-1, 1] and residuals (B, A); obs (B, O), base (B, A)."""
        res = self.residual(
            torch.from_numpy(obs), torch.from_numpy(base.astype(np.float32))
        ).numpy()
        a = base + res
        if explore:
            noise = _truncated_normal(a.shape, self.cfg.explore_std, rng or np.random.default_rng())
            a = a + noise * self.mask.numpy()
        return np.clip(a, -1.0, 1.0).astype(np.float32), res

    # ------------------------------------------------------------------ learning
    def update(
        self, batch: Mapping[str, Any], update_actor: bool | None = None
    ) -> dict[str, float]:
        """One critic update (and an actor update every ``actor_delay``) on a replay batch
        with ``obs``/``next_obs`` dicts holding ``features`` (B, O) and ``base_action`` (B, A),
        ``action`` (B, A), ``reward`` (B,) n-step return, ``discount`` (B,)."""
        cfg = self.cfg
        obs = torch.as_tensor(batch["obs"]["features"])
        base = torch.as_tensor(batch["obs"]["base_action"])
        action = torch.as_tensor(batch["action"])
        reward = torch.as_tensor(batch["reward"])
        discount = torch.as_tensor(batch["discount"])
        next_obs = torch.as_tensor(batch["next_obs"]["features"])
        next_base = torch.as_tensor(batch["next_obs"]["base_action"])

        with torch.no_grad():
            noise = (torch.randn_like(next_base) * cfg.target_noise).clamp(
                -cfg.target_noise_clip, cfg.target_noise_clip
            ) * self.mask
            next_res = self.residual(next_obs, next_base, target=True) + noise
            next_a = (next_base + next_res).clamp(-1.0, 1.0)
            q_next = self.critic_target(next_obs, next_a)  # (E, B)
            heads = torch.randperm(cfg.ensemble)[: cfg.target_heads]
            y = reward + discount * q_next[heads].min(dim=0).values
        q = self.critic(obs, action)
        critic_loss = ((q - y[None]) ** 2).mean(dim=1).sum() / cfg.ensemble
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        nn.utils.clip_grad_norm_(self.critic.parameters(), cfg.grad_clip, foreach=True)
        self.critic_opt.step()
        self.updates += 1
        logs = {"critic_loss": critic_loss.item(), "q_mean": q.mean().item()}

        if update_actor is None:
            update_actor = self.updates % cfg.actor_delay == 0
        if update_actor:
            res = self.residual(obs, base)
            a = (base + res).clamp(-1.0, 1.0)
            q_actor = self.critic(obs, a)  # (E, B)
            actor_loss = -q_actor.mean()
            if cfg.residual_l2 > 0:
                actor_loss = actor_loss + cfg.residual_l2 * (res**2).sum(-1).mean()
            wanted = (action - base).clamp(-cfg.scale, cfg.scale) * self.mask  # imitation target
            for key, weight, log in (
                ("human", cfg.intervention_bc, "intervention_bc"),
                ("demo", cfg.demo_bc, "demo_bc"),
            ):
                flags = batch["obs"].get(key)
                if weight <= 0 or flags is None:
                    continue
                flags = torch.as_tensor(flags, dtype=res.dtype)
                if flags.sum() > 0:
                    imitation = (flags * ((res - wanted) ** 2).sum(-1)).sum() / flags.sum()
                    actor_loss = actor_loss + weight * imitation
                    logs[log] = imitation.item()
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            nn.utils.clip_grad_norm_(self.actor.parameters(), cfg.grad_clip, foreach=True)
            self.actor_opt.step()
            logs["actor_loss"] = actor_loss.item()
            self._soft_update(self.actor_target, self.actor)
        self._soft_update(self.critic_target, self.critic)
        return logs

    @torch.no_grad()
    def _soft_update(self, target: nn.Module, source: nn.Module) -> None:
        torch._foreach_lerp_(list(target.parameters()), list(source.parameters()), self.cfg.tau)


def save_agent(
    agent: ResidualAgent, directory: str | os.PathLike[str], meta: dict[str, Any]
) -> Path:
    """Residual actor + critics as a robotrl checkpoint (``meta`` should name the base)."""

    return save_module(
        agent, directory, {"agent": "residual", "config": agent.config_dict(), "meta": meta}
    )


def load_agent(directory: str | os.PathLike[str]) -> tuple[ResidualAgent, dict[str, Any]]:
    """Rebuild a saved agent; returns ``(agent, meta)``."""

    doc = read_doc(directory, "residual checkpoint")
    if doc.get("agent") != "residual":
        raise CheckpointError(f"{Path(directory) / CONFIG} is not a residual agent checkpoint")
    cfg = dict(doc["config"])
    obs_dim, act_dim = cfg.pop("obs_dim"), cfg.pop("act_dim")
    known = {f.name for f in fields(ResidualConfig)}  # older checkpoints: removed options
    cfg = {k: v for k, v in cfg.items() if k in known}
    agent = ResidualAgent(obs_dim, act_dim, ResidualConfig(**cfg))
    load_into(agent, directory)
    return agent, dict(doc.get("meta") or {})
