"""Networks shared by the RL algorithms: MLPs and a vectorised critic ensemble.

Shapes: B batch, E ensemble members, O observation features, A action dim.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def mlp(
    in_dim: int,
    out_dim: int,
    hidden: int = 256,
    layers: int = 2,
    layer_norm: bool = True,
    activation: type[nn.Module] = nn.ReLU,
) -> nn.Sequential:
    """``layers`` hidden layers of width ``hidden`` (Linear [-> LayerNorm] -> ``activation``),
    then linear."""
    mods: list[nn.Module] = []
    d = in_dim
    for _ in range(layers):
        mods.append(nn.Linear(d, hidden))
        if layer_norm:
            mods.append(nn.LayerNorm(hidden))
        mods.append(activation())
        d = hidden
    mods.append(nn.Linear(d, out_dim))
    return nn.Sequential(*mods)


class EnsembleLinear(nn.Module):
    """E independent linear layers applied in one batched matmul: (E, B, I) -> (E, B, O)."""

    def __init__(self, ensemble: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(ensemble, in_dim, out_dim))
        self.bias = nn.Parameter(torch.empty(ensemble, 1, out_dim))
        bound = 1.0 / math.sqrt(in_dim)  # nn.Linear's default init, per member
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleCritic(nn.Module):
    """E Q-functions Q_e(s, a), each an MLP with LayerNorm, evaluated together.

    Args:
        obs_dim: O. act_dim: A. hidden, layers: per-member MLP. ensemble: E.
        layer_norm: LayerNorm after every hidden layer (RLPD/ResFiT: stabilises high UTD).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: int = 256,
        layers: int = 2,
        ensemble: int = 10,
        layer_norm: bool = True,
    ) -> None:
        super().__init__()
        self.ensemble = ensemble
        mods: list[nn.Module] = []
        d = obs_dim + act_dim
        for _ in range(layers):
            mods.append(EnsembleLinear(ensemble, d, hidden))
            if layer_norm:
                mods.append(nn.LayerNorm(hidden))
            mods.append(nn.ReLU())
            d = hidden
        mods.append(EnsembleLinear(ensemble, d, 1))
        self.net = nn.Sequential(*mods)

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        """(E, B) Q-values for obs (B, O) and actions (B, A)."""
        x = torch.cat([obs, act], dim=-1)
        return self.net(x.unsqueeze(0).expand(self.ensemble, *x.shape)).squeeze(-1)
