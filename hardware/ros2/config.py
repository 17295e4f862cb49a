"""Configuration of the ROS 2 nodes: topic profiles, rates, QoS, watchdog, one dataclass per node.

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
  measured EE twist on ``/robotrl/sim/ee_twist`` and the task state.

Every profile also has robotrl's own topics (same on every robot): the executed normalised action
(``/robotrl/action``), the intervention flag (``/robotrl/intervention``), the teleop device's
twist and action (``/robotrl/teleop/...``), and the episode protocol of the sim robot node:

- ``reset`` (Float64MultiArray ``[seed]``): reset the episode with that seed.
- ``episode`` (Float64MultiArray, :data:`EPISODE_FIELDS`): published by whoever steps the env
  (the sim robot node, or the bridge on hardware) after every reset and every control step,
  stamped together with the state it describes. The recorder cuts episodes with it.
- ``task_state`` (Float64MultiArray): task observations (``state/cube_pos`` ...) of the sim;
  ``layout.dim[i].label`` is the key without ``state/`` and ``layout.dim[i].size`` its length,
  in the order the values are concatenated.

Node parameter files use the ROS 2 layout (``<node_name>: ros__parameters: {...}``; a ``/**``
section applies to every node); :meth:`NodeConfig.from_yaml` loads one node's section into its
dataclass and rejects unknown keys, listing the valid ones. Nested ``topics: {name: topic}``
overrides entries of the chosen profile.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

# ------------------------------------------------------------------ rates [Hz] and bounds
JOINT_STATE_HZ = 1000.0  # franka_ros2 joint_state_broadcaster / robot state broadcaster
EE_POSE_HZ = 1000.0
WRENCH_HZ = 1000.0
GRIPPER_STATE_HZ = 50.0  # franka_gripper publishes its joint states at tens of Hz
CAMERA_HZ = 30.0
CONTROL_HZ = 20.0  # policy / teleop / equilibrium-pose command rate (10-20 Hz on real arms)
STATE_TIMEOUT_S = 0.05  # watchdog: no fresh state within this bound -> hold, refuse commands

FRANKA_ARM_JOINTS = tuple(f"fr3_joint{i}" for i in range(1, 8))
FRANKA_FINGER_JOINTS = ("fr3_finger_joint1", "fr3_finger_joint2")
GENERIC_ARM_JOINTS = tuple(f"joint{i}" for i in range(1, 8))
GENERIC_FINGER_JOINTS = ("finger_joint1", "finger_joint2")

EPISODE_FIELDS = ("seed", "step", "reward", "success", "terminated", "truncated")
"""Layout of the ``episode`` message: the reset seed, the control step (0 right after reset),
the reward of that step, and 0/1 flags. Float64 holds integer seeds exactly below 2**53."""


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


COMMAND_QOS = QosChoice("reliable", "volatile", 10)  # every writer: rclpy readers are RELIABLE
STATE_QOS = QosChoice("reliable", "volatile", 10)  # state writers (readers may be best effort)
SENSOR_READER_QOS = QosChoice("best_effort", "volatile", 1)  # newest sample only, never stalls
LATCHED_QOS = QosChoice("reliable", "transient_local", 1)  # e.g. task_state layout, parameters
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
SIM = dataclasses.replace(FRANKA, name="sim", ee_twist="/robotrl/sim/ee_twist")
PROFILES: dict[str, TopicProfile] = {"franka": FRANKA, "generic": GENERIC, "sim": SIM}


def topic_profile(name: str, overrides: dict[str, Any] | None = None) -> TopicProfile:
    """The profile ``name`` of :data:`PROFILES` with ``overrides`` applied."""
    if name not in PROFILES:
        raise ConfigError(f"unknown topic profile {name!r}; available: {sorted(PROFILES)}")
    return PROFILES[name].with_overrides(overrides or {})


# ------------------------------------------------------------------ node configs
def _check_value(name: str, value: Any, hint: Any) -> Any:
    """``value`` converted to the field's type ``hint`` (ints widen to floats, lists to tuples),
    or ConfigError saying what was expected."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _check_value(name, value, inner[0])
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isfinite(float(value)):
                raise ConfigError(f"{name} must be finite, got {value}")
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif origin is tuple:
        if isinstance(value, list | tuple):
            item = args[0] if args else Any
            return tuple(_check_value(f"{name}[{i}]", v, item) for i, v in enumerate(value))
    elif origin is dict or hint is dict:
        if isinstance(value, dict):
            return dict(value)
    elif hint is Any:
        return value
    expected = getattr(hint, "__name__", str(hint))
    raise ConfigError(f"{name} must be {expected}, got {value!r} ({type(value).__name__})")


@dataclass
class NodeConfig:
    """Fields every node has.

    Attributes:
        profile: topic profile (:data:`PROFILES`).
        topics: overrides of profile entries (field -> topic).
        domain_id: DDS domain; -1 takes ``ROS_DOMAIN_ID`` (default 0).
    """

    NODE_NAME: ClassVar[str] = "node"

    profile: str = "franka"
    topics: dict[str, Any] = field(default_factory=dict)
    domain_id: int = -1

    def __post_init__(self) -> None:
        self.topic_profile()  # validates profile and overrides early
        self.validate()

    def validate(self) -> None:
        """Per-node checks of values (ConfigError)."""

    def topic_profile(self) -> TopicProfile:
        """The topics this node uses."""
        return topic_profile(self.profile, self.topics)

    @classmethod
    def field_names(cls) -> list[str]:
        return sorted(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_params(cls, params: dict[str, Any], where: str = "parameters") -> Self:
        """Build from a ``ros__parameters`` mapping; unknown keys and bad types -> ConfigError."""
        valid = cls.field_names()
        unknown = sorted(set(params) - set(valid))
        if unknown:
            raise ConfigError(
                f"{where}: unknown parameters {unknown} for {cls.__name__}; valid: {valid}"
            )
        hints = typing.get_type_hints(cls)
        kwargs = {k: _check_value(f"{where}: {k}", v, hints[k]) for k, v in params.items()}
        return cls(**kwargs)

    @classmethod
    def from_yaml(cls, path: str | Path, node_name: str | None = None) -> Self:
        """The ``node_name`` section (default :attr:`NODE_NAME`) of a ROS 2 parameter file,
        merged over its ``/**`` section; a file without either section -> ConfigError."""
        import yaml

        node_name = node_name or cls.NODE_NAME
        text = Path(path).read_text()
        doc = yaml.safe_load(text) or {}
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: expected a mapping of node names, got {type(doc).__name__}")
        params: dict[str, Any] = {}
        found = False
        for key in ("/**", node_name, "/" + node_name.lstrip("/")):
            if key in doc:
                section = doc[key]
                if not isinstance(section, dict) or set(section) != {"ros__parameters"}:
                    raise ConfigError(
                        f"{path}: section {key!r} must hold exactly 'ros__parameters', "
                        f"got {sorted(section) if isinstance(section, dict) else section!r}"
                    )
                params.update(section["ros__parameters"] or {})
                found = True
        if not found:
            raise ConfigError(
                f"{path}: no section for node {node_name!r} (sections: {sorted(doc)})"
            )
        return cls.from_params(params, where=f"{path} [{node_name}]")

    def to_params(self) -> dict[str, Any]:
        """The ``ros__parameters`` mapping of this config (tuples as lists)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


def _positive(cfg: Any, *names: str) -> None:
    for n in names:
        if not getattr(cfg, n) > 0:
            raise ConfigError(f"{n} must be positive, got {getattr(cfg, n)}")


@dataclass
class BridgeConfig(NodeConfig):
    """``robotrl-bridge``: the robot env over ROS 2 (state in, safety-filtered commands out).

    Attributes:
        control_hz: env step / command rate [Hz].
        state_timeout_s: watchdog bound [s]; older state -> hold position, refuse commands.
        command: ``equilibrium_pose`` (Cartesian impedance robot-side) or ``joint_torque``
            (our impedance controller runs in the bridge at ``torque_hz``).
        torque_hz: rate of the in-bridge controller for ``joint_torque`` [Hz].
        max_dpos, max_drot: action scale [m, rad] per unit and step.
        workspace_low, workspace_high: (3,) TCP box [m, base frame] of the safety filter.
        stiffness: (6,) Cartesian stiffness [N/m x3, Nm/rad x3] sent on ``impedance_params``;
            empty: leave the robot's own.
        max_episode_steps: truncation horizon of the env.
    """

    NODE_NAME: ClassVar[str] = "robotrl_bridge"

    control_hz: float = CONTROL_HZ
    state_timeout_s: float = STATE_TIMEOUT_S
    command: str = "equilibrium_pose"
    torque_hz: float = 1000.0
    max_dpos: float = 0.02
    max_drot: float = 0.1
    workspace_low: tuple[float, ...] = (0.2, -0.45, 0.015)
    workspace_high: tuple[float, ...] = (0.8, 0.45, 0.7)
    stiffness: tuple[float, ...] = ()
    max_episode_steps: int = 200

    def validate(self) -> None:
        _positive(self, "control_hz", "state_timeout_s", "torque_hz", "max_dpos", "max_drot")
        _positive(self, "max_episode_steps")
        if self.command not in ("equilibrium_pose", "joint_torque"):
            raise ConfigError(
                f"command must be equilibrium_pose|joint_torque, got {self.command!r}"
            )
        for n in ("workspace_low", "workspace_high"):
            if len(getattr(self, n)) != 3:
                raise ConfigError(f"{n} must have 3 values [m], got {getattr(self, n)}")
        if any(lo >= hi for lo, hi in zip(self.workspace_low, self.workspace_high, strict=True)):
            raise ConfigError(
                f"workspace_low must be below workspace_high, got {self.workspace_low} / "
                f"{self.workspace_high}"
            )
        if self.stiffness and len(self.stiffness) != 6:
            raise ConfigError(f"stiffness must be empty or 6 values, got {self.stiffness}")


@dataclass
class PolicyNodeConfig(BridgeConfig):
    """``robotrl-policy-node``: a checkpoint acting through the bridge's safety layer.

    Attributes:
        checkpoint: checkpoint directory (safetensors + resolved config).
        policy_hz: inference / command rate [Hz] (<= control_hz; chunks fill the gap).
        episodes: episodes to run (0: until stopped).
        seed: first episode seed.
        device: torch device of the policy.
    """

    NODE_NAME: ClassVar[str] = "robotrl_policy"

    checkpoint: str = ""
    policy_hz: float = 10.0
    episodes: int = 0
    seed: int = 0
    device: str = "cpu"

    def validate(self) -> None:
        super().validate()
        _positive(self, "policy_hz")
        if self.policy_hz > self.control_hz:
            raise ConfigError(
                f"policy_hz ({self.policy_hz}) must not exceed control_hz ({self.control_hz})"
            )
        if self.episodes < 0:
            raise ConfigError(f"episodes must be >= 0, got {self.episodes}")


@dataclass
class TeleopNodeConfig(NodeConfig):
    """``robotrl-teleop-node``: a teleop device -> twist, action and intervention flag.

    Attributes:
        device: device name (``hardware.devices.DEVICES``: keyboard, spacemouse, gamepad,
            scripted, expert).
        device_kwargs: constructor arguments of the device.
        rate_hz: publish rate [Hz] (the control rate).
        max_dpos, max_drot: scale of an action unit per step [m, rad]: the twist is
            ``action * max_dpos * rate_hz`` [m/s] and ``action * max_drot * rate_hz`` [rad/s].
        task: task of the ``expert`` device (its scripted expert acts on the observed state).
        expert_noise: action noise of the expert.
        seed: seed of the expert's noise.
        state_timeout_s: the expert acts only on state fresher than this [s].
        lockstep: (expert) act once per ``episode`` message (sim robot in lockstep), not on a
            timer.
    """

    NODE_NAME: ClassVar[str] = "robotrl_teleop"

    device: str = "spacemouse"
    device_kwargs: dict[str, Any] = field(default_factory=dict)
    rate_hz: float = CONTROL_HZ
    max_dpos: float = 0.02
    max_drot: float = 0.1
    task: str = "lift"
    expert_noise: float = 0.0
    seed: int = 0
    state_timeout_s: float = 0.5
    lockstep: bool = False

    def validate(self) -> None:
        _positive(self, "rate_hz", "max_dpos", "max_drot", "state_timeout_s")
        from hardware.devices import DEVICES

        if self.device not in DEVICES:
            raise ConfigError(f"unknown device {self.device!r}; available: {sorted(DEVICES)}")


@dataclass
class RecorderConfig(NodeConfig):
    """``robotrl-recorder-node``: topics -> episodes in the zarr episode store.

    Attributes:
        out: store directory (created, or appended to when it holds the same robot and rate).
        fps: control grid [Hz] the topics are resampled onto.
        robot: ``robot`` attribute of the store.
        task, operator, language: per-episode metadata.
        cameras: camera names to record (topics from the profile).
        episodes: stop after this many committed episodes (0: until stopped).
        state_timeout_s: a grid step whose newest state is older than this is not recorded
            (the episode is discarded and the reason logged) [s].
    """

    NODE_NAME: ClassVar[str] = "robotrl_recorder"

    out: str = "data/ros2_session"
    fps: float = CONTROL_HZ
    robot: str = "panda_sim"
    task: str = ""
    operator: str = ""
    language: str = ""
    cameras: tuple[str, ...] = ()
    episodes: int = 0
    state_timeout_s: float = 0.5

    def validate(self) -> None:
        _positive(self, "fps", "state_timeout_s")
        if not self.out:
            raise ConfigError("out must name a store directory")
        if self.episodes < 0:
            raise ConfigError(f"episodes must be >= 0, got {self.episodes}")


@dataclass
class SimRobotConfig(NodeConfig):
    """``robotrl-sim-robot``: the MuJoCo arm served over the robot's topics.

    Attributes:
        task: sim task (``sim.TASKS``).
        controller: sim controller (``native``, ``impedance``, ``osc``).
        control_hz: env control rate [Hz].
        state_hz: joint state / pose / wrench publish rate [Hz] (realtime mode).
        camera_hz: image publish rate [Hz].
        cameras: cameras rendered and published.
        image_size: (H, W) of images.
        seed: seed of the first episode.
        lockstep: step the env once per ``action`` message and publish state + ``episode``
            right after (deterministic, as fast as the loop allows); False: physics runs in
            real time tracking the latest ``equilibrium_pose``.
        max_dpos, max_drot: action scale of lockstep ``action`` messages [m, rad].
    """

    NODE_NAME: ClassVar[str] = "robotrl_sim_robot"

    profile: str = "sim"
    task: str = "lift"
    controller: str = "native"
    control_hz: float = CONTROL_HZ
    state_hz: float = JOINT_STATE_HZ
    camera_hz: float = CAMERA_HZ
    cameras: tuple[str, ...] = ()
    image_size: tuple[int, ...] = (96, 96)
    seed: int = 0
    lockstep: bool = False
    max_dpos: float = 0.02
    max_drot: float = 0.1

    def validate(self) -> None:
        _positive(self, "control_hz", "state_hz", "camera_hz", "max_dpos", "max_drot")
        if len(self.image_size) != 2 or min(self.image_size) < 1:
            raise ConfigError(f"image_size must be (H, W) > 0, got {self.image_size}")


NODE_CONFIGS: dict[str, type[NodeConfig]] = {
    "bridge": BridgeConfig,
    "policy": PolicyNodeConfig,
    "teleop": TeleopNodeConfig,
    "recorder": RecorderConfig,
    "sim_robot": SimRobotConfig,
}
