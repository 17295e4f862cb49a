"""Env stepping for residual RL: N envs, the frozen base in chunk mode, optional human takeover,
and complete transitions ``(s, a_b, a, r, s', a_b')`` handed to a sink.

Shared by the single-process loop (:func:`robotrl.algos.residual_training.train_residual`, whose
sink writes the replay buffers) and the actor process of the split
(:mod:`robotrl.algos.residual_actor`, whose sink streams to the learner). The caller chooses the
executed actions between :meth:`ResidualRollout.observe` and :meth:`ResidualRollout.step`::

    feats, a_b = rollout.observe(sink)       # (N, O), (N, Da); completes last step's transitions
    actions = a_b + residual(feats, a_b)     # (N, Da) in [-1, 1]
    rollout.step(actions, sink)              # human may override; terminal transitions emitted
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from robotrl.algos.residual import Featurizer
from robotrl.chunk_runner import ChunkRunner
from robotrl.safety_tally import SafetyTally

# intervener(env_id, obs, proposed_action) -> the human's action, or None when not intervening
Intervener = Callable[[int, Mapping[str, np.ndarray], np.ndarray], "np.ndarray | None"]


class ResidualTransition(NamedTuple):
    """One env step as the residual learner stores it (arrays of one env, not batched)."""

    features: np.ndarray  # (O,) featurised observation s
    base_action: np.ndarray  # (Da,) a_b planned at s
    action: np.ndarray  # (Da,) executed action (the human's when intervening)
    reward: float
    terminated: bool
    truncated: bool
    intervention: bool  # a human took over at this step
    next_features: np.ndarray  # (O,) s'
    next_base_action: np.ndarray  # (Da,) a_b' (queue action, or a fresh plan at episode end)
    env_id: int


Sink = Callable[[ResidualTransition], None]


class ResidualRollout:
    """Steps ``num_envs`` envs made by ``make_env`` under the frozen ``base``.

    Args:
        base: frozen :class:`robotrl.types.ChunkPolicy`. make_env: env factory (Gymnasium API,
            ``info["success"]``). featurizer: observation -> residual features.
        num_envs: N. execute_horizon: Te base actions executed per chunk.
        seed: env ``e`` is reset with ``seed + 1000 * e + episode``.
        intervener: optional human (or scripted) takeover.
        vector_env: step ``num_envs`` envs elsewhere, all at once (e.g. on Ray workers:
            :class:`robotrl.distributed.ray_rollout.RayVectorEnv`, which provides
            ``step_each`` / ``reset_one``); ``make_env`` is then not called.

    Attributes:
        env_steps: env steps taken (summed over envs). episodes: one dict per finished episode
            (``env_steps``, ``success``, ``length``, ``intervention_rate``).
    """

    def __init__(
        self,
        base: Any,
        make_env: Callable[[], Any],
        featurizer: Featurizer,
        *,
        num_envs: int = 1,
        execute_horizon: int = 8,
        seed: int = 0,
        intervener: Intervener | None = None,
        vector_env: Any | None = None,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if vector_env is not None and vector_env.num_envs != num_envs:
            raise ValueError(f"vector_env has {vector_env.num_envs} envs, num_envs is {num_envs}")
        self.featurizer, self.num_envs, self.seed = featurizer, num_envs, seed
        self.intervener = intervener
        self.vector_env = vector_env
        self.envs = [] if vector_env is not None else [make_env() for _ in range(num_envs)]
        self.runner = ChunkRunner(base, num_envs, execute_horizon)
        self.obs = [self._reset(i, seed + 1000 * i) for i in range(num_envs)]
        for i in range(num_envs):
            self._reset_human(i)
        self._episode = [0] * num_envs
        self._pending: list[ResidualTransition | None] = [None] * num_envs
        self._stats = [self._fresh_stats() for _ in range(num_envs)]
        self._feats: np.ndarray | None = None
        self._a_b: np.ndarray | None = None
        self.env_steps = 0
        self.episodes: list[dict[str, float]] = []
        self.safety = SafetyTally()  # constraint violations of the training steps

    @staticmethod
    def _fresh_stats() -> dict[str, Any]:
        return {"len": 0, "interventions": 0, "success": False}

    def _reset(self, i: int, seed: int) -> dict[str, Any]:
        if self.vector_env is not None:
            return self.vector_env.reset_one(i, seed)[0]
        return self.envs[i].reset(seed=seed)[0]

    def _step_all(self, actions: list[np.ndarray]) -> list[tuple[Any, ...]]:
        if self.vector_env is not None:  # all envs at once, in other processes
            return self.vector_env.step_each(np.stack(actions))
        return [env.step(a) for env, a in zip(self.envs, actions, strict=True)]

    def _reset_human(self, i: int) -> None:
        if self.intervener is not None and hasattr(self.intervener, "reset"):
            self.intervener.reset(i)

    def observe(self, sink: Sink) -> tuple[np.ndarray, np.ndarray]:
        """Features (N, O) and base actions (N, Da) of the current observations; emits the
        previous step's non-terminal transitions, now that their ``a_b'`` is known."""
        batch_obs = {k: np.stack([o[k] for o in self.obs]) for k in self.obs[0]}
        a_b = self.runner.act(batch_obs)
        feats = self.featurizer(batch_obs)
        for i in range(self.num_envs):
            pending = self._pending[i]
            if pending is not None:
                sink(pending._replace(next_features=feats[i], next_base_action=a_b[i]))
                self._pending[i] = None
        self._feats, self._a_b = feats, a_b
        return feats, a_b

    def step(self, actions: np.ndarray, sink: Sink) -> None:
        """Execute ``actions`` (N, Da) (a human's action replaces an env's when intervening);
        emits terminal transitions at once and resets those envs."""
        if self._feats is None or self._a_b is None:
            raise RuntimeError("call observe() before step()")
        feats, a_b, self._feats, self._a_b = self._feats, self._a_b, None, None
        executed, took = [], []
        for i in range(self.num_envs):
            proposed = actions[i]
            human = self.intervener(i, self.obs[i], proposed) if self.intervener else None
            took.append(human is not None)
            executed.append(np.asarray(human, np.float32) if human is not None else proposed)
        results = self._step_all(executed)
        for i in range(self.num_envs):
            a, took_over = executed[i], took[i]
            next_obs, reward, terminated, truncated, info = results[i]
            self.safety.add(info)
            st = self._stats[i]
            st["len"] += 1
            st["interventions"] += int(took_over)
            st["success"] |= bool(info.get("success"))
            if "oracle_success" in info:  # a classifier gives "success"; the sim's own verdict
                st["oracle_success"] = st.get("oracle_success", False) or info["oracle_success"]
            # s' and a_b' are filled in by the next observe() unless the episode ends here
            head = ResidualTransition(
                feats[i], a_b[i], a, float(reward), bool(terminated), bool(truncated), took_over,
                feats[i], a_b[i], i,
            )  # fmt: skip
            if terminated or truncated:
                obs1 = {k: np.asarray(v)[None] for k, v in next_obs.items()}
                next_feat = self.featurizer(obs1)[0]
                next_base = self.runner.plan_first(i, next_obs)
                sink(head._replace(next_features=next_feat, next_base_action=next_base))
                self.episodes.append(
                    {
                        "env_steps": self.env_steps + 1,
                        "success": float(st["success"]),
                        "length": st["len"],
                        "intervention_rate": st["interventions"] / st["len"],
                        **{k: float(st[k]) for k in ("oracle_success",) if k in st},
                    }
                )
                self._episode[i] += 1
                self._stats[i] = self._fresh_stats()
                next_obs = self._reset(i, self.seed + 1000 * i + self._episode[i])
                self.runner.reset([i])
                self._reset_human(i)
            else:
                self._pending[i] = head
            self.obs[i] = next_obs
            self.env_steps += 1

    def close(self) -> None:
        for env in self.envs:
            env.close()
        if self.vector_env is not None:
            self.vector_env.close()
