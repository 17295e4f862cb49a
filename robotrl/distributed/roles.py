"""What an algorithm implements to run split across processes (structural: any object with
these methods fits; no base class).

The learner side (GPU box) is driven by :class:`~robotrl.distributed.LearnerServer`, the actor
side (robot PC: env, policy, safety) uses :class:`~robotrl.distributed.ActorClient`::

    # learner process                        # actor process
    server = LearnerServer(addr, learner)    client = ActorClient(addr, "robot0")
    while training:                          while running:
        server.deliver(timeout=0.01)             client.sync(actor)      # newest weights
        learner.update()                         a = actor.act(obs)
        server.updated()   # may publish         obs2, r, term, trunc, info = env.step(a)
                                                 client.add(obs, a, r, obs2, term, trunc)
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

        Called in the thread that calls ``LearnerServer.deliver``; the batch is acknowledged to
        the actor only after this returns, so raising leaves it to be re-sent.
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
