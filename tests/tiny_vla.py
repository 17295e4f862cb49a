"""A tiny :class:`policies.vla.TinyVLA` for tests: 32-wide, one block per stack, two heads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from policies.tokenizer import WordTokenizer
from policies.vla import TinyVLA


def tiny_vla(
    state_dims: Mapping[str, int],
    texts: Sequence[str],
    *,
    action_dim: int = 2,
    obs_horizon: int = 2,
    action_horizon: int = 4,
    seed: int = 0,
    **kw: Any,
) -> TinyVLA:
    """A freshly seeded tiny VLA whose vocabulary is the words of ``texts``; ``kw`` overrides
    any other constructor argument (``image_keys``, ``num_steps``, ``aux_dims`` ...)."""
    torch.manual_seed(seed)
    args: dict[str, Any] = {
        "num_steps": 4,
        "max_tokens": 8,
        "dim": 32,
        "trunk_layers": 1,
        "expert_layers": 1,
        "heads": 2,
        "readout_tokens": 2,
        "hidden": 32,
        "depth": 1,
        **kw,
    }
    return TinyVLA(
        dict(state_dims),
        action_dim=action_dim,
        obs_horizon=obs_horizon,
        action_horizon=action_horizon,
        vocab=WordTokenizer.from_texts(list(texts)).vocab,
        **args,
    )


# train-bc overrides of a tiny VLA on a tabletop store with the table camera at 32 x 32 px
TABLETOP_VLA_BC = [
    "policy=vla",
    "cameras=[table]",
    "image_size=[32,32]",
    "obs_keys=[state/ee_pos,state/gripper]",
    "aux_keys=[state/target_pos,state/pad_pos]",
    "obs_horizon=1",
    "eval_episodes=0",
    "policy_kwargs={dim: 32, trunk_layers: 1, expert_layers: 1}",
    "progress=false",
]
