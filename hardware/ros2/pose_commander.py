"""Safety-filtered robot commands and the stale-state watchdog of the bridge (no torch).

:class:`PoseCommander` turns a normalised action (7,) into what a Cartesian impedance robot
takes through :class:`controllers.commander.Commander`, the action-to-target conversion every sim
backend uses (measured TCP pose + scaled delta, safety filter last, NaN -> hold), and publishes
the target as ``equilibrium_pose`` (PoseStamped); ``a[6]`` (-1 open, +1 closed) becomes
``gripper_command`` ``[width m]`` = ``(1 - a[6]) * FINGER_TRAVEL``.

:class:`StateWatchdog` polls a :class:`hardware.ros2.observation.StateCache`: when any state
topic's newest sample is older than the bound (or never arrived) it holds: the commander
re-publishes the last safe target and refuses new commands, and the reason ("``/joint_states``
61 ms old > 50 ms bound") is kept, logged and published on the status topic. When every topic is
fresh again it resumes; the commander re-synchronises its filter to the measured pose first, so
a restarted robot never sees a jump towards a stale target.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from controllers import panda
from controllers.commander import (
    DEFAULT_MAX_DPOS,
    DEFAULT_MAX_DROT,
    DEFAULT_WORKSPACE_HIGH,
    DEFAULT_WORKSPACE_LOW,
    Commander,
)
from controllers.grasp_hold import GraspHold
from controllers.reflex import Reflex, RiskMLP
from controllers.reflex_stage import FEATURES, ROBOT_FEATURES, ReflexStage, robot_features
from controllers.rotations import mat_to_quat, quat_to_mat
from hardware.ros2 import messages as m
from hardware.ros2.observation import StateCache
from hardware.ros2.topics import TopicProfile
from hardware.ros2.transport import LATCHED_QOS, Transport

log = logging.getLogger(__name__)

REFLEX_FEATURES = [n for n, _ in FEATURES]
"""What a critic the robot's reflex runs may read: a robot does not measure the objects'
state, so a critic with task entries (``task/hole_pos``) is refused."""


class ReflexFeatures:
    """The reflex features (10,) of a robot observation (:data:`controllers.reflex_stage.FEATURES`):
    ``state/ee_pos``, the linear part of ``state/ee_twist`` (without a twist topic: the TCP
    position's finite difference over the state stamps), the force of ``state/wrench`` and
    ``state/gripper``, all base frame (the profile's topics must be; the franka profile's
    wrench is ``external_wrench_in_base_frame``)."""

    def __init__(self) -> None:
        self.out = np.zeros(ROBOT_FEATURES)  # reused: valid until the next call
        self._prev: tuple[np.ndarray, int] | None = None
        self._vel = np.zeros(3)

    def reset(self) -> None:
        """Forget the last position (the next velocity without a twist topic is zero)."""
        self._prev, self._vel = None, np.zeros(3)

    def __call__(self, obs: dict[str, np.ndarray], stamp_ns: int) -> np.ndarray:
        """Features of ``obs`` measured at ``stamp_ns``; KeyError names a missing entry."""
        missing = [k for k in ("state/ee_pos", "state/wrench", "state/gripper") if k not in obs]
        if missing:
            raise KeyError(f"the reflex needs {missing} in the robot's state")
        pos = np.asarray(obs["state/ee_pos"], dtype=float)
        if "state/ee_twist" in obs:
            self._vel = np.asarray(obs["state/ee_twist"][:3], dtype=float)
        elif self._prev is not None and stamp_ns > self._prev[1]:
            self._vel = (pos - self._prev[0]) / ((stamp_ns - self._prev[1]) * 1e-9)
        if self._prev is None or stamp_ns > self._prev[1]:
            self._prev = (pos.copy(), stamp_ns)
        force = np.asarray(obs["state/wrench"][:3], dtype=float)
        return robot_features(self.out, pos, self._vel, force, float(obs["state/gripper"][0]))


def load_reflex(path: str, threshold: float | None, max_dpos: float) -> Reflex:
    """The reflex of the exported risk critic at ``path`` (``.npz``) for a robot: ValueError
    when the critic reads features a robot does not measure."""
    critic = RiskMLP.from_file(path)
    if critic.feature_names and critic.feature_names != REFLEX_FEATURES:
        raise ValueError(
            f"{path}: the critic reads {critic.feature_names}; on a robot the reflex measures "
            f"{REFLEX_FEATURES} only (train it without task_keys)"
        )
    if critic.obs_dim != ROBOT_FEATURES:
        raise ValueError(f"{path}: the critic reads {critic.obs_dim} features, not 10")
    return Reflex(critic, threshold=threshold, action_scale=max_dpos)


STATUS_TOPIC = "/robotrl/bridge/status"
"""std_msgs/String: ``ok`` or ``hold: <reason>`` whenever the watchdog changes state."""


class PoseCommander:
    """Normalised actions -> safety-filtered equilibrium pose + gripper width on the robot.

    Args:
        transport: where the commands go.
        profile: topic names (``equilibrium_pose``, ``gripper_command``, ``impedance_params``).
        max_dpos: translation per action unit and step [m].
        max_drot: rotation per action unit and step [rad].
        workspace_low, workspace_high: (3,) TCP box of the safety filter [m, base frame].
        stiffness: (6,) Cartesian stiffness [N/m x3, Nm/rad x3] published once (latched) on
            ``impedance_params``; None leaves the robot's own.
        grasp_release_z: TCP height [m] above which a held object stays gripped
            (:class:`controllers.grasp_hold.GraspHold`, an action stage of the commander; it
            reads the finger opening: :meth:`apply`'s ``opening``); 0: off.
        safety_critic: exported risk critic (``.npz``, robot features only) of the safety
            reflex (:class:`controllers.reflex_stage.ReflexStage`): every :meth:`apply` and
            :meth:`reflex_tick` evaluates the command at the measured features and replaces
            the target with a slowed or recovery one when it is risky. In contact it lowers the
            stiffness on ``impedance_params`` when ``stiffness`` is given (else the robot's
            stiffness stays). None: no reflex.
        safety_threshold: eps_safe of the reflex (None: the export's).
    """

    def __init__(
        self,
        transport: Transport,
        profile: TopicProfile,
        *,
        max_dpos: float = DEFAULT_MAX_DPOS,
        max_drot: float = DEFAULT_MAX_DROT,
        workspace_low: np.ndarray | Sequence[float] = DEFAULT_WORKSPACE_LOW,
        workspace_high: np.ndarray | Sequence[float] = DEFAULT_WORKSPACE_HIGH,
        stiffness: np.ndarray | Sequence[float] | None = None,
        grasp_release_z: float = 0.0,
        safety_critic: str | None = None,
        safety_threshold: float | None = None,
    ) -> None:
        if not profile.equilibrium_pose:
            raise ValueError(f"profile {profile.name!r} has no equilibrium_pose topic")
        self.profile = profile
        stages = [GraspHold(float(grasp_release_z))] if grasp_release_z > 0 else []
        self.commander = Commander(max_dpos, max_drot, workspace_low, workspace_high, stages)
        self.safety = self.commander.safety
        self.max_dpos, self.max_drot = self.commander.max_dpos, self.commander.max_drot
        self._pose = transport.publisher(profile.equilibrium_pose, m.PoseStamped)
        self._gripper = (
            transport.publisher(profile.gripper_command, m.Float64MultiArray)
            if profile.gripper_command
            else None
        )
        self._stiffness: np.ndarray | None = None
        if stiffness is not None and len(stiffness):
            k = np.asarray(stiffness, dtype=float)
            if k.shape != (6,) or not (k > 0).all():
                raise ValueError(f"expected 6 positive stiffnesses, got {stiffness}")
            if not profile.impedance_params:
                raise ValueError(f"profile {profile.name!r} has no impedance_params topic")
            pub = transport.publisher(profile.impedance_params, m.Float64MultiArray, LATCHED_QOS)
            self._impedance = pub  # keep the latched writer alive
            self.set_stiffness(k)
        self.reflex: ReflexStage | None = None
        if safety_critic:
            if not profile.wrench:
                raise ValueError(
                    f"the reflex reads the external force: profile {profile.name!r} "
                    "has no wrench topic"
                )
            reflex = load_reflex(safety_critic, safety_threshold, self.max_dpos)
            compliance = self if self._stiffness is not None else None
            if compliance is None:
                log.warning("the reflex cannot lower the stiffness: no stiffness is configured")
            self.reflex = ReflexStage(reflex, compliance)
        self._lock = threading.RLock()  # apply and reflex_tick come from different threads
        self.target: tuple[np.ndarray, np.ndarray] | None = None  # last safe (pos, rot)
        self.width: float | None = None
        self._needs_sync = True
        self.commands = 0

    def resync(self) -> None:
        """Forget the last target: the next :meth:`apply` starts from the measured pose (after a
        reset or a hold, so the filter's step limit never pulls towards an old target). The
        reflex forgets its step and gives back the stiffness it lowered."""
        with self._lock:
            self._needs_sync = True
            if self.reflex is not None:
                self.reflex.reset()
                self.reflex.release()

    def apply(
        self,
        action: np.ndarray,
        ee_pos: np.ndarray,
        ee_quat: np.ndarray,
        opening: float | None = None,
        features: np.ndarray | None = None,
    ) -> dict[str, Any]:
        """Publish the filtered command of ``action`` (7,) at the measured TCP pose
        (``ee_pos`` (3,) [m], ``ee_quat`` (w, x, y, z), base frame) and finger ``opening`` [m]
        (needed with a grasp hold); with a reflex, its ``features`` (10,) (:class:`ReflexFeatures`)
        are required and the reflex may replace the target. Returns the flags of what the
        commander's stages, the safety filter and the reflex changed."""
        a = np.asarray(action, dtype=float)
        cur_pos = np.asarray(ee_pos, dtype=float)
        cur_rot = quat_to_mat(np.asarray(ee_quat, dtype=float))
        with self._lock:
            if self._needs_sync:
                self.commander.reset(cur_pos, cur_rot, self.commander.gripper)
                self._needs_sync = False
            target = self.commander.command(a, cur_pos, cur_rot, opening)
            flags: dict[str, Any] = dict(target.flags)
            pos, rot = target.pos, target.rot
            if self.reflex is not None:
                if features is None:
                    raise ValueError("the reflex needs the measured features of every command")
                executed = np.r_[np.clip(a[:6], -1.0, 1.0), target.gripper]  # after the stages
                self.reflex.begin(executed if np.isfinite(a).all() else None)
                replacement = self.reflex.tick(features)
                if replacement is not None:
                    pos, rot = self._retarget(replacement, cur_pos, cur_rot, flags)
                flags.update(self.reflex.flags())
            # gripper first: a lockstep sim robot steps on the pose and must have the width then
            if np.isfinite(a).all():
                self.set_gripper(target.gripper)
            self.track(pos, rot)
            self.commands += 1
        return flags

    def reflex_tick(
        self, features: np.ndarray, ee_pos: np.ndarray, ee_quat: np.ndarray
    ) -> dict[str, Any]:
        """One reflex evaluation between commands (the bridge's reflex rate): the last command
        at the measured ``features`` (10,); a stronger intervention than the step's so far
        re-targets from the measured TCP pose. Returns the reflex's flags of the step so far
        (empty without a reflex or before the first command)."""
        with self._lock:
            if self.reflex is None or self.target is None or self._needs_sync:
                return {}
            flags: dict[str, Any] = {}
            replacement = self.reflex.tick(features)
            if replacement is not None:
                cur_pos = np.asarray(ee_pos, dtype=float)
                cur_rot = quat_to_mat(np.asarray(ee_quat, dtype=float))
                self.track(*self._retarget(replacement, cur_pos, cur_rot, flags))
            flags.update(self.reflex.flags())
            return flags

    def _retarget(
        self, action: np.ndarray, cur_pos: np.ndarray, cur_rot: np.ndarray, flags: dict[str, Any]
    ) -> tuple[np.ndarray, np.ndarray]:
        target = self.commander.retarget(action, cur_pos, cur_rot)
        for key, value in target.flags.items():
            flags[key] = bool(flags.get(key, False)) or value
        return target.pos, target.rot

    # Compliance (controllers.reflex_stage): the robot's impedance parameters
    @property
    def stiffness(self) -> np.ndarray:
        """The Cartesian stiffness (6,) last sent on ``impedance_params``."""
        if self._stiffness is None:
            raise ValueError("no stiffness is configured")
        return self._stiffness

    def set_stiffness(self, stiffness: np.ndarray) -> None:
        """Send the Cartesian stiffness (6,) [N/m x3, Nm/rad x3] on ``impedance_params``."""
        self._stiffness = np.array(stiffness, dtype=float)
        self._impedance.publish(m.Float64MultiArray(data=[float(x) for x in self._stiffness]))

    # TargetBackend (controllers.tick): the robot's own impedance controller tracks the target
    def track(self, pos: np.ndarray, rot: np.ndarray) -> None:
        """Publish the (already safe) TCP target ``pos`` (3,) [m], ``rot`` (3, 3), base frame, as
        the equilibrium pose; :meth:`hold` re-sends it."""
        self.target = (pos, rot)
        self._publish_pose(pos, rot)

    def set_gripper(self, command: float) -> None:
        """Publish the gripper width of ``command`` in [-1 open, +1 closed] (no gripper topic in
        the profile: nothing)."""
        if self._gripper is not None:
            self.width = float((1.0 - command) * panda.FINGER_TRAVEL)
            self._gripper.publish(m.Float64MultiArray(data=[self.width]))

    def hold(self) -> None:
        """Re-publish the last safe target (the robot keeps it; nothing new is accepted)."""
        with self._lock:
            if self.target is not None:
                self._publish_pose(*self.target)

    def _publish_pose(self, pos: np.ndarray, rot: np.ndarray) -> None:
        q = mat_to_quat(rot)  # (w, x, y, z)
        msg = m.PoseStamped(
            header=m.Header(stamp=m.stamp(time.time_ns()), frame_id=self.profile.base_frame),
            pose=m.Pose(
                m.Point(float(pos[0]), float(pos[1]), float(pos[2])),
                m.Quaternion(float(q[1]), float(q[2]), float(q[3]), float(q[0])),
            ),
        )
        self._pose.publish(msg)


@dataclass
class HoldEvent:
    """One hold: when it started and ended (``time.monotonic`` [s]) and why."""

    start: float
    reason: str
    end: float | None = None


@dataclass
class WatchdogState:
    held: bool = True
    reason: str = "no state received yet"
    events: list[HoldEvent] = field(default_factory=list)


class StateWatchdog:
    """Holds the robot when its state goes stale (see the module docstring).

    Args:
        cache: the state cache the bridge reads.
        timeout_s: freshness bound [s] of every state topic.
        on_hold: called with the reason when a hold starts (on the watchdog thread).
        on_resume: called when every topic is fresh again.
        poll_s: check period [s] (the hold latency is at most ``timeout_s + poll_s`` after the
            last sample).
        status: transport to publish ``ok`` / ``hold: <reason>`` on :data:`STATUS_TOPIC`.
        clock: monotonic seconds the hold events are stamped with (the cache has its own).
        run: check every ``poll_s`` on a thread of its own (False: the caller calls
            :meth:`tick`).
    """

    def __init__(
        self,
        cache: StateCache,
        timeout_s: float,
        *,
        on_hold: Callable[[str], None] | None = None,
        on_resume: Callable[[], None] | None = None,
        poll_s: float = 0.002,
        status: Transport | None = None,
        clock: Callable[[], float] = time.monotonic,
        run: bool = True,
    ) -> None:
        if not (timeout_s > 0 and poll_s > 0):
            raise ValueError(f"expected timeout_s, poll_s > 0, got {timeout_s}, {poll_s}")
        self.cache = cache
        self.timeout_s = float(timeout_s)
        self.poll_s = float(poll_s)
        self.on_hold, self.on_resume = on_hold, on_resume
        self.state = WatchdogState()
        self._lock = threading.Lock()
        self._status: Any = (
            status.publisher(STATUS_TOPIC, m.String, LATCHED_QOS) if status is not None else None
        )
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if run:
            self._thread = threading.Thread(target=self._loop, name="state-watchdog", daemon=True)
            self._thread.start()

    @property
    def held(self) -> bool:
        return self.state.held

    @property
    def reason(self) -> str:
        return self.state.reason

    def check(self) -> str:
        """Why the state is not fresh now ("" when every topic is within the bound)."""
        ages = self.cache.ages()
        missing = [t for t, a in ages.items() if a is None]
        if missing:
            return f"no state received yet on {missing}"
        topic, oldest = max(ages.items(), key=lambda kv: kv[1] or 0.0)
        age = oldest or 0.0
        if age > self.timeout_s:
            return f"{topic} {age * 1e3:.0f} ms old > {self.timeout_s * 1e3:.0f} ms bound"
        return ""

    def tick(self) -> None:
        """Check once: start a hold (flag, event, status, ``on_hold``) when the state went
        stale, end it (``on_resume``) when every topic is fresh again."""
        reason = self.check()
        if reason and not self.state.held:
            with self._lock:
                self.state.held, self.state.reason = True, reason
                self.state.events.append(HoldEvent(self.clock(), reason))
            log.warning("hold: %s", reason)
            self._publish(f"hold: {reason}")
            if self.on_hold is not None:
                self.on_hold(reason)
        elif not reason and self.state.held:
            with self._lock:
                self.state.held, self.state.reason = False, ""
                if self.state.events:
                    self.state.events[-1].end = self.clock()
            log.info("state fresh again: resuming")
            self._publish("ok")
            if self.on_resume is not None:
                self.on_resume()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.tick()

    def _publish(self, text: str) -> None:
        if self._status is not None:
            self._status.publish(m.String(data=text))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
