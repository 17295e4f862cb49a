"""Observation encoders: state MLP and a small CNN per camera, fused into one feature vector.

Input: ``{"state/<k>": (B, To, D_k), "images/<cam>": (B, To, H, W, 3) uint8}``.
Output: (B, F) features. State entries are normalised by the policy's
:class:`~policies.normalizer.Normalizer` first; images are scaled to [0, 1] here and, in
training, randomly shifted by up to ``shift`` pixels (DrQ-style augmentation: pad with edge
pixels, random crop back).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from policies.normalizer import Normalizer


def random_shift(
    img: torch.Tensor, shift: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """(N, C, H, W) images each translated by an integer in [-shift, shift] px (edge padded)."""
    if shift <= 0:
        return img
    n, _, h, w = img.shape
    padded = F.pad(img, (shift, shift, shift, shift), mode="replicate")
    # One grid per image: integer offsets, so the crop is exact (no interpolation blur).
    dx = torch.randint(0, 2 * shift + 1, (n,), generator=generator, device=img.device)
    dy = torch.randint(0, 2 * shift + 1, (n,), generator=generator, device=img.device)
    rows = (dy[:, None] + torch.arange(h, device=img.device)[None]).view(n, 1, h, 1)
    cols = (dx[:, None] + torch.arange(w, device=img.device)[None]).view(n, 1, 1, w)
    idx_n = torch.arange(n, device=img.device).view(n, 1, 1, 1)
    return padded.permute(0, 2, 3, 1)[idx_n, rows, cols].squeeze(1).permute(0, 3, 1, 2)


class SpatialSoftmax(nn.Module):
    """(N, C, h, w) feature maps -> (N, 2K) expected image coordinates of K learned keypoints.

    A 1x1 convolution makes K heat maps; a softmax over each map (learned temperature) gives a
    distribution whose mean (x, y) in [-1, 1] is the keypoint. Unlike global average pooling,
    this keeps *where* things are, which a policy that must reach an object needs.
    """

    def __init__(self, channels: int, keypoints: int = 32) -> None:
        super().__init__()
        self.proj = nn.Conv2d(channels, keypoints, 1)
        self.log_temperature = nn.Parameter(torch.zeros(()))

    def forward(self, feat: torch.Tensor) -> torch.Tensor:
        n, _, h, w = feat.shape
        maps = self.proj(feat).flatten(2) / self.log_temperature.exp()  # (N, K, h*w)
        prob = maps.softmax(dim=-1)
        ys = torch.linspace(-1.0, 1.0, h, device=feat.device, dtype=feat.dtype)
        xs = torch.linspace(-1.0, 1.0, w, device=feat.device, dtype=feat.dtype)
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        x = (prob * gx.reshape(1, 1, -1)).sum(-1)
        y = (prob * gy.reshape(1, 1, -1)).sum(-1)
        return torch.cat([x, y], dim=-1).view(n, -1)


def conv_stack(channels: Sequence[int], strides: Sequence[int]) -> nn.Sequential:
    """3x3 convolutions (``channels[i]`` out, ``strides[i]``), each with GroupNorm and SiLU:
    (N, 3, H, W) -> (N, channels[-1], H / prod(strides), W / prod(strides))."""
    if len(channels) != len(strides) or not channels:
        raise ValueError(f"channels {tuple(channels)} and strides {tuple(strides)} differ")
    layers: list[nn.Module] = []
    c_in = 3
    for c, s in zip(channels, strides, strict=True):
        layers += [nn.Conv2d(c_in, c, 3, stride=s, padding=1), nn.GroupNorm(8, c), nn.SiLU()]
        c_in = c
    return nn.Sequential(*layers)


class ImageEncoder(nn.Module):
    """Small CNN: (N, 3, H, W) in [0, 1] -> (N, out_dim).

    Four 3x3 convolutions (strides 2, 1, 2, 1: a 64 px image leaves 16x16 maps) with GroupNorm,
    then spatial-softmax keypoints and a linear layer.
    """

    def __init__(
        self,
        out_dim: int = 64,
        channels: Sequence[int] = (32, 32, 64, 64),
        strides: Sequence[int] = (2, 1, 2, 1),
        keypoints: int = 32,
    ) -> None:
        super().__init__()
        self.conv = conv_stack(channels, strides)
        self.pool = SpatialSoftmax(channels[-1], keypoints)
        self.head = nn.Linear(2 * keypoints, out_dim)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.conv(img)))


class ObsEncoder(nn.Module):
    """Encodes an observation history into one (B, out_dim) vector.

    Args:
        state_dims: ``{"state/<k>": D_k}`` state entries used (in this order).
        image_keys: ``["images/<cam>", ...]`` cameras used (one CNN each).
        obs_horizon: To.
        out_dim: F.
        image_feature_dim: per-camera CNN output.
        shift: random-shift augmentation [px] in training mode.
    """

    def __init__(
        self,
        state_dims: Mapping[str, int],
        image_keys: Sequence[str] = (),
        obs_horizon: int = 2,
        out_dim: int = 256,
        image_feature_dim: int = 64,
        shift: int = 4,
    ) -> None:
        super().__init__()
        if not state_dims and not image_keys:
            raise ValueError("an observation encoder needs at least one state or image key")
        self.state_keys = list(state_dims)
        self.image_keys = list(image_keys)
        self.obs_horizon = obs_horizon
        self.shift = shift
        self.cameras = nn.ModuleDict(
            {k.replace("/", "__"): ImageEncoder(image_feature_dim) for k in self.image_keys}
        )
        in_dim = obs_horizon * (sum(state_dims.values()) + image_feature_dim * len(self.image_keys))
        self.mlp = nn.Sequential(
            nn.Linear(in_dim, out_dim),
            nn.LayerNorm(out_dim),
            nn.SiLU(),
            nn.Linear(out_dim, out_dim),
        )
        self.out_dim = out_dim

    def forward(self, obs: Mapping[str, torch.Tensor], normalizer: Normalizer) -> torch.Tensor:
        parts = []
        batch = None
        for key in self.state_keys:
            x = obs[key]
            if x.dim() != 3 or x.shape[1] != self.obs_horizon:
                raise ValueError(
                    f"{key}: expected (B, To={self.obs_horizon}, D), got {tuple(x.shape)}"
                )
            batch = x.shape[0]
            parts.append(normalizer.normalize(key, x.float()).flatten(1))
        for key in self.image_keys:
            img = obs[key]
            if img.dim() != 5 or img.shape[1] != self.obs_horizon or img.shape[-1] != 3:
                raise ValueError(
                    f"{key}: expected (B, To={self.obs_horizon}, H, W, 3), got {tuple(img.shape)}"
                )
            b, t = img.shape[:2]
            x = img.reshape(b * t, *img.shape[2:]).permute(0, 3, 1, 2).float() / 255.0
            if self.training:
                x = random_shift(x, self.shift)
            feat = self.cameras[key.replace("/", "__")](x)
            parts.append(feat.view(b, -1))
        if batch is not None and any(p.shape[0] != batch for p in parts):
            raise ValueError("observation entries have different batch sizes")
        return self.mlp(torch.cat(parts, dim=-1))
