"""DSRL: RL in the latent-noise space of a frozen flow / diffusion / VLA sampler (arXiv 2506.15799).

The base's sampler maps an observation and an initial noise ``w`` (Ta, Da) to an action chunk;
it is deterministic given ``w`` (flow ODE, DDIM with eta = 0). DSRL leaves the base untouched
and trains a SAC agent whose *action* is that noise:

    w = bound * tanh(u),  u ~ N(mu(s), sigma(s)^2)            (the latent policy, D = Ta * Da)
    chunk = base(s, w);   the first Te actions are executed     (one latent step)
    R = sum_k gamma^k r_k over the executed steps,  discount gamma^Te  (0 at termination)
    Q-target y = R + discount * (min_{2 heads} Q'(s', w') - alpha * log pi(w' | s') / D)
    actor loss = mean(alpha * log pi(w | s) / D - mean_e Q_e(s, w)),  alpha tuned to an entropy

The entropy terms use the log-density per noise dimension (``log pi / D``): with D = Ta * Da in
the hundreds, the summed entropy bonus would outweigh a sparse success reward of 1 by two orders
of magnitude and the critic would learn the bonus instead of the task.

The base is a black box: no gradient passes through it, so the same agent steers any policy
with a ``predict_chunk(obs, noise=...)``. The latent actor's last layer starts at zero, so the
untrained agent samples ``w`` like the base's own prior (``bound * tanh`` of a unit Gaussian)
and its deterministic action ``w = 0`` is the base's mean-noise plan.

Observations reach the agent as standardised state features (B, O) of the observation at which
the chunk is planned (:class:`robotrl.algos.residual.StateFeaturizer`).
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from policies.checkpoint import CONFIG, CheckpointError, load_into, read_doc, save_module
from robotrl.algos.agent_checkpoint import checkpoint_kind, load_context
from robotrl.algos.networks import EnsembleCritic, mlp
from robotrl.algos.residual import Featurizer


@dataclass
class DSRLConfig:
    """Hyperparameters of the latent-noise SAC agent.

    Attributes:
        bound: largest |w| per noise dimension. The base was trained on unit Gaussian noise,
            whose norm is about sqrt(D); every w with |w_i| <= 1 stays within that norm, while
            a latent actor that drifts to +-1.5 in every dimension feeds the base noise it has
            never seen (docs/rl_methods.md: a perfect lift base then fails).
        hidden, layers: width and hidden layers of the actor and critic MLPs.
        ensemble: critic heads E; the target is the min over ``target_heads`` random heads.
        layer_norm: LayerNorm in the actor and critic MLPs.
        gamma: discount per env step (a latent step of Te env steps discounts gamma^Te).
        tau: Polyak rate of the target critics.
        actor_lr, critic_lr, alpha_lr: Adam learning rates.
        init_alpha: initial entropy temperature (of the per-dimension log-density).
        target_entropy: entropy target per noise dimension [nats].
        batch_size: latent transitions per update. utd: updates per latent transition.
        init_log_std: log std of the untrained actor (0: samples like the base's prior).
    """

    bound: float = 1.0
    hidden: int = 256
    layers: int = 2
    ensemble: int = 2
    target_heads: int = 2
    layer_norm: bool = True
    gamma: float = 0.99
    tau: float = 0.005
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    alpha_lr: float = 3e-4
    init_alpha: float = 0.01
    target_entropy: float = -0.5
    batch_size: int = 256
    utd: int = 8
    init_log_std: float = 0.0


LOG_STD_MIN, LOG_STD_MAX = -5.0, 1.0


class DSRLAgent(nn.Module):
    """Latent tanh-Gaussian actor, critic ensemble over (features, noise), temperature.

    Args:
        obs_dim: O. noise_shape: (Ta, Da) of the base's initial noise. cfg: hyperparameters.
        seed: torch seed for the init.
    """

    def __init__(
        self, obs_dim: int, noise_shape: tuple[int, int], cfg: DSRLConfig, seed: int = 0
    ) -> None:
        super().__init__()
        if cfg.target_heads > cfg.ensemble:
            raise ValueError(f"target_heads {cfg.target_heads} > ensemble {cfg.ensemble}")
        if cfg.bound <= 0:
            raise ValueError(f"bound must be > 0, got {cfg.bound}")
        torch.manual_seed(seed)
        self.cfg, self.obs_dim = cfg, obs_dim
        self.noise_shape = (int(noise_shape[0]), int(noise_shape[1]))
        d = self.noise_shape[0] * self.noise_shape[1]
        self.latent_dim = d
        self.actor = mlp(obs_dim, 2 * d, cfg.hidden, cfg.layers, cfg.layer_norm)
        last = self.actor[-1]
        assert isinstance(last, nn.Linear)
        nn.init.zeros_(last.weight)  # untrained: w ~ bound * tanh(N(0, exp(init_log_std)^2))
        with torch.no_grad():
            last.bias.zero_()
            last.bias[d:] = cfg.init_log_std
        self.critic = EnsembleCritic(
            obs_dim, d, cfg.hidden, cfg.layers, cfg.ensemble, cfg.layer_norm
        )
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(cfg.init_alpha)))
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.actor_lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=cfg.alpha_lr)
        self.updates = 0

    def config_dict(self) -> dict[str, Any]:
        return {"obs_dim": self.obs_dim, "noise_shape": list(self.noise_shape), **asdict(self.cfg)}

    # ------------------------------------------------------------------ acting
    def sample(
        self, obs: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Noise ``w`` (B, D) in [-bound, bound] and its log-density per noise dimension (B,)
        under the actor (deterministic: ``bound * tanh(mu)``, log-density 0)."""
        out = self.actor(obs)
        mu, log_std = out.chunk(2, dim=-1)
        if deterministic:
            return self.cfg.bound * torch.tanh(mu), torch.zeros(obs.shape[0])
        log_std = log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
        std = log_std.exp()
        u = mu + std * torch.randn_like(mu)
        w = torch.tanh(u)
        # N(u; mu, std) with the change of variables of tanh and the bound
        logp = (-0.5 * ((u - mu) / std) ** 2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        logp = logp - (2 * (math.log(2) - u - nn.functional.softplus(-2 * u))).sum(-1)
        logp = logp / self.latent_dim - math.log(self.cfg.bound)
        return self.cfg.bound * w, logp

    @torch.no_grad()
    def act(self, obs: np.ndarray, *, explore: bool) -> np.ndarray:
        """Latent actions (B, D) float32 for features (B, O)."""
        w, _ = self.sample(torch.as_tensor(obs, dtype=torch.float32), deterministic=not explore)
        return w.numpy().astype(np.float32)

    def to_noise(self, w: np.ndarray) -> np.ndarray:
        """The base's initial noise (B, Ta, Da) for latent actions (B, D)."""
        return w.reshape(-1, *self.noise_shape)

    # ------------------------------------------------------------------ learning
    def update(self, batch: Mapping[str, Any]) -> dict[str, float]:
        """One SAC update on a replay batch: ``obs``/``next_obs`` dicts holding ``features``
        (B, O), ``action`` (B, D) the noise, ``reward`` (B,) the latent step's discounted
        return, ``discount`` (B,) gamma^Te (0 at termination)."""
        cfg = self.cfg
        obs = torch.as_tensor(batch["obs"]["features"])
        w = torch.as_tensor(batch["action"])
        reward = torch.as_tensor(batch["reward"])
        discount = torch.as_tensor(batch["discount"])
        next_obs = torch.as_tensor(batch["next_obs"]["features"])
        alpha = self.log_alpha.exp().detach()

        with torch.no_grad():
            next_w, next_logp = self.sample(next_obs)
            q_next = self.critic_target(next_obs, next_w)  # (E, B)
            heads = torch.randperm(cfg.ensemble)[: cfg.target_heads]
            v_next = q_next[heads].min(dim=0).values - alpha * next_logp
            y = reward + discount * v_next
        q = self.critic(obs, w)
        critic_loss = ((q - y[None]) ** 2).mean(dim=1).sum() / cfg.ensemble
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()

        new_w, logp = self.sample(obs)
        q_pi = self.critic(obs, new_w).mean(dim=0)
        actor_loss = (alpha * logp - q_pi).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()

        alpha_loss = -(self.log_alpha * (logp.detach() + cfg.target_entropy)).mean()
        self.alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_opt.step()

        with torch.no_grad():
            for t, s in zip(self.critic_target.parameters(), self.critic.parameters(), strict=True):
                t.lerp_(s, cfg.tau)
        self.updates += 1
        return {
            "critic_loss": critic_loss.item(),
            "q_mean": q.mean().item(),
            "actor_loss": actor_loss.item(),
            "alpha": float(alpha),
            "entropy_per_dim": float(-logp.mean().item()),
        }


class SteeredPolicy:
    """The frozen ``base`` driven by a :class:`DSRLAgent`: a chunk policy (for
    :class:`robotrl.chunk_runner.ChunkRunner`) whose ``predict_chunk`` picks the initial noise
    with the agent. ``explore``: sample the latent policy (else its mean). After each call,
    ``last_features`` (B, O) and ``last_noise`` (B, Ta, Da) hold what was planned from.

    Args:
        agent: the latent agent. base: frozen policy with ``predict_chunk(obs, noise=)``.
        featurizer: features of an observation window (``from_window``): a
            :class:`~robotrl.algos.residual.StateFeaturizer` or a
            :class:`~robotrl.algos.perception_features.PerceptionFeaturizer`.
    """

    def __init__(self, agent: DSRLAgent, base: Any, featurizer: Featurizer, explore: bool) -> None:
        self.agent, self.base, self.featurizer, self.explore = agent, base, featurizer, explore
        self.config = base.config
        self.obs_horizon, self.action_horizon = base.obs_horizon, base.action_horizon
        self.action_dim = base.action_dim
        self.tokenizer = getattr(base, "tokenizer", None)
        self.last_features = np.zeros((0, featurizer.dim), np.float32)
        self.last_latent = np.zeros((0, agent.latent_dim), np.float32)

    def reset(self) -> None:
        self.base.reset()

    @torch.no_grad()
    def predict_chunk(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """(B, Ta, Da) actions planned from the agent's noise for an observation window."""
        feats = self.featurizer.from_window(obs)
        w = self.agent.act(feats, explore=self.explore)
        self.last_features, self.last_latent = feats, w
        return self.base.predict_chunk(obs, noise=torch.from_numpy(self.agent.to_noise(w)))


def save_dsrl(agent: DSRLAgent, directory: str | os.PathLike[str], meta: dict[str, Any]) -> Path:
    """DSRL agent as a robotrl checkpoint (``meta`` should name the base)."""

    return save_module(
        agent, directory, {"agent": "dsrl", "config": agent.config_dict(), "meta": meta}
    )


def load_dsrl(directory: str | os.PathLike[str]) -> tuple[DSRLAgent, dict[str, Any]]:
    """Rebuild a saved DSRL agent; returns ``(agent, meta)``."""

    doc = read_doc(directory, "DSRL checkpoint")
    if doc.get("agent") != "dsrl":
        raise CheckpointError(f"{Path(directory) / CONFIG} is not a DSRL agent checkpoint")
    cfg = dict(doc["config"])
    obs_dim, noise_shape = cfg.pop("obs_dim"), cfg.pop("noise_shape")
    agent = DSRLAgent(obs_dim, tuple(noise_shape), DSRLConfig(**cfg))  # type: ignore[arg-type]
    load_into(agent, directory)
    return agent, dict(doc.get("meta") or {})


def is_dsrl_checkpoint(directory: str | os.PathLike[str]) -> bool:
    """True when ``directory`` holds a ``robotrl train-rl algo=dsrl`` checkpoint."""

    return checkpoint_kind(directory) == "dsrl"


def load_steered_policy(
    directory: str | os.PathLike[str], base_checkpoint: str | None = None
) -> tuple[SteeredPolicy, dict[str, Any]]:
    """The DSRL checkpoint at ``directory`` steering its base (mean noise, no exploration), a
    chunk policy; returns ``(policy, base meta)`` with the run's task and Te.

    Args:
        base_checkpoint: the base's checkpoint (None: the path the training run recorded).
    """

    agent, meta = load_dsrl(directory)
    ctx = load_context(directory, meta, agent.obs_dim, "DSRL agent", base_checkpoint)
    sampled = (ctx.base.action_horizon, ctx.base.action_dim)
    if sampled != agent.noise_shape:
        raise CheckpointError(
            f"{directory}: the agent steers noise {agent.noise_shape}, its base samples {sampled}"
        )
    return SteeredPolicy(agent, ctx.base, ctx.featurizer, explore=False), ctx.meta
