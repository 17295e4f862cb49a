"""``robotrl-bridge``: normalised actions in, safety-filtered robot commands out, with a watchdog.

Subscribes the ``action`` topic (Float64MultiArray, the (7,) normalised action a policy or a
teleop node publishes) and applies every action as it arrives through a
:class:`~hardware.ros2.pose_commander.PoseCommander` (measured TCP pose + scaled delta ->
safety filter, always last -> ``equilibrium_pose`` and ``gripper_command``). A
:class:`~hardware.ros2.pose_commander.StateWatchdog` watches the robot's state topics: state older
than ``state_timeout_s`` -> hold (the last safe target is re-sent, actions are refused) and the
reason is logged and published on ``/robotrl/bridge/status``; fresh state again -> resume from
the measured pose. A ``reset`` message re-synchronises the filter (the arm moves to its reset
pose). No torch: the bridge keeps its loop free of inference.

With ``safety_critic``, the safety reflex (:class:`controllers.reflex_stage.ReflexStage`, the
stage the sim runs at its physics rate) checks every action at the measured features before it
is sent, and re-checks the last command ``reflex_hz`` times a second until the next action: a
risky command is slowed or replaced by a recovery target, and in contact the stiffness drops.
The bridge prints how often (``reflex_steps``, ``reflex_ticks``) on exit.

Only ``command: equilibrium_pose`` (a Cartesian impedance controller robot-side) is served; the
``joint_torque`` mode (our impedance controller in the bridge) is not implemented yet.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hardware.ros2 import messages as m
from hardware.ros2.config import BridgeConfig, ConfigError
from hardware.ros2.node_process import run_node_process
from hardware.ros2.observation import StateCache
from hardware.ros2.pose_commander import PoseCommander, ReflexFeatures, StateWatchdog
from hardware.ros2.robot_env import LOCKSTEP_TIMEOUT_S
from hardware.ros2.transport import SENSOR_QOS, Transport

log = logging.getLogger(__name__)


@dataclass
class BridgeStats:
    """Counts of what the bridge did (printed as JSON on exit)."""

    actions: int = 0
    applied: int = 0
    refused: int = 0
    resets: int = 0
    holds: int = 0
    reflex_steps: int = 0  # actions the reflex slowed or replaced (at once or later)
    reflex_ticks: int = 0  # reflex evaluations that slowed or replaced the command
    hold_reasons: list[str] = field(default_factory=list)
    stopped_by: str = ""


class BridgeNode:
    """The bridge on ``transport`` (see the module docstring).

    Args:
        cfg: bridge configuration (topics, watchdog bound, action scale, workspace).
        transport: a :class:`hardware.ros2.transport.Transport`.
    """

    def __init__(self, cfg: BridgeConfig, transport: Transport) -> None:
        if cfg.command != "equilibrium_pose":
            raise ConfigError(
                f"the bridge serves command=equilibrium_pose only, got {cfg.command!r} "
                "(joint_torque is not implemented)"
            )
        self.cfg = cfg
        self.profile = cfg.topic_profile()
        self.stats = BridgeStats()
        self.cache = StateCache(self.profile)
        self._subs = self.cache.subscribe(transport, SENSOR_QOS)
        self.commander = PoseCommander(
            transport,
            self.profile,
            max_dpos=cfg.max_dpos,
            max_drot=cfg.max_drot,
            workspace_low=cfg.workspace_low,
            workspace_high=cfg.workspace_high,
            stiffness=cfg.stiffness or None,
            grasp_release_z=cfg.grasp_release_z,
            safety_critic=cfg.safety_critic or None,
            safety_threshold=cfg.safety_threshold or None,
        )
        self.features = ReflexFeatures()
        self._reflex_counted = False  # this action's reflex already counted in the stats
        self._step_ticks = 0  # reflex ticks of this action counted so far
        self._reflex_failed = False  # the reflex thread raised: every action is refused
        self._reflex_lock = threading.Lock()  # features and counts: action vs reflex thread
        # the commander was resynced since the last hold (by the first action or the resume,
        # whichever came first: a late resume must not forget an action applied since)
        self._synced = False
        # a lockstep sim robot publishes state only when commanded: bound its answer instead
        self.watchdog = StateWatchdog(
            self.cache,
            LOCKSTEP_TIMEOUT_S if cfg.lockstep else cfg.state_timeout_s,
            on_hold=self._on_hold,
            on_resume=self._on_resume,
            status=transport,
        )
        self._cv = threading.Condition()
        self._action: np.ndarray | None = None
        self._stop = False
        p = self.profile
        self._subs.append(transport.subscribe(p.action, m.Float64MultiArray, self._on_action))
        self._subs.append(transport.subscribe(p.reset, m.Float64MultiArray, self._on_reset))
        self._reflex_thread: threading.Thread | None = None
        if self.commander.reflex is not None and not cfg.lockstep:  # lockstep: per action
            self._reflex_thread = threading.Thread(
                target=self._reflex_loop, name="bridge-reflex", daemon=True
            )
            self._reflex_thread.start()

    def _on_action(self, msg: m.Float64MultiArray) -> None:
        a = np.asarray(msg.data, dtype=float)
        with self._cv:
            self.stats.actions += 1
            if a.shape != (7,):
                log.warning("ignoring an action of shape %s (expected (7,))", a.shape)
                self.stats.refused += 1
                return
            self._action = a
            self._cv.notify()

    def _on_reset(self, msg: m.Float64MultiArray) -> None:
        self.stats.resets += 1
        self.commander.resync()
        self.features.reset()

    def _on_hold(self, reason: str) -> None:
        self._synced = False
        self.stats.holds += 1
        self.stats.hold_reasons.append(reason)
        self.commander.hold()

    def _on_resume(self) -> None:
        with self._reflex_lock:
            self._resync_once()

    def _resync_once(self) -> None:
        """Resync the commander once after a hold (the caller holds ``_reflex_lock``)."""
        if not self._synced:
            self.commander.resync()
            self._synced = True

    def apply(self, action: np.ndarray) -> bool:
        """Apply one action now (False when the watchdog or a failed reflex refuses it)."""
        # synchronous: the watchdog thread may lag behind
        if self._reflex_failed or self.watchdog.check():
            self.stats.refused += 1
            return False
        latest = self.cache.latest()
        end = time.monotonic() + (2.0 if self.cfg.lockstep else 0.0)
        while latest is None and time.monotonic() < end:  # lockstep: the reset state may lag
            time.sleep(0.005)
            latest = self.cache.latest()
        if latest is None:
            self.stats.refused += 1
            return False
        obs, _ = latest
        opening = float(obs["state/gripper"][0]) if "state/gripper" in obs else None
        with self._reflex_lock:
            self._resync_once()  # fresh again before the watchdog thread noticed
            features = None
            if self.commander.reflex is not None:
                features = self.features(obs, self.cache.newest_stamp())
            flags = self.commander.apply(
                action, obs["state/ee_pos"], obs["state/ee_quat"], opening, features
            )
            self.stats.applied += 1
            self._reflex_counted = False
            self._count_reflex(flags)
        return True

    def reflex_tick(self) -> bool:
        """Re-check the last command at the newest state (the reflex thread's tick). Returns
        whether a check ran (not without a reflex, during a hold or before the first action)."""
        if self.commander.reflex is None or self.watchdog.check():
            return False
        latest = self.cache.latest()
        if latest is None:
            return False
        obs, _ = latest
        with self._reflex_lock:
            features = self.features(obs, self.cache.newest_stamp())
            flags = self.commander.reflex_tick(features, obs["state/ee_pos"], obs["state/ee_quat"])
            self._count_reflex(flags, between=True)
        return bool(flags)

    def _count_reflex(self, flags: dict[str, Any], between: bool = False) -> None:
        ticks = int(flags.get("reflex_ticks", 0))
        # between actions, the step's count grew by one when this tick intervened
        if ticks > (self._step_ticks if between else 0):
            self.stats.reflex_ticks += ticks - (self._step_ticks if between else 0)
        self._step_ticks = ticks
        if flags.get("reflex") and not self._reflex_counted:
            self.stats.reflex_steps += 1
            self._reflex_counted = True

    def _reflex_loop(self) -> None:
        period = 1.0 / self.cfg.reflex_hz
        next_tick = time.monotonic()
        while not self._stop:
            next_tick += period
            try:
                self.reflex_tick()
            except Exception:  # fail closed: hold the last safe target, refuse new actions
                log.exception("the reflex failed: holding the robot")
                self._reflex_failed = True
                self.commander.hold()
                return
            time.sleep(max(0.0, next_tick - time.monotonic()))

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()

    def run(self, duration_s: float | None = None) -> BridgeStats:
        """Apply actions as they arrive until :meth:`stop` (or ``duration_s``)."""
        end = None if duration_s is None else time.monotonic() + duration_s
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._stop or self._action is not None, timeout=0.1)
                if self._stop:
                    self.stats.stopped_by = "stopped"
                    break
                action, self._action = self._action, None
            if action is not None:
                self.apply(action)
            if end is not None and time.monotonic() > end:
                self.stats.stopped_by = "duration"
                break
        return self.stats

    def close(self) -> None:
        self.stop()
        if self._reflex_thread is not None:
            self._reflex_thread.join(timeout=1.0)
        self.watchdog.close()
        for sub in self._subs:
            sub.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``robotrl-bridge`` (ROS 2 style arguments: ``--ros-args -p key:=v``)."""
    return run_node_process(BridgeConfig, BridgeNode, argv)


if __name__ == "__main__":
    raise SystemExit(main())
