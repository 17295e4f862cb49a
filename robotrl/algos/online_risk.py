"""Online updates of the safety critic from the transitions reflex-guarded envs report."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from robotrl.algos.risk_data import add_risk_transition
from robotrl.algos.safety_critic import SafetyCritic, risk_buffer
from robotrl.datasets.replay_buffer import ReplayBuffer


class OnlineRiskLearner:
    """Online updates of a pre-trained critic from the transitions guarded envs report.

    Attach to an env's :class:`sim.safety_guard.SafetyGuard` (``attach(env.guard)``): every
    finished step arrives as ``(s, a, c, s', done)`` and is stored in a risk replay buffer
    (the repo's :class:`~robotrl.datasets.ReplayBuffer`) together with the next step's action;
    every ``update_every`` transitions, ``updates`` gradient steps run and the new weights are
    loaded into every attached reflex. Transitions in which the reflex had to step in after the
    first tick are skipped: their cost reflects the reflex's protection, not the action's risk.

    Args:
        critic: the pre-trained :class:`SafetyCritic`. capacity: buffer size.
        prefill: transitions (e.g. the offline data) to start the buffer with.
        update_every, updates: schedule. seed: sampling RNG.
    """

    def __init__(
        self,
        critic: SafetyCritic,
        capacity: int = 100_000,
        prefill: ReplayBuffer | None = None,
        update_every: int = 200,
        updates: int = 50,
        seed: int = 0,
    ) -> None:
        self.critic = critic
        self.buffer = prefill or risk_buffer(capacity, critic.obs_dim, critic.act_dim)
        self.update_every, self.updates = int(update_every), int(updates)
        self.rng = np.random.default_rng(seed)
        self.guards: list[Any] = []
        self._pending: dict[int, tuple[np.ndarray, np.ndarray, float, np.ndarray]] = {}
        self.received = 0
        self.skipped = 0
        self.logs: dict[str, float] = {}

    def attach(self, guard: Any) -> None:
        """Receive ``guard``'s transitions and push new weights into its reflex."""
        gid = len(self.guards)
        self.guards.append(guard)
        guard.on_transition = functools.partial(self._receive, gid)

    def _receive(
        self,
        gid: int,
        feat: np.ndarray,
        act: np.ndarray,
        cost: float,
        nxt: np.ndarray,
        done: bool,
        mid_step_reflex: bool,
    ) -> None:
        prev = self._pending.pop(gid, None)
        if prev is not None:
            add_risk_transition(self.buffer, *prev, act, False)
        if mid_step_reflex:
            self.skipped += 1
            return
        item = (feat.copy(), np.asarray(act, np.float32).copy(), float(cost), nxt.copy())
        if done or cost > 0:
            add_risk_transition(self.buffer, *item, item[1], True)
        else:
            self._pending[gid] = item
        self.received += 1
        if self.received % self.update_every == 0:
            self.logs = self.critic.fit(self.buffer, self.updates, self.rng, progress=False)
            weights = self.critic.weights()
            for g in self.guards:
                g.reflex.critic.load(weights)
