"""What every robotrl policy is: an ``nn.Module`` that predicts action chunks.

A policy maps an observation batch (``state/<k>``: (B, To, D) float, ``images/<cam>``: (B, To,
H, W, 3) uint8, optionally ``language``) to a chunk of Ta actions of dimension Da in the env's
[-1, 1] action space, and learns from BC batches that add ``action`` (B, Ta, Da). Its
``config`` holds the constructor's keyword arguments (plain YAML values, read off the signature
by :func:`constructor_config`, so none is left out by hand): a checkpoint stores it
with the ``policy_type`` under which :mod:`policies.registry` finds the class, and
:func:`policies.checkpoint.load_policy` rebuilds the policy from it (save and load are written
once, there).
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import nn


class Policy(nn.Module, abc.ABC):
    """Base class of the flow, diffusion, VLA, distilled and LeRobot-adapter policies.

    Attributes:
        policy_type: the registry name (``"flow"``, ``"diffusion"``, ...).
        config: the constructor's keyword arguments, as saved in checkpoints.
        obs_horizon: To, observation steps a prediction reads.
        action_horizon: Ta, actions per predicted chunk.
        action_dim: Da.
    """

    policy_type: ClassVar[str]
    config: dict[str, Any]
    obs_horizon: int
    action_horizon: int
    action_dim: int

    @property
    def device(self) -> torch.device:
        """The device of the policy's parameters."""
        return next(self.parameters()).device

    def reset(self) -> None:
        """Forget per-episode state (an observation or action queue); stateless by default."""

    @abc.abstractmethod
    def compute_loss(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """The BC loss of a batch (scalar tensor) and its logged parts."""

    @abc.abstractmethod
    def predict_chunk(
        self, obs: Mapping[str, torch.Tensor], noise: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(B, Ta, Da) actions in [-1, 1] for an observation batch; ``noise`` is the initial
        sample of a generative sampler (None: drawn; a policy without one refuses it)."""


def _plain(value: Any) -> Any:
    """A YAML-safe copy: tuples and sequences to lists, mappings to dicts, recursively."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def constructor_config(
    cls: type[Policy], values: Mapping[str, Any], exclude: tuple[str, ...] = ("stats",)
) -> dict[str, Any]:
    """The arguments of ``cls.__init__`` (but ``exclude``) read from ``values`` (its
    ``locals()`` at the top of ``__init__``), as plain YAML values: the ``config`` a checkpoint
    stores, taken from the signature so that no argument is left out of it by hand."""
    names = [n for n in inspect.signature(cls.__init__).parameters if n != "self"]
    return {n: _plain(values[n]) for n in names if n not in exclude}
