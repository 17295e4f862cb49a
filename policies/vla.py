"""Tiny vision-language-action policy: pi0's shape at CPU scale.

A small transformer "VLM" trunk reads one prefix sequence per sample,

    [image patch tokens (To x cameras x h x w) | instruction tokens (L) | state tokens (To) |
     readout tokens (R)],

where image tokens are the last feature map of the :class:`~policies.encoders.ImageEncoder`
CNN (one token per cell, 2-D sine position code), instruction tokens are word embeddings of
:class:`~policies.tokenizer.WordTokenizer` ids (padding masked out of attention) and state tokens
project the normalised proprioception. The R readout tokens after the trunk are the observation
features, (B, R * D). A flow "action expert" predicts the velocity from them: a transformer over
the R readout tokens and Ta action tokens (noisy action + time embedding, as pi0), or the
:class:`~policies.denoiser.ChunkDenoiser` MLP conditioned on the flattened readout.

Everything about the chain (pi0 flow convention, ODE / Flow-SDE / Flow-Noise transitions, exact
log-prob recompute, ``obs_features`` / ``expert_features``) is inherited from
:class:`~policies.flow_matching.FlowChainPolicy`; only the conditioning differs.

Observation batch: ``{"state/<k>": (B, To, D_k), "images/<cam>": (B, To, H, W, 3) uint8,
"language": (B, L) int64 token ids (0 = padding)}``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from policies.denoiser import ChunkDenoiser, time_embedding
from policies.encoders import ImageEncoder, random_shift
from policies.flow_matching import FlowChainPolicy
from policies.normalizer import Normalizer
from policies.tokenizer import LANGUAGE_KEY, PAD_ID, WordTokenizer

EXPERTS = ("transformer", "mlp")


def sincos_2d(h: int, w: int, dim: int, device: torch.device) -> torch.Tensor:
    """(h * w, dim) fixed 2-D sine/cosine position code (dim divisible by 4)."""
    quarter = dim // 4
    freqs = torch.exp(-math.log(100.0) * torch.arange(quarter, device=device) / quarter)
    ys, xs = torch.meshgrid(
        torch.arange(h, device=device), torch.arange(w, device=device), indexing="ij"
    )
    parts = []
    for coord in (ys.reshape(-1), xs.reshape(-1)):
        args = coord.float()[:, None] * freqs[None]
        parts += [torch.sin(args), torch.cos(args)]
    return torch.cat(parts, dim=-1)


class Block(nn.Module):
    """Pre-norm transformer block; ``mask`` (B, N) bool marks tokens that may be attended to.
    Written out (no ``nn.TransformerEncoderLayer``) so that inference and training run the
    same kernels: log-probs must recompute exactly with and without gradients."""

    def __init__(self, dim: int, heads: int, mlp_ratio: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim)
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attn_mask = None if mask is None else mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        x = x + self.proj(y.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class PrefixEncoder(nn.Module):
    """The "VLM": images + instruction + state -> (B, R * D) readout features.

    Args:
        state_dims: ``{"state/<k>": D_k}``. image_keys: cameras. obs_horizon: To.
        vocab_size: token ids (specials included). max_tokens: L.
        dim: D. layers: transformer blocks. heads: attention heads.
        readout_tokens: R. shift: random-shift augmentation [px] in training.
        image_grid: G; each camera's CNN feature map is average-pooled to G x G tokens (a 64 px
            image leaves 16 x 16 maps: 256 tokens per camera made attention ~13x slower to
            train than the MLP image policy).
    """

    def __init__(
        self,
        state_dims: Mapping[str, int],
        image_keys: Sequence[str],
        obs_horizon: int,
        vocab_size: int,
        max_tokens: int,
        dim: int,
        layers: int,
        heads: int,
        readout_tokens: int,
        shift: int = 4,
        image_grid: int = 4,
    ) -> None:
        super().__init__()
        if image_grid < 1:
            raise ValueError(f"image_grid must be >= 1, got {image_grid}")
        self.image_grid = image_grid
        self.state_keys, self.image_keys = list(state_dims), list(image_keys)
        self.obs_horizon, self.max_tokens, self.dim, self.shift = (
            obs_horizon,
            max_tokens,
            dim,
            shift,
        )
        self.cameras = nn.ModuleDict(
            {k.replace("/", "__"): ImageEncoder(dim) for k in self.image_keys}
        )
        self.camera_embed = nn.Parameter(torch.zeros(max(len(self.image_keys), 1), dim))
        self.step_embed = nn.Parameter(torch.zeros(obs_horizon, dim))
        self.token_embed = nn.Embedding(vocab_size, dim, padding_idx=PAD_ID)
        self.token_pos = nn.Parameter(torch.zeros(max_tokens, dim))
        state_in = sum(state_dims.values())
        self.state_proj = nn.Linear(state_in, dim) if state_in else None
        self.readout = nn.Parameter(torch.zeros(readout_tokens, dim))
        for p in (self.camera_embed, self.step_embed, self.token_pos, self.readout):
            nn.init.normal_(p, std=0.02)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.out_norm = nn.LayerNorm(dim)
        self.out_dim = readout_tokens * dim

    def _image_tokens(self, key: str, img: torch.Tensor, cam: int) -> torch.Tensor:
        if img.dim() != 5 or img.shape[1] != self.obs_horizon or img.shape[-1] != 3:
            raise ValueError(
                f"{key}: expected (B, To={self.obs_horizon}, H, W, 3), got {tuple(img.shape)}"
            )
        b, t = img.shape[:2]
        x = img.reshape(b * t, *img.shape[2:]).permute(0, 3, 1, 2).float() / 255.0
        if self.training:
            x = random_shift(x, self.shift)
        enc = cast(ImageEncoder, self.cameras[key.replace("/", "__")])
        fmap = enc.conv(x)  # (B*To, C, h, w)
        if max(fmap.shape[-2:]) > self.image_grid:
            fmap = F.adaptive_avg_pool2d(fmap, self.image_grid)  # (B*To, C, G, G)
        h, w = fmap.shape[-2:]
        tok = enc.head(fmap.flatten(2).transpose(1, 2))  # (B*To, h*w, D)
        tok = tok + sincos_2d(h, w, self.dim, tok.device)[None] + self.camera_embed[cam]
        tok = tok.view(b, t, h * w, self.dim) + self.step_embed[None, :, None]
        return tok.reshape(b, t * h * w, self.dim)

    def forward(self, obs: Mapping[str, torch.Tensor], normalizer: Any) -> torch.Tensor:
        tokens: list[torch.Tensor] = []
        for cam, key in enumerate(self.image_keys):
            tokens.append(self._image_tokens(key, obs[key], cam))
        if LANGUAGE_KEY not in obs:
            raise KeyError(f"a VLA needs the instruction: obs[{LANGUAGE_KEY!r}] (B, L) token ids")
        ids = obs[LANGUAGE_KEY]
        if ids.dim() != 2 or ids.shape[1] != self.max_tokens or ids.is_floating_point():
            raise ValueError(
                f"{LANGUAGE_KEY}: expected (B, L={self.max_tokens}) integer ids, "
                f"got {tuple(ids.shape)} {ids.dtype}"
            )
        b = ids.shape[0]
        tokens.append(self.token_embed(ids.long()) + self.token_pos[None])
        if self.state_proj is not None:
            parts = []
            for key in self.state_keys:
                x = obs[key]
                if x.dim() != 3 or x.shape[:2] != (b, self.obs_horizon):
                    raise ValueError(
                        f"{key}: expected (B={b}, To={self.obs_horizon}, D), got {tuple(x.shape)}"
                    )
                parts.append(normalizer.normalize(key, x.float()))
            tokens.append(self.state_proj(torch.cat(parts, dim=-1)) + self.step_embed[None])
        tokens.append(self.readout[None].expand(b, -1, -1))
        if any(t.shape[0] != b for t in tokens):
            raise ValueError("observation entries have different batch sizes")
        seq = torch.cat(tokens, dim=1)
        start = sum(t.shape[1] for t in tokens[: len(self.image_keys)])  # first word token
        mask = torch.ones(seq.shape[:2], dtype=torch.bool, device=seq.device)
        mask[:, start : start + self.max_tokens] = ids != PAD_ID
        for block in self.blocks:
            seq = block(seq, mask)
        r = self.readout.shape[0]
        return self.out_norm(seq[:, -r:]).flatten(1)


class TransformerExpert(nn.Module):
    """Flow action expert: Ta action tokens (noisy action + time) attend jointly with the R
    readout tokens. ``(x (B, Ta, Da), t (B,), cond (B, R * D)) -> (v (B, Ta, Da), feat (B, D))``
    where ``feat`` is the mean of the action tokens' outputs (noise and value heads read it)."""

    def __init__(
        self, action_dim: int, horizon: int, dim: int, readout_tokens: int, layers: int, heads: int
    ) -> None:
        super().__init__()
        self.dim, self.readout_tokens = dim, readout_tokens
        self.action_in = nn.Linear(action_dim, dim)
        self.fuse = nn.Sequential(nn.Linear(2 * dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.pos = nn.Parameter(torch.randn(horizon, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.out_norm = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, action_dim)
        self.hidden = dim

    def forward(
        self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        b, ta, _ = x.shape
        temb = time_embedding(t.expand(b) if t.dim() == 0 else t, self.dim)
        a = self.action_in(x)
        a = self.fuse(torch.cat([a, temb[:, None].expand(-1, ta, -1)], dim=-1)) + self.pos[None]
        seq = torch.cat([cond.view(b, self.readout_tokens, self.dim), a], dim=1)
        for block in self.blocks:
            seq = block(seq)
        h = self.out_norm(seq[:, self.readout_tokens :])
        return self.out(h), h.mean(dim=1)


class TinyVLA(FlowChainPolicy):
    """Images + instruction + state -> flow action chunks (see the module docstring).

    Args:
        state_dims: ``{"state/<k>": D}`` (proprioception; may be empty with cameras).
        action_dim: Da. image_keys: cameras (``images/<cam>``).
        obs_horizon: To. action_horizon: Ta. num_steps: K.
        vocab: tokenizer words (:class:`~policies.tokenizer.WordTokenizer`). max_tokens: L.
        dim: D, width of trunk and transformer expert. trunk_layers, expert_layers: blocks.
        heads: attention heads. readout_tokens: R.
        expert: ``"transformer"`` (pi0-style) or ``"mlp"`` (ChunkDenoiser on the readout).
        hidden, depth: width and blocks of the ``"mlp"`` expert.
        image_shift: random-shift augmentation [px].
        image_grid: G, image tokens per camera and step are G x G (pooled CNN features).
        time_beta, noise_std_bounds, sde_noise_level, stats: as
            :class:`~policies.flow_matching.FlowMatchingPolicy`.
    """

    policy_type = "vla"

    def __init__(
        self,
        state_dims: Mapping[str, int],
        action_dim: int = 7,
        image_keys: Sequence[str] = (),
        obs_horizon: int = 2,
        action_horizon: int = 16,
        num_steps: int = 10,
        vocab: Sequence[str] = (),
        max_tokens: int = 16,
        dim: int = 128,
        trunk_layers: int = 2,
        expert_layers: int = 2,
        heads: int = 4,
        readout_tokens: int = 4,
        expert: str = "transformer",
        hidden: int = 256,
        depth: int = 3,
        image_shift: int = 4,
        image_grid: int = 4,
        time_beta: tuple[float, float] = (1.5, 1.0),
        noise_std_bounds: tuple[float, float] = (0.08, 0.16),
        sde_noise_level: float = 0.5,
        stats: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        if expert not in EXPERTS:
            raise ValueError(f"expert must be one of {EXPERTS}, got {expert!r}")
        if dim % heads or dim % 4:
            raise ValueError(f"dim must be divisible by heads and by 4, got {dim}, {heads}")
        if not state_dims and not image_keys:
            raise ValueError("a VLA needs at least one state or image key")
        normalizer = Normalizer.for_policy(state_dims, action_dim, stats)
        tokenizer = WordTokenizer(vocab, max_tokens)
        encoder = PrefixEncoder(
            state_dims,
            image_keys,
            obs_horizon,
            tokenizer.vocab_size,
            max_tokens,
            dim,
            trunk_layers,
            heads,
            readout_tokens,
            image_shift,
            image_grid,
        )
        net: nn.Module
        if expert == "transformer":
            net = TransformerExpert(
                action_dim, action_horizon, dim, readout_tokens, expert_layers, heads
            )
            net_hidden = dim
        else:
            net = ChunkDenoiser(action_dim, action_horizon, encoder.out_dim, hidden, depth)
            net_hidden = hidden
        super().__init__(
            normalizer=normalizer,
            encoder=encoder,
            net=net,
            net_hidden=net_hidden,
            action_dim=action_dim,
            obs_horizon=obs_horizon,
            action_horizon=action_horizon,
            num_steps=num_steps,
            time_beta=time_beta,
            noise_std_bounds=noise_std_bounds,
            sde_noise_level=sde_noise_level,
        )
        self.tokenizer = tokenizer
        self.config: dict[str, Any] = {
            "state_dims": dict(state_dims),
            "action_dim": action_dim,
            "image_keys": list(image_keys),
            "obs_horizon": obs_horizon,
            "action_horizon": action_horizon,
            "num_steps": num_steps,
            "vocab": list(vocab),
            "max_tokens": max_tokens,
            "dim": dim,
            "trunk_layers": trunk_layers,
            "expert_layers": expert_layers,
            "heads": heads,
            "readout_tokens": readout_tokens,
            "expert": expert,
            "hidden": hidden,
            "depth": depth,
            "image_grid": image_grid,
            "image_shift": image_shift,
            "time_beta": list(time_beta),
            "noise_std_bounds": list(noise_std_bounds),
            "sde_noise_level": sde_noise_level,
        }

    def encode(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """(B, R * D) readout features of the prefix."""
        return self.encoder(obs, self.normalizer)

    def tokenize(self, texts: Sequence[str]) -> torch.Tensor:
        """(B, L) int64 token ids of instructions, the ``language`` entry of an obs batch."""
        return torch.from_numpy(self.tokenizer.encode_batch(texts)[0]).to(self.device)
