"""Import ROS 2 bags (sqlite3 or MCAP, read with ``rosbags``: no ROS install) into the episode
store, one bag per episode.

Topics arrive at their own rates and with jitter; the importer resamples them onto the store's
fixed control grid (``fps``): the grid starts when every required topic has published and
step k at ``t0 + k / fps`` takes, for each observation topic, the newest message stamped at or
before that time (zero-order hold, what a controller running at ``fps`` would have seen). The
action of step k is the newest action message before ``t_k + 1/fps``, so a policy that
publishes right after reading its observation lines up with that observation; the grid ends
at the last action. Time is the bag's receive time [ns].

Default topics are those the robotrl ROS 2 nodes use (see ``launch/``); map a robot's own with
:class:`BagTopics`. Message field conversions:

- ``sensor_msgs/JointState``: ``position`` / ``velocity`` of ``arm_joints`` (in that order) ->
  ``state/joint_pos`` / ``state/joint_vel``; ``gripper_joints`` positions summed ->
  ``state/gripper`` (finger opening [m]);
- ``geometry_msgs/PoseStamped`` -> ``state/ee_pos`` (3,), ``state/ee_quat`` (w, x, y, z);
- ``geometry_msgs/WrenchStamped`` -> ``state/wrench`` (force, torque);
- ``geometry_msgs/TwistStamped`` -> ``state/ee_twist`` (linear, angular);
- ``sensor_msgs/Image`` (rgb8, bgr8, mono8) and ``sensor_msgs/CompressedImage`` (JPEG/PNG) ->
  ``images/<camera>`` uint8 (H, W, 3) RGB;
- ``std_msgs/Float64MultiArray`` -> ``action``; ``std_msgs/Bool`` -> per-step ``intervention``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hardware.ros2.topics import TopicProfile
from robotrl.datasets.episode_store import EpisodeStore, EpisodeStoreError

PANDA_ARM_JOINTS = tuple(f"fr3_joint{i}" for i in range(1, 8))
PANDA_FINGER_JOINTS = ("fr3_finger_joint1", "fr3_finger_joint2")


class BagImportError(EpisodeStoreError):
    """A bag that cannot be imported: unreadable, missing topics, or messages of another type."""


@dataclass
class BagTopics:
    """Which topic feeds which entry; ``None`` leaves an entry out.

    Attributes:
        joint_states: JointState topic; ``arm_joints`` / ``gripper_joints`` pick its joints.
        gripper_joint_states: a separate JointState topic of the fingers (franka_gripper's);
            None: the fingers are joints of ``joint_states``.
        ee_pose, wrench, ee_twist: PoseStamped, WrenchStamped, TwistStamped topics.
        cameras: camera name -> Image or CompressedImage topic.
        action: Float64MultiArray topic of the executed (normalised) action.
        intervention: Bool topic, true while a human drives.
    """

    joint_states: str | None = "/joint_states"
    arm_joints: tuple[str, ...] = PANDA_ARM_JOINTS
    gripper_joints: tuple[str, ...] = PANDA_FINGER_JOINTS
    gripper_joint_states: str | None = None
    ee_pose: str | None = "/robotrl/ee_pose"
    wrench: str | None = "/robotrl/wrench"
    ee_twist: str | None = None
    cameras: dict[str, str] = field(default_factory=dict)
    action: str = "/robotrl/action"
    intervention: str | None = "/robotrl/intervention"

    def __post_init__(self) -> None:
        used = [self.joint_states, self.gripper_joint_states, self.ee_pose, self.wrench]
        used += [self.ee_twist, self.action]
        used += [self.intervention, *self.cameras.values()]
        named = [t for t in used if t]
        dupes = sorted({t for t in named if named.count(t) > 1})
        if dupes:
            raise ValueError(f"topics mapped to more than one entry: {dupes}")


def bag_topics(profile: TopicProfile, cameras: Mapping[str, str] | None = None) -> BagTopics:
    """The topics of bags recorded with the ROS 2 topic ``profile`` (``hardware.ros2.bag``,
    ``collect_teleop.launch.py record_bag:=true``). ``cameras``: camera name -> image topic."""
    return BagTopics(
        joint_states=profile.joint_states,
        arm_joints=tuple(profile.arm_joints),
        gripper_joints=tuple(profile.gripper_joints),
        gripper_joint_states=profile.gripper_joint_states,
        ee_pose=profile.ee_pose,
        wrench=profile.wrench,
        ee_twist=profile.ee_twist,
        cameras=dict(cameras or {}),
        action=profile.action,
        intervention=profile.intervention,
    )


def _image_rgb(msg: Any, msgtype: str) -> np.ndarray:
    import cv2

    if msgtype.endswith("CompressedImage"):
        img = cv2.imdecode(np.frombuffer(bytes(msg.data), np.uint8), cv2.IMREAD_COLOR)
        if img is None:
            raise BagImportError(f"cannot decode a {msg.format!r} CompressedImage")
        return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    h, w, enc = int(msg.height), int(msg.width), str(msg.encoding)
    raw = np.frombuffer(bytes(msg.data), np.uint8)
    channels = {"rgb8": 3, "bgr8": 3, "mono8": 1}.get(enc)
    if channels is None:
        raise BagImportError(f"unsupported image encoding {enc!r} (rgb8, bgr8, mono8)")
    img = raw.reshape(h, int(msg.step))[:, : w * channels].reshape(h, w, channels)
    if enc == "bgr8":
        img = img[..., ::-1]
    if enc == "mono8":
        img = np.repeat(img, 3, axis=2)
    return np.ascontiguousarray(img)


def _pose(msg: Any) -> dict[str, np.ndarray]:
    p, q = msg.pose.position, msg.pose.orientation
    return {
        "state/ee_pos": np.array([p.x, p.y, p.z], np.float32),
        "state/ee_quat": np.array([q.w, q.x, q.y, q.z], np.float32),
    }


def _vec6(a: Any, b: Any) -> np.ndarray:
    return np.array([a.x, a.y, a.z, b.x, b.y, b.z], np.float32)


def _joint_fields(topics: BagTopics) -> Callable[[Any], dict[str, np.ndarray]]:
    # the fingers are joints of this message unless they have their own topic
    separate = topics.gripper_joint_states or not topics.gripper_joints
    fingers = None if separate else _finger_opening(topics)

    def convert(msg: Any) -> dict[str, np.ndarray]:
        names = list(msg.name)
        try:
            arm = [names.index(j) for j in topics.arm_joints]
        except ValueError as exc:
            raise BagImportError(
                f"JointState lacks arm joints {topics.arm_joints}: it has {names}"
            ) from exc
        pos, vel = np.asarray(msg.position, float), np.asarray(msg.velocity, float)
        out = {"state/joint_pos": pos[arm].astype(np.float32)}
        out["state/joint_vel"] = (vel[arm] if len(vel) == len(names) else 0 * pos[arm]).astype(
            np.float32
        )
        if fingers is not None:
            out.update(fingers(msg))
        return out

    return convert


def _finger_opening(topics: BagTopics) -> Callable[[Any], dict[str, np.ndarray]]:
    """JointState -> ``state/gripper``: the sum of the finger joints' positions [m]."""

    def convert(msg: Any) -> dict[str, np.ndarray]:
        names, pos = list(msg.name), np.asarray(msg.position, float)
        fingers = [names.index(j) for j in topics.gripper_joints if j in names]
        return {"state/gripper": np.array([pos[fingers].sum() if fingers else 0.0], np.float32)}

    return convert


def _converters(topics: BagTopics) -> dict[str, tuple[str, Callable[[Any], dict]]]:
    """topic -> (expected msgtype suffix, message -> {key: array})."""
    conv: dict[str, tuple[str, Callable[[Any], dict]]] = {}
    if topics.joint_states:
        conv[topics.joint_states] = ("sensor_msgs/msg/JointState", _joint_fields(topics))
    if topics.gripper_joint_states and topics.gripper_joints:
        conv[topics.gripper_joint_states] = ("sensor_msgs/msg/JointState", _finger_opening(topics))
    if topics.ee_pose:
        conv[topics.ee_pose] = ("geometry_msgs/msg/PoseStamped", _pose)
    if topics.wrench:
        conv[topics.wrench] = (
            "geometry_msgs/msg/WrenchStamped",
            lambda m: {"state/wrench": _vec6(m.wrench.force, m.wrench.torque)},
        )
    if topics.ee_twist:
        conv[topics.ee_twist] = (
            "geometry_msgs/msg/TwistStamped",
            lambda m: {"state/ee_twist": _vec6(m.twist.linear, m.twist.angular)},
        )
    return conv


def read_bag(bag: str | os.PathLike[str], topics: BagTopics) -> dict[str, list[tuple[int, Any]]]:
    """All messages of the mapped topics: topic -> [(receive time [ns], converted value)]."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    conv = _converters(topics)
    wanted = {*conv, *topics.cameras.values(), topics.action}
    if topics.intervention:
        wanted.add(topics.intervention)
    series: dict[str, list[tuple[int, Any]]] = {t: [] for t in wanted}
    try:
        reader_cm = AnyReader([Path(bag)], default_typestore=get_typestore(Stores.ROS2_HUMBLE))
        with reader_cm as reader:
            conns = [c for c in reader.connections if c.topic in wanted]
            for conn in conns:
                expected = conv.get(conn.topic, (None,))[0]
                if expected and conn.msgtype != expected:
                    raise BagImportError(
                        f"{conn.topic} carries {conn.msgtype}, expected {expected}"
                    )
            for conn, t_ns, raw in reader.messages(connections=conns):
                msg: Any = reader.deserialize(raw, conn.msgtype)  # typed object: fields vary
                if conn.topic in conv:
                    value: Any = conv[conn.topic][1](msg)
                elif conn.topic == topics.action:
                    value = np.asarray(msg.data, np.float32)
                elif conn.topic == topics.intervention:
                    value = bool(msg.data)
                else:
                    value = _image_rgb(msg, conn.msgtype)
                series[conn.topic].append((int(t_ns), value))
    except BagImportError:
        raise
    except Exception as exc:  # rosbags raises many types for unreadable input
        raise BagImportError(f"cannot read bag {bag}: {type(exc).__name__}: {exc}") from exc
    return series


def _hold(times: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Index of the newest sample at or before each grid time (-1 if none)."""
    return np.searchsorted(times, grid, side="right") - 1


def resample(
    series: Mapping[str, list[tuple[int, Any]]], topics: BagTopics, fps: float
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """Resample a bag's series onto the control grid.

    Returns ``(obs, actions (T, Da), intervention (T,), grid_ns (T,))``, obs ``{key: (T, ...)}``.
    """
    obs_topics = [t for t in (*_converters(topics), *topics.cameras.values())]
    missing = [t for t in (*obs_topics, topics.action) if not series.get(t)]
    if missing:
        raise BagImportError(f"the bag has no messages on {missing}")
    period = round(1e9 / fps)
    t0 = max(series[t][0][0] for t in (*obs_topics, topics.action))
    # The episode ends with the last action: later observations have nothing to pair with.
    t_end = min(max(series[t][-1][0] for t in obs_topics), series[topics.action][-1][0])
    grid = np.arange(t0, t_end + 1, period, dtype=np.int64)
    if grid.size < 2:
        raise BagImportError("the bag spans less than two control periods")
    obs: dict[str, np.ndarray] = {}
    cam_names = {v: k for k, v in topics.cameras.items()}
    for topic in obs_topics:
        times = np.array([t for t, _ in series[topic]], np.int64)
        idx = _hold(times, grid)
        values = [series[topic][i][1] for i in idx]
        if topic in cam_names:
            obs[f"images/{cam_names[topic]}"] = np.stack(values)
        else:
            for key in values[0]:
                obs[key] = np.stack([v[key] for v in values])
    a_times = np.array([t for t, _ in series[topics.action]], np.int64)
    a_idx = np.maximum(np.searchsorted(a_times, grid + period, side="left") - 1, 0)
    actions = np.stack([series[topics.action][i][1] for i in a_idx])
    intervention = np.zeros(grid.size, bool)
    if topics.intervention and series.get(topics.intervention):
        i_times = np.array([t for t, _ in series[topics.intervention]], np.int64)
        i_idx = _hold(i_times, grid)
        intervention = np.array([i >= 0 and series[topics.intervention][i][1] for i in i_idx], bool)
    return obs, actions, intervention, grid


def import_bags(
    bags: Sequence[str | os.PathLike[str]],
    store_path: str | os.PathLike[str],
    *,
    topics: BagTopics | None = None,
    fps: float = 20.0,
    robot: str = "panda",
    task: str = "",
    language: str = "",
    success: bool | Sequence[bool] = False,
) -> EpisodeStore:
    """Append one episode per bag to the store at ``store_path`` (created if needed).

    Each bag is fully read and resampled before anything is written, so a bad bag adds
    nothing. Returns the store opened for append (close it when done).
    """
    topics = topics or BagTopics()
    flags = [success] * len(bags) if isinstance(success, bool) else list(success)
    if len(flags) != len(bags):
        raise ValueError(f"{len(bags)} bags but {len(flags)} success flags")
    episodes = [resample(read_bag(b, topics), topics, fps) for b in bags]
    store = EpisodeStore.create(store_path, fps=fps, robot=robot, exist_ok=True)
    if abs(store.fps - fps) > 1e-9:
        store.close()
        raise BagImportError(f"{store_path} is recorded at {store.fps} Hz, not {fps} Hz")
    try:
        for (obs, actions, intervention, grid), ok in zip(episodes, flags, strict=True):
            with store.begin_episode(task=task, language=language, operator="rosbag") as w:
                for k in range(len(grid)):
                    step_obs = {key: v[k] for key, v in obs.items()}
                    info = {"intervention": bool(intervention[k])}
                    w.add(step_obs, actions[k], info, timestamp=(grid[k] - grid[0]) * 1e-9)
                w.commit(success=bool(ok))
    except BaseException:
        store.close()
        raise
    return store
