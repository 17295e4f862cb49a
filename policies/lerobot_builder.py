"""Building lerobot diffusion / ACT policies for our observation keys: randomly initialised
from a feature config (:func:`build_lerobot_policy`), or loaded from a directory saved by lerobot
(:func:`load_lerobot_policy`), each with its processor pipelines. The
:class:`~policies.lerobot_adapter.LeRobotPolicyAdapter` wraps the result.

``lerobot`` lives in its own venv (``.ci/lerobot_env.sh``) and is imported only when a policy is
built, so this module imports anywhere.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch

STATE = "observation.state"
ENV_STATE = "observation.environment_state"
IMAGES = "observation.images"  # lerobot's prefix of camera features and its stacked-camera key
ACTION = "action"
PREPROCESSOR = "policy_preprocessor.json"
POSTPROCESSOR = "policy_postprocessor.json"


def require_lerobot() -> None:
    """Raise an ImportError saying how to get ``lerobot`` when it is not importable."""
    try:
        importlib.import_module("lerobot")
    except ImportError as exc:
        raise ImportError(
            "LeRobotPolicyAdapter needs the `lerobot` package (0.4.x), which pins torch<2.11 and "
            "so lives in its own virtualenv: build it with `.ci/lerobot_env.sh [VENV_DIR]` and run "
            "from there (default /work/.venv-lerobot)"
        ) from exc


def _lr(path: str) -> Any:
    """``"lerobot.<module>:<name>"`` imported on use (lerobot ships no type stubs)."""
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


# lerobot type -> (config class, policy class, make_pre_post_processors)
_KINDS = {
    "diffusion": (
        "lerobot.policies.diffusion.configuration_diffusion:DiffusionConfig",
        "lerobot.policies.diffusion.modeling_diffusion:DiffusionPolicy",
        "lerobot.policies.diffusion.processor_diffusion:make_diffusion_pre_post_processors",
    ),
    "act": (
        "lerobot.policies.act.configuration_act:ACTConfig",
        "lerobot.policies.act.modeling_act:ACTPolicy",
        "lerobot.policies.act.processor_act:make_act_pre_post_processors",
    ),
}
LEROBOT_KINDS = tuple(_KINDS)


def _lerobot_classes(kind: str) -> tuple[Any, Any, Any]:
    """(config class, policy class, make_pre_post_processors) of a lerobot policy type."""
    if kind not in _KINDS:
        raise ValueError(
            f"unsupported lerobot policy type {kind!r}; supported: {list(LEROBOT_KINDS)}"
        )
    config_cls, policy_cls, make = (_lr(p) for p in _KINDS[kind])
    return config_cls, policy_cls, make


def camera_name(image_key: str) -> str:
    """``images/<cam>`` -> ``<cam>``; raises ValueError on other keys."""
    if not image_key.startswith("images/") or len(image_key) == len("images/"):
        raise ValueError(f"image keys must look like 'images/<cam>', got {image_key!r}")
    return image_key.removeprefix("images/")


class LeRobotParts(NamedTuple):
    """A lerobot policy with its processors and the ``images/<cam>`` keys it reads."""

    policy: Any  # lerobot's DiffusionPolicy / ACTPolicy (lerobot has no type stubs)
    preprocessor: Any  # normalises the lerobot batch
    postprocessor: Any  # unnormalises the action chunk
    image_keys: list[str]


def build_lerobot_policy(
    kind: str,
    *,
    state_dims: Mapping[str, int],
    action_dim: int,
    image_keys: Sequence[str] = (),
    image_size: tuple[int, int] | None = None,
    env_state_keys: Sequence[str] = (),
    dataset_stats: Mapping[str, Mapping[str, Any]] | None = None,
    device: str = "cpu",
    **config_overrides: Any,
) -> LeRobotParts:
    """A randomly initialised lerobot ``kind`` ("diffusion" | "act") policy for our keys.

    Args:
        state_dims: ``{"state/<k>": D}`` of every state entry read, in concatenation order.
        action_dim: Da.
        image_keys: ``images/<cam>`` entries read.
        env_state_keys: the state entries that form ``observation.environment_state``.
        image_size: (H, W) of every camera (required with ``image_keys``).
        dataset_stats: lerobot stats ``{feature: {"mean"|"std"|"min"|"max": array}}``;
            None normalises nothing (our env actions are already in [-1, 1]).
        config_overrides: fields of lerobot's ``DiffusionConfig`` / ``ACTConfig``
            (``n_obs_steps``, ``horizon``, ``n_action_steps``, ``chunk_size``, ``down_dims``,
            ``dim_model``, ...). ACT's ImageNet backbone weights default to None here (no
            download).
    """
    require_lerobot()
    feature_type = _lr("lerobot.configs.types:FeatureType")
    policy_feature = _lr("lerobot.configs.types:PolicyFeature")
    config_cls, policy_cls, make_processors = _lerobot_classes(kind)
    if image_keys and image_size is None:
        raise ValueError("image_size (H, W) is required with image_keys")
    unknown = [k for k in env_state_keys if k not in state_dims]
    if unknown:
        raise ValueError(f"env_state_keys {unknown} are not in state_dims {list(state_dims)}")
    inputs: dict[str, Any] = {}
    robot_dim = sum(int(d) for k, d in state_dims.items() if k not in env_state_keys)
    env_dim = sum(int(state_dims[k]) for k in env_state_keys)
    if robot_dim:
        inputs[STATE] = policy_feature(type=feature_type.STATE, shape=(robot_dim,))
    if env_dim:
        inputs[ENV_STATE] = policy_feature(type=feature_type.ENV, shape=(env_dim,))
    for k in image_keys:
        h, w = image_size or (0, 0)
        inputs[f"{IMAGES}.{camera_name(k)}"] = policy_feature(
            type=feature_type.VISUAL, shape=(3, int(h), int(w))
        )
    outputs = {ACTION: policy_feature(type=feature_type.ACTION, shape=(int(action_dim),))}
    overrides = {"push_to_hub": False, "device": device, **config_overrides}
    if kind == "act":
        overrides.setdefault("pretrained_backbone_weights", None)
    cfg = config_cls(input_features=inputs, output_features=outputs, **overrides)
    policy = policy_cls(cfg)
    stats = None if dataset_stats is None else {k: dict(v) for k, v in dataset_stats.items()}
    for name, ft in {**inputs, **outputs}.items():
        for stat, value in (stats or {}).get(name, {}).items():
            shape = tuple(torch.as_tensor(value).shape)
            # per-dim vectors for state/action; per-channel (3, 1, 1) or scalars for images
            if ft.type is not feature_type.VISUAL and shape not in ((ft.shape[0],), ()):
                raise ValueError(
                    f"dataset_stats[{name!r}][{stat!r}] must be ({ft.shape[0]},), got {shape}"
                )
    pre, post = make_processors(cfg, dataset_stats=stats)
    return LeRobotParts(policy, pre, post, list(image_keys))


def load_lerobot_policy(
    local_dir: str | os.PathLike[str],
    *,
    image_keys: Sequence[str] | None = None,
    device: str = "cpu",
    require_processors: bool = True,
) -> LeRobotParts:
    """Load a policy saved by lerobot (``save_pretrained`` / ``lerobot-train``'s
    ``pretrained_model``) from a local directory; never contacts the hub.

    Args:
        image_keys: default: ``images/<c>`` for each of the policy's cameras.
        require_processors: without ``policy_preprocessor.json`` /
            ``policy_postprocessor.json`` (a bare ``policy.save_pretrained``) raise, unless
            False: then no normalisation is applied.
    """
    require_lerobot()
    pretrained_config = _lr("lerobot.configs.policies:PreTrainedConfig")
    pipeline = _lr("lerobot.processor:PolicyProcessorPipeline")
    conv = importlib.import_module("lerobot.processor.converters")

    d = Path(local_dir)
    if not (d / "config.json").is_file() or not (d / "model.safetensors").is_file():
        raise FileNotFoundError(
            f"no lerobot policy at {d}: expected config.json and model.safetensors "
            "(local directories only, no hub ids)"
        )
    _lerobot_classes("diffusion")  # registers the config choices draccus decodes
    _lerobot_classes("act")
    cfg = pretrained_config.from_pretrained(d, local_files_only=True)
    _, policy_cls, make_processors = _lerobot_classes(cfg.type)
    cfg.device = device
    policy = policy_cls.from_pretrained(d, config=cfg, local_files_only=True)
    have = [(d / f).is_file() for f in (PREPROCESSOR, POSTPROCESSOR)]
    if all(have):
        pre = pipeline.from_pretrained(
            d,
            PREPROCESSOR,
            local_files_only=True,
            overrides={"device_processor": {"device": device}},
            to_transition=conv.batch_to_transition,
            to_output=conv.transition_to_batch,
        )
        post = pipeline.from_pretrained(
            d,
            POSTPROCESSOR,
            local_files_only=True,
            to_transition=conv.policy_action_to_transition,
            to_output=conv.transition_to_policy_action,
        )
    elif require_processors:
        raise FileNotFoundError(
            f"{d} has no {PREPROCESSOR} / {POSTPROCESSOR} (lerobot's normalisation); save them "
            "with LeRobotPolicyAdapter.save_pretrained, or pass require_processors=False to "
            "run without normalisation"
        )
    else:
        pre, post = make_processors(cfg, dataset_stats=None)
    if image_keys is None:
        image_keys = [f"images/{k.removeprefix(IMAGES + '.')}" for k in cfg.image_features]
    return LeRobotParts(policy, pre, post, list(image_keys))
