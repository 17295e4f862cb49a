"""``robotrl-teleop-node``: a teleop device on ROS 2 topics.

Each tick the device (``hardware.devices``: keyboard, spacemouse, gamepad, scripted, expert) is
read and published as

- ``teleop_twist`` (TwistStamped, base frame): ``action[:3] * max_dpos * rate_hz`` [m/s] and
  ``action[3:6] * max_drot * rate_hz`` [rad/s] (what a servo / twist controller consumes);
- ``teleop_action`` (Float64MultiArray, (7,) normalised action incl. gripper);
- ``intervention`` (Bool): the human is driving this tick;
- ``action`` (Float64MultiArray, (7,)) when ``publish_action``: the teleop drives the robot.

Two ways to tick:

- **timer** (robots): at ``rate_hz``; the ``expert`` device acts on the newest state, and only
  on state fresher than ``state_timeout_s`` (otherwise nothing is published: stale state never
  produces motion).
- **lockstep** (the sim robot in lockstep): the node runs the episodes itself, like
  ``robotrl collect``: ``reset`` with ``seed + k``, then one action per ``episode`` message of a
  non-final step, computed from the state of exactly that step's stamp; actions are tagged
  (:func:`hardware.ros2.topics.action_tag`) so a recorder pairs them with steps exactly.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hardware.devices import ExpertDevice, TeleopCommand, TeleopDevice, make_device
from hardware.ros2.config import TeleopNodeConfig
from hardware.ros2.node_process import run_node_process
from hardware.ros2.observation import StateCache, deep_reader_qos
from hardware.ros2.topics import EPISODE_FIELDS, action_tag

EPISODE_WAIT_S = 10.0  # lockstep: a sim that answers no reset/action within this is gone


@dataclass
class TeleopStats:
    ticks: int = 0
    interventions: int = 0
    skipped_stale: int = 0
    episodes: int = 0
    stopped_by: str = "done"
    wall_s: float = 0.0  # lockstep: from the first reset to the end of the last episode


def make_node_device(cfg: TeleopNodeConfig) -> TeleopDevice:
    """The device of ``cfg``; ``expert`` wraps the task's scripted expert (seeded by
    ``cfg.seed``, scaled by ``max_dpos`` / ``max_drot``) as ``robotrl collect`` does."""
    if cfg.device == "expert":
        import sim  # lazy: teleop on a robot PC does not need the simulator

        expert = sim.make_expert(
            cfg.task,
            None,
            max_dpos=cfg.max_dpos,
            max_drot=cfg.max_drot,
            noise=cfg.expert_noise,
            seed=cfg.seed,
        )
        return ExpertDevice(expert)
    return make_device(cfg.device, **cfg.device_kwargs)


class TeleopNode:
    """Publishes a device's commands (see the module docstring).

    Args:
        cfg: node configuration.
        transport: a :class:`hardware.ros2.transport.Transport`.
        device: the device; built from ``cfg`` when None.
        clock_ns: the node's clock [ns]: timer pacing and the expert's state freshness
            (default: time.monotonic_ns).
        wait: waits up to the given seconds in timer mode (default: until ``stop()``).
    """

    def __init__(
        self,
        cfg: TeleopNodeConfig,
        transport: Any,
        device: TeleopDevice | None = None,
        clock_ns: Callable[[], int] | None = None,
        wait: Callable[[float], object] | None = None,
    ) -> None:
        from hardware.ros2 import messages as m  # lazy: cyclonedds only when the node runs

        self.cfg, self.transport = cfg, transport
        self.topics = cfg.topic_profile()
        self.device = device if device is not None else make_node_device(cfg)
        self.stats = TeleopStats()
        self.clock_ns = clock_ns or time.monotonic_ns
        self._m = m
        t = self.topics
        self._twist = transport.publisher(t.teleop_twist, m.TwistStamped)
        self._teleop_action = transport.publisher(t.teleop_action, m.Float64MultiArray)
        self._flag = transport.publisher(t.intervention, m.Bool)
        self._action = (
            transport.publisher(t.action, m.Float64MultiArray) if cfg.publish_action else None
        )
        self.cache: StateCache | None = None
        if isinstance(self.device, ExpertDevice):
            self.cache = StateCache(t, task_state=True, history=256, clock_ns=self.clock_ns)
            self.cache.subscribe(transport, deep_reader_qos(transport) if cfg.lockstep else None)
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait
        self._episodes: queue.Queue[dict[str, float]] = queue.Queue()
        self._reset = transport.publisher(t.reset, m.Float64MultiArray)
        if cfg.publish_episodes:
            self._episode_pub = transport.publisher(t.episode, m.Float64MultiArray)
        self._seed, self._step = cfg.seed, -1  # timer-mode episodes (publish_episodes)
        self._robot_ended = threading.Event()
        self._done = False
        if cfg.auto_reset and not cfg.lockstep:
            transport.subscribe(t.episode, m.Float64MultiArray, self._on_robot_episode)
        if cfg.lockstep:
            qos = deep_reader_qos(transport)
            if qos is None:
                transport.subscribe(t.episode, m.Float64MultiArray, self._on_episode)
            else:
                transport.subscribe(t.episode, m.Float64MultiArray, self._on_episode, qos)

    def stop(self) -> None:
        """Ask :meth:`run` to return after the current tick."""
        self._stop.set()

    def close(self) -> None:
        """Nothing to release: the transport owns the publishers and subscriptions."""

    # ------------------------------------------------------------------ publishing
    def publish(self, cmd: TeleopCommand, tag: str = "", stamp_ns: int | None = None) -> None:
        """Publish one command on the twist, teleop action, flag (and action) topics; the
        twist is stamped ``stamp_ns`` (the sim clock in lockstep) or the wall clock."""
        m, cfg = self._m, self.cfg
        a = cmd.action.astype(np.float64)
        v, w = a[:3] * cfg.max_dpos * cfg.rate_hz, a[3:6] * cfg.max_drot * cfg.rate_hz
        t = time.time_ns() if stamp_ns is None else stamp_ns
        header = m.Header(stamp=m.stamp(t), frame_id=self.topics.base_frame)
        self._twist.publish(
            m.TwistStamped(
                header=header,
                twist=m.Twist(m.Vector3(*map(float, v)), m.Vector3(*map(float, w))),
            )
        )
        data = [float(x) for x in a]
        layout = m.MultiArrayLayout(
            dim=[m.MultiArrayDimension(label=tag or "action", size=len(data), stride=len(data))]
        )
        self._teleop_action.publish(m.Float64MultiArray(layout=layout, data=data))
        self._flag.publish(m.Bool(data=bool(cmd.intervene)))
        if self._action is not None:
            self._action.publish(m.Float64MultiArray(layout=layout, data=data))
        self.stats.ticks += 1
        self.stats.interventions += int(cmd.intervene)

    # ------------------------------------------------------------------ timer mode
    def tick(self) -> TeleopCommand | None:
        """Read the device once and publish; None when the expert has no fresh state.

        With ``publish_episodes`` the tick is also a step of the operator's episode: the first
        tick publishes ``reset [seed]``, every tick an ``episode`` message stamped like the
        twist (a recorder holds the robot's state at that stamp) and a tagged action; the
        ``success`` / ``failure`` events end the episode (``truncated`` with the label, as
        ``robotrl collect`` commits an operator-labelled episode), ``rerecord`` resets the same
        seed. Without it (the robot's stack cuts episodes, e.g. the sim robot's task oracle)
        those keys publish a ``reset`` for the next seed (re-record: the same seed)."""
        if isinstance(self.device, ExpertDevice):
            assert self.cache is not None
            latest = self.cache.latest()
            if latest is None or latest[1] > self.cfg.state_timeout_s:
                self.stats.skipped_stale += 1
                return None
            self.device.observe(latest[0])
        if self.cfg.auto_reset and not self.cfg.publish_episodes:
            if self._step < 0 or self._robot_ended.is_set():
                self._next_robot_episode()
                return None  # the next tick acts on the post-reset state
        if self.cfg.publish_episodes and self._step < 0:
            self._reset.publish(self._m.Float64MultiArray(data=[float(self._seed)]))
            self.device.reset()
            self._step = 0
        stamp = time.time_ns()
        cmd = self.device.read()
        if not self.cfg.publish_episodes:
            self.publish(cmd, stamp_ns=stamp)
            if {"success", "failure", "rerecord"} & cmd.events:
                # the robot's stack cuts episodes (sim oracle): the operator's keys start the
                # next one (re-record: the same seed again)
                if "rerecord" not in cmd.events:
                    self._seed += 1
                self._reset.publish(self._m.Float64MultiArray(data=[float(self._seed)]))
                self.device.reset()
            return cmd
        if "rerecord" in cmd.events:
            self._step = -1  # the next tick resets the same seed; the recorder discards
            return cmd
        ended = bool({"success", "failure"} & cmd.events)
        sec, nsec = divmod(stamp, 1_000_000_000)
        data = [self._seed, self._step, 0.0, "success" in cmd.events, False, ended, sec, nsec]
        self._episode_pub.publish(self._m.Float64MultiArray(data=[float(x) for x in data]))
        if ended:
            self._seed, self._step = self._seed + 1, -1
            self.stats.episodes += 1
            return cmd
        self.publish(cmd, action_tag(self._seed, self._step, cmd.intervene), stamp)
        self._step += 1
        return cmd

    def _on_robot_episode(self, msg: Any) -> None:
        d = msg.data
        if len(d) == len(EPISODE_FIELDS) and self._step >= 0 and int(d[0]) == self._seed:
            if d[1] > 0 and (d[4] or d[5]):  # terminated or truncated
                self._robot_ended.set()

    def _next_robot_episode(self) -> None:
        """auto_reset: reset ``seed`` once ready, ``seed + 1`` after the robot ended one."""
        if self._step >= 0:
            self.stats.episodes += 1
            self._seed += 1
            if 0 < self.cfg.episodes <= self.stats.episodes:
                self._done = True
                return None
        self._robot_ended.clear()
        self._reset.publish(self._m.Float64MultiArray(data=[float(self._seed)]))
        self.device.reset()
        self._step = 0
        return None  # the next tick acts on the post-reset state

    def run(self, duration_s: float | None = None) -> TeleopStats:
        """Timer mode (or lockstep when configured) until stopped, ``quit``, or ``duration_s``."""
        if self.cfg.lockstep:
            return self.run_lockstep()
        period = 1.0 / self.cfg.rate_hz
        start = t_next = self.clock_ns() * 1e-9
        with self.device:
            while not self._stop.is_set():
                cmd = self.tick()
                if cmd is not None and "quit" in cmd.events:
                    self.stats.stopped_by = "quit"
                    break
                if self.cfg.publish_episodes and 0 < self.cfg.episodes <= self.stats.episodes:
                    break
                if self._done:
                    break
                if duration_s is not None and self.clock_ns() * 1e-9 - start >= duration_s:
                    break
                t_next += period
                self._wait(max(0.0, t_next - self.clock_ns() * 1e-9))
        if self._stop.is_set():
            self.stats.stopped_by = "stopped"
        return self.stats

    # ------------------------------------------------------------------ lockstep mode
    def _on_episode(self, msg: Any) -> None:
        if len(msg.data) != len(EPISODE_FIELDS):
            return
        self._episodes.put(dict(zip(EPISODE_FIELDS, (float(x) for x in msg.data), strict=True)))

    def _next_episode_msg(self) -> dict[str, float]:
        try:
            return self._episodes.get(timeout=EPISODE_WAIT_S)
        except queue.Empty:
            raise TimeoutError(
                f"no {self.topics.episode} message within {EPISODE_WAIT_S} s: is the sim robot "
                "running with lockstep:=true?"
            ) from None

    def _wait_for_readers(self) -> None:
        deadline = time.monotonic() + EPISODE_WAIT_S
        need = self.cfg.wait_subscribers
        pub = self._action if self._action is not None else self._teleop_action
        while pub.matched_count() < need or self._reset.matched_count() < 1:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{pub.matched_count()} readers of the action topic and "
                    f"{self._reset.matched_count()} of {self.topics.reset} after "
                    f"{EPISODE_WAIT_S} s; expected {need} and 1"
                )
            time.sleep(0.01)
        time.sleep(0.2)  # let the readers' side of discovery (their writers) settle too

    def run_lockstep(self) -> TeleopStats:
        """Run ``cfg.episodes`` episodes against a lockstep sim robot (see the module doc)."""
        if self.cfg.episodes < 1:
            raise ValueError("lockstep teleop needs episodes >= 1")
        if not isinstance(self.device, ExpertDevice):
            raise ValueError(f"lockstep teleop drives the expert device, got {self.cfg.device!r}")
        assert self.cache is not None
        self._wait_for_readers()
        start = time.monotonic()
        with self.device:
            for k in range(self.cfg.episodes):
                if self._stop.is_set():
                    self.stats.stopped_by = "stopped"
                    break
                seed = self.cfg.seed + k
                self._run_episode(seed)
                self.stats.episodes += 1
        self.stats.wall_s = round(time.monotonic() - start, 3)
        return self.stats

    def _run_episode(self, seed: int) -> None:
        m = self._m
        self._reset.publish(m.Float64MultiArray(data=[float(seed)]))
        self.device.reset()
        assert self.cache is not None
        while True:
            ep = self._next_episode_msg()
            if int(ep["seed"]) != seed:
                continue  # a late message of an earlier episode
            if ep["step"] > 0 and (ep["terminated"] or ep["truncated"]):
                return
            stamp = int(ep["stamp_sec"]) * 1_000_000_000 + int(ep["stamp_nanosec"])
            obs = self.cache.wait_at(stamp, EPISODE_WAIT_S)
            if obs is None:
                raise TimeoutError(
                    f"state of step {int(ep['step'])} (stamp {stamp} ns) incomplete after "
                    f"{EPISODE_WAIT_S} s; missing topics: {self.cache.missing()}"
                )
            assert isinstance(self.device, ExpertDevice)
            self.device.observe(obs)
            cmd = self.device.read()
            self.publish(cmd, action_tag(seed, int(ep["step"]), cmd.intervene), stamp)


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``robotrl-teleop-node`` (ROS 2 style arguments, see NodeConfig.from_args)."""
    return run_node_process(TeleopNodeConfig, TeleopNode, argv)


if __name__ == "__main__":
    raise SystemExit(main())
