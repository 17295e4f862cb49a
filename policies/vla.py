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

Auxiliary state loss (training only): with ``aux_dims`` (privileged sim state such as object
positions, ``{"state/<k>": D_k}``), an MLP head predicts those entries' normalised values at the
last observation step from the readout features (or the cameras' keypoints), and
``aux_weight`` times its MSE joins the flow loss. The head makes the trunk locate the objects
and, for entries that depend on the instruction (the named cube's position), ground the words;
inference never reads those entries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from policies.base import constructor_config
from policies.denoiser import ChunkDenoiser, time_embedding
from policies.encoders import SpatialSoftmax, conv_stack, random_shift
from policies.flow_matching import FlowChainPolicy
from policies.normalizer import Normalizer
from policies.tokenizer import LANGUAGE_KEY, PAD_ID, WordTokenizer

EXPERTS = ("transformer", "mlp")
EXPERT_INPUTS = ("readout", "readout+state", "state")
AUX_INPUTS = ("readout", "keypoints", "grounded")
CONFIDENCE_SCALE = 10.0  # [1/nat]: a one-hot word outweighs a two-way one by e^6.9


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
        image_grid: G; each camera's CNN feature map is average-pooled to G x G tokens.
        image_channels, image_strides: the per-camera CNN (:func:`~policies.encoders.conv_stack`).
        keypoints: K; each camera also gives one token of K spatial-softmax keypoints (the
            sub-cell image coordinates of K learned features: where things are, finer than G).
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
        image_channels: Sequence[int] = (16, 32, 64, 64),
        image_strides: Sequence[int] = (2, 2, 2, 1),
        keypoints: int = 16,
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
            {
                k.replace("/", "__"): conv_stack(image_channels, image_strides)
                for k in self.image_keys
            }
        )
        self.image_proj = nn.Linear(image_channels[-1], dim)  # CNN feature map cell -> token
        self.keypoints = nn.ModuleDict(
            {
                k.replace("/", "__"): SpatialSoftmax(image_channels[-1], keypoints)
                for k in image_keys
            }
        )
        self.keypoint_proj = nn.Linear(2 * keypoints, dim)
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

    def _image_tokens(
        self, key: str, img: torch.Tensor, cam: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens (B, To * (G * G + 1), D), keypoints of the last step (B, 2K))."""
        if img.dim() != 5 or img.shape[1] != self.obs_horizon or img.shape[-1] != 3:
            raise ValueError(
                f"{key}: expected (B, To={self.obs_horizon}, H, W, 3), got {tuple(img.shape)}"
            )
        b, t = img.shape[:2]
        x = img.reshape(b * t, *img.shape[2:]).permute(0, 3, 1, 2).float() / 255.0
        if self.training:
            x = random_shift(x, self.shift)
        name = key.replace("/", "__")
        fmap = self.cameras[name](x)  # (B*To, C, h, w)
        points = self.keypoints[name](fmap)  # (B*To, 2K) image coordinates in [-1, 1]
        kp = self.keypoint_proj(points)[:, None]  # (B*To, 1, D)
        if max(fmap.shape[-2:]) > self.image_grid:
            fmap = F.adaptive_avg_pool2d(fmap, self.image_grid)  # (B*To, C, G, G)
        h, w = fmap.shape[-2:]
        tok = self.image_proj(fmap.flatten(2).transpose(1, 2))  # (B*To, h*w, D)
        tok = tok + sincos_2d(h, w, self.dim, tok.device)[None]
        tok = torch.cat([tok, kp], dim=1) + self.camera_embed[cam]  # (B*To, h*w + 1, D)
        tok = tok.view(b, t, h * w + 1, self.dim) + self.step_embed[None, :, None]
        return tok.reshape(b, t * (h * w + 1), self.dim), points.view(b, t, -1)[:, -1]

    def instruction_and_proprio(
        self, obs: Mapping[str, torch.Tensor], normalizer: Any
    ) -> torch.Tensor:
        """(B, 2, D): the mean word embedding of the instruction (padding excluded) and the
        projected proprioception of the last step (zeros without state keys)."""
        ids = obs[LANGUAGE_KEY].long()
        mask = (ids != PAD_ID).float()[..., None]
        words = (self.token_embed(ids) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        if self.state_proj is None:
            proprio = torch.zeros_like(words)
        else:
            x = [normalizer.normalize(k, obs[k][:, -1:].float()) for k in self.state_keys]
            proprio = self.state_proj(torch.cat(x, dim=-1))[:, 0]
        return torch.stack([words, proprio], dim=1)

    def forward(self, obs: Mapping[str, torch.Tensor], normalizer: Any) -> torch.Tensor:
        """(B, R * D) readout features."""
        return self.features(obs, normalizer)[0]

    def features(
        self, obs: Mapping[str, torch.Tensor], normalizer: Any, readout: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(readout (B, R * D), keypoints of every camera at the last step (B, cams * 2K)).
        ``readout=False`` skips the transformer (the readout comes back (B, 0))."""
        tokens: list[torch.Tensor] = []
        points: list[torch.Tensor] = []
        for cam, key in enumerate(self.image_keys):
            tok, pts = self._image_tokens(key, obs[key], cam)
            tokens.append(tok)
            points.append(pts)
        if not readout:
            kps = torch.cat(points, dim=-1)
            return kps.new_zeros(kps.shape[0], 0), kps
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
        b = seq.shape[0]
        kps = torch.cat(points, dim=-1) if points else seq.new_zeros(b, 0)
        return self.out_norm(seq[:, -r:]).flatten(1), kps


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
        expert: ``"transformer"`` (pi0-style) or ``"mlp"`` (ChunkDenoiser on the conditioning);
            None: ``"mlp"`` with ``expert_input="state"``, else ``"transformer"``.
        hidden, depth: width and blocks of the ``"mlp"`` expert.
        image_shift: random-shift augmentation [px].
        image_grid: G, image tokens per camera and step are G x G (pooled CNN features).
        image_channels, image_strides, keypoints: the per-camera CNN and keypoint token
            (:class:`PrefixEncoder`).
        aux_dims: ``{"state/<k>": D_k}`` privileged entries the auxiliary head predicts
            (training batches must hold them; inference does not read them).
        aux_weight: weight of the auxiliary MSE in the training loss.
        expert_input: what the action expert is conditioned on. ``"readout"``: the R readout
            tokens (pi0's way). ``"readout+state"``: those and one token of the privileged state.
            ``"state"``: the state token, the instruction's mean word embedding and the
            proprioception (3 tokens; the images reach it only through the state). The state
            token carries, in training, the true normalised ``aux_dims`` state plus Gaussian
            noise of std ``state_token_noise`` (teacher forcing) and, at inference, the
            auxiliary head's prediction from the images and the instruction: the expert learns
            to act from a state as a state policy does while the trunk learns to perceive it.
            None: ``"state"`` with ``aux_dims``, else ``"readout"``.
        aux_input: what the auxiliary head reads: ``"readout"`` (the trunk's output),
            ``"keypoints"`` (every camera's spatial-softmax keypoints and the instruction's
            mean word embedding) or ``"grounded"``: the keypoints alone give the entries that do
            not depend on the instruction and ``aux_candidates`` candidates for those that do
            (``aux_instructed``), and the instruction's words only choose among the candidates
            (:meth:`choose`: a colour word learnt with one verb names its object with the
            other). None: ``"grounded"`` with cameras and instructed entries, ``"keypoints"``
            with cameras only, else ``"readout"``.
        aux_instructed: the ``aux_dims`` entries that depend on the instruction (the named
            object's); None: those whose name starts with ``state/target_``.
        aux_candidates: the candidates per instructed entry (``aux_input="grounded"``).
        word_dropout: in training, the probability that the grounded head's choice ignores a
            word (never all of them).
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
        expert: str | None = None,
        hidden: int = 256,
        depth: int = 3,
        image_shift: int = 4,
        image_grid: int = 4,
        image_channels: Sequence[int] = (16, 32, 64, 64),
        image_strides: Sequence[int] = (2, 2, 2, 1),
        keypoints: int = 16,
        time_beta: tuple[float, float] = (1.5, 1.0),
        noise_std_bounds: tuple[float, float] = (0.08, 0.16),
        sde_noise_level: float = 0.5,
        aux_dims: Mapping[str, int] | None = None,
        aux_weight: float = 1.0,
        expert_input: str | None = None,
        state_token_noise: float = 0.02,
        aux_input: str | None = None,
        aux_instructed: Sequence[str] | None = None,
        aux_candidates: int = 4,
        word_dropout: float = 0.5,
        stats: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        aux_dims = dict(aux_dims or {})
        # the recipe (docs/vla.md): with privileged state to learn, the expert acts from the
        # state token through an MLP and the head reads the cameras' keypoints, the words only
        # choosing the named object's entries; without, pi0's readout and transformer expert
        expert_input = expert_input or ("state" if aux_dims else "readout")
        expert = expert or ("mlp" if expert_input == "state" else "transformer")
        if aux_instructed is None:
            aux_instructed = [k for k in aux_dims if k.startswith("state/target_")]
        aux_instructed = list(aux_instructed)
        if aux_input is None:
            aux_input = (
                "readout" if not image_keys else "grounded" if aux_instructed else "keypoints"
            )
        if aux_input not in AUX_INPUTS:
            raise ValueError(f"aux_input must be one of {AUX_INPUTS}, got {aux_input!r}")
        if expert_input not in EXPERT_INPUTS:
            raise ValueError(f"expert_input must be one of {EXPERT_INPUTS}, got {expert_input!r}")
        state_token = expert_input != "readout"
        if state_token and not aux_dims:
            raise ValueError(f"expert_input={expert_input!r} needs aux_dims (the state it carries)")
        overlap = sorted(set(aux_dims) & set(state_dims))
        if overlap:
            raise ValueError(f"aux_dims {overlap} are also inputs (state_dims)")
        if expert not in EXPERTS:
            raise ValueError(f"expert must be one of {EXPERTS}, got {expert!r}")
        unknown = sorted(set(aux_instructed) - set(aux_dims))
        if unknown:
            raise ValueError(f"aux_instructed {unknown} are not in aux_dims {sorted(aux_dims)}")
        if aux_input == "grounded" and not (image_keys and aux_instructed):
            raise ValueError("aux_input='grounded' needs cameras and instructed aux entries")
        if aux_candidates < 1:
            raise ValueError(f"aux_candidates must be >= 1, got {aux_candidates}")
        if dim % heads or dim % 4:
            raise ValueError(f"dim must be divisible by heads and by 4, got {dim}, {heads}")
        if not state_dims and not image_keys:
            raise ValueError("a VLA needs at least one state or image key")
        normalizer = Normalizer.for_policy({**state_dims, **aux_dims}, action_dim, stats)
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
            image_channels,
            image_strides,
            keypoints,
        )
        net: nn.Module
        cond_tokens = {"readout": readout_tokens, "readout+state": readout_tokens + 1, "state": 3}[
            expert_input
        ]
        if expert == "transformer":
            net = TransformerExpert(
                action_dim, action_horizon, dim, cond_tokens, expert_layers, heads
            )
            net_hidden = dim
        else:
            net = ChunkDenoiser(action_dim, action_horizon, cond_tokens * dim, hidden, depth)
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
        self.aux_dims, self.aux_weight = aux_dims, float(aux_weight)
        self.aux_input, self.aux_instructed = aux_input, aux_instructed
        self.aux_candidates, self.word_dropout = int(aux_candidates), float(word_dropout)
        points_in = len(image_keys) * 2 * keypoints
        aux_in = {"readout": encoder.out_dim, "keypoints": points_in + dim, "grounded": points_in}
        aux_out = sum(aux_dims.values())
        if aux_input == "grounded":  # the free entries, then the instructed ones' candidates
            instructed = sum(aux_dims[k] for k in aux_instructed)
            aux_out += (self.aux_candidates - 1) * instructed
        # the grounded head's output columns [free entries | chosen instructed entries] in
        # aux_dims order, and where the candidates start
        free = [k for k in aux_dims if k not in aux_instructed]
        keys = [*free, *aux_instructed]
        start = dict(zip(keys, accumulate((aux_dims[k] for k in keys), initial=0), strict=False))
        self._aux_order = [start[k] + i for k in aux_dims for i in range(aux_dims[k])]
        self._n_free = sum(aux_dims[k] for k in free)
        self.aux_head = (
            nn.Sequential(nn.Linear(aux_in[aux_input], 256), nn.SiLU(), nn.Linear(256, aux_out))
            if aux_dims
            else None
        )
        # per word: logits over the candidates
        self.selector = nn.Linear(dim, self.aux_candidates) if aux_input == "grounded" else None
        self.state_token = nn.Linear(sum(aux_dims.values()), dim) if state_token else None
        self.state_token_noise = float(state_token_noise)
        self.expert_input = expert_input
        self.config = constructor_config(TinyVLA, locals())

    def compute_loss(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """Flow-matching MSE, plus ``aux_weight`` x the auxiliary state MSE when configured."""
        if self.aux_head is None:
            return super().compute_loss(batch)
        obs = batch["obs"]
        missing = [k for k in self.aux_dims if k not in obs]
        if missing:
            raise KeyError(f"the auxiliary loss needs {missing} in the training batch")
        parts = self._parts(obs)
        target = torch.cat(
            [self.normalizer.normalize(k, obs[k][:, -1].float()) for k in self.aux_dims], dim=-1
        )
        aux = torch.mean((self.predict_state(*parts) - target) ** 2)
        # teacher forcing: the expert reads the true state, perturbed
        noisy = target + self.state_token_noise * torch.randn_like(target)
        cond = self._condition(parts[0], parts[2], noisy)
        flow, info = self.flow_loss(cond, batch["action"])
        loss = flow + self.aux_weight * aux
        return loss, {**info, "loss": float(loss.detach()), "aux_loss": float(aux.detach())}

    @property
    def prefix(self) -> PrefixEncoder:
        """The trunk (:class:`PrefixEncoder`), typed."""
        return cast(PrefixEncoder, self.encoder)

    def encode(
        self, obs: Mapping[str, torch.Tensor], state: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The action expert's conditioning: (B, R * D) readout features of the prefix, or with
        a state token (``expert_input``) the tokens holding the auxiliary head's prediction, or
        ``state`` (B, A) (normalised ``aux_dims`` entries) instead: an oracle for the
        perception (``bench/vla_oracle.py``)."""
        if self.state_token is None:
            if state is not None:
                raise ValueError("this VLA has no state token to hold a given state")
            return self.encoder(obs, self.normalizer)
        parts = self._parts(obs)
        return self._condition(
            parts[0], parts[2], self.predict_state(*parts) if state is None else state
        )

    def _parts(
        self, obs: Mapping[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """What the heads read, each computed once: the readout ((B, 0) when neither head reads
        it: the trunk is skipped), the keypoints, the instruction and proprioception tokens
        (B, 2, D) (None when unused) and the grounded head's choice among its candidates
        (B, C) (None without it)."""
        uses_readout = self.aux_input == "readout" or self.expert_input != "state"
        readout, points = self.prefix.features(obs, self.normalizer, readout=uses_readout)
        uses_rest = self.aux_input != "readout" or self.expert_input == "state"
        rest = self.prefix.instruction_and_proprio(obs, self.normalizer) if uses_rest else None
        return readout, points, rest, self.choose(obs) if self.selector is not None else None

    def choose(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """(B, C) the grounded head's weights over its candidates for the instruction.

        Each word gives a distribution over the candidates; the weights are their mean, each
        word weighted by its confidence (softmax over the words of ``-CONFIDENCE_SCALE`` x its
        distribution's entropy). In training each word is hidden with probability
        ``word_dropout``, so every word alone must name what it can: a colour word names one
        object whatever the verb, a verb only narrows it down, and the colour word's sharper
        distribution outweighs the verb's next to a verb it was never seen with.
        """
        assert self.selector is not None
        ids = obs[LANGUAGE_KEY].long()
        per_word = torch.softmax(self.selector(self.prefix.token_embed(ids)), dim=-1)  # (B,L,C)
        hidden = ids == PAD_ID
        if self.training and self.word_dropout > 0:
            dropped = hidden | (torch.rand(ids.shape, device=ids.device) < self.word_dropout)
            hidden = torch.where(dropped.all(dim=1, keepdim=True), hidden, dropped)
        entropy = -(per_word * torch.log(per_word.clamp(min=1e-8))).sum(-1)  # (B, L) [nats]
        confidence = (-CONFIDENCE_SCALE * entropy).masked_fill(hidden, -1e9)
        return torch.einsum("bl,blc->bc", torch.softmax(confidence, dim=-1), per_word)

    @property
    def perceives(self) -> bool:
        """Whether the policy has an auxiliary state head (``aux_dims``)."""
        return self.aux_head is not None

    def perceive(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """(B, A) the auxiliary head's normalised estimate of the ``aux_dims`` state from an
        observation batch (cameras, instruction, proprioception): what the policy sees."""
        if self.aux_head is None:
            raise ValueError("this VLA has no auxiliary state head (train it with aux_keys)")
        return self.predict_state(*self._parts(obs))

    def predict_state(
        self,
        readout: torch.Tensor,
        points: torch.Tensor,
        rest: torch.Tensor | None,
        choice: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(B, A) the auxiliary head's normalised ``aux_dims`` state: from the readout, or
        (``aux_input="keypoints"``) from the cameras' keypoints and the instruction's mean word
        embedding (``rest[:, 0]``; image coordinates map to table positions almost linearly),
        or (``"grounded"``) from the keypoints, ``choice`` (:meth:`choose`) weighting the
        candidates of the ``aux_instructed`` entries."""
        assert self.aux_head is not None
        if self.aux_input == "readout":
            return self.aux_head(readout)
        if self.selector is None:
            assert rest is not None
            return self.aux_head(torch.cat([points, rest[:, 0]], dim=-1))
        assert choice is not None
        out = self.aux_head(points)
        candidates = out[:, self._n_free :].reshape(out.shape[0], self.aux_candidates, -1)
        chosen = torch.einsum("bc,bcd->bd", choice, candidates)  # (B, instructed dims)
        return torch.cat([out[:, : self._n_free], chosen], dim=-1)[:, self._aux_order]

    def _condition(
        self, readout: torch.Tensor, rest: torch.Tensor | None, state: torch.Tensor
    ) -> torch.Tensor:
        """The expert's (B, tokens * D) conditioning from the readout, the instruction and
        proprioception tokens and a normalised state."""
        if self.state_token is None:
            return readout
        token = self.state_token(state)
        if self.expert_input == "readout+state":
            return torch.cat([readout, token], dim=-1)
        assert rest is not None
        return torch.cat([token[:, None], rest], dim=1).flatten(1)

    def tokenize(self, texts: Sequence[str]) -> torch.Tensor:
        """(B, L) int64 token ids of instructions, the ``language`` entry of an obs batch."""
        return torch.from_numpy(self.tokenizer.encode_batch(texts)[0]).to(self.device)
