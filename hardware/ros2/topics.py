"""Topic profiles of ROS 2 robots, rates, QoS choices, the watchdog bound and the episode protocol.

Topic profiles name the topics a robot's ROS 2 stack speaks (:data:`PROFILES`):

- ``franka``: franka_ros2 (FR3): ``/joint_states`` from the joint_state_broadcaster,
  ``/franka_robot_state_broadcaster/current_pose`` (PoseStamped, flange/EE in base frame),
  ``.../external_wrench_in_base_frame`` (WrenchStamped), ``/franka_gripper/joint_states``;
  commands go to a Cartesian impedance controller's ``~/equilibrium_pose``
  (``/cartesian_impedance_controller/equilibrium_pose``). The gripper itself is driven by the
  ``/franka_gripper/move`` / ``grasp`` actions; our transport has no actions, so nodes publish
  ``gripper_command`` (Float64MultiArray ``[width m]``) and a robot-side relay calls the action.
- ``generic``: a ros2_control arm with a CRISP-style Cartesian controller (``current_pose`` in,
  ``target_pose`` out), a force_torque_sensor_broadcaster and forward_command_controllers for
  gripper and joint efforts.
- ``sim``: what ``robotrl-sim-robot`` serves: the ``franka`` names (a launch file switches
  between the real arm and the simulated one by changing nothing but the robot), plus the
  measured EE twist on ``/robotrl/sim/ee_twist``, the task state and the sim's cameras
  (:data:`SIM_CAMERAS`) on ``/robotrl/sim/<camera>/image_raw`` (rgb8 Image).

Every profile also has robotrl's own topics (same on every robot): the executed normalised action
(``/robotrl/action``), the intervention flag (``/robotrl/intervention``), the teleop device's
twist and action (``/robotrl/teleop/...``), and the episode protocol of the sim robot node:

- ``action`` (Float64MultiArray, (7,) normalised action): what the robot executes; a lockstep
  sim steps once per message. Lockstep operators tag it (:func:`action_tag`).
- ``reset`` (Float64MultiArray ``[seed]``): reset the episode with that seed.
- ``episode`` (Float64MultiArray, :data:`EPISODE_FIELDS`): published by whoever steps the env
  (the sim robot node, or the bridge on hardware) after every reset and every control step,
  carrying the stamp of the state messages it describes. The recorder cuts episodes with it.
- ``instruction`` (std_msgs/String, latched): the task instruction of a language-conditioned
  policy; the sim robot publishes its episode's at every reset, an operator sets it on a robot.
- ``task_state`` (sensor_msgs/JointState): task observations of the sim (``state/cube_pos``
  ...), stamped like the arm state: ``name[i]`` is ``<key>/<index>`` (``cube_pos/0``) with the
  key without ``state/``, ``position[i]`` the value; see :func:`task_state_names`.

Node configurations (one dataclass per node, loaded from ROS 2 parameter YAML) are in
``hardware/ros2/config.py``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

# ------------------------------------------------------------------ rates [Hz] and bounds
JOINT_STATE_HZ = 1000.0  # franka_ros2 joint_state_broadcaster / robot state broadcaster
EE_POSE_HZ = 1000.0
WRENCH_HZ = 1000.0
GRIPPER_STATE_HZ = 50.0  # franka_gripper publishes its joint states at tens of Hz
CAMERA_HZ = 30.0
SIM_CAMERAS = ("front", "wrist", "table")  # the MuJoCo scenes' cameras (table: tabletop only)
CONTROL_HZ = 20.0  # policy / teleop / equilibrium-pose command rate (10-20 Hz on real arms)
STATE_TIMEOUT_S = 0.05  # watchdog: no fresh state within this bound -> hold, refuse commands

FRANKA_ARM_JOINTS = tuple(f"fr3_joint{i}" for i in range(1, 8))
FRANKA_FINGER_JOINTS = ("fr3_finger_joint1", "fr3_finger_joint2")
GENERIC_ARM_JOINTS = tuple(f"joint{i}" for i in range(1, 8))
GENERIC_FINGER_JOINTS = ("finger_joint1", "finger_joint2")

EPISODE_FIELDS = (
    "seed",
    "step",
    "reward",
    "success",
    "terminated",
    "truncated",
    "stamp_sec",
    "stamp_nanosec",
)
"""Layout of the ``episode`` message: the reset seed, the control step (0 right after reset),
the reward of that step, 0/1 flags, and the header stamp (sec, nanosec) of the state messages
published for that step (DDS does not order samples across topics, so a reader matches state
to steps by stamp). Float64 holds these integers exactly (below 2**53)."""


class ConfigError(ValueError):
    """A parameter file or value that does not fit a node's configuration."""


# ------------------------------------------------------------------ QoS
@dataclass(frozen=True)
class QosChoice:
    """A DDS QoS as ROS 2 names it.

    Attributes:
        reliability: ``reliable`` (rclpy subscribers' default) or ``best_effort``.
        durability: ``volatile``, or ``transient_local`` for latched topics.
        depth: KEEP_LAST history depth.
    """

    reliability: str = "reliable"
    durability: str = "volatile"
    depth: int = 10

    def __post_init__(self) -> None:
        if self.reliability not in ("reliable", "best_effort"):
            raise ConfigError(f"reliability must be reliable|best_effort, got {self.reliability!r}")
        if self.durability not in ("volatile", "transient_local"):
            raise ConfigError(
                f"durability must be volatile|transient_local, got {self.durability!r}"
            )
        if self.depth < 1:
            raise ConfigError(f"depth must be >= 1, got {self.depth}")

    def to_transport(self) -> Any:
        """The :class:`hardware.ros2.transport.QoS` of this choice (imports cyclonedds)."""
        from hardware.ros2.transport import QoS  # lazy: cyclonedds (the 'ros2' extra)

        return QoS(
            reliable=self.reliability == "reliable",
            depth=self.depth,
            transient_local=self.durability == "transient_local",
        )


COMMAND_QOS = QosChoice("reliable", "volatile", 10)  # every writer: rclpy readers are RELIABLE
STATE_QOS = QosChoice("reliable", "volatile", 10)  # state writers (readers may be best effort)
SENSOR_READER_QOS = QosChoice("best_effort", "volatile", 1)  # newest sample only, never stalls
LATCHED_QOS = QosChoice("reliable", "transient_local", 1)  # e.g. impedance parameters
QOS: dict[str, QosChoice] = {
    "command": COMMAND_QOS,
    "state": STATE_QOS,
    "sensor_reader": SENSOR_READER_QOS,
    "latched": LATCHED_QOS,
}


# ------------------------------------------------------------------ topic profiles
@dataclass(frozen=True)
class TopicProfile:
    """Topic names of one robot (``None``: the robot has no such topic).

    State in: ``joint_states`` (JointState; ``arm_joints`` in order, ``gripper_joints`` summed
    = finger opening [m] when the gripper reports there), ``gripper_joint_states`` (JointState),
    ``ee_pose`` (PoseStamped, EE in base frame), ``wrench`` (WrenchStamped, external wrench on
    the EE in base frame [N, Nm]), ``ee_twist`` (TwistStamped), ``cameras`` (name -> Image topic).
    Commands out: ``equilibrium_pose`` (PoseStamped, Cartesian impedance target, base frame),
    ``impedance_params`` (Float64MultiArray: 6 stiffnesses [N/m x3, Nm/rad x3] then 6 damping
    ratios), ``gripper_command`` (Float64MultiArray ``[width m]``), ``joint_torque_command``
    (Float64MultiArray, 7 torques [Nm]). ``gripper_move_action`` / ``gripper_grasp_action``
    name the robot's gripper actions for the relay. robotrl topics: see the module docstring.
    """

    name: str
    joint_states: str = "/joint_states"
    gripper_joint_states: str | None = None
    ee_pose: str | None = None
    wrench: str | None = None
    ee_twist: str | None = None
    cameras: tuple[tuple[str, str], ...] = ()
    equilibrium_pose: str | None = None
    impedance_params: str | None = None
    gripper_command: str | None = None
    gripper_move_action: str | None = None
    gripper_grasp_action: str | None = None
    joint_torque_command: str | None = None
    arm_joints: tuple[str, ...] = FRANKA_ARM_JOINTS
    gripper_joints: tuple[str, ...] = FRANKA_FINGER_JOINTS
    base_frame: str = "base"
    # robotrl's own topics
    action: str = "/robotrl/action"
    intervention: str = "/robotrl/intervention"
    teleop_twist: str = "/robotrl/teleop/twist"
    teleop_action: str = "/robotrl/teleop/action"
    reset: str = "/robotrl/reset"
    episode: str = "/robotrl/episode"
    task_state: str = "/robotrl/sim/task_state"
    instruction: str = "/robotrl/instruction"

    @property
    def camera_topics(self) -> dict[str, str]:
        """Camera name -> Image topic."""
        return dict(self.cameras)

    def with_overrides(self, overrides: dict[str, Any]) -> TopicProfile:
        """A copy with ``overrides`` (field -> value) applied; unknown fields -> ConfigError."""
        valid = {f.name for f in dataclasses.fields(self)} - {"name"}
        unknown = sorted(set(overrides) - valid)
        if unknown:
            raise ConfigError(f"unknown topics {unknown}; valid: {sorted(valid)}")
        fixed = dict(overrides)
        if "cameras" in fixed and isinstance(fixed["cameras"], dict):
            fixed["cameras"] = tuple((str(k), str(v)) for k, v in fixed["cameras"].items())
        for key in ("arm_joints", "gripper_joints"):
            if key in fixed:
                fixed[key] = tuple(str(j) for j in fixed[key])
        return dataclasses.replace(self, **fixed)

    def all_topics(self) -> dict[str, str]:
        """Every topic this profile names: field (``camera.<name>`` for cameras) -> topic."""
        out = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), str)
            and getattr(self, f.name).startswith("/")
            and f.name not in ("gripper_move_action", "gripper_grasp_action")
        }
        out.update({f"camera.{k}": v for k, v in self.cameras})
        return out


FRANKA = TopicProfile(
    name="franka",
    joint_states="/joint_states",
    gripper_joint_states="/franka_gripper/joint_states",
    ee_pose="/franka_robot_state_broadcaster/current_pose",
    wrench="/franka_robot_state_broadcaster/external_wrench_in_base_frame",
    ee_twist=None,  # the broadcaster publishes only the desired twist; the bridge uses J dq
    equilibrium_pose="/cartesian_impedance_controller/equilibrium_pose",
    impedance_params="/cartesian_impedance_controller/impedance_params",
    gripper_command="/franka_gripper/width_command",
    gripper_move_action="/franka_gripper/move",
    gripper_grasp_action="/franka_gripper/grasp",
    joint_torque_command="/joint_effort_controller/commands",
    arm_joints=FRANKA_ARM_JOINTS,
    gripper_joints=FRANKA_FINGER_JOINTS,
    base_frame="fr3_link0",
)
GENERIC = TopicProfile(
    name="generic",
    joint_states="/joint_states",
    gripper_joint_states=None,  # fingers are joints of /joint_states
    ee_pose="/current_pose",
    wrench="/force_torque_sensor_broadcaster/wrench",
    ee_twist=None,
    equilibrium_pose="/target_pose",
    impedance_params="/cartesian_impedance_controller/impedance_params",
    gripper_command="/gripper_controller/commands",
    joint_torque_command="/effort_controller/commands",
    arm_joints=GENERIC_ARM_JOINTS,
    gripper_joints=GENERIC_FINGER_JOINTS,
    base_frame="base_link",
)
# The sim adds what a real Franka lacks: the measured EE twist and the task's object state.
SIM = dataclasses.replace(
    FRANKA,
    name="sim",
    ee_twist="/robotrl/sim/ee_twist",
    cameras=tuple((c, f"/robotrl/sim/{c}/image_raw") for c in SIM_CAMERAS),
)
PROFILES: dict[str, TopicProfile] = {"franka": FRANKA, "generic": GENERIC, "sim": SIM}


def task_state_names(sizes: dict[str, int]) -> list[str]:
    """``name`` entries of a ``task_state`` message for observation sizes ``{"cube_pos": 3}``:
    ``["cube_pos/0", "cube_pos/1", "cube_pos/2"]`` (keys in the given order)."""
    return [f"{key}/{i}" for key, n in sizes.items() for i in range(n)]


def task_state_sizes(names: list[str]) -> dict[str, int]:
    """Inverse of :func:`task_state_names` (ConfigError on names out of order or malformed)."""
    sizes: dict[str, int] = {}
    for name in names:
        key, sep, idx = name.rpartition("/")
        if not sep or not key or not idx.isdigit() or int(idx) != sizes.get(key, 0):
            raise ConfigError(f"task_state name {name!r} is not '<key>/<index>' in order")
        if key in sizes and list(sizes)[-1] != key:
            raise ConfigError(f"task_state entries of {key!r} are not contiguous")
        sizes[key] = int(idx) + 1
    return sizes


ACTION_TAG_PREFIX = "robotrl:"


def action_tag(seed: int, step: int, intervention: bool) -> str:
    """Label of the single ``layout.dim`` of an ``action`` message from a lockstep operator:
    which episode (its reset seed) and step the action is for, and whether a human drove it.
    ROS consumers (and the bag importer) ignore labels; the recorder uses it to pair actions
    with steps exactly instead of by arrival time."""
    return f"{ACTION_TAG_PREFIX}seed={int(seed)};step={int(step)};intervention={int(intervention)}"


def parse_action_tag(label: str) -> tuple[int, int, bool] | None:
    """(seed, step, intervention) of an :func:`action_tag` label; None for other labels."""
    if not label.startswith(ACTION_TAG_PREFIX):
        return None
    try:
        fields = dict(kv.split("=", 1) for kv in label[len(ACTION_TAG_PREFIX) :].split(";"))
        return int(fields["seed"]), int(fields["step"]), bool(int(fields["intervention"]))
    except (KeyError, ValueError):
        return None


def topic_profile(name: str, overrides: dict[str, Any] | None = None) -> TopicProfile:
    """The profile ``name`` of :data:`PROFILES` with ``overrides`` applied."""
    if name not in PROFILES:
        raise ConfigError(f"unknown topic profile {name!r}; available: {sorted(PROFILES)}")
    return PROFILES[name].with_overrides(overrides or {})
