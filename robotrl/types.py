"""The interfaces the stack is built around (structural: anything with these methods fits).

Shape letters, used in every docstring: B batch, To observation horizon, Ta action horizon
(chunk length), Te actions executed per chunk, Da action dim, K denoising steps,
H/W image height/width.

Observation batch: ``{"state/<name>": (B, To, D) float32, "images/<cam>": (B, To, H, W, 3) uint8}``
(torch tensors inside policies, numpy at the env boundary). Actions are normalised env actions
in [-1, 1] (see ``sim/env.py``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch


@runtime_checkable
class ChunkPolicy(Protocol):
    """A BC policy that predicts action chunks from an observation history."""

    obs_horizon: int  # To
    action_horizon: int  # Ta
    action_dim: int  # Da

    def predict_chunk(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """(B, Ta, Da) actions in [-1, 1] for an observation batch (inference mode)."""
        ...

    def compute_loss(self, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """Training loss on ``{"obs": {...}, "action": (B, Ta, Da)}`` and scalar logs."""
        ...

    def reset(self) -> None:
        """Forget per-episode state (none for stateless policies)."""
        ...


@runtime_checkable
class ChainPolicy(ChunkPolicy, Protocol):
    """A flow policy whose denoising chain RL can sample from and score exactly."""

    num_steps: int  # K

    def sample_chain(
        self,
        obs: dict[str, torch.Tensor],
        noise: torch.Tensor | None = None,
        mode: str = "ode",
        **kw: Any,
    ) -> dict[str, torch.Tensor]:
        """The chain (B, K+1, Ta, Da) from noise to action and its per-step log-probs."""
        ...

    def log_prob(
        self, obs: dict[str, torch.Tensor], chain: torch.Tensor, mode: str = "sde", **kw: Any
    ) -> torch.Tensor:
        """(B, K) log-probs of the chain's transitions, recomputed exactly as sampled."""
        ...
