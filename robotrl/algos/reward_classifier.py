"""Success reward classifier (HIL-SERL): p(success | camera images [, state]) as a sparse reward.

On hardware there is no simulator to say when the task is done; a binary classifier on the
camera images gives the reward instead (1 when p >= threshold, else 0) and may end the episode.

Model: one small CNN per camera (:class:`policies.encoders.ImageEncoder`, random-shift
augmentation in training), optional standardised state, concatenated into a small MLP head
with one logit.

Frozen encoder. HIL-SERL freezes an ImageNet-pretrained ResNet-10 because fine-tuning millions
of weights on a few hundred labelled frames overfits. We may not download weights, and a frozen
*random* CNN is a poor feature extractor, so by default the small CNN (~0.1 M weights) is trained
end to end with augmentation on every labelled frame, then frozen: :meth:`freeze` (and loading a
checkpoint) puts the whole model in eval mode with no gradients, so the reward cannot drift while
the RL agent trains on it. ``train_encoder=False`` in training keeps the encoder fixed and fits
only the head, e.g. to relabel a new task on an encoder from an earlier checkpoint.

Threshold. A false positive pays the agent for a failure, which it then learns to repeat
(reward hacking); a false negative only withholds one reward. So the threshold is the lowest one
that reaches a target precision on validation episodes (maximum recall subject to precision),
never below ``MIN_THRESHOLD``; see :func:`robotrl.algos.reward_training.select_threshold`.

Shape letters: B batch, H x W image size, D_k state entry size.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from policies.checkpoint import CONFIG, CheckpointError, load_into, read_doc, save_module
from policies.encoders import ImageEncoder, random_shift

MODEL_TYPE = "reward_classifier"
MIN_THRESHOLD = 0.5  # below this the classifier thinks failure is more likely than success


class RewardClassifier(nn.Module):
    """Binary success classifier.

    Args:
        image_keys: ``["images/<cam>", ...]``, one CNN each (at least one).
        image_size: (H, W) the model is trained on; other sizes are rejected.
        state_dims: ``{"state/<k>": D_k}`` state entries fed to the head (standardised with
            statistics set by :meth:`set_state_stats`), or None.
        feature_dim: per-camera CNN output.
        hidden: head width.
        shift: random-shift augmentation [px] in training mode.
        threshold: probability at which :meth:`reward` says success.
    """

    state_mean: torch.Tensor  # buffers (register_buffer)
    state_std: torch.Tensor

    def __init__(
        self,
        image_keys: Sequence[str],
        image_size: Sequence[int] = (64, 64),
        state_dims: Mapping[str, int] | None = None,
        feature_dim: int = 64,
        hidden: int = 256,
        shift: int = 4,
        threshold: float = MIN_THRESHOLD,
    ) -> None:
        super().__init__()
        self.image_keys = list(image_keys)
        if not self.image_keys or not all(k.startswith("images/") for k in self.image_keys):
            raise ValueError(
                f"image_keys must be a non-empty list of 'images/<cam>', got {image_keys}"
            )
        self.state_dims = {str(k): int(v) for k, v in (state_dims or {}).items()}
        if not all(k.startswith("state/") for k in self.state_dims):
            raise ValueError(f"state_dims keys must be 'state/<k>', got {list(self.state_dims)}")
        if len(image_size) != 2:
            raise ValueError(f"image_size must be (H, W), got {image_size}")
        self.image_size = (int(image_size[0]), int(image_size[1]))
        self.feature_dim, self.hidden, self.shift = int(feature_dim), int(hidden), int(shift)
        self.threshold = float(threshold)
        self.encoders = nn.ModuleDict(
            {_name(k): ImageEncoder(self.feature_dim) for k in self.image_keys}
        )
        d_state = sum(self.state_dims.values())
        self.register_buffer("state_mean", torch.zeros(d_state))
        self.register_buffer("state_std", torch.ones(d_state))
        self.head = nn.Sequential(
            nn.Linear(self.feature_dim * len(self.image_keys) + d_state, self.hidden),
            nn.LayerNorm(self.hidden),
            nn.SiLU(),
            nn.Linear(self.hidden, 1),
        )

    @property
    def config(self) -> dict[str, Any]:
        """Constructor arguments (YAML-able) that rebuild this model, threshold included."""
        return {
            "image_keys": self.image_keys,
            "image_size": list(self.image_size),
            "state_dims": self.state_dims,
            "feature_dim": self.feature_dim,
            "hidden": self.hidden,
            "shift": self.shift,
            "threshold": self.threshold,
        }

    @property
    def keys(self) -> list[str]:
        """Observation keys the classifier reads."""
        return [*self.image_keys, *self.state_dims]

    def set_state_stats(self, mean: np.ndarray, std: np.ndarray) -> None:
        """Standardisation of the concatenated state entries: (D,) mean and std."""
        d = self.state_mean.shape[0]
        mean, std = (
            np.asarray(mean, np.float32).reshape(-1),
            np.asarray(std, np.float32).reshape(-1),
        )
        if mean.shape != (d,) or std.shape != (d,):
            raise ValueError(f"state stats must have shape ({d},), got {mean.shape}, {std.shape}")
        self.state_mean.copy_(torch.from_numpy(mean))
        self.state_std.copy_(torch.from_numpy(np.maximum(std, 1e-3)))

    def freeze(self) -> RewardClassifier:
        """Deployment mode: eval, no gradients anywhere."""
        self.eval()
        self.requires_grad_(False)
        return self

    def forward(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Logits (B,) from ``{"images/<cam>": (B, H, W, 3) uint8, "state/<k>": (B, D_k)}``."""
        batch = self._check(obs)
        parts = []
        for key in self.image_keys:
            x = torch.as_tensor(obs[key]).permute(0, 3, 1, 2).float() / 255.0
            if self.training:
                x = random_shift(x, self.shift)
            parts.append(self.encoders[_name(key)](x))
        if self.state_dims:
            s = torch.cat(
                [torch.as_tensor(obs[k]).float().reshape(batch, -1) for k in self.state_dims], -1
            )
            parts.append((s - self.state_mean) / self.state_std)
        return self.head(torch.cat(parts, dim=-1)).squeeze(-1)

    def predict_proba(self, obs: Mapping[str, Any]) -> np.ndarray:
        """(B,) success probabilities of a batch (numpy or torch entries; extra keys ignored)."""
        was_training = self.training
        self.eval()
        try:
            with torch.no_grad():
                batch = {k: torch.as_tensor(np.asarray(obs[k])) for k in self._present(obs)}
                return torch.sigmoid(self(batch)).numpy().astype(np.float64)
        finally:
            self.train(was_training)

    def reward(self, obs: Mapping[str, Any]) -> float:
        """1.0 if one (unbatched) observation from the env shows success, else 0.0."""
        batch = {k: np.asarray(obs[k])[None] for k in self._present(obs)}
        return float(self.predict_proba(batch)[0] >= self.threshold)

    def _present(self, obs: Mapping[str, Any]) -> list[str]:
        missing = [k for k in self.keys if k not in obs]
        if missing:
            raise ValueError(
                f"reward classifier needs observation keys {missing}; got {sorted(obs)}"
            )
        return self.keys

    def _check(self, obs: Mapping[str, torch.Tensor]) -> int:
        self._present(obs)
        batch = int(obs[self.image_keys[0]].shape[0])
        for key in self.image_keys:
            shape = tuple(obs[key].shape)
            if len(shape) != 4 or shape[1:] != (*self.image_size, 3):
                raise ValueError(
                    f"{key}: expected (B, {self.image_size[0]}, {self.image_size[1]}, 3) uint8 "
                    f"(the size the classifier was trained on), got {shape}"
                )
            if obs[key].dtype != torch.uint8:
                raise ValueError(f"{key}: expected uint8 images, got {obs[key].dtype}")
            if shape[0] != batch:
                raise ValueError(f"{key}: batch {shape[0]} differs from {batch}")
        for key, dim in self.state_dims.items():
            shape = tuple(obs[key].shape)
            if len(shape) < 1 or shape[0] != batch or int(np.prod(shape[1:])) != dim:
                raise ValueError(f"{key}: expected ({batch}, {dim}), got {shape}")
        return batch


def _name(key: str) -> str:
    return key.replace("/", "__")  # module names may not contain '/' or '.'


def save_reward_classifier(
    model: RewardClassifier, directory: str | os.PathLike[str], meta: dict[str, Any] | None = None
) -> Path:
    """Write ``model.safetensors`` and ``config.yaml`` (constructor config, ``meta``) to
    ``directory`` (created); returns the directory."""
    doc = {"model_type": MODEL_TYPE, "config": model.config, "meta": meta or {}}
    return save_module(model, directory, doc)


def load_reward_classifier(
    directory: str | os.PathLike[str],
) -> tuple[RewardClassifier, dict[str, Any]]:
    """Rebuild a saved classifier, frozen (eval, no gradients); returns ``(model, meta)``."""
    d = Path(directory)
    doc = read_doc(d, "reward classifier")
    if doc.get("model_type") != MODEL_TYPE or "config" not in doc:
        raise CheckpointError(f"{d / CONFIG} does not describe a {MODEL_TYPE}")
    try:
        model = RewardClassifier(**doc["config"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{d / CONFIG}: config does not fit the classifier: {exc}") from exc
    load_into(model, d)
    return model.freeze(), dict(doc.get("meta") or {})
