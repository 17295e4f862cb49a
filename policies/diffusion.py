"""Diffusion policy: epsilon prediction, DDPM training (100 steps), DDIM inference (10 steps),
with the noise schedulers of ``diffusers`` (squared-cosine betas, samples clipped to [-1, 1]).

Same observation encoder, denoiser network and normaliser as the flow policy; the denoiser is
conditioned on ``k / num_train_steps`` in [0, 1].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from diffusers.schedulers.scheduling_ddim import DDIMScheduler
from diffusers.schedulers.scheduling_ddpm import DDPMScheduler

from policies.base import Policy, constructor_config
from policies.denoiser import ChunkDenoiser
from policies.encoders import ObsEncoder
from policies.normalizer import Normalizer


class DiffusionPolicy(Policy):
    """Chunked DDPM/DDIM BC policy.

    Args:
        state_dims, action_dim, image_keys, obs_horizon, action_horizon, hidden, depth,
            obs_feature_dim, image_feature_dim, stats: as in
            :class:`policies.flow_matching.FlowMatchingPolicy`.
        num_train_steps: DDPM diffusion steps in training.
        num_inference_steps: DDIM steps at inference (K).
    """

    policy_type = "diffusion"

    def __init__(
        self,
        state_dims: Mapping[str, int],
        action_dim: int = 7,
        image_keys: Sequence[str] = (),
        obs_horizon: int = 2,
        action_horizon: int = 16,
        num_train_steps: int = 100,
        num_inference_steps: int = 10,
        hidden: int = 256,
        depth: int = 3,
        obs_feature_dim: int = 256,
        image_feature_dim: int = 64,
        stats: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        self.noise_scale = 1.0  # initial-noise scale of predict_chunk (run time; 0: deterministic)
        if not 1 <= num_inference_steps <= num_train_steps:
            raise ValueError(
                f"need 1 <= num_inference_steps <= num_train_steps, got "
                f"{num_inference_steps}, {num_train_steps}"
            )
        self.config = constructor_config(DiffusionPolicy, locals())
        self.obs_horizon, self.action_horizon, self.action_dim = (
            obs_horizon,
            action_horizon,
            action_dim,
        )
        self.num_steps = num_inference_steps
        sched = {
            "num_train_timesteps": num_train_steps,
            "beta_schedule": "squaredcos_cap_v2",
            "clip_sample": True,
            "prediction_type": "epsilon",
        }
        self.train_scheduler = DDPMScheduler(**sched)
        self.infer_scheduler = DDIMScheduler(**sched)
        self.normalizer = Normalizer.for_policy(state_dims, action_dim, stats)
        self.encoder = ObsEncoder(
            state_dims, image_keys, obs_horizon, obs_feature_dim, image_feature_dim
        )
        self.net = ChunkDenoiser(action_dim, action_horizon, obs_feature_dim, hidden, depth)
        self.num_train_steps = num_train_steps

    def reset(self) -> None:
        """Stateless: nothing to forget."""

    def encode(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return self.encoder(obs, self.normalizer)

    def compute_loss(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """MSE between predicted and true noise at a random DDPM step."""
        cond = self.encode(batch["obs"])
        a = self.normalizer.normalize("action", batch["action"].float())
        if a.shape != (cond.shape[0], self.action_horizon, self.action_dim):
            raise ValueError(
                f"action batch must be (B, Ta={self.action_horizon}, Da={self.action_dim}), "
                f"got {tuple(a.shape)}"
            )
        eps = torch.randn_like(a)
        k = torch.randint(0, self.num_train_steps, (a.shape[0],), device=a.device)
        x_k = self.train_scheduler.add_noise(a, eps, k)
        pred, _ = self.net(x_k, k.float() / self.num_train_steps, cond)
        loss = torch.mean((pred - eps) ** 2)
        return loss, {"loss": float(loss.detach())}

    @torch.no_grad()
    def predict_chunk(
        self,
        obs: Mapping[str, torch.Tensor],
        noise: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """(B, Ta, Da) actions by DDIM with ``num_inference_steps`` steps (eta = 0) from
        ``noise`` (default: ``noise_scale`` x standard normal; 0 is deterministic)."""
        cond = self.encode(obs)
        b = cond.shape[0]
        shape = (b, self.action_horizon, self.action_dim)
        x = (
            noise
            if noise is not None
            else self.noise_scale * torch.randn(shape, generator=generator)
        )
        sched = self.infer_scheduler
        sched.set_timesteps(self.num_steps)
        for k in sched.timesteps:
            kb = torch.full((b,), float(k) / self.num_train_steps)
            eps, _ = self.net(x, kb, cond)
            x = sched.step(eps, k, x).prev_sample
        return self.normalizer.unnormalize("action", x).clamp(-1.0, 1.0)
