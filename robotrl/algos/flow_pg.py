"""Flow-Noise and Flow-SDE policy gradients through a flow policy's denoising chain (pi_RL),
with PPO (chunk-level GAE, dual clip, clipped Huber value loss) or GRPO (group-relative
advantages, no critic); the maths: docs/algorithms.md, policy gradients through the chain.

The policy's chain makes every denoising transition a Gaussian, so the log-likelihood of the
sampled chunk is exact (:meth:`policies.flow_matching.FlowMatchingPolicy.log_prob`):

- ``flow_noise``: mean and ODE velocity as in BC, std from the policy's learnable noise head,
  squashed into ``noise_std_bounds``; every step is stochastic and the chunk's log-prob is the
  mean over the K steps (pi_RL averages over the chain; log N(x_0; 0, I) cancels in ratios);
- ``flow_sde``: the ODE-to-SDE conversion (same marginals), only the stored step ``k*`` is
  stochastic: the chunk's log-prob is that one Gaussian;
- ``grpo``: either of the above (``grpo_mode``), advantages from groups of episodes that
  started in one reset state.

The value head is an MLP on the detached observation and action-expert features stored at
sampling time (:func:`robotrl.algos.flow_rollout.value_features`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from robotrl.algos.chunk_gae import chunk_gae, group_advantages
from robotrl.algos.flow_rollout import MODE_OF_ALGO, FlowEpisode
from robotrl.algos.networks import mlp

ALGOS = ("flow_noise", "flow_sde", "grpo")


@dataclass
class FlowPGConfig:
    """Hyperparameters of :class:`FlowPG` (defaults: pi_RL's; docs/algorithms.md).

    Attributes:
        algo: ``flow_noise`` | ``flow_sde`` | ``grpo``. grpo_mode: the chain GRPO samples
            (``noise_net`` or ``sde``).
        num_steps: K used for RL (None: the checkpoint's); pi_RL uses 4.
        noise_level: Flow-SDE ``a`` (None: the policy's, 0.5).
        clip: PPO ratio clip. dual_clip: bound on the loss of negative-advantage samples
            (c in max(min(.), c * A)). value_clip: clip of the value change. huber_delta: Huber.
        gamma: discount per chunk step. lam: GAE lambda.
        epochs: passes over a batch. minibatch_size: chunk steps per gradient step.
        actor_lr, critic_lr, betas: Adam. grad_clip: global norm per optimiser.
        entropy_coef: Flow-Noise entropy bonus (per step; per action dimension when
            ``per_dim_log_prob``).
        value_hidden: width of the value MLP (2 hidden layers, LayerNorm).
        group_size: GRPO's G. group_success_range: keep groups whose mean success is inside.
        normalize_advantages: standardise PPO advantages per batch.
        rollout_env_steps: env steps (summed over envs) collected per iteration.
        execute_horizon: Te actions executed per chunk (None: the checkpoint's).
        per_dim_log_prob: PPO ratios from the chunk log-prob divided by Ta x Da (a geometric
            mean per action dimension): summed over a whole chunk, a small change of the policy
            gives ratios far outside the clip range.
        noise_std_bounds: Flow-Noise std range replacing the policy's (None: keep it); the
            exploration noise must stay small against a BC policy's precision (pi_RL's
            [0.08, 0.16] and the measured choice: docs/results.md, flow policy gradients).
        critic_warmup_iters: first batches that train only the value head (a fresh critic's
            advantages are noise, and PPO on them degrades the policy).
    """

    algo: str = "flow_noise"
    grpo_mode: str = "sde"
    num_steps: int | None = 4
    noise_level: float | None = None
    clip: float = 0.2
    dual_clip: float = 3.0
    value_clip: float = 0.2
    huber_delta: float = 1.0
    gamma: float = 0.99
    lam: float = 0.95
    epochs: int = 4
    minibatch_size: int = 128
    actor_lr: float = 5e-6
    critic_lr: float = 1e-4
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    entropy_coef: float = 0.005
    value_hidden: int = 256
    group_size: int = 8
    group_success_range: tuple[float, float] = (0.1, 0.9)
    normalize_advantages: bool = True
    rollout_env_steps: int = 4000
    execute_horizon: int | None = None
    per_dim_log_prob: bool = True
    noise_std_bounds: tuple[float, float] | None = (0.02, 0.05)
    critic_warmup_iters: int = 3

    def __post_init__(self) -> None:
        if self.algo not in ALGOS:
            raise ValueError(f"algo must be one of {ALGOS}, got {self.algo!r}")
        if self.grpo_mode not in ("noise_net", "sde"):
            raise ValueError(f"grpo_mode must be 'noise_net' or 'sde', got {self.grpo_mode!r}")
        if self.num_steps is not None and self.num_steps < 1:
            raise ValueError(f"num_steps must be >= 1 or None, got {self.num_steps}")
        self.betas = (float(self.betas[0]), float(self.betas[1]))
        self.group_success_range = (
            float(self.group_success_range[0]),
            float(self.group_success_range[1]),
        )

    @property
    def mode(self) -> str:
        """The policy's chain mode: ``noise_net`` (Flow-Noise) or ``sde`` (Flow-SDE)."""
        return self.grpo_mode if self.algo == "grpo" else MODE_OF_ALGO[self.algo]

    @property
    def uses_critic(self) -> bool:
        return self.algo != "grpo"


class FlowPG:
    """The learner: the flow policy (actor), a value head, their optimisers and the update.

    Args:
        policy: flow policy (kept in eval mode: no augmentation, exact log-prob recompute).
        feature_dim: F, the value-head input size (``FlowRollout.feature_dim``).
        cfg: hyperparameters.
    """

    def __init__(self, policy: Any, feature_dim: int, cfg: FlowPGConfig) -> None:
        self.policy, self.cfg = policy, cfg
        if cfg.num_steps is not None:
            policy.num_steps = int(cfg.num_steps)
        if cfg.noise_std_bounds is not None:
            lo, hi = map(float, cfg.noise_std_bounds)
            if not 0 < lo <= hi:
                raise ValueError(f"noise_std_bounds must satisfy 0 < lo <= hi, got {(lo, hi)}")
            policy.noise_std_bounds = (lo, hi)
            policy.config["noise_std_bounds"] = [lo, hi]
        policy.eval()
        self.value = mlp(feature_dim, 1, cfg.value_hidden, 2, layer_norm=True)
        params = [p for p in policy.parameters() if p.requires_grad]
        self.actor_opt = torch.optim.Adam(params, lr=cfg.actor_lr, betas=cfg.betas)
        self.critic_opt = torch.optim.Adam(
            self.value.parameters(), lr=cfg.critic_lr, betas=cfg.betas
        )

    @torch.no_grad()
    def values(self, features: np.ndarray) -> np.ndarray:
        """(B,) values of (B, F) features."""
        if len(features) == 0:
            return np.zeros(0)
        return self.value(torch.from_numpy(np.asarray(features, np.float32))).squeeze(-1).numpy()

    # ------------------------------------------------------------------ batches
    def make_batch(self, groups: Sequence[Sequence[FlowEpisode]]) -> dict[str, Any] | None:
        """Flatten finished episodes into a training batch with advantages and returns.

        PPO: GAE per episode with the current value head. GRPO: every chunk step of an
        episode gets its episode's group-relative advantage; all-equal groups are dropped.
        Returns None when nothing is left to learn from.
        """
        cfg = self.cfg
        episodes = [ep for g in groups for ep in g]
        if cfg.uses_critic:
            advs, rets = [], []
            for ep in episodes:
                v = self.values(np.stack([s.features for s in ep.steps]))
                last = 0.0
                if not ep.terminated and ep.final_features is not None:
                    last = float(self.values(ep.final_features[None])[0])
                a, r = chunk_gae(
                    np.array([s.reward for s in ep.steps]), v, last, cfg.gamma, cfg.lam
                )
                advs.append(a)
                rets.append(r)
            kept = episodes
        else:
            ep_adv, keep = group_advantages(
                [ep.ret for ep in episodes],
                [ep.group for ep in episodes],
                [ep.success for ep in episodes],
                cfg.group_success_range,
            )
            kept = [ep for ep, k in zip(episodes, keep, strict=True) if k]
            advs = [
                np.full(len(ep.steps), a)
                for ep, a, k in zip(episodes, ep_adv, keep, strict=True)
                if k
            ]
            rets = [np.zeros(len(ep.steps)) for ep in kept]
        steps = [s for ep in kept for s in ep.steps]
        if not steps:
            return None
        keys = steps[0].obs.keys()
        feats = np.stack([s.features for s in steps]).astype(np.float32)
        return {
            "obs": {k: torch.from_numpy(np.stack([s.obs[k] for s in steps])) for k in keys},
            "chain": torch.from_numpy(np.stack([s.chain for s in steps])),
            "k_star": torch.tensor([s.k_star for s in steps]),
            "log_prob": self.reduce(torch.from_numpy(np.stack([s.log_probs for s in steps]))),
            "features": torch.from_numpy(feats),
            "old_value": torch.from_numpy(self.values(feats).astype(np.float32)),
            "advantage": torch.from_numpy(np.concatenate(advs).astype(np.float32)),
            "return": torch.from_numpy(np.concatenate(rets).astype(np.float32)),
        }

    # ------------------------------------------------------------------ the update
    def chunk_log_prob(
        self, obs: dict[str, torch.Tensor], chain: torch.Tensor, k_star: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B,) chunk log-probs of stored chains under the current weights, and (B,) entropy
        per action dimension and stochastic step (Flow-Noise's bonus)."""
        mode = self.cfg.mode
        lp, ent = self.policy.log_prob_and_entropy(
            obs,
            chain,
            mode=mode,
            k_star=k_star if mode == "sde" else None,
            noise_level=self.cfg.noise_level,
        )
        return self.reduce(lp), self.reduce(ent)

    def reduce(self, per_step: torch.Tensor) -> torch.Tensor:
        """(B, K) per-step log-probs (or entropies) -> (B,) per chunk: the mean over the chain
        for Flow-Noise (every step stochastic), the one stochastic step for Flow-SDE; divided
        by Ta x Da when ``per_dim_log_prob``."""
        out = per_step.mean(1) if self.cfg.mode == "noise_net" else per_step.sum(1)
        if self.cfg.per_dim_log_prob:
            out = out / (self.policy.action_horizon * self.policy.action_dim)
        return out

    def update(
        self, batch: dict[str, Any], seed: int = 0, update_actor: bool = True
    ) -> dict[str, float]:
        """``epochs`` passes of minibatch PPO on ``batch`` (from :meth:`make_batch`);
        ``update_actor=False`` trains the value head only (critic warm-up)."""
        cfg = self.cfg
        start = time.perf_counter()
        n = len(batch["advantage"])
        adv = batch["advantage"]
        if cfg.uses_critic and cfg.normalize_advantages and n > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        gen = torch.Generator().manual_seed(seed)
        logs: dict[str, list[float]] = {
            k: [] for k in ("pg_loss", "value_loss", "entropy", "clip_frac", "approx_kl")
        }
        for _ in range(cfg.epochs):
            perm = torch.randperm(n, generator=gen)
            for lo in range(0, n, cfg.minibatch_size):
                idx = perm[lo : lo + cfg.minibatch_size]
                if update_actor:
                    self._actor_step(batch, idx, adv[idx], logs)
                if cfg.uses_critic:
                    logs["value_loss"].append(self._value_step(batch, idx))
        out = {k: float(np.mean(v)) for k, v in logs.items() if v}
        out["update_s"] = time.perf_counter() - start
        out["batch_chunks"] = float(n)
        return out

    def _actor_step(
        self,
        batch: dict[str, Any],
        idx: torch.Tensor,
        a: torch.Tensor,
        logs: dict[str, list[float]],
    ) -> None:
        cfg = self.cfg
        obs = {k: v[idx] for k, v in batch["obs"].items()}
        new_lp, ent = self.chunk_log_prob(obs, batch["chain"][idx], batch["k_star"][idx])
        log_ratio = new_lp - batch["log_prob"][idx]
        ratio = torch.exp(log_ratio).float()
        pg = -torch.min(ratio * a, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * a)
        # dual clip: a negative advantage cannot push the loss beyond -dual_clip * A
        pg = torch.where(a < 0, torch.min(pg, -cfg.dual_clip * a), pg)
        loss = pg.mean()
        if cfg.mode == "noise_net" and cfg.entropy_coef > 0:
            loss = loss - cfg.entropy_coef * ent.float().mean()
        self.actor_opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.grad_clip)
        self.actor_opt.step()
        logs["pg_loss"].append(float(pg.detach().mean()))
        logs["entropy"].append(float(ent.detach().mean()))
        logs["clip_frac"].append(float(((ratio.detach() - 1).abs() > cfg.clip).float().mean()))
        logs["approx_kl"].append(float(((ratio - 1) - log_ratio.float()).detach().mean()))

    def _value_step(self, batch: dict[str, Any], idx: torch.Tensor) -> float:
        cfg = self.cfg
        v = self.value(batch["features"][idx]).squeeze(-1)
        old, ret = batch["old_value"][idx], batch["return"][idx]
        v_clip = old + (v - old).clamp(-cfg.value_clip, cfg.value_clip)
        loss = torch.max(
            F.huber_loss(v, ret, reduction="none", delta=cfg.huber_delta),
            F.huber_loss(v_clip, ret, reduction="none", delta=cfg.huber_delta),
        ).mean()
        self.critic_opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.value.parameters(), cfg.grad_clip)
        self.critic_opt.step()
        return float(loss.detach())
