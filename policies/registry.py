"""Plain dict registry of policy classes (imported on use: diffusers is slow to import)."""

from __future__ import annotations

import importlib
from typing import Any

from torch import nn

POLICIES: dict[str, str] = {
    "flow": "policies.flow_matching:FlowMatchingPolicy",
    "diffusion": "policies.diffusion:DiffusionPolicy",
    "distilled": "policies.distillation:DistilledPolicy",
    "vla": "policies.vla:TinyVLA",
}


def policy_class(name: str) -> type[nn.Module]:
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; available: {sorted(POLICIES)}")
    module, cls = POLICIES[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make_policy(name: str, **kwargs: Any) -> nn.Module:
    """Build the policy registered as ``name`` with constructor ``kwargs``."""
    return policy_class(name)(**kwargs)
