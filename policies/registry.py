"""Plain dict registry of policy classes (imported on use: diffusers is slow to import)."""

from __future__ import annotations

import importlib
import math
from typing import Any, cast

from policies.base import Policy

POLICIES: dict[str, str] = {
    "flow": "policies.flow_matching:FlowMatchingPolicy",
    "diffusion": "policies.diffusion:DiffusionPolicy",
    "distilled": "policies.distillation:DistilledPolicy",
    "vla": "policies.vla:TinyVLA",
}


def policy_class(name: str) -> type[Policy]:
    """The policy class registered as ``name``."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; available: {sorted(POLICIES)}")
    module, cls = POLICIES[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make_policy(name: str, **kwargs: Any) -> Policy:
    """Build the policy registered as ``name`` with constructor ``kwargs``."""
    return policy_class(name)(**kwargs)


def has_noise_scale(policy: Any) -> bool:
    """Whether ``policy``'s sampler takes a noise scale (flow, diffusion and vla policies)."""
    return hasattr(policy, "noise_scale")


def set_noise_scale(policy: object, scale: float, option: str = "noise_scale") -> None:
    """Scale the initial noise of ``policy.predict_chunk`` (flow / diffusion / VLA): 1 samples the
    policy, 0 runs it deterministically from the prior's mean. A run-time setting, not saved.

    Raises:
        ValueError: ``scale`` is not a finite value >= 0, or it is not 1 for a policy whose
            sampler has no noise scale (``option`` names the setting in the message).
    """
    try:
        scale = float(scale)
    except (TypeError, ValueError):
        raise ValueError(f"{option} must be a finite value >= 0, got {scale!r}") from None
    if not (math.isfinite(scale) and scale >= 0.0):
        raise ValueError(f"{option} must be a finite value >= 0, got {scale!r}")
    if not has_noise_scale(policy):
        if scale != 1.0:
            raise ValueError(
                f"{option}={scale}: {type(policy).__name__} has no noise scale "
                "(flow, diffusion and vla policies do)"
            )
        return
    cast(Any, policy).noise_scale = scale  # flow, diffusion and vla policies (checked above)
