"""``robotrl-recorder-node``: robot topics -> episodes in the crash-safe zarr episode store.

The control grid is given by the ``episode`` messages of whoever steps the robot (the sim robot
node, or the bridge): step 0 after a reset, then one per control step, each carrying the stamp
of the state published for it (``hardware/ros2/topics.py``). For each grid step the recorder

- takes the observation of exactly that stamp from the state topics when they carry it (a
  lockstep sim; DDS does not order samples across topics, so pairing is by stamp, never by
  arrival), else the zero-order hold: per topic the newest sample stamped at or before it,
  no older than ``state_timeout_s`` (a real-time robot, :meth:`StateCache.wait_hold`);
- pairs the step with the action that produced the next step: a tagged action
  (``seed``/``step`` label, lockstep operators) exactly; otherwise the newest ``action``
  message received before the next step's ``episode`` message (zero-order hold on the grid),
  and likewise the newest ``intervention`` flag;
- stores ``reward`` and the flags of the step the action led to, like ``robotrl collect``
  (``writer.add(obs_k, a_k, info_k+1, reward_k+1)``), and the sim stamp since the episode's
  first step as ``timestamp`` (exactly ``k / fps`` in lockstep).

An episode is committed (fsynced, atomically published by the store) when a step reports
``terminated`` or ``truncated``; a reset before that, a missing state/action after
``state_timeout_s``, or a stop discards only the episode being recorded.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hardware.ros2.config import RecorderConfig
from hardware.ros2.node_process import run_node_process
from hardware.ros2.observation import StateCache, deep_reader_qos
from hardware.ros2.topics import EPISODE_FIELDS, parse_action_tag
from robotrl.collection import ACTION_SPACE, open_or_create_store

log = logging.getLogger(__name__)

# Samples kept per state topic until consumed. A lockstep sim can run many times faster than
# the recorder commits episodes; consumed stamps are dropped, so this only bounds a stall.
HISTORY = 20_000


@dataclass
class RecorderStats:
    recorded: int = 0
    successes: int = 0
    discarded: int = 0
    steps: int = 0
    reasons: list[str] = field(default_factory=list)
    episode_indices: list[int] = field(default_factory=list)


@dataclass
class _Step:
    stamp: int
    obs: dict[str, np.ndarray]
    ep: dict[str, float]
    received: int  # receive time of the episode message [ns, monotonic]


class RecorderNode:
    """Records episodes (see the module docstring).

    Args:
        cfg: node configuration (store path, fps, metadata, topics).
        transport: a :class:`hardware.ros2.transport.Transport`.
    """

    def __init__(self, cfg: RecorderConfig, transport: Any) -> None:
        from hardware.ros2 import messages as m  # lazy: cyclonedds only when the node runs

        self.cfg = cfg
        self.topics = cfg.topic_profile()
        self.stats = RecorderStats()
        self.cache = StateCache(
            self.topics, task_state=cfg.task_state, cameras=cfg.cameras, history=HISTORY
        )
        qos = deep_reader_qos(transport)
        self.cache.subscribe(transport, qos)
        self._episodes: queue.Queue[tuple[dict[str, float], int]] = queue.Queue()
        self._lock = threading.Lock()
        self._tagged: dict[tuple[int, int], tuple[np.ndarray, bool]] = {}
        self._untagged: list[tuple[int, np.ndarray]] = []  # (receive ns, action)
        self._flags: list[tuple[int, bool]] = []  # (receive ns, intervention)
        self._seen_tags = False
        self._dropping: int | None = None
        self._stop = threading.Event()
        self._store: Any = None
        self._steps: list[_Step] = []
        for topic, cls, cb in (
            (self.topics.episode, m.Float64MultiArray, self._on_episode),
            (self.topics.action, m.Float64MultiArray, self._on_action),
            (self.topics.intervention, m.Bool, self._on_flag),
        ):
            if qos is None:
                transport.subscribe(topic, cls, cb)
            else:
                transport.subscribe(topic, cls, cb, qos)

    # ------------------------------------------------------------------ callbacks
    def _on_episode(self, msg: Any) -> None:
        if len(msg.data) == len(EPISODE_FIELDS):
            ep = dict(zip(EPISODE_FIELDS, (float(x) for x in msg.data), strict=True))
            self._episodes.put((ep, time.monotonic_ns()))

    def _on_action(self, msg: Any) -> None:
        action = np.asarray(msg.data, dtype=np.float64).astype(np.float32)
        tag = parse_action_tag(msg.layout.dim[0].label) if msg.layout.dim else None
        with self._lock:
            if tag is not None:
                self._seen_tags = True  # a lockstep operator: pair by tag only from now on
                self._tagged[(tag[0], tag[1])] = (action, tag[2])
            else:
                self._untagged.append((time.monotonic_ns(), action))
                del self._untagged[:-1024]

    def _on_flag(self, msg: Any) -> None:
        with self._lock:
            self._flags.append((time.monotonic_ns(), bool(msg.data)))
            del self._flags[:-1024]

    def stop(self) -> None:
        self._stop.set()

    # ------------------------------------------------------------------ store
    def _open_store(self, obs: dict[str, np.ndarray]) -> Any:
        if self._store is None:
            self._store = open_or_create_store(
                self.cfg.out,
                fps=self.cfg.fps,
                robot=self.cfg.robot,
                obs_keys=list(obs),
                action_space=ACTION_SPACE,
            )
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    # ------------------------------------------------------------------ grid
    def _discard(self, reason: str, seed: int | None = None) -> None:
        """Count one dropped episode; its later steps (``seed``) are ignored silently."""
        self.stats.discarded += 1
        self.stats.reasons.append(reason)
        log.warning("recorder: episode discarded: %s", reason)
        self._steps = []
        self._dropping = seed

    def _action_for(
        self, seed: int, step: int, since_ns: int, until_ns: int
    ) -> tuple[np.ndarray, bool] | None:
        """Action (and intervention) of ``step``: tagged, else the newest untagged one received
        in (``since_ns``, ``until_ns``]: after the episode's reset, before the next step."""
        deadline = time.monotonic() + self.cfg.state_timeout_s
        while True:
            with self._lock:
                hit = self._tagged.pop((seed, step), None)
                if hit is not None:
                    return hit
                if not self._seen_tags:
                    before = [a for t, a in self._untagged if since_ns < t <= until_ns]
                    flags = [f for t, f in self._flags if since_ns < t <= until_ns]
                    if before:
                        return before[-1], (flags[-1] if flags else False)
            if time.monotonic() > deadline:
                return None
            time.sleep(0.001)

    def handle(self, ep: dict[str, float], received: int) -> None:
        """Process one ``episode`` message (called in order by :meth:`run`)."""
        stamp = int(ep["stamp_sec"]) * 1_000_000_000 + int(ep["stamp_nanosec"])
        step, seed = int(ep["step"]), int(ep["seed"])
        if step == 0:
            if self._steps:
                self._discard(f"reset (seed {seed}) before episode end")
            self._steps, self._dropping = [], None
        elif self._dropping == seed:
            return
        elif not self._steps or int(self._steps[-1].ep["step"]) != step - 1:
            self._discard(f"step {step} of seed {seed} without its predecessor", seed)
            return
        obs = self.cache.wait_hold(stamp, self.cfg.state_timeout_s, self.cfg.state_timeout_s)
        if obs is None:
            missing = self.cache.missing() or "stamp"
            self._discard(f"state of step {step} of seed {seed} incomplete: {missing}", seed)
            return
        self.cache.drop_before(stamp)  # consumed: memory stays bounded by how far we lag
        self._steps.append(_Step(stamp, obs, ep, received))
        if step > 0 and (ep["terminated"] or ep["truncated"]):
            self._commit()

    def _commit(self) -> None:
        steps, self._steps = self._steps, []
        seed = int(steps[0].ep["seed"])
        self._dropping = seed  # a real-time robot keeps stepping after the end: ignore that
        rows = []
        for k in range(len(steps) - 1):
            hit = self._action_for(seed, k, steps[0].received, steps[k + 1].received)
            if hit is None:
                self._discard(f"no action for step {k} of seed {seed}", seed)
                return
            rows.append(hit)
        store = self._open_store(steps[0].obs)
        last = steps[-1].ep
        with store.begin_episode(
            operator=self.cfg.operator, task=self.cfg.task, language=self.cfg.language
        ) as writer:
            for k, (action, flag) in enumerate(rows):
                nxt = steps[k + 1].ep
                info = {"success": bool(nxt["success"]), "intervention": flag}
                t = (steps[k].stamp - steps[0].stamp) / 1e9
                writer.add(steps[k].obs, action, info, reward=nxt["reward"], timestamp=t)
            index = writer.commit(
                success=bool(last["success"]),
                terminated=bool(last["terminated"]),
                final_obs=steps[-1].obs,
            )
        with self._lock:  # forget this episode's leftovers
            for key in [k for k in self._tagged if k[0] == seed]:
                del self._tagged[key]
        self.stats.recorded += 1
        self.stats.successes += int(bool(last["success"]))
        self.stats.steps += len(rows)
        self.stats.episode_indices.append(index)

    def run(self, timeout_s: float | None = None) -> RecorderStats:
        """Handle ``episode`` messages until ``cfg.episodes`` are committed, :meth:`stop`, or
        ``timeout_s`` without any message."""
        while not self._stop.is_set():
            if self.cfg.episodes and self.stats.recorded >= self.cfg.episodes:
                break
            try:
                ep, received = self._episodes.get(timeout=0.1 if timeout_s is None else timeout_s)
            except queue.Empty:
                if timeout_s is not None:
                    break
                continue
            self.handle(ep, received)
        if self._steps:
            self._discard("stopped mid-episode")
        return self.stats


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``robotrl-recorder-node`` (ROS 2 style arguments)."""
    return run_node_process(RecorderConfig, RecorderNode, argv, extra=lambda cfg: {"out": cfg.out})


if __name__ == "__main__":
    raise SystemExit(main())
