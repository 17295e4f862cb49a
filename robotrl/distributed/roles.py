"""What an algorithm implements to run split across processes (structural: any object with
these methods fits; no base class).

The learner side (GPU box) runs inside :class:`~robotrl.distributed.LearnerService`, a Ray
actor; the actor side (robot PC: env, policy, safety) uses
:class:`~robotrl.distributed.ActorClient`::

    # learner process                              # actor process
    serve_learner(make_learner, state_dir=d,       client = ActorClient("robot0")
                  stop=stop)                       while running:
    # in the Ray actor: push() -> on_transitions       client.sync(actor)      # newest weights
    #                   loop: work(), publish          a = actor.act(obs)
                                                       obs2, r, term, trunc, info = env.step(a)
                                                       client.add(obs, a, r, obs2, term, trunc)

A learner may also have ``work(max_updates) -> int`` (run due updates), ``ready`` (weights
worth publishing exist), ``save(dir, version, meta)`` and ``resume(dir) -> version | None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from robotrl.distributed.transitions import TransitionBatch


@runtime_checkable
class Learner(Protocol):
    """Learner-side algorithm: consumes transitions, exposes the weights the actors need."""

    def on_transitions(self, batch: TransitionBatch) -> None:
        """Take T transitions of one actor (e.g. ``for row in batch.rows(): buffer.add(**row)``).

        The batch is acknowledged to the actor only after this returns, so raising leaves it
        to be re-sent.
        """
        ...

    def state_dict(self) -> Mapping[str, Any]:
        """The weights actors act with: numpy arrays or tensors (sent as safetensors)."""
        ...


@runtime_checkable
class Actor(Protocol):
    """Actor-side policy holder: takes the weights the learner broadcasts."""

    def load_state_dict(self, state_dict: Mapping[str, np.ndarray]) -> Any:
        """Replace the acting weights (numpy arrays, as published by the learner)."""
        ...
