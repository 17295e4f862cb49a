"""What an RL agent on a VLA reads: proprioception plus the VLA's own estimate of the scene.

A VLA trained with an auxiliary state head (``robotrl train-bc policy=vla aux_keys=[...]``)
estimates the privileged task state (object positions, the named object, its face yaw) from its
cameras and its instruction. :class:`PerceptionFeaturizer` appends that estimate (normalised, as
the head predicts it) to the standardised state features of a
:class:`robotrl.algos.residual.StateFeaturizer`: the agent sees the scene through the policy's
eyes, with nothing a robot would not have at run time.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from policies.tokenizer import LANGUAGE_KEY
from robotrl.algos.relative_features import RelativeFeaturizer
from robotrl.algos.residual import StateFeaturizer

log = logging.getLogger(__name__)

# what an RL agent on a base may read (``features=``)
FEATURES = ("state", "relative", "perception")


def featurizer_for(
    features: str, state: StateFeaturizer, policy: Any
) -> StateFeaturizer | RelativeFeaturizer | PerceptionFeaturizer:
    """The featurizer of a ``features`` setting: ``state`` itself; ``relative``: a
    :class:`RelativeFeaturizer` over it (objects relative to the TCP), or ``state`` alone, with a
    warning, when its keys hold no TCP or no object position (a real arm's state); ``perception``:
    a :class:`PerceptionFeaturizer` of ``policy`` over it.

    Raises:
        ValueError: an unknown ``features``, or a policy that does not perceive.
    """
    if features not in FEATURES:
        raise ValueError(f"features must be one of {FEATURES}, got {features!r}")
    if features == "perception":
        return PerceptionFeaturizer(state, policy)
    if features == "relative":
        try:
            return RelativeFeaturizer(state)
        except ValueError as err:
            log.warning("%s; the agent reads the state alone", err)
    return state


class PerceptionFeaturizer:
    """State features (O_s) + the policy's perceived state (A): (..., O_s + A) float32.

    Args:
        state: the standardised proprioception features.
        policy: a VLA with an auxiliary state head (``perceives``; ``perceive(obs)``).

    Raises:
        ValueError: the policy has no auxiliary state head.
    """

    def __init__(self, state: StateFeaturizer, policy: Any) -> None:
        if not getattr(policy, "perceives", False):
            raise ValueError(
                "features=perception needs a policy that perceives the task state: a VLA "
                "trained with aux_keys"
            )
        self.state, self.policy = state, policy
        self.policy_state_keys = list(policy.config["state_dims"])
        self.image_keys = list(policy.config["image_keys"])
        self.keys = list(dict.fromkeys([*state.keys, *self.policy_state_keys, *self.image_keys]))
        self.raw_keys = [*self.keys, LANGUAGE_KEY]  # what __call__ reads of an observation
        self.perceived_dim = int(sum(policy.aux_dims.values()))

    @property
    def dim(self) -> int:
        return self.state.dim + self.perceived_dim

    @torch.no_grad()
    def _perceive(self, window: Mapping[str, torch.Tensor]) -> np.ndarray:
        return self.policy.perceive(window).cpu().numpy().astype(np.float32)

    def __call__(self, obs: Mapping[str, Any]) -> np.ndarray:
        """(B, O) features of a batch of raw env observations: ``state/*`` (B, D), images
        (B, H, W, 3) uint8 and the instruction ``language`` (B,) str."""
        to = int(self.policy.obs_horizon)
        window = {
            k: torch.from_numpy(np.asarray(obs[k]))[:, None].expand(-1, to, *np.shape(obs[k])[1:])
            for k in [*self.policy_state_keys, *self.image_keys]
        }
        texts = [str(t) for t in np.asarray(obs[LANGUAGE_KEY]).reshape(-1)]
        window[LANGUAGE_KEY] = torch.from_numpy(self.policy.tokenizer.encode_batch(texts)[0])
        return np.concatenate([self.state(obs), self._perceive(window)], axis=-1)

    def from_window(self, window: Mapping[str, torch.Tensor]) -> np.ndarray:
        """(B, O) features of a policy's observation window (what a chunk runner feeds it:
        (B, To, ...) entries and ``language`` (B, L) token ids)."""
        latest = {k: window[k][:, -1].numpy() for k in self.state.keys}
        return np.concatenate([self.state(latest), self._perceive(window)], axis=-1)
