"""The network inside flow and diffusion policies: a residual MLP over a flattened action chunk,
FiLM-conditioned on the noise level and the observation features.

``ChunkDenoiser(x (B, Ta, Da), t (B,) in [0, 1], cond (B, F)) -> (out (B, Ta, Da), feat (B, H))``.
``out`` is a velocity (flow) or a noise estimate (diffusion); ``feat`` is the last hidden
layer, which RL heads (noise std, value) read.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def time_embedding(t: torch.Tensor, dim: int, max_period: float = 1000.0) -> torch.Tensor:
    """(B,) times in [0, 1] -> (B, dim) sinusoidal features."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=t.device) / half)
    args = (t.float()[:, None] * 1000.0) * freqs[None]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=-1)


class _Block(nn.Module):
    def __init__(self, hidden: int, cond_dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden, elementwise_affine=False)
        self.film = nn.Linear(cond_dim, 2 * hidden)
        self.mlp = nn.Sequential(
            nn.Linear(hidden, 2 * hidden), nn.SiLU(), nn.Linear(2 * hidden, hidden)
        )
        nn.init.zeros_(self.film.weight)
        nn.init.zeros_(self.film.bias)

    def forward(self, h: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        scale, shift = self.film(c).chunk(2, dim=-1)
        return h + self.mlp(self.norm(h) * (1 + scale) + shift)


class ChunkDenoiser(nn.Module):
    """Residual FiLM MLP.

    Args:
        action_dim: Da. horizon: Ta. cond_dim: F (observation features).
        hidden: width H. depth: residual blocks. time_dim: time-embedding size.
    """

    def __init__(
        self,
        action_dim: int,
        horizon: int,
        cond_dim: int,
        hidden: int = 256,
        depth: int = 3,
        time_dim: int = 64,
    ) -> None:
        super().__init__()
        self.action_dim, self.horizon, self.time_dim = action_dim, horizon, time_dim
        flat = action_dim * horizon
        c = hidden
        self.cond = nn.Sequential(nn.Linear(time_dim + cond_dim, c), nn.SiLU(), nn.Linear(c, c))
        self.inp = nn.Linear(flat + time_dim + cond_dim, hidden)
        self.blocks = nn.ModuleList(_Block(hidden, c) for _ in range(depth))
        self.out_norm = nn.LayerNorm(hidden)
        self.out = nn.Linear(hidden, flat)
        self.hidden = hidden

    def forward(
        self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        b = x.shape[0]
        temb = time_embedding(t.expand(b) if t.dim() == 0 else t, self.time_dim)
        c = self.cond(torch.cat([temb, cond], dim=-1))
        h = self.inp(torch.cat([x.reshape(b, -1), temb, cond], dim=-1))
        for block in self.blocks:
            h = block(h, c)
        feat = self.out_norm(h)
        return self.out(feat).view(b, self.horizon, self.action_dim), feat
