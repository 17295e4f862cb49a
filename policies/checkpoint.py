"""Checkpoints: ``model.safetensors`` (weights, incl. the normaliser) + ``config.yaml`` (the
checkpoint format version, the policy type, its constructor config and free-form metadata such
as the task). Loading runs no pickle: the config rebuilds the module, then the weights are
loaded strictly.

``format_version`` is :data:`FORMAT_VERSION` in every checkpoint written now; a checkpoint
without one is format 0 (written before versions existed, the same layout). A checkpoint from
a newer format is refused with one line, never half-loaded. ``tests/data/golden_flow`` is a
committed format-1 checkpoint whose outputs the tests pin.

Files are written to temporary names and renamed, so a crash never leaves half a checkpoint.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
import yaml
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from policies.base import Policy
from policies.registry import POLICIES, make_policy

WEIGHTS = "model.safetensors"
CONFIG = "config.yaml"
FORMAT_VERSION = 1  # of the layout of config.yaml + model.safetensors; bump on a breaking change


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded: missing files, corrupt weights, mismatched config."""


def _atomic_write(path: Path, write: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    write(tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_module(module: nn.Module, directory: str | os.PathLike[str], doc: dict[str, Any]) -> Path:
    """Write any module's ``state_dict`` as safetensors and ``doc`` as YAML into ``directory``
    (created), each atomically. The shared format of every robotrl checkpoint."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    doc = {"format_version": FORMAT_VERSION, **doc}
    state = {k: v.detach().contiguous().cpu() for k, v in module.state_dict().items()}
    _atomic_write(d / WEIGHTS, lambda p: save_file(state, str(p)))
    _atomic_write(d / CONFIG, lambda p: p.write_text(yaml.safe_dump(doc, sort_keys=False)))
    return d


def load_into(module: nn.Module, directory: str | os.PathLike[str]) -> None:
    """Load ``directory``'s weights into ``module`` strictly, with a clear error on mismatch."""
    d = Path(directory)
    try:
        state = load_file(str(d / WEIGHTS))
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"cannot read weights {d / WEIGHTS}: {exc}") from exc
    own = module.state_dict()
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    bad = [k for k in set(own) & set(state) if own[k].shape != state[k].shape]
    if missing or unexpected or bad:
        raise CheckpointError(
            f"weights in {d} do not match the config: missing {missing[:5]}, unexpected "
            f"{unexpected[:5]}, wrong shape {sorted(bad)[:5]}"
        )
    with torch.no_grad():
        module.load_state_dict(state, strict=True)


def save_policy(
    policy: Policy, directory: str | os.PathLike[str], meta: dict[str, Any] | None = None
) -> Path:
    """Write ``policy`` to ``directory`` (created); returns the directory."""
    doc = {"policy_type": policy.policy_type, "config": policy.config, "meta": meta or {}}
    return save_module(policy, directory, doc)


def read_doc(directory: str | os.PathLike[str], what: str = "checkpoint") -> dict[str, Any]:
    """``directory``'s ``config.yaml`` as a dict, after checking that both files exist, the YAML
    parses and its format is one this code reads. ``what`` names the kind in errors."""
    d = Path(directory)
    if not (d / CONFIG).is_file() or not (d / WEIGHTS).is_file():
        raise CheckpointError(f"no {what} at {d}: expected {CONFIG} and {WEIGHTS}")
    try:
        doc = yaml.safe_load((d / CONFIG).read_text())
    except yaml.YAMLError as exc:
        raise CheckpointError(f"{d / CONFIG} is not valid YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise CheckpointError(f"{d / CONFIG} is not a checkpoint config (a YAML mapping)")
    version = doc.get("format_version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise CheckpointError(f"{d / CONFIG}: format_version must be an int >= 0, got {version!r}")
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"{d} is checkpoint format {version}, newer than this robotrl reads "
            f"({FORMAT_VERSION}): upgrade robotrl"
        )
    return doc


def read_config(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The policy checkpoint's ``config.yaml`` as a dict (policy_type, config, meta)."""
    d = Path(directory)
    doc = read_doc(d)
    if doc.get("policy_type") not in POLICIES or "config" not in doc:
        raise CheckpointError(
            f"{d / CONFIG} does not describe a policy (policy_type one of {sorted(POLICIES)})"
        )
    return doc


def execute_horizon(meta: dict[str, Any], action_horizon: int, override: int | None = None) -> int:
    """Te, the actions a policy with chunks of ``action_horizon`` runs open loop per chunk:
    ``override`` when given, else what its checkpoint's ``meta`` records (``robotrl train-bc``
    writes it), else half its chunk."""
    return int(override or meta.get("execute_horizon") or action_horizon // 2)


def load_policy(directory: str | os.PathLike[str]) -> tuple[Policy, dict[str, Any]]:
    """Rebuild and load a policy; returns ``(policy in eval mode, meta)``."""
    d = Path(directory)
    doc = read_config(d)
    try:
        policy = make_policy(doc["policy_type"], **doc["config"])
    except TypeError as exc:
        raise CheckpointError(f"{d / CONFIG}: config does not fit the policy: {exc}") from exc
    load_into(policy, d)
    policy.eval()
    return policy, dict(doc.get("meta") or {})
