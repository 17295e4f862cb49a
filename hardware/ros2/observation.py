"""Robot state topics <-> the robotrl observation dict, and a stamped cache of the newest state.

Conversions (the same as ``robotrl/datasets/rosbag_import.py``; all values stay float64 until
the observation is built, then become float32 like the sim env's):

- ``sensor_msgs/JointState`` on ``joint_states``: ``position`` / ``velocity`` of the profile's
  ``arm_joints`` (in that order) -> ``state/joint_pos`` / ``state/joint_vel`` (7,) [rad, rad/s];
  the ``gripper_joints`` positions summed -> ``state/gripper`` (1,) finger opening [m] (from
  ``gripper_joint_states`` when the profile has that topic);
- ``geometry_msgs/PoseStamped`` -> ``state/ee_pos`` (3,) [m], ``state/ee_quat`` (w, x, y, z),
  base frame;
- ``geometry_msgs/WrenchStamped`` -> ``state/wrench`` (6,) force [N], torque [Nm];
- ``geometry_msgs/TwistStamped`` -> ``state/ee_twist`` (6,) linear [m/s], angular [rad/s];
- ``task_state`` (JointState named ``<key>/<i>``) -> ``state/<key>``;
- ``sensor_msgs/Image`` (rgb8) -> ``images/<camera>`` (H, W, 3) uint8.

:class:`StateCache` subscribes those topics and keeps the last few samples of each by header
stamp: :meth:`StateCache.at` assembles the observation of one exact stamp (what a lockstep sim
published for one step: DDS does not order samples across topics, so matching by stamp is what
makes a reader see exactly that step), :meth:`StateCache.latest` the newest of every topic
(zero-order hold, what a controller on a real robot sees) with the age of its oldest part.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hardware.ros2.topics import TopicProfile, task_state_names, task_state_sizes

READER_DEPTH = 1000  # DDS reader history: a busy moment must not overwrite unread samples
# Modules of the robotrl transports (checked by name: importing them here would load cyclonedds).
TRANSPORT_MODULES = ("hardware.ros2.cyclone_transport", "hardware.ros2.rclpy_transport")
ARM_KEYS = ("joint_pos", "joint_vel", "ee_pos", "ee_quat", "ee_twist", "wrench", "gripper")


def deep_reader_qos(transport: Any) -> Any:
    """Reliable reader QoS with a :data:`READER_DEPTH` history for the robotrl transports
    (None, the transport's default, for others such as test doubles). Recorders and lockstep
    operators read every sample; keep-last 10 would drop some while their thread is busy."""
    if type(transport).__module__ not in TRANSPORT_MODULES:
        return None
    from hardware.ros2.transport import QoS  # lazy: cyclonedds (the 'ros2' extra)

    return QoS(reliable=True, depth=READER_DEPTH)


class StateError(ValueError):
    """A state message that does not fit the profile (missing joints, bad encoding...)."""


def stamp_ns(msg: Any) -> int:
    """Header stamp of a message [ns]."""
    t = msg.header.stamp
    return int(t.sec) * 1_000_000_000 + int(t.nanosec)


def _joint_values(msg: Any, names: Sequence[str], field: str) -> np.ndarray:
    index = {n: i for i, n in enumerate(msg.name)}
    missing = [n for n in names if n not in index]
    if missing:
        raise StateError(f"JointState lacks joints {missing}; it has {list(msg.name)}")
    values = getattr(msg, field)
    if len(values) != len(msg.name):
        raise StateError(f"JointState {field} has {len(values)} values for {len(msg.name)} names")
    return np.array([values[index[n]] for n in names], dtype=np.float64)


def joint_state_obs(
    msg: Any, arm_joints: Sequence[str], gripper_joints: Sequence[str] = ()
) -> dict[str, np.ndarray]:
    """``state/joint_pos``, ``state/joint_vel`` (and ``state/gripper`` if ``gripper_joints``)."""
    out = {}
    if arm_joints:
        out["state/joint_pos"] = _joint_values(msg, arm_joints, "position")
        out["state/joint_vel"] = _joint_values(msg, arm_joints, "velocity")
    if gripper_joints:
        fingers = _joint_values(msg, gripper_joints, "position")
        total = 0.0
        for v in fingers:  # left to right, as the sim env sums its finger qpos
            total = total + v
        out["state/gripper"] = np.array([total])
    return out


def pose_obs(msg: Any) -> dict[str, np.ndarray]:
    """``state/ee_pos`` (3,) and ``state/ee_quat`` (w, x, y, z) of a PoseStamped."""
    p, q = msg.pose.position, msg.pose.orientation
    return {
        "state/ee_pos": np.array([p.x, p.y, p.z]),
        "state/ee_quat": np.array([q.w, q.x, q.y, q.z]),
    }


def wrench_obs(msg: Any) -> dict[str, np.ndarray]:
    """``state/wrench`` (6,) force then torque of a WrenchStamped."""
    f, t = msg.wrench.force, msg.wrench.torque
    return {"state/wrench": np.array([f.x, f.y, f.z, t.x, t.y, t.z])}


def twist_obs(msg: Any) -> dict[str, np.ndarray]:
    """``state/ee_twist`` (6,) linear then angular of a TwistStamped."""
    v, w = msg.twist.linear, msg.twist.angular
    return {"state/ee_twist": np.array([v.x, v.y, v.z, w.x, w.y, w.z])}


def task_state_obs(msg: Any) -> dict[str, np.ndarray]:
    """``state/<key>`` entries of a task_state JointState (names ``<key>/<i>``)."""
    sizes = task_state_sizes(list(msg.name))
    values = np.asarray(msg.position, dtype=np.float64)
    out, start = {}, 0
    for key, n in sizes.items():
        out[f"state/{key}"] = values[start : start + n].copy()
        start += n
    return out


def image_obs(msg: Any, camera: str) -> dict[str, np.ndarray]:
    """``images/<camera>`` (H, W, 3) uint8 of an rgb8 Image."""
    if msg.encoding != "rgb8":
        raise StateError(f"expected an rgb8 image on camera {camera!r}, got {msg.encoding!r}")
    data = np.frombuffer(bytes(msg.data), dtype=np.uint8)
    rows = data.reshape(int(msg.height), int(msg.step))[:, : int(msg.width) * 3]
    return {f"images/{camera}": rows.reshape(int(msg.height), int(msg.width), 3).copy()}


# ------------------------------------------------------------------ obs -> messages
def state_messages(
    obs: dict[str, np.ndarray],
    t_ns: int,
    profile: TopicProfile,
    *,
    task_keys: Sequence[str] = (),
) -> dict[str, Any]:
    """Messages (topic -> message) carrying the ``state/*`` entries of ``obs``, stamped ``t_ns``.

    The inverse of :class:`StateCache`'s conversions: the fingers each report half the opening
    (their sum is exact), the task entries ``task_keys`` go to ``task_state``. Used by sim
    publishers and tests; values are sent as float64 (exact for the env's float32 arrays).
    """
    from hardware.ros2 import messages as m  # lazy: cyclonedds (the 'ros2' extra)

    header = m.Header(stamp=m.stamp(t_ns), frame_id=profile.base_frame)
    out: dict[str, Any] = {}
    f64 = {k: np.asarray(v, dtype=np.float64) for k, v in obs.items() if k.startswith("state/")}
    half = float(f64["state/gripper"][0]) / 2 if "state/gripper" in f64 else 0.0
    names = list(profile.arm_joints)
    pos, vel = list(f64["state/joint_pos"]), list(f64["state/joint_vel"])
    fingers = list(profile.gripper_joints)
    if profile.gripper_joint_states:
        out[profile.gripper_joint_states] = m.JointState(
            header=header, name=fingers, position=[half, half], velocity=[0.0, 0.0]
        )
    else:
        names, pos, vel = [*names, *fingers], [*pos, half, half], [*vel, 0.0, 0.0]
    out[profile.joint_states] = m.JointState(header=header, name=names, position=pos, velocity=vel)
    if profile.ee_pose:
        p, q = f64["state/ee_pos"], f64["state/ee_quat"]
        out[profile.ee_pose] = m.PoseStamped(
            header=header,
            pose=m.Pose(m.Point(*map(float, p)), m.Quaternion(*map(float, (*q[1:], q[0])))),
        )
    if profile.wrench:
        w = [float(x) for x in f64["state/wrench"]]
        out[profile.wrench] = m.WrenchStamped(
            header=header, wrench=m.Wrench(m.Vector3(*w[:3]), m.Vector3(*w[3:]))
        )
    if profile.ee_twist and "state/ee_twist" in f64:
        v = [float(x) for x in f64["state/ee_twist"]]
        out[profile.ee_twist] = m.TwistStamped(
            header=header, twist=m.Twist(m.Vector3(*v[:3]), m.Vector3(*v[3:]))
        )
    if task_keys:
        sizes = {k: int(f64[f"state/{k}"].size) for k in task_keys}
        values = [float(x) for k in task_keys for x in f64[f"state/{k}"]]
        out[profile.task_state] = m.JointState(
            header=header, name=task_state_names(sizes), position=values
        )
    return out


def image_message(image: np.ndarray, t_ns: int, frame_id: str = "") -> Any:
    """An rgb8 ``sensor_msgs/Image`` of an (H, W, 3) uint8 image, stamped ``t_ns`` (the inverse
    of :func:`image_obs`)."""
    from hardware.ros2 import messages as m  # lazy: cyclonedds (the 'ros2' extra)

    img = np.ascontiguousarray(image)
    if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
        raise StateError(f"expected an (H, W, 3) uint8 image, got {img.shape} {img.dtype}")
    h, w = img.shape[:2]
    header = m.Header(stamp=m.stamp(t_ns), frame_id=frame_id)
    return m.Image(
        header=header, height=h, width=w, encoding="rgb8", step=3 * w, data=img.tobytes()
    )


# ------------------------------------------------------------------ cache
class StateCache:
    """Newest state samples per topic, converted to observation entries, indexed by stamp.

    Args:
        profile: topics and joint names.
        task_state: also expect the sim's ``task_state`` topic.
        cameras: camera names to expect (``images/<name>``).
        history: samples kept per topic (stamps older than that are forgotten).
        clock_ns: receive clock for ages [ns].

    Thread-safe: transport callbacks write, the node's loop reads.
    """

    def __init__(
        self,
        profile: TopicProfile,
        *,
        task_state: bool = False,
        cameras: Sequence[str] = (),
        history: int = 64,
        clock_ns: Callable[[], int] | None = None,
    ) -> None:
        self.profile = profile
        self.history = int(history)
        self.clock_ns = clock_ns or time.monotonic_ns
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        fingers_in_joints = not profile.gripper_joint_states
        self._convert: dict[str, Callable[[Any], dict[str, np.ndarray]]] = {
            profile.joint_states: lambda msg: joint_state_obs(
                msg, profile.arm_joints, profile.gripper_joints if fingers_in_joints else ()
            )
        }
        if profile.gripper_joint_states:
            self._convert[profile.gripper_joint_states] = lambda msg: joint_state_obs(
                msg, (), profile.gripper_joints
            )
        for topic, fn in ((profile.ee_pose, pose_obs), (profile.wrench, wrench_obs)):
            if topic:
                self._convert[topic] = fn
        if profile.ee_twist:
            self._convert[profile.ee_twist] = twist_obs
        if task_state:
            self._convert[profile.task_state] = task_state_obs
        cams = profile.camera_topics
        for cam in cameras:
            if cam not in cams:
                raise StateError(f"camera {cam!r} has no topic in profile {profile.name!r}")
            self._convert[cams[cam]] = functools.partial(_camera_obs, camera=cam)
        # topic -> stamp -> (receive time, entries)
        self._samples: dict[str, OrderedDict[int, tuple[int, dict[str, np.ndarray]]]] = {
            t: OrderedDict() for t in self._convert
        }
        self.errors = 0
        self.last_error = ""

    @property
    def topics(self) -> list[str]:
        return list(self._convert)

    def message_types(self) -> dict[str, type]:
        """Topic -> message class to subscribe with."""
        from hardware.ros2 import messages as m  # lazy: reading bags needs no cyclonedds

        p = self.profile
        types: dict[str, type] = {}
        for topic in self._convert:
            if topic in (p.joint_states, p.gripper_joint_states, p.task_state):
                types[topic] = m.JointState
            elif topic == p.ee_pose:
                types[topic] = m.PoseStamped
            elif topic == p.wrench:
                types[topic] = m.WrenchStamped
            elif topic == p.ee_twist:
                types[topic] = m.TwistStamped
            else:
                types[topic] = m.Image
        return types

    def subscribe(self, transport: Any, qos: Any = None) -> list[Any]:
        """Subscribe every state topic on ``transport``; returns the subscriptions."""
        subs = []
        for topic, cls in self.message_types().items():

            def callback(msg: Any, topic: str = topic) -> None:
                self.put(topic, msg)

            args = (topic, cls, callback) if qos is None else (topic, cls, callback, qos)
            subs.append(transport.subscribe(*args))
        return subs

    def put(self, topic: str, msg: Any) -> None:
        """Store one message of ``topic`` (transport callback); bad messages are counted."""
        try:
            entries = self._convert[topic](msg)
        except (StateError, ValueError) as exc:
            self.errors += 1
            self.last_error = f"{topic}: {exc}"
            return
        t = stamp_ns(msg)
        with self._changed:
            samples = self._samples[topic]
            samples[t] = (self.clock_ns(), entries)
            while len(samples) > self.history:
                samples.popitem(last=False)
            self._changed.notify_all()

    def at(self, t_ns: int) -> dict[str, np.ndarray] | None:
        """The observation (float32 ``state/*``, uint8 ``images/*``) of stamp ``t_ns``, or None
        while some topic has no sample of exactly that stamp."""
        with self._lock:
            parts = [s.get(t_ns) for s in self._samples.values()]
        if any(p is None for p in parts):
            return None
        return _assemble([p[1] for p in parts if p is not None])

    def wait_at(self, t_ns: int, timeout_s: float) -> dict[str, np.ndarray] | None:
        """:meth:`at`, waiting up to ``timeout_s`` for the missing topics."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                if all(t_ns in s for s in self._samples.values()):
                    parts = [s[t_ns][1] for s in self._samples.values()]
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)
        return _assemble(parts)

    def latest(self) -> tuple[dict[str, np.ndarray], float] | None:
        """Newest sample of every topic and the age [s] of the oldest of them (by receive
        time); None until every topic has published."""
        with self._lock:
            newest = [next(reversed(s.values()), None) for s in self._samples.values()]
        if any(n is None for n in newest):
            return None
        oldest = min(n[0] for n in newest if n is not None)
        age = (self.clock_ns() - oldest) / 1e9
        return _assemble([n[1] for n in newest if n is not None]), age

    def newest_stamp(self) -> int:
        """Header stamp [ns] of the newest TCP pose sample (-1: none yet); what a velocity
        estimated from ``state/ee_pos`` differences divides by."""
        with self._lock:
            samples = self._samples.get(self.profile.ee_pose or "")
            return next(reversed(samples), -1) if samples else -1

    def ages(self) -> dict[str, float | None]:
        """Topic -> age [s] of its newest sample by receive time (None: nothing yet); the
        bridge's watchdog names the stale topic with it."""
        now = self.clock_ns()
        with self._lock:
            newest = {t: next(reversed(s.values()), None) for t, s in self._samples.items()}
        return {t: None if n is None else (now - n[0]) / 1e9 for t, n in newest.items()}

    def drop_before(self, t_ns: int) -> None:
        """Forget what a reader that consumed stamp ``t_ns`` can no longer need: per topic,
        every sample older than the newest one stamped at or before ``t_ns`` (that one stays:
        it is the zero-order hold of later stamps until a newer sample arrives)."""
        with self._lock:
            for samples in self._samples.values():
                keys = list(samples)
                keep = next((i for i in range(len(keys) - 1, -1, -1) if keys[i] <= t_ns), 0)
                for k in keys[:keep]:
                    del samples[k]

    def wait_hold(
        self, t_ns: int, timeout_s: float, max_age_s: float
    ) -> dict[str, np.ndarray] | None:
        """The observation of stamp ``t_ns``: the exact stamp when every topic has it (a
        lockstep sim), else the zero-order hold — per topic the newest sample stamped at or
        before ``t_ns``, no older than ``max_age_s`` (a real robot, whose topics are stamped
        by their own publishers). The hold is taken once every topic has published past
        ``t_ns`` (nothing earlier can still arrive in order) or after ``timeout_s``; None if
        some topic has nothing fresh enough."""
        deadline = time.monotonic() + timeout_s
        oldest = t_ns - round(max_age_s * 1e9)
        with self._changed:
            while True:
                samples = list(self._samples.values())
                if all(t_ns in s for s in samples):
                    return _assemble([s[t_ns][1] for s in samples])
                settled = all(s and next(reversed(s)) > t_ns for s in samples)
                if settled or time.monotonic() >= deadline:
                    parts = []
                    for s in samples:
                        k = next((k for k in reversed(s) if k <= t_ns), None)
                        if k is None or k < oldest:
                            return None
                        parts.append(s[k][1])
                    return _assemble(parts)
                self._changed.wait(max(0.0, deadline - time.monotonic()))

    def missing(self) -> list[str]:
        """Topics that have not published yet."""
        with self._lock:
            return [t for t, s in self._samples.items() if not s]


def _camera_obs(msg: Any, camera: str) -> dict[str, np.ndarray]:
    return image_obs(msg, camera)


def _assemble(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    obs: dict[str, np.ndarray] = {}
    for p in parts:
        for k, v in p.items():
            obs[k] = v if k.startswith("images/") else v.astype(np.float32)
    return obs
