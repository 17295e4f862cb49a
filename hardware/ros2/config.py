"""Configuration of the ROS 2 nodes: one typed dataclass per node, loaded from ROS 2 parameters.

Every config is a :class:`~hardware.ros2.node_params.NodeConfig`: loaded from a ROS 2
parameter file (``<node_name>: ros__parameters: {...}``, ``/**`` for every node;
``from_yaml``) or a ROS 2 node command line (``--ros-args --params-file F -p key:=value
-r __node:=name``; ``from_args``), so launch files start our console scripts like ROS nodes.
Unknown keys are errors listing the valid ones. Topic profiles, rates and QoS live in
``hardware/ros2/topics.py`` and are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from controllers.commander import (
    DEFAULT_MAX_DPOS,
    DEFAULT_MAX_DROT,
    DEFAULT_WORKSPACE_HIGH,
    DEFAULT_WORKSPACE_LOW,
)
from hardware.devices import DEVICES
from hardware.ros2.node_params import NodeConfig
from hardware.ros2.topics import (
    CAMERA_HZ,
    COMMAND_QOS,
    CONTROL_HZ,
    EE_POSE_HZ,
    EPISODE_FIELDS,
    FRANKA,
    GENERIC,
    GRIPPER_STATE_HZ,
    JOINT_STATE_HZ,
    LATCHED_QOS,
    PROFILES,
    QOS,
    SENSOR_READER_QOS,
    SIM,
    STATE_QOS,
    STATE_TIMEOUT_S,
    WRENCH_HZ,
    ConfigError,
    QosChoice,
    TopicProfile,
    topic_profile,
)

__all__ = [
    "CAMERA_HZ",
    "COMMAND_QOS",
    "CONTROL_HZ",
    "EE_POSE_HZ",
    "EPISODE_FIELDS",
    "FRANKA",
    "GENERIC",
    "GRIPPER_STATE_HZ",
    "JOINT_STATE_HZ",
    "LATCHED_QOS",
    "NODE_CONFIGS",
    "PROFILES",
    "QOS",
    "SENSOR_READER_QOS",
    "SIM",
    "STATE_QOS",
    "STATE_TIMEOUT_S",
    "WRENCH_HZ",
    "BridgeConfig",
    "ConfigError",
    "NodeConfig",
    "PolicyNodeConfig",
    "QosChoice",
    "RecorderConfig",
    "SimRobotConfig",
    "TeleopNodeConfig",
    "TopicProfile",
    "topic_profile",
]


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
        grasp_release_z: TCP height [m] above which a held object stays gripped (a loosening
            gripper command is raised to closed, :mod:`controllers.grasp_hold`); 0: off.
        safety_critic: exported risk critic (``.npz`` of ``robotrl train-safety``, trained
            without task keys) of the safety reflex on the robot
            (:class:`hardware.ros2.pose_commander.PoseCommander`); empty: no reflex.
        safety_threshold: eps_safe of the reflex; 0: the export's.
        reflex_hz: how often the bridge re-evaluates the last command between two actions
            [Hz] (the robot's state rate bounds it; lockstep: once per action).
        max_episode_steps: truncation horizon of the env.
        lockstep: the robot is a sim robot stepping once per command (``lockstep: true,
            lockstep_on: equilibrium_pose``): it publishes state only after a step, so the
            state-age watchdog is off and each env step waits for the robot's answer.
    """

    NODE_NAME: ClassVar[str] = "robotrl_bridge"

    control_hz: float = CONTROL_HZ
    state_timeout_s: float = STATE_TIMEOUT_S
    command: str = "equilibrium_pose"
    torque_hz: float = 1000.0
    max_dpos: float = DEFAULT_MAX_DPOS
    max_drot: float = DEFAULT_MAX_DROT
    workspace_low: tuple[float, ...] = DEFAULT_WORKSPACE_LOW
    workspace_high: tuple[float, ...] = DEFAULT_WORKSPACE_HIGH
    stiffness: tuple[float, ...] = ()
    grasp_release_z: float = 0.0
    safety_critic: str = ""
    safety_threshold: float = 0.0
    reflex_hz: float = 100.0
    max_episode_steps: int = 200
    lockstep: bool = False

    def validate(self) -> None:
        _positive(self, "control_hz", "state_timeout_s", "torque_hz", "max_dpos", "max_drot")
        _positive(self, "reflex_hz")
        if not 0.0 <= self.safety_threshold < 1.0:
            raise ConfigError(
                f"safety_threshold must be in [0, 1) (0: the export's), got {self.safety_threshold}"
            )
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
        if not self.grasp_release_z >= 0:
            raise ConfigError(f"grasp_release_z must be >= 0 [m], got {self.grasp_release_z}")


@dataclass
class PolicyNodeConfig(BridgeConfig):
    """``robotrl-policy-node``: a checkpoint acting through the bridge's safety layer.

    Attributes:
        checkpoint: checkpoint directory (safetensors + resolved config).
        policy_hz: step rate [Hz]: the rate the policy was trained at (the action scale is
            per step; <= control_hz).
        episodes: episodes to run (0: until stopped).
        seed: first episode seed.
        device: torch device of the policy.
        via_bridge: publish normalised actions on ``action`` for a ``robotrl-bridge`` process
            (which filters and commands); False: filter and command in this node.
        task: sim task whose observation entries (``state/cube_pos`` ...) the policy reads
            from ``task_state`` (sim robot); empty: arm state only.
        instruction: the task instruction of a language-conditioned policy (the VLA) until
            one arrives on the ``instruction`` topic; empty: from that topic only.
    """

    NODE_NAME: ClassVar[str] = "robotrl_policy"

    checkpoint: str = ""
    policy_hz: float = 20.0
    episodes: int = 0
    seed: int = 0
    device: str = "cpu"
    via_bridge: bool = False
    task: str = ""
    instruction: str = ""

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
        episodes: (lockstep, publish_episodes) episodes to run, each started by a ``reset``
            with ``seed + k`` (0: until stopped).
        wait_subscribers: (lockstep) readers of ``action`` to wait for before the first reset
            (the sim robot, plus the recorder when one records).
        publish_episodes: (timer mode) the operator's ticks are the control grid: publish
            ``reset`` and ``episode`` messages and tagged actions, episodes ended by the
            device's success / failure events (robots whose stack publishes no ``episode``
            messages: real arms). Leave False with a sim robot, whose task oracle cuts them.
        auto_reset: (timer mode, a robot that cuts its own episodes: the sim robot) publish
            ``reset [seed + k]`` once the node acts on fresh state and again whenever the
            robot's ``episode`` message ends one, like ``robotrl collect``; ``episodes``
            bounds them.
        publish_action: also publish the device's action on the executed-action topic
            ``action`` (teleop drives the robot: data collection); False publishes only the
            teleop topics and the flag (a policy drives, the human may take over).
    """

    NODE_NAME: ClassVar[str] = "robotrl_teleop"

    device: str = "spacemouse"
    device_kwargs: dict[str, Any] = field(default_factory=dict)
    rate_hz: float = CONTROL_HZ
    max_dpos: float = DEFAULT_MAX_DPOS
    max_drot: float = DEFAULT_MAX_DROT
    task: str = "lift"
    expert_noise: float = 0.0
    seed: int = 0
    state_timeout_s: float = 0.5
    lockstep: bool = False
    publish_action: bool = True
    episodes: int = 0
    wait_subscribers: int = 1
    publish_episodes: bool = False
    auto_reset: bool = False

    def validate(self) -> None:
        _positive(self, "rate_hz", "max_dpos", "max_drot", "state_timeout_s")
        if self.device not in DEVICES:
            raise ConfigError(f"unknown device {self.device!r}; available: {sorted(DEVICES)}")
        if self.episodes < 0 or self.wait_subscribers < 0:
            raise ConfigError(
                f"episodes and wait_subscribers must be >= 0, got {self.episodes}, "
                f"{self.wait_subscribers}"
            )


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
        state_timeout_s: how long a step waits for its state and action messages, and the
            oldest state a step may hold (real-time robots) [s]; a step still incomplete after
            it discards the episode (the reason is logged).
        task_state: also record the sim's task state (``state/cube_pos`` ...).
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
    task_state: bool = False

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
        lockstep_on: what a lockstep step consumes: ``action`` (a normalised action, applied
            as ``sim/env.py`` does) or ``equilibrium_pose`` (one control period of physics
            tracking the pose, after the newest ``gripper_command``: the bridge's commands).
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
    max_dpos: float = DEFAULT_MAX_DPOS
    max_drot: float = DEFAULT_MAX_DROT
    lockstep_on: str = "action"

    def validate(self) -> None:
        _positive(self, "control_hz", "state_hz", "camera_hz", "max_dpos", "max_drot")
        if self.lockstep_on not in ("action", "equilibrium_pose"):
            raise ConfigError(
                f"lockstep_on must be action|equilibrium_pose, got {self.lockstep_on!r}"
            )
        if len(self.image_size) != 2 or min(self.image_size) < 1:
            raise ConfigError(f"image_size must be (H, W) > 0, got {self.image_size}")


NODE_CONFIGS: dict[str, type[NodeConfig]] = {
    "bridge": BridgeConfig,
    "policy": PolicyNodeConfig,
    "teleop": TeleopNodeConfig,
    "recorder": RecorderConfig,
    "sim_robot": SimRobotConfig,
}
