"""Execute a chunked policy on N envs: observation history, action queue, open-loop chunks.

Each env keeps its last To observations (edge-padded with the first one after a reset, as the
training windows are) and a queue of actions. When an env's queue is empty the policy is run
(batched over every env that needs a chunk) and the first Te actions of the chunk are queued.

Language-conditioned policies (those with a ``tokenizer``, e.g. :class:`policies.vla.TinyVLA`)
also read ``obs["language"]``, the env's instruction string; the runner tokenises the latest one
of each env into the ``(B, L)`` id batch the policy expects (no history: it is per episode).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

LANGUAGE_KEY = "language"  # the instruction entry of an observation (str at the env)


def policy_keys(policy: Any) -> list[str]:
    """Observation keys a policy reads (its state entries and cameras, and ``language`` for
    policies with a tokenizer)."""
    cfg = policy.config
    keys = [*cfg["state_dims"], *cfg.get("image_keys", [])]
    if getattr(policy, "tokenizer", None) is not None:
        keys.append(LANGUAGE_KEY)
    return keys


class ChunkRunner:
    """Runs ``policy`` for ``num_envs`` envs at once.

    Args:
        policy: a :class:`robotrl.types.ChunkPolicy`.
        num_envs: N.
        execute_horizon: Te actions executed per chunk (<= Ta).
    """

    def __init__(self, policy: Any, num_envs: int = 1, execute_horizon: int = 8) -> None:
        if not 1 <= execute_horizon <= policy.action_horizon:
            raise ValueError(
                f"execute_horizon must be in [1, Ta={policy.action_horizon}], got {execute_horizon}"
            )
        self.policy = policy
        self.num_envs = num_envs
        self.execute_horizon = execute_horizon
        self.keys = policy_keys(policy)
        self.history: list[deque[dict[str, np.ndarray]]] = [
            deque(maxlen=policy.obs_horizon) for _ in range(num_envs)
        ]
        self.queues: list[deque[np.ndarray]] = [deque() for _ in range(num_envs)]
        self.inference_calls = 0

    def reset(self, env_ids: Sequence[int] | None = None) -> None:
        """Forget history and queued actions of ``env_ids`` (all when None)."""
        for i in range(self.num_envs) if env_ids is None else env_ids:
            self.history[i].clear()
            self.queues[i].clear()
        self.policy.reset()

    def _push(self, i: int, obs: Mapping[str, np.ndarray]) -> None:
        missing = [k for k in self.keys if k not in obs]
        if missing:
            raise KeyError(f"the env does not provide {missing}, which the policy reads")
        h = self.history[i]
        entry = {k: np.asarray(obs[k]) for k in self.keys}
        if not h:
            h.extend([entry] * self.policy.obs_horizon)
        else:
            h.append(entry)

    def plan_first(self, env_id: int, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """First action (Da,) of a fresh chunk planned from env ``env_id``'s history plus
        ``obs``, without changing the history or the queue (e.g. the base action at a
        terminal observation, for bootstrapping)."""
        to = self.policy.obs_horizon
        h = [*self.history[env_id], {k: np.asarray(obs[k]) for k in self.keys}][-to:]
        h = [h[0]] * (to - len(h)) + h  # edge-pad a short history
        with torch.no_grad():
            chunk = self.policy.predict_chunk(self._batch([h]))
        return chunk[0, 0].cpu().numpy().astype(np.float32)

    def _batch(self, histories: Sequence[Sequence[Mapping[str, np.ndarray]]]) -> dict[str, Any]:
        """The policy's input for B histories of To observations: ``{key: (B, To, ...)}``, and
        the latest instruction of each tokenised into ``language`` (B, L)."""
        batch = {
            k: torch.from_numpy(np.stack([np.stack([e[k] for e in h]) for h in histories]))
            for k in self.keys
            if k != LANGUAGE_KEY
        }
        if LANGUAGE_KEY in self.keys:
            ids, _ = self.policy.tokenizer.encode_batch(
                [str(h[-1][LANGUAGE_KEY]) for h in histories]
            )
            batch[LANGUAGE_KEY] = torch.from_numpy(ids)
        return batch

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """Actions (N, Da) for a batched observation ``{key: (N, ...)}``."""
        for i in range(self.num_envs):
            self._push(i, {k: v[i] for k, v in obs.items()})
        need = [i for i in range(self.num_envs) if not self.queues[i]]
        if need:
            with torch.no_grad():
                chunk = self.policy.predict_chunk(self._batch([self.history[i] for i in need]))
                chunk = chunk.cpu().numpy()
            self.inference_calls += 1
            for j, i in enumerate(need):
                self.queues[i].extend(chunk[j, : self.execute_horizon])
        return np.stack([self.queues[i].popleft() for i in range(self.num_envs)]).astype(np.float32)


class SingleEnvPolicy:
    """Adapts a :class:`ChunkRunner` with one env to the ``EpisodePolicy`` protocol of
    :func:`robotrl.evaluation.evaluate` (``reset()``, ``__call__(obs) -> action``)."""

    def __init__(self, policy: Any, execute_horizon: int = 8) -> None:
        self.runner = ChunkRunner(policy, 1, execute_horizon)

    def reset(self) -> None:
        self.runner.reset()

    def __call__(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.runner.act({k: np.asarray(v)[None] for k, v in obs.items()})[0]


def as_episode_policy(policy: Any, execute_horizon: int = 8) -> Any:
    """``policy`` as an ``EpisodePolicy``: anything that predicts chunks (a
    :class:`policies.base.Policy`, DSRL's steered base, a test's toy base) wrapped in a
    :class:`SingleEnvPolicy`; anything else (e.g. a residual on its base) is one already."""
    return SingleEnvPolicy(policy, execute_horizon) if hasattr(policy, "predict_chunk") else policy
