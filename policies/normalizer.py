"""Per-key affine normalisation that lives inside the policy (saved with its weights).

Observations (state keys) are standardised (mean/std); actions are mapped from their
[min, max] range onto [-1, 1] (the range flow/diffusion noise lives in). Image keys are left
to the image encoder (uint8 -> [0, 1] there).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

MIN_STD = 1e-3  # below this a feature is (nearly) constant: do not blow it up
MIN_RANGE = 1e-3


def _key(name: str) -> str:
    return name.replace("/", "__")  # module buffer names may not contain '/' or '.'


class Normalizer(nn.Module):
    """Holds ``scale``/``offset`` buffers per key: ``normalize(x) = (x - offset) * scale``.

    Args:
        stats: ``{key: {"mean", "std", "min", "max"}}`` (numpy arrays, one value per feature),
            e.g. from :func:`robotrl.datasets.compute_stats`.
        modes: ``{key: "meanstd" | "minmax"}``; keys not listed use ``default_mode``.
    """

    def __init__(
        self,
        stats: Mapping[str, Mapping[str, np.ndarray]],
        modes: Mapping[str, str] | None = None,
        default_mode: str = "meanstd",
    ) -> None:
        super().__init__()
        self.keys = sorted(stats)
        modes = dict(modes or {})
        for key in self.keys:
            mode = modes.get(key, default_mode)
            s = {k: np.asarray(v, dtype=np.float64) for k, v in stats[key].items()}
            if mode == "meanstd":
                offset = s["mean"]
                scale = 1.0 / np.maximum(s["std"], MIN_STD)
            elif mode == "minmax":
                rng = np.maximum(s["max"] - s["min"], MIN_RANGE)
                offset = (s["max"] + s["min"]) / 2
                scale = 2.0 / rng
            else:
                raise ValueError(f"normaliser mode must be meanstd or minmax, got {mode!r}")
            if not (np.all(np.isfinite(offset)) and np.all(np.isfinite(scale))):
                raise ValueError(f"non-finite statistics for {key!r}")
            self.register_buffer(f"{_key(key)}__scale", torch.as_tensor(scale, dtype=torch.float32))
            self.register_buffer(
                f"{_key(key)}__offset", torch.as_tensor(offset, dtype=torch.float32)
            )

    @classmethod
    def for_policy(
        cls,
        state_dims: Mapping[str, int],
        action_dim: int,
        stats: Mapping[str, Mapping[str, np.ndarray]] | None = None,
    ) -> Normalizer:
        """A chunk policy's normaliser: state keys standardised, ``action`` min/max -> [-1, 1].

        Without ``stats``, an identity placeholder of the right shapes (a checkpoint's weights
        are loaded over it)."""
        if stats is None:
            return cls.placeholder({**state_dims, "action": action_dim})
        missing = [k for k in [*state_dims, "action"] if k not in stats]
        if missing:
            raise KeyError(f"no normalisation statistics for {missing}")
        return cls({k: stats[k] for k in [*state_dims, "action"]}, modes={"action": "minmax"})

    @classmethod
    def placeholder(cls, shapes: Mapping[str, int]) -> Normalizer:
        """Identity normaliser with the right buffer shapes (weights are loaded over it)."""
        stats = {k: {"mean": np.zeros(n), "std": np.ones(n)} for k, n in shapes.items()}
        return cls(stats)

    def _params(self, key: str) -> tuple[torch.Tensor, torch.Tensor]:
        try:
            return getattr(self, f"{_key(key)}__scale"), getattr(self, f"{_key(key)}__offset")
        except AttributeError:
            raise KeyError(f"no normalisation statistics for {key!r}; have {self.keys}") from None

    def affine(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """``(offset, scale)`` of ``key`` (numpy): ``normalize(x) = (x - offset) * scale``."""
        scale, offset = self._params(key)
        return offset.detach().cpu().numpy(), scale.detach().cpu().numpy()

    def normalize(self, key: str, x: torch.Tensor) -> torch.Tensor:
        scale, offset = self._params(key)
        return (x - offset) * scale

    def unnormalize(self, key: str, x: torch.Tensor) -> torch.Tensor:
        scale, offset = self._params(key)
        return x / scale + offset
