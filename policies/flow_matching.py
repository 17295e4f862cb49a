"""Flow-matching policy (pi0 convention) with an exactly scorable denoising chain.

Convention: t = 1 is noise, t = 0 is data; ``x_t = t * eps + (1 - t) * a``; the network
predicts the velocity ``v = eps - a``; inference integrates Euler steps on the grid
``t_k = 1 - k / K`` (``x_{k+1} = x_k - v / K``) from ``x_0 ~ N(0, I)``. Actions live in the
normaliser's [-1, 1] space inside the chain.

For RL (Flow-Noise / Flow-SDE, docs/algorithms.md) every transition can be made a
Gaussian ``x_{k+1} ~ N(mu_k, diag(s_k^2))``:

- ``ode``: ``mu = x - v / K``, ``s = 0`` (deterministic; evaluation);
- ``sde``: the ODE-to-SDE conversion with the same marginals, score ``-(x + (1 - t) v) / t``:
  ``mu = x - [v + sigma_t^2 / (2 t) (x + (1 - t) v)] / K``, ``s = sigma_t / sqrt(K)``,
  ``sigma_t = a sqrt(t / (1 - t))`` (``1 - t`` replaced by ``1 / K`` at ``t = 1``);
  ``k_star`` (B,) makes only that step stochastic (the "hybrid" MDP of pi_RL);
- ``noise_net``: ``mu`` = ODE mean, ``s`` from a learned head on the network's features,
  squashed into ``noise_std_bounds`` (Flow-Noise); every step is stochastic.

:meth:`FlowChainPolicy.log_prob` recomputes the same Gaussians from a stored chain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from policies.base import Policy, constructor_config
from policies.denoiser import ChunkDenoiser
from policies.encoders import ObsEncoder
from policies.normalizer import Normalizer

MODES = ("ode", "sde", "noise_net")
LOG_2PI = math.log(2 * math.pi)


def gaussian_log_prob(x: torch.Tensor, mu: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Sum over all but the batch dim of log N(x; mu, std^2), computed in float64."""
    x, mu, std = x.double(), mu.double(), std.double()
    z = (x - mu) / std
    return (-0.5 * z * z - torch.log(std) - 0.5 * LOG_2PI).flatten(1).sum(-1)


class FlowChainPolicy(Policy):
    """A flow-matching policy of any conditioning: the chain, its losses and samplers, over an
    ``encoder`` (obs -> (B, F) features) and a velocity network ``net``.

    Args:
        normalizer: the observation and action normaliser.
        encoder: ``encoder(obs, normalizer)`` -> (B, F) conditioning features.
        net: ``net(x, t, cond)`` -> (velocity (B, Ta, Da), features (B, net_hidden)); the
            Flow-Noise std head reads the features.
        action_dim: Da. obs_horizon: To. action_horizon: Ta. num_steps: K (Euler steps).
        time_beta: t ~ Beta(a, b) * 0.999 + 0.001 in training (pi0 emphasises noisy t).
        noise_std_bounds: Flow-Noise std range (normalised action units).
        sde_noise_level: a in sigma_t.
    """

    def __init__(
        self,
        *,
        normalizer: Normalizer,
        encoder: nn.Module,
        net: nn.Module,
        net_hidden: int,
        action_dim: int,
        obs_horizon: int,
        action_horizon: int,
        num_steps: int,
        time_beta: tuple[float, float],
        noise_std_bounds: tuple[float, float],
        sde_noise_level: float,
    ) -> None:
        if num_steps < 1 or obs_horizon < 1 or action_horizon < 1 or action_dim < 1:
            raise ValueError("num_steps, obs_horizon, action_horizon, action_dim must be >= 1")
        lo, hi = noise_std_bounds
        if not 0 < lo <= hi:
            raise ValueError(f"noise_std_bounds must satisfy 0 < lo <= hi, got {noise_std_bounds}")
        super().__init__()
        self.obs_horizon, self.action_horizon, self.action_dim = (
            obs_horizon,
            action_horizon,
            action_dim,
        )
        self.num_steps = num_steps
        # Scale of the initial noise of predict_chunk (a run-time setting, not saved): 1 samples
        # the learned distribution, 0 runs the ODE from the prior's mean (deterministic).
        self.noise_scale = 1.0
        self.noise_std_bounds = (float(lo), float(hi))
        self.sde_noise_level = float(sde_noise_level)
        self.time_beta = torch.distributions.Beta(float(time_beta[0]), float(time_beta[1]))
        self.normalizer = normalizer
        self.encoder = encoder
        self.net = net
        self.noise_head = nn.Linear(net_hidden, action_horizon * action_dim)
        nn.init.zeros_(self.noise_head.weight)
        nn.init.zeros_(self.noise_head.bias)  # starts mid-range: (lo + hi) / 2

    # ------------------------------------------------------------------ basics
    def encode(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """(B, F) observation features."""
        return self.encoder(obs, self.normalizer)

    def _chunk_shape(self, b: int) -> tuple[int, int, int]:
        return (b, self.action_horizon, self.action_dim)

    def compute_loss(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """MSE between predicted and true velocity ``eps - a`` at random t."""
        return self.flow_loss(self.encode(batch["obs"]), batch["action"])

    def flow_loss(
        self, cond: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Flow-matching loss of raw action chunks (B, Ta, Da) given (B, F) features."""
        a = self.normalizer.normalize("action", action.float())
        if a.shape != self._chunk_shape(cond.shape[0]):
            raise ValueError(
                f"action batch must be (B, Ta={self.action_horizon}, Da={self.action_dim}), "
                f"got {tuple(a.shape)}"
            )
        eps = torch.randn_like(a)
        t = self.time_beta.sample((a.shape[0],)).to(a) * 0.999 + 0.001
        x_t = t[:, None, None] * eps + (1 - t[:, None, None]) * a
        v, _ = self.net(x_t, t, cond)
        loss = torch.mean((v - (eps - a)) ** 2)
        return loss, {"loss": float(loss.detach()), "flow_loss": float(loss.detach())}

    # ------------------------------------------------------------------ the chain
    def _times(self) -> np.ndarray:
        return 1.0 - np.arange(self.num_steps) / self.num_steps

    def transition(
        self,
        x: torch.Tensor,
        v: torch.Tensor,
        feat: torch.Tensor,
        t: torch.Tensor,
        mode: str,
        noise_level: float | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and std of ``x_{k+1}`` given ``x_k`` at times ``t`` (B,): (B, Ta, Da) each."""
        d = 1.0 / self.num_steps
        tt = t.to(x)[:, None, None]
        if mode == "ode":
            return x - d * v, torch.zeros_like(x)
        if mode == "noise_net":
            lo, hi = self.noise_std_bounds
            raw = self.noise_head(feat).view_as(x)
            return x - d * v, lo + (hi - lo) * torch.sigmoid(raw)
        if mode == "sde":
            a = self.sde_noise_level if noise_level is None else float(noise_level)
            one_minus = torch.where(tt >= 1.0, torch.full_like(tt, d), 1.0 - tt)
            sigma = a * torch.sqrt(tt / one_minus)
            mu = x - d * (v + sigma**2 / (2 * tt) * (x + (1 - tt) * v))
            return mu, (sigma * math.sqrt(d)).expand_as(x)
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")

    def _stochastic(
        self, mode: str, k: int, k_star: torch.Tensor | None, b: int, device: torch.device
    ) -> torch.Tensor:
        if mode == "ode":
            return torch.zeros(b, dtype=torch.bool, device=device)
        if mode == "sde" and k_star is not None:
            return k_star.to(device) == k
        return torch.ones(b, dtype=torch.bool, device=device)

    def sample_chain(
        self,
        obs: Mapping[str, torch.Tensor],
        noise: torch.Tensor | None = None,
        mode: str = "ode",
        k_star: torch.Tensor | None = None,
        noise_level: float | None = None,
        generator: torch.Generator | None = None,
    ) -> dict[str, torch.Tensor]:
        """Run the chain from ``noise`` (B, Ta, Da) (drawn if None).

        Returns ``chain`` (B, K+1, Ta, Da) normalised, ``log_prob`` (B, K) (0 at deterministic
        steps), ``stochastic`` (B, K) bool, ``init_log_prob`` (B,) of ``x_0`` under N(0, I),
        ``action`` (B, Ta, Da) in env units, ``obs_features`` (B, F) and ``expert_features``
        (B, H) (the denoiser's features at the first step, for value heads).
        """
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        cond = self.encode(obs)
        b = cond.shape[0]
        x = (
            noise
            if noise is not None
            else torch.randn(self._chunk_shape(b), generator=generator, device=cond.device)
        )
        if x.shape != self._chunk_shape(b):
            raise ValueError(f"noise must be {self._chunk_shape(b)}, got {tuple(x.shape)}")
        chain, logps, masks, first_feat = [x], [], [], None
        for k, t in enumerate(self._times()):
            tb = torch.full((b,), float(t), device=cond.device)
            v, feat = self.net(x, tb, cond)
            first_feat = feat if first_feat is None else first_feat
            mu, std = self.transition(x, v, feat, tb, mode, noise_level)
            m = self._stochastic(mode, k, k_star, b, cond.device)
            eps = torch.randn(x.shape, generator=generator, device=cond.device)
            x = torch.where(m[:, None, None], mu + std * eps, mu)
            lp = gaussian_log_prob(x, mu, torch.where(m[:, None, None], std, torch.ones_like(std)))
            logps.append(torch.where(m, lp, torch.zeros_like(lp)))
            masks.append(m)
            chain.append(x)
        chain_t = torch.stack(chain, dim=1)
        assert first_feat is not None  # num_steps >= 1
        return {
            "chain": chain_t,
            "log_prob": torch.stack(logps, dim=1),
            "stochastic": torch.stack(masks, dim=1),
            "init_log_prob": gaussian_log_prob(
                chain_t[:, 0], torch.zeros_like(x), torch.ones_like(x)
            ),
            "action": self.to_action(chain_t[:, -1]),
            "obs_features": cond,
            "expert_features": first_feat,
        }

    def log_prob(
        self,
        obs: Mapping[str, torch.Tensor],
        chain: torch.Tensor,
        mode: str = "sde",
        k_star: torch.Tensor | None = None,
        noise_level: float | None = None,
    ) -> torch.Tensor:
        """(B, K) log-probs of the stored chain's transitions under the current weights
        (0 at deterministic steps): exactly what :meth:`sample_chain` computed when the
        weights are unchanged."""
        return self.log_prob_and_entropy(obs, chain, mode, k_star, noise_level)[0]

    def log_prob_and_entropy(
        self,
        obs: Mapping[str, torch.Tensor],
        chain: torch.Tensor,
        mode: str = "sde",
        k_star: torch.Tensor | None = None,
        noise_level: float | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`log_prob` and the (B, K) entropies of the same Gaussian transitions
        (summed over Ta x Da; 0 at deterministic steps), for an entropy bonus in RL."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        cond = self.encode(obs)
        b = cond.shape[0]
        if chain.shape != (b, self.num_steps + 1, self.action_horizon, self.action_dim):
            raise ValueError(
                f"chain must be (B, K+1={self.num_steps + 1}, Ta, Da), got {tuple(chain.shape)}"
            )
        out, ents = [], []
        for k, t in enumerate(self._times()):
            tb = torch.full((b,), float(t), device=cond.device)
            x = chain[:, k]
            v, feat = self.net(x, tb, cond)
            mu, std = self.transition(x, v, feat, tb, mode, noise_level)
            m = self._stochastic(mode, k, k_star, b, cond.device)
            std = torch.where(m[:, None, None], std, 1.0)
            lp = gaussian_log_prob(chain[:, k + 1], mu, std)
            ent = (torch.log(std) + 0.5 * (1.0 + LOG_2PI)).flatten(1).sum(-1)
            out.append(torch.where(m, lp, torch.zeros_like(lp)))
            ents.append(torch.where(m, ent, torch.zeros_like(ent)))
        return torch.stack(out, dim=1), torch.stack(ents, dim=1)

    def to_action(self, x: torch.Tensor) -> torch.Tensor:
        """Normalised chunk -> env actions in [-1, 1]."""
        return self.normalizer.unnormalize("action", x).clamp(-1.0, 1.0)

    @torch.no_grad()
    def predict_chunk(
        self, obs: Mapping[str, torch.Tensor], noise: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(B, Ta, Da) actions by the deterministic ODE sampler (Euler, K steps) from ``noise``
        (default: ``noise_scale`` x standard normal).

        The same chain as ``sample_chain(mode="ode")`` without its bookkeeping (log-probs,
        noise draws), which dominates the latency at small sizes.
        """
        cond = self.encode(obs)
        b = cond.shape[0]
        x = (
            noise
            if noise is not None
            else self.noise_scale * torch.randn(self._chunk_shape(b), device=cond.device)
        )
        if x.shape != self._chunk_shape(b):
            raise ValueError(f"noise must be {self._chunk_shape(b)}, got {tuple(x.shape)}")
        d = 1.0 / self.num_steps
        for t in self._times():
            v, _ = self.net(x, torch.full((b,), float(t), device=cond.device), cond)
            x = x - d * v
        return self.to_action(x)


class FlowMatchingPolicy(FlowChainPolicy):
    """Chunked flow-matching BC policy.

    Args:
        state_dims: ``{"state/<k>": D}`` observation entries used.
        action_dim: Da.
        image_keys: cameras used (``images/<cam>``).
        obs_horizon: To. action_horizon: Ta. num_steps: K (Euler steps).
        hidden, depth: denoiser width and residual blocks.
        obs_feature_dim, image_feature_dim: encoder sizes.
        time_beta: t ~ Beta(a, b) * 0.999 + 0.001 in training (pi0 emphasises noisy t).
        noise_std_bounds: Flow-Noise std range (normalised action units).
        sde_noise_level: a in sigma_t.
        stats: normaliser statistics ``{key: {mean, std, min, max}}`` incl. ``action``; None
            builds an identity placeholder (weights loaded from a checkpoint replace it).
    """

    policy_type = "flow"

    def __init__(
        self,
        state_dims: Mapping[str, int],
        action_dim: int = 7,
        image_keys: Sequence[str] = (),
        obs_horizon: int = 2,
        action_horizon: int = 16,
        num_steps: int = 10,
        hidden: int = 256,
        depth: int = 3,
        obs_feature_dim: int = 256,
        image_feature_dim: int = 64,
        time_beta: tuple[float, float] = (1.5, 1.0),
        noise_std_bounds: tuple[float, float] = (0.08, 0.16),
        sde_noise_level: float = 0.5,
        stats: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        config = constructor_config(FlowMatchingPolicy, locals())
        normalizer = Normalizer.for_policy(state_dims, action_dim, stats)
        encoder = ObsEncoder(
            state_dims, image_keys, obs_horizon, obs_feature_dim, image_feature_dim
        )
        net = ChunkDenoiser(action_dim, action_horizon, obs_feature_dim, hidden, depth)
        super().__init__(
            normalizer=normalizer,
            encoder=encoder,
            net=net,
            net_hidden=hidden,
            action_dim=action_dim,
            obs_horizon=obs_horizon,
            action_horizon=action_horizon,
            num_steps=num_steps,
            time_beta=time_beta,
            noise_std_bounds=noise_std_bounds,
            sde_noise_level=sde_noise_level,
        )
        self.config = config
