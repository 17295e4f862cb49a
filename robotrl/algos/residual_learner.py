"""The learner side of split residual RL: replay from actors' streams, the update schedule of
:func:`~robotrl.algos.residual_training.train_residual`, versioned weights and checkpoints.

:class:`ResidualLearner` is a :class:`robotrl.distributed.Learner`: transitions arrive in batches
(``on_transitions``), :meth:`~ResidualLearner.work` runs the updates they owe, ``state_dict``
is the residual actor the actors act with.
:func:`robotrl.distributed.serve_learner` runs it in a restartable Ray actor until told to stop.

Schedule (as in one process, counted in transitions received instead of env steps): nothing
until ``warmup_steps`` transitions, then ``critic_warmup_updates`` critic-only updates, then
``utd`` updates per transition received; the first weights are published after the critic
warm-up (until then actors act with base + noise).

Streams: each (actor id, env id) is one env stream of the replay. The actor numbers each
stream's transitions (``extras["t"]``); a transition is stored when its successor arrives, so a
gap (outbox overflow, an actor restart, a re-sent batch arriving late) stores it as truncated:
its target bootstraps from its own ``s'`` and n-step returns never cross the gap.

Restart: the learner checkpoints the agent (actor, critics, targets), the update count, the
weights version and the transitions received every ``checkpoint_every_s`` (at a publish), in a
versioned subdirectory named by ``latest``. A restarted learner loads it, publishes those
weights at once and continues the version count. Lost on a kill: the online replay and the Adam
moments (re-estimated within a few updates); the demo buffer is rebuilt from its store. The
restarted learner waits for ``refill_steps`` fresh transitions before updating again, so its
first updates do not overfit a nearly empty replay.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from policies.checkpoint import load_into, read_doc
from robotrl.algos.residual import ResidualAgent, save_agent
from robotrl.algos.residual_rollout import ResidualTransition
from robotrl.algos.residual_training import ResidualReplay, TrainConfig
from robotrl.datasets import ReplayBuffer

LATEST = "latest"  # file naming the newest checkpoint subdirectory


@dataclass
class _Stream:
    index: int  # env id in the replay buffers
    epoch: int = -1
    t: int = -1  # step number of the newest transition seen
    held: ResidualTransition | None = None  # newest non-terminal transition, not yet stored


class ResidualLearner:
    """Residual agent + replay fed by actors.

    Args:
        agent: the residual agent to train (its actor is what gets published).
        train: schedule (``warmup_steps``, ``critic_warmup_updates``, ``buffer_size``, ``seed``).
        demos: demo buffer (or None).
        max_streams: distinct (actor, env) streams at most (replay ``num_envs``).
        refill_steps: transitions a resumed learner waits for before updating (None:
            ``train.warmup_steps``).
    """

    def __init__(
        self,
        agent: ResidualAgent,
        train: TrainConfig,
        *,
        demos: ReplayBuffer | None = None,
        max_streams: int = 256,
        refill_steps: int | None = None,
    ) -> None:
        self.agent, self.cfg, self.train = agent, agent.cfg, train
        self.buffers = ResidualReplay(
            agent.obs_dim,
            agent.act_dim,
            agent.cfg,
            train.buffer_size,
            demos=demos,
            num_envs=max_streams,
        )
        self.online, self.replay = self.buffers.online, self.buffers.replay
        self.rng = np.random.default_rng(train.seed)
        self.max_streams = max_streams
        self.refill_steps = train.warmup_steps if refill_steps is None else refill_steps
        self._streams: dict[tuple[str, int], _Stream] = {}
        self.received = 0  # transitions handed to on_transitions, over every session
        self.session_received = 0
        self.cut = 0  # transitions stored as truncated because their successor went missing
        self.critic_warmup_done = 0
        self.resumed = False
        self.owed = 0.0  # updates due under the UTD ratio and not yet run
        self.last_logs: dict[str, float] = {}

    # ------------------------------------------------------------------ Learner role
    def on_transitions(self, batch: Any) -> None:
        """Store a :class:`~robotrl.distributed.TransitionBatch` of one actor."""
        ex = batch.extras
        feats, base = batch.obs["features"], batch.obs["base_action"]
        nfeats, nbase = batch.next_obs["features"], batch.next_obs["base_action"]
        for i in range(len(batch)):
            key = (batch.actor_id, int(batch.env_id[i]))
            s = self._streams.get(key)
            if s is None:
                if len(self._streams) >= self.max_streams:
                    raise ValueError(
                        f"more than max_streams={self.max_streams} (actor, env) streams"
                    )
                s = self._streams[key] = _Stream(len(self._streams))
            t = int(ex["t"][i])
            if s.held is not None and (batch.epoch != s.epoch or t != s.t + 1):
                self._store(s.held._replace(truncated=True))  # bootstrap: a gap, not an end
                self.cut += 1
                s.held = None
            s.epoch, s.t = batch.epoch, t
            tr = ResidualTransition(
                feats[i],
                base[i],
                batch.action[i],
                float(batch.reward[i]),
                bool(batch.terminated[i]),
                bool(batch.truncated[i]),
                bool(ex["intervention"][i]),
                nfeats[i],
                nbase[i],
                s.index,
            )
            if s.held is not None:
                self._store(s.held)
            if tr.terminated or tr.truncated:
                self._store(tr)
                s.held = None
            else:
                s.held = tr
            self.received += 1
            self.session_received += 1
            if self.learning:
                self.owed += self.cfg.utd

    def _store(self, t: ResidualTransition) -> None:
        self.buffers.store(t)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The residual actor's weights (what actors act with)."""
        return self.agent.actor.state_dict()

    # ------------------------------------------------------------------ schedule
    @property
    def critic_warm(self) -> bool:
        return self.resumed or self.critic_warmup_done >= self.train.critic_warmup_updates

    @property
    def learning(self) -> bool:
        """Past the warm-ups: transitions owe updates."""
        if self.resumed:
            return self.session_received >= self.refill_steps
        return self.critic_warm and self.received >= self.train.warmup_steps

    @property
    def ready(self) -> bool:
        """Weights worth publishing exist (critic warmed up, or resumed from a checkpoint)."""
        return self.resumed or (self.critic_warm and self.received >= self.train.warmup_steps)

    def has_work(self) -> bool:
        """Updates are due now (critic warm-up pending, or owed under the UTD ratio)."""
        warming = not self.critic_warm and self.received >= self.train.warmup_steps
        return warming or (self.learning and self.owed >= 1)

    def work(self, max_updates: int = 4) -> int:
        """Run up to ``max_updates`` due updates (critic warm-up first); how many ran."""
        bs, done = self.cfg.batch_size, 0
        if not self.resumed and self.received >= self.train.warmup_steps and not self.critic_warm:
            n = min(max_updates, self.train.critic_warmup_updates - self.critic_warmup_done)
            for _ in range(n):
                self.agent.update(self.replay.sample(bs, self.rng), update_actor=False)
            self.critic_warmup_done += n
            return n
        while done < max_updates and self.learning and self.owed >= 1:
            self.last_logs = self.agent.update(self.replay.sample(bs, self.rng))
            self.owed -= 1
            done += 1
        return done

    # ------------------------------------------------------------------ checkpoints
    def save(self, directory: str | os.PathLike[str], version: int, meta: dict[str, Any]) -> Path:
        """Checkpoint into ``directory/ckpt-<updates>`` and point ``latest`` at it (atomic);
        older checkpoints are removed. Loadable with :func:`~robotrl.algos.residual.load_agent`."""
        root = Path(directory)
        sub = root / f"ckpt-{self.agent.updates:09d}"
        learner = {
            "updates": self.agent.updates,
            "version": version,
            "received": self.received,
            "critic_warmup_done": self.critic_warmup_done,
        }
        save_agent(self.agent, sub, {**meta, "learner": learner})
        tmp = root / f"{LATEST}.tmp"
        tmp.write_text(sub.name)
        os.replace(tmp, root / LATEST)
        for old in root.glob("ckpt-*"):
            if old != sub:
                shutil.rmtree(old, ignore_errors=True)
        return sub

    def resume(self, directory: str | os.PathLike[str]) -> int | None:
        """Load the newest checkpoint in ``directory``; its weights version, or None if there
        is none."""
        sub = latest_checkpoint(directory)
        if sub is None:
            return None
        load_into(self.agent, sub)
        learner = read_doc(sub, "learner checkpoint")["meta"]["learner"]
        self.agent.updates = int(learner["updates"])
        self.received = int(learner["received"])
        self.critic_warmup_done = int(learner["critic_warmup_done"])
        self.resumed = True
        return int(learner["version"])


def latest_checkpoint(directory: str | os.PathLike[str]) -> Path | None:
    """The newest learner checkpoint in ``directory`` (a :func:`~robotrl.algos.residual.
    load_agent` directory), or None if there is none."""
    root = Path(directory)
    if not (root / LATEST).is_file():
        return None
    return root / (root / LATEST).read_text().strip()
