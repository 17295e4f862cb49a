"""Residual PPO: an on-policy Gaussian residual on a frozen chunked base (as ResiP, Ankile et al.
2024, "From Imitation to Refinement").

The base plans chunks and its queue gives ``a_b`` (Da,) at every env step; the agent adds a
per-step correction drawn from a Gaussian over the normalised residual ``u``:

    u ~ N(mu(s, a_b), diag(sigma^2))        sigma: one learnt std per action dimension
    a = clip(a_b + scale * clip(u, -1, 1), -1, 1)

and learns it by PPO from the task's reward: GAE(lambda) advantages from a value head
``V(s, a_b)``, the clipped ratio objective on the log-density of ``u``. The mean's last layer
starts at zero, so the untrained agent's deterministic action (``u = mu``) is the base's own.

Unlike the off-policy residual (:mod:`robotrl.algos.residual`), no critic has to rank single
actions: the advantage of a step is the return that followed it, less the value of its state,
so a correction that has to be held over a whole approach is credited with what the approach
achieved. It pays with env steps (no replay); in simulation those are cheap. With
``noise_correlation`` the exploration noise ``u - mu`` is held from step to step within an
episode (AR(1)), so an episode can try a correction held over its approach.

Inputs: standardised state features (B, O) (:class:`robotrl.algos.residual.StateFeaturizer` or
a featurizer over it) next to the base action (B, Da).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from policies.checkpoint import CONFIG, CheckpointError, load_into, read_doc, save_module
from robotrl.algos.networks import mlp


@dataclass
class ResidualPPOConfig:
    """Hyperparameters and schedule of ``robotrl train-rl algo=residual_ppo``.

    Attributes:
        scale: bound of the residual [action units], as the off-policy residual's.
        hidden: width of the mean and value MLPs (2 hidden layers, tanh).
        init_std: std of ``u`` before training, in units of ``scale`` (0.5: 0.05 action units
            at the default scale, the off-policy residual's exploration).
        lr: Adam learning rate of the mean, std and value head.
        epochs: passes over each rollout. minibatch_size: env steps per gradient step.
        clip: PPO ratio clip epsilon. value_coef: weight of the value loss.
        grad_clip: max gradient norm. gamma: discount per env step. lam: GAE lambda (0.99:
            a step of the approach is credited mostly with the episode's sparse outcome, not
            with the value head's estimate of it).
        num_envs: envs stepped in this process (their base plans are batched).
        rollout_steps: env steps per env between updates (num_envs * rollout_steps per update).
        total_steps: env-step budget (summed over envs); eval_every: env steps between
            evaluations. On-policy learning needs far more env steps than the off-policy
            residual's 20 000, so its budget is its own.
        noise_correlation: rho of the exploration noise's AR(1) process within an episode
            (0: independent per step). A deviation is held for about ``1 / (1 - rho)`` steps,
            as a correction held over an approach is; PPO's ratios use each step's density
            given the previous step (:meth:`ResidualPPOAgent.conditional`), so they stay exact.
    """

    scale: float = 0.1
    hidden: int = 256
    init_std: float = 0.5
    lr: float = 3e-4
    epochs: int = 5
    minibatch_size: int = 512
    clip: float = 0.2
    value_coef: float = 0.5
    grad_clip: float = 0.5
    gamma: float = 0.99
    lam: float = 0.99
    num_envs: int = 16
    rollout_steps: int = 128
    total_steps: int = 600_000
    eval_every: int = 20_000
    noise_correlation: float = 0.9

    def __post_init__(self) -> None:
        positive = {
            "scale": self.scale, "hidden": self.hidden, "init_std": self.init_std, "lr": self.lr,
            "epochs": self.epochs, "minibatch_size": self.minibatch_size, "clip": self.clip,
            "num_envs": self.num_envs, "rollout_steps": self.rollout_steps,
            "total_steps": self.total_steps, "eval_every": self.eval_every,
        }  # fmt: skip
        bad = {k: v for k, v in positive.items() if not v > 0}
        if bad:
            raise ValueError(f"residual_ppo: these must be > 0: {bad}")
        if not 0 <= self.noise_correlation < 1:
            raise ValueError(f"residual_ppo: need 0 <= noise_correlation < 1, got "
                             f"{self.noise_correlation}")  # fmt: skip
        if not (0 < self.gamma <= 1 and 0 <= self.lam <= 1):
            raise ValueError(f"residual_ppo: need 0 < gamma <= 1 and 0 <= lam <= 1, got "
                             f"gamma={self.gamma}, lam={self.lam}")  # fmt: skip


class ResidualPPOAgent(nn.Module):
    """Gaussian residual policy and value head.

    Args:
        obs_dim: O. act_dim: A (Da). cfg: hyperparameters. seed: torch seed for the init.
    """

    def __init__(self, obs_dim: int, act_dim: int, cfg: ResidualPPOConfig, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.cfg, self.obs_dim, self.act_dim = cfg, obs_dim, act_dim
        d = obs_dim + act_dim
        self.mean = mlp(d, act_dim, cfg.hidden, 2, layer_norm=False, activation=nn.Tanh)
        last = self.mean[-1]
        assert isinstance(last, nn.Linear)
        nn.init.zeros_(last.weight)  # the untrained agent's mean residual is zero
        nn.init.zeros_(last.bias)
        self.log_std = nn.Parameter(torch.full((act_dim,), math.log(cfg.init_std)))
        self.value = mlp(d, 1, cfg.hidden, 2, layer_norm=False, activation=nn.Tanh)
        self.opt = torch.optim.Adam(self.parameters(), lr=cfg.lr, eps=1e-5)

    def config_dict(self) -> dict[str, Any]:
        return {"obs_dim": self.obs_dim, "act_dim": self.act_dim, **asdict(self.cfg)}

    @staticmethod
    def inputs(obs: np.ndarray, base: np.ndarray) -> torch.Tensor:
        """(B, O + A) float32 network input from features (B, O) and base actions (B, A)."""
        return torch.from_numpy(np.concatenate([obs, base], axis=-1).astype(np.float32))

    def distribution(self, x: torch.Tensor) -> torch.distributions.Normal:
        """The Gaussian over ``u`` (B, A) at inputs ``x`` (B, O + A)."""
        return torch.distributions.Normal(self.mean(x), self.log_std.exp())

    def conditional(
        self, x: torch.Tensor, prev_x: torch.Tensor, prev_u: torch.Tensor, first: torch.Tensor
    ) -> torch.distributions.Normal:
        """The Gaussian over ``u`` (B, A) given the previous step of the episode.

        With ``noise_correlation`` rho the exploration noise ``e_t = u_t - mu(s_t)`` is AR(1):
        ``e_t = rho e_{t-1} + sqrt(1 - rho^2) sigma eta``, ``e_0 ~ N(0, sigma^2)``; ``first``
        (B,) marks an episode's first step, where ``prev_x`` (B, O + A) and ``prev_u`` (B, A)
        are unused. rho = 0: :meth:`distribution`."""
        rho = self.cfg.noise_correlation
        if rho == 0.0:
            return self.distribution(x)
        carry = (~first).float()[:, None]
        mean = self.mean(x) + rho * carry * (prev_u - self.mean(prev_x))
        std = self.log_std.exp() * (1.0 - carry * (1.0 - math.sqrt(1.0 - rho * rho)))
        return torch.distributions.Normal(mean, std)

    def executed(self, base: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Executed actions (B, A) in [-1, 1] and residuals (B, A) of normalised ``u``."""
        res = self.cfg.scale * np.clip(u, -1.0, 1.0)
        return np.clip(base + res, -1.0, 1.0).astype(np.float32), res.astype(np.float32)

    @torch.no_grad()
    def act(
        self,
        obs: np.ndarray,
        base: np.ndarray,
        *,
        explore: bool,
        rng: np.random.Generator | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Executed actions (B, A) and residuals (B, A); obs (B, O), base (B, A). ``explore``:
        sample ``u`` (from ``rng``), else its mean."""
        mu = self.mean(self.inputs(obs, base)).numpy()
        if explore:
            std = self.log_std.exp().numpy()
            mu = mu + std * (rng or np.random.default_rng()).standard_normal(mu.shape)
        return self.executed(base, mu)

    @torch.no_grad()
    def sample(
        self,
        obs: np.ndarray,
        base: np.ndarray,
        gen: torch.Generator,
        prev: Mapping[str, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For a rollout step: ``u`` (B, A), its log-density (B,) and ``V(s, a_b)`` (B,).
        ``prev``: the previous step's ``prev_obs``, ``prev_base``, ``prev_u`` and ``first``
        (see :meth:`conditional`; None: every step is an episode's first)."""
        x = self.inputs(obs, base)
        if prev is None:
            dist = self.distribution(x)
        else:
            dist = self.conditional(x, *self.previous(prev))
        u = dist.mean + dist.stddev * torch.randn(dist.mean.shape, generator=gen)
        return (
            u.numpy(),
            dist.log_prob(u).sum(-1).numpy(),
            self.value(x)[:, 0].numpy(),
        )

    @torch.no_grad()
    def values(self, obs: np.ndarray, base: np.ndarray) -> np.ndarray:
        """``V(s, a_b)`` (B,)."""
        return self.value(self.inputs(obs, base))[:, 0].numpy()

    def previous(
        self, batch: Mapping[str, np.ndarray]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`conditional`'s ``prev_x`` (B, O + A), ``prev_u`` (B, A) and ``first`` (B,)
        from a batch's ``prev_obs``, ``prev_base``, ``prev_u`` and ``first``."""
        return (
            self.inputs(batch["prev_obs"], batch["prev_base"]),
            torch.as_tensor(batch["prev_u"], dtype=torch.float32),
            torch.as_tensor(batch["first"], dtype=torch.bool),
        )

    def update(self, batch: Mapping[str, np.ndarray], gen: torch.Generator) -> dict[str, float]:
        """``epochs`` passes of PPO over a rollout: ``obs`` (M, O), ``base`` (M, A), ``u``
        (M, A), ``log_prob`` (M,), ``advantage`` (M,), ``ret`` (M,), and with correlated noise
        the :meth:`previous` keys (``prev_obs``, ``prev_base``, ``prev_u``, ``first``; the
        ratio is then the step's density given its previous step). Advantages are normalised
        per minibatch. Returns the last pass's mean losses, approximate KL and clipped share."""
        cfg = self.cfg
        x = self.inputs(batch["obs"], batch["base"])
        u = torch.as_tensor(batch["u"], dtype=torch.float32)
        old = torch.as_tensor(batch["log_prob"], dtype=torch.float32)
        adv = torch.as_tensor(batch["advantage"], dtype=torch.float32)
        ret = torch.as_tensor(batch["ret"], dtype=torch.float32)
        prev = self.previous(batch) if "prev_u" in batch else None
        m = len(x)
        logs: dict[str, list[float]] = {}
        for _ in range(cfg.epochs):
            logs = {"policy_loss": [], "value_loss": [], "approx_kl": [], "clip_frac": []}
            for idx in torch.randperm(m, generator=gen).split(cfg.minibatch_size):
                dist = (
                    self.distribution(x[idx])
                    if prev is None
                    else self.conditional(x[idx], *(p[idx] for p in prev))
                )
                log_ratio = dist.log_prob(u[idx]).sum(-1) - old[idx]
                ratio = log_ratio.exp()
                a = adv[idx]
                a = (a - a.mean()) / (a.std(unbiased=False) + 1e-8)
                clipped = ratio.clamp(1.0 - cfg.clip, 1.0 + cfg.clip)
                policy_loss = -torch.min(ratio * a, clipped * a).mean()
                value_loss = (self.value(x[idx])[:, 0] - ret[idx]).pow(2).mean()
                self.opt.zero_grad(set_to_none=True)
                (policy_loss + cfg.value_coef * value_loss).backward()
                nn.utils.clip_grad_norm_(self.parameters(), cfg.grad_clip)
                self.opt.step()
                with torch.no_grad():
                    logs["policy_loss"].append(float(policy_loss))
                    logs["value_loss"].append(float(value_loss))
                    logs["approx_kl"].append(float(((ratio - 1) - log_ratio).mean()))
                    logs["clip_frac"].append(float(((ratio - 1).abs() > cfg.clip).float().mean()))
        out = {k: float(np.mean(v)) for k, v in logs.items()}
        out["residual_std"] = float(self.log_std.detach().exp().mean()) * cfg.scale
        return out


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    final_values: np.ndarray,
    last_values: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """GAE(lambda) over a rollout of N envs and T steps each, episodes ending anywhere.

    Args:
        rewards, values, terminated, truncated: (T, N) per step (``values``: V(s_t)).
        final_values: (T, N) V of the final observation where an episode was truncated
            (bootstrap on truncation, not on termination; other entries unused).
        last_values: (N,) V of each env's state after the rollout's last step.

    Returns:
        ``(advantages, returns)``, both (T, N), ``returns = advantages + values``.
    """
    r = np.asarray(rewards, np.float64)
    if not r.shape == np.shape(values) == np.shape(terminated) == np.shape(truncated):
        raise ValueError("rewards, values, terminated and truncated must share a (T, N) shape")
    adv = np.zeros_like(r)
    acc = np.zeros(r.shape[1])
    next_v = np.asarray(last_values, np.float64)
    for t in range(r.shape[0] - 1, -1, -1):
        term, trunc = terminated[t].astype(bool), truncated[t].astype(bool) & ~terminated[t]
        boot = np.where(term, 0.0, np.where(trunc, final_values[t], next_v))
        delta = r[t] + gamma * boot - values[t]
        acc = delta + gamma * lam * acc * ~(term | trunc)
        adv[t] = acc
        next_v = values[t]
    return adv.astype(np.float32), (adv + values).astype(np.float32)


def save_residual_ppo(
    agent: ResidualPPOAgent, directory: str | os.PathLike[str], meta: dict[str, Any]
) -> Path:
    """The agent as a robotrl checkpoint (``meta`` should name the base); ``robotrl eval``
    runs it on its base as a residual."""
    return save_module(
        agent, directory, {"agent": "residual_ppo", "config": agent.config_dict(), "meta": meta}
    )


def load_residual_ppo(
    directory: str | os.PathLike[str],
) -> tuple[ResidualPPOAgent, dict[str, Any]]:
    """Rebuild a saved agent; returns ``(agent, meta)``."""
    doc = read_doc(directory, "residual PPO checkpoint")
    if doc.get("agent") != "residual_ppo":
        raise CheckpointError(f"{Path(directory) / CONFIG} is not a residual PPO checkpoint")
    cfg = dict(doc["config"])
    obs_dim, act_dim = cfg.pop("obs_dim"), cfg.pop("act_dim")
    known = {f.name for f in fields(ResidualPPOConfig)}
    agent = ResidualPPOAgent(
        obs_dim, act_dim, ResidualPPOConfig(**{k: v for k, v in cfg.items() if k in known})
    )
    load_into(agent, directory)
    return agent, dict(doc.get("meta") or {})
