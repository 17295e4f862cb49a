"""A LeRobot ``PreTrainedPolicy`` (diffusion or ACT) behind our :class:`robotrl.types.ChunkPolicy`
interface, so it can be evaluated and used as a frozen residual-RL base like our own policies.

``lerobot`` pins torch<2.11 and lives in its own venv (``.ci/lerobot_env.sh``); this module
imports it only when an adapter is built, so ``import policies.lerobot_adapter`` works anywhere.

Key mapping (ours -> lerobot, the same as ``robotrl.datasets.lerobot_format`` exports)::

    state/<k>   (B, To, D) float32       observation.state: the ``state_dims`` keys, concatenated
                                         in ``state_dims`` order (minus ``env_state_keys``)
    state/<k>   listed in env_state_keys observation.environment_state, concatenated in that order
    images/<c>  (B, To, H, W, 3) uint8   observation.images.<c>: (B, To, 3, H, W) float in [0, 1]

Policies that take an observation history (diffusion: ``n_obs_steps`` = To) get the time axis;
those that take one frame (ACT: To = 1) get it squeezed, as lerobot's datasets deliver them.
Normalisation is lerobot's processor pipeline (``policy_preprocessor.json`` /
``policy_postprocessor.json`` beside the weights); the returned chunk is clipped to the env's
action range [-1, 1].
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from policies.base import Policy
from policies.lerobot_builder import (
    ACTION,
    ENV_STATE,
    IMAGES,
    LEROBOT_KINDS,
    POSTPROCESSOR,
    PREPROCESSOR,
    STATE,
    build_lerobot_policy,
    camera_name,
    load_lerobot_policy,
    require_lerobot,
)

__all__ = [  # the key names are re-exported: they were defined here
    "ACTION",
    "ENV_STATE",
    "IMAGES",
    "LEROBOT_KINDS",
    "POSTPROCESSOR",
    "PREPROCESSOR",
    "STATE",
    "LeRobotPolicyAdapter",
]


class LeRobotPolicyAdapter(Policy):
    """A lerobot diffusion / ACT policy as a :class:`robotrl.types.ChunkPolicy`.

    Build with :meth:`from_config` (random init) or :meth:`from_pretrained` (a local directory).

    Args:
        policy: a lerobot ``DiffusionPolicy`` or ``ACTPolicy``.
        preprocessor / postprocessor: its lerobot processor pipelines (normalise the lerobot
            batch / unnormalise the action chunk).
        state_dims: ``{"state/<k>": D}`` of every state entry read, in concatenation order.
        image_keys: ``images/<cam>`` entries read; must be exactly the policy's cameras.
        env_state_keys: the state entries (subset of ``state_dims``, in this order) that form
            ``observation.environment_state`` instead of ``observation.state``.
        clip_actions: clip the chunk to [-1, 1] (the env's action range).

    Attributes:
        obs_horizon: To = lerobot's ``n_obs_steps``. action_horizon: Ta (diffusion:
        ``n_action_steps``; ACT: ``chunk_size``). execute_horizon: lerobot's
        ``n_action_steps``, the Te it was trained to execute. action_dim: Da.
    """

    policy_type = "lerobot"
    policy: Any  # lerobot's DiffusionPolicy / ACTPolicy (an nn.Module; lerobot has no stubs)

    def __init__(
        self,
        policy: nn.Module,
        preprocessor: Any,
        postprocessor: Any,
        state_dims: Mapping[str, int],
        image_keys: Sequence[str] = (),
        env_state_keys: Sequence[str] = (),
        clip_actions: bool = True,
    ) -> None:
        super().__init__()
        require_lerobot()
        kind = getattr(policy, "name", None)
        if kind not in LEROBOT_KINDS:
            raise ValueError(
                f"unsupported lerobot policy {kind!r}; supported: {list(LEROBOT_KINDS)}"
            )
        self.policy = policy
        self.preprocessor = preprocessor
        self.postprocessor = postprocessor
        self.kind = kind
        self.clip_actions = clip_actions
        cfg: Any = policy.config
        unknown = [k for k in env_state_keys if k not in state_dims]
        if unknown:
            raise ValueError(f"env_state_keys {unknown} are not in state_dims {list(state_dims)}")
        self.state_keys = [k for k in state_dims if k not in env_state_keys]
        self.env_state_keys = list(env_state_keys)
        for name, keys, feat in (
            (STATE, self.state_keys, cfg.robot_state_feature),
            (ENV_STATE, self.env_state_keys, cfg.env_state_feature),
        ):
            got = sum(int(state_dims[k]) for k in keys)
            want = 0 if feat is None else int(feat.shape[0])
            if got != want:
                raise ValueError(
                    f"lerobot {kind} expects {name} of dim {want}, but the keys mapped to it "
                    f"{keys} sum to {got}"
                )
        self.cameras = {k: camera_name(k) for k in image_keys}
        want_cams = sorted(k.removeprefix(IMAGES + ".") for k in cfg.image_features)
        if sorted(self.cameras.values()) != want_cams:
            raise ValueError(
                f"lerobot {kind} reads cameras {want_cams}, got image_keys {list(image_keys)}"
            )
        self.image_shapes = {
            k: tuple(cfg.image_features[f"{IMAGES}.{c}"].shape) for k, c in self.cameras.items()
        }  # (3, H, W)
        self.state_dims = {k: int(v) for k, v in state_dims.items()}
        self.obs_horizon = int(cfg.n_obs_steps)  # To
        # Ta: what lerobot's predict_action_chunk returns (diffusion: n_action_steps from the
        # current step; ACT: the whole chunk_size); lerobot itself executes n_action_steps.
        self.action_horizon = int(cfg.n_action_steps if kind == "diffusion" else cfg.chunk_size)
        self.execute_horizon = int(cfg.n_action_steps)
        self.action_dim = int(cfg.output_features[ACTION].shape[0])  # Da
        self.time_axis = cfg.observation_delta_indices is not None
        self.config: dict[str, Any] = {
            "lerobot_type": kind,
            "state_dims": dict(self.state_dims),
            "image_keys": list(image_keys),
            "env_state_keys": list(env_state_keys),
            "obs_horizon": self.obs_horizon,
            "action_horizon": self.action_horizon,
            "action_dim": self.action_dim,
        }
        self.eval()

    # ---- constructors -------------------------------------------------------------------

    @classmethod
    def from_config(
        cls,
        kind: str,
        *,
        state_dims: Mapping[str, int],
        action_dim: int,
        image_keys: Sequence[str] = (),
        image_size: tuple[int, int] | None = None,
        env_state_keys: Sequence[str] = (),
        dataset_stats: Mapping[str, Mapping[str, Any]] | None = None,
        device: str = "cpu",
        clip_actions: bool = True,
        **config_overrides: Any,
    ) -> LeRobotPolicyAdapter:
        """A randomly initialised lerobot ``kind`` ("diffusion" | "act") policy for our keys;
        the arguments are :func:`~policies.lerobot_builder.build_lerobot_policy`'s."""
        parts = build_lerobot_policy(
            kind,
            state_dims=state_dims,
            action_dim=action_dim,
            image_keys=image_keys,
            image_size=image_size,
            env_state_keys=env_state_keys,
            dataset_stats=dataset_stats,
            device=device,
            **config_overrides,
        )
        return cls(*parts[:3], state_dims, parts.image_keys, env_state_keys, clip_actions)

    @classmethod
    def from_pretrained(
        cls,
        local_dir: str | os.PathLike[str],
        *,
        state_dims: Mapping[str, int],
        image_keys: Sequence[str] | None = None,
        env_state_keys: Sequence[str] = (),
        device: str = "cpu",
        require_processors: bool = True,
        clip_actions: bool = True,
    ) -> LeRobotPolicyAdapter:
        """Load a policy saved by lerobot from a local directory (never the hub); see
        :func:`~policies.lerobot_builder.load_lerobot_policy`.

        Args:
            state_dims: our state entries in concatenation order (lerobot's config records only
                the total dims, which are checked against these).
        """
        parts = load_lerobot_policy(
            local_dir, image_keys=image_keys, device=device, require_processors=require_processors
        )
        return cls(*parts[:3], state_dims, parts.image_keys, env_state_keys, clip_actions)

    def save_pretrained(self, directory: str | os.PathLike[str]) -> Path:
        """lerobot's own layout: config.json + model.safetensors + both processor pipelines."""
        d = Path(directory)
        self.policy.save_pretrained(d)
        self.preprocessor.save_pretrained(d)
        self.postprocessor.save_pretrained(d)
        return d

    # ---- the ChunkPolicy interface ------------------------------------------------------

    def to_lerobot_batch(self, obs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Our observation batch -> lerobot's (unnormalised) observation batch (see the module
        docstring for the mapping); raises KeyError / ValueError on missing keys or bad shapes."""
        missing = [k for k in [*self.state_dims, *self.cameras] if k not in obs]
        if missing:
            raise KeyError(
                f"observation batch lacks {missing}; the adapter reads "
                f"{[*self.state_dims, *self.cameras]}"
            )
        to = self.obs_horizon
        b = int(torch.as_tensor(obs[[*self.state_dims, *self.cameras][0]]).shape[0])
        out: dict[str, torch.Tensor] = {}
        for k, d in self.state_dims.items():
            v = torch.as_tensor(obs[k])
            if tuple(v.shape) != (b, to, d):
                raise ValueError(f"{k} must be (B={b}, To={to}, D={d}), got {tuple(v.shape)}")
        for name, keys in ((STATE, self.state_keys), (ENV_STATE, self.env_state_keys)):
            if keys:
                out[name] = torch.cat([torch.as_tensor(obs[k]).float() for k in keys], dim=-1)
        for k, cam in self.cameras.items():
            v = torch.as_tensor(obs[k])
            _, h, w = self.image_shapes[k]
            if tuple(v.shape) != (b, to, h, w, 3) or v.dtype != torch.uint8:
                raise ValueError(
                    f"{k} must be uint8 (B={b}, To={to}, H={h}, W={w}, 3), got {v.dtype} "
                    f"{tuple(v.shape)}"
                )
            out[f"{IMAGES}.{cam}"] = v.permute(0, 1, 4, 2, 3).float() / 255.0
        if not self.time_axis:  # one-frame policies (ACT): lerobot gives them no time axis
            out = {k: v[:, -1] for k, v in out.items()}
        device = next(self.policy.parameters()).device
        return {k: v.to(device) for k, v in out.items()}

    @torch.no_grad()
    def predict_chunk(
        self, obs: Mapping[str, torch.Tensor], noise: torch.Tensor | None = None
    ) -> torch.Tensor:
        """(B, Ta, Da) float32 env actions in [-1, 1] for an observation batch.

        Args:
            noise: diffusion only: the initial sample (B, horizon, Da) (None: torch's global RNG).
        """
        if noise is not None and self.kind != "diffusion":
            raise ValueError(f"noise is only meaningful for diffusion, not {self.kind}")
        batch = self.preprocessor(self.to_lerobot_batch(obs))
        if self.kind == "diffusion":
            # lerobot's predict_action_chunk reads its own observation queues; the history here
            # comes from the caller (ChunkRunner), so call the sampler on it directly.
            cams = list(self.policy.config.image_features)
            if cams:
                batch[IMAGES] = torch.stack([batch[k] for k in cams], dim=-4)
            lb = {k: batch[k] for k in (STATE, ENV_STATE, IMAGES) if k in batch}
            chunk = self.policy.diffusion.generate_actions(lb, noise=noise)
        else:
            chunk = self.policy.predict_action_chunk(batch)
        chunk = self.postprocessor(chunk).float().cpu()
        return chunk.clamp(-1.0, 1.0) if self.clip_actions else chunk

    def compute_loss(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """lerobot's training loss on ``{"obs": {...}, "action": (B, L, Da)}``, L being the
        length lerobot trains on (diffusion: ``horizon`` from the first observation step;
        ACT: ``chunk_size`` from the current step). Call ``train()`` first: ACT's VAE
        objective exists only in training mode."""
        lb = self.to_lerobot_batch(batch["obs"])
        action = torch.as_tensor(batch["action"]).float().to(next(self.parameters()).device)
        length = len(self.policy.config.action_delta_indices)
        if action.ndim != 3 or tuple(action.shape[1:]) != (length, self.action_dim):
            raise ValueError(
                f"action must be (B, L={length}, Da={self.action_dim}), got {tuple(action.shape)}"
            )
        lb[ACTION] = action
        lb["action_is_pad"] = torch.zeros(action.shape[:2], dtype=torch.bool, device=action.device)
        loss, out = self.policy.forward(self.preprocessor(lb))
        logs = {"loss": float(loss.detach())}
        logs.update({k: float(v) for k, v in (out or {}).items() if isinstance(v, int | float)})
        return loss, logs

    def reset(self) -> None:
        """Clear lerobot's per-episode queues (unused by predict_chunk, kept consistent)."""
        self.policy.reset()
