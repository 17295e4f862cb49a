"""An RL agent's checkpoint on its frozen base: what ``robotrl eval`` and the training runs'
videos need besides the agent's weights (the base, the state features, the run's Te and task).

Residual and DSRL checkpoints keep in their metadata the base's checkpoint path, the feature
keys with their statistics, the execute horizon and the task (see their ``save_*`` functions).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from policies.checkpoint import CheckpointError, load_policy
from robotrl.algos.perception_features import featurizer_for
from robotrl.algos.residual import Featurizer, StateFeaturizer


def checkpoint_kind(directory: str | os.PathLike[str]) -> str | None:
    """The ``agent`` a ``robotrl train-rl`` checkpoint at ``directory`` holds (``residual``,
    ``dsrl``), or None for anything else (a BC checkpoint, a missing or unreadable file)."""
    path = Path(directory) / "config.yaml"
    try:
        doc = yaml.safe_load(path.read_text()) if path.is_file() else None
    except yaml.YAMLError:
        return None
    kind = doc.get("agent") if isinstance(doc, dict) else None
    return str(kind) if kind is not None else None


@dataclass
class AgentContext:
    """What an agent acts with: its frozen base, its state features and the run's settings."""

    base: Any  # the frozen chunk policy, in eval mode
    featurizer: Featurizer
    execute_horizon: int  # Te
    meta: dict[str, Any]  # the base's checkpoint metadata with the run's task and Te


def load_context(
    directory: str | os.PathLike[str],
    meta: dict[str, Any],
    obs_dim: int,
    what: str,
    base_checkpoint: str | None = None,
) -> AgentContext:
    """The base and featurizer of the agent saved at ``directory`` with metadata ``meta``.

    Args:
        obs_dim: the features the agent reads (checked against the featurizer).
        what: the agent's name in error messages (``residual``, ``DSRL agent``).
        base_checkpoint: the base's checkpoint (None: the path the training run recorded;
            give it when the base has moved since).

    Raises:
        CheckpointError: no base named or loadable, metadata incomplete, or feature sizes differ.
    """

    base_dir = base_checkpoint or meta.get("base_checkpoint")
    if not base_dir:
        raise CheckpointError(f"{directory} names no base checkpoint: give base_checkpoint")
    try:
        base, base_meta = load_policy(base_dir)
    except CheckpointError as exc:
        raise CheckpointError(
            f"the {what} at {directory} needs its base {base_dir}: {exc} "
            "(moved? give base_checkpoint=...)"
        ) from exc
    missing = [k for k in ("obs_keys", "featurizer", "execute_horizon") if k not in meta]
    if missing:
        raise CheckpointError(f"{directory}: the {what}'s metadata lacks {missing}")
    state = StateFeaturizer(meta["obs_keys"], meta["featurizer"])
    featurizer = featurizer_for(meta.get("features", "state"), state, base)
    if featurizer.dim != obs_dim:
        raise CheckpointError(
            f"{directory}: {featurizer.dim} features from obs_keys, the agent reads {obs_dim}"
        )
    base.eval()
    te = int(meta["execute_horizon"])
    task = meta.get("task", base_meta.get("task"))
    return AgentContext(base, featurizer, te, {**base_meta, "task": task, "execute_horizon": te})
