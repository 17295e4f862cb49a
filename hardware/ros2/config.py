"""Configuration of the ROS 2 nodes: one typed dataclass per node, loaded from ROS 2 parameters.

Node parameter files use the ROS 2 layout (``<node_name>: ros__parameters: {...}``; a ``/**``
section applies to every node); :meth:`NodeConfig.from_yaml` loads one node's section into its
dataclass and rejects unknown keys, listing the valid ones. Nested ``topics: {name: topic}``
overrides entries of the chosen topic profile (``hardware/ros2/topics.py``, re-exported here).
:meth:`NodeConfig.from_args` reads a node's command line the way a ROS 2 node does
(``--ros-args --params-file F -p key:=value -r __node:=name``), so launch files start our
console scripts exactly like ROS nodes.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

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
        node_name = node_name or cls.NODE_NAME
        return cls.from_params(cls.yaml_params(path, node_name), where=f"{path} [{node_name}]")

    @classmethod
    def yaml_params(cls, path: str | Path, node_name: str | None = None) -> dict[str, Any]:
        """The raw ``ros__parameters`` of ``node_name`` in ``path`` merged over ``/**``."""
        import yaml

        node_name = node_name or cls.NODE_NAME
        doc = yaml.safe_load(Path(path).read_text()) or {}
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
        return params

    @classmethod
    def from_args(cls, argv: Sequence[str]) -> tuple[Self, str]:
        """Config and node name from a ROS 2 node command line.

        Accepted: ``key:=value`` / ``key=value`` before ``--ros-args``; after it
        ``--params-file F`` (repeatable, later files win), ``-p key:=value`` / ``--param``,
        ``-r __node:=name`` / ``--remap``, and ``--log-level X`` (ignored). Values are YAML
        (as in ROS); ``topics.ee_pose:=/x`` sets one nested entry. Unknown options ->
        ConfigError.
        """
        import yaml

        node_name = cls.NODE_NAME
        files: list[str] = []
        sets: list[str] = []
        args = list(argv)
        i, ros = 0, False
        while i < len(args):
            a = args[i]
            if a == "--ros-args":
                ros = True
            elif a == "--":
                ros = False
            elif ros and a == "--params-file" and i + 1 < len(args):
                files.append(args[i + 1])
                i += 1
            elif ros and a in ("-p", "--param") and i + 1 < len(args):
                sets.append(args[i + 1])
                i += 1
            elif ros and a in ("-r", "--remap") and i + 1 < len(args):
                lhs, _, rhs = args[i + 1].partition(":=")
                if lhs != "__node" or not rhs:
                    raise ConfigError(
                        f"only '-r __node:=<name>' remaps are supported, got {args[i + 1]!r}"
                    )
                node_name = rhs
                i += 1
            elif ros and a == "--log-level" and i + 1 < len(args):
                i += 1
            elif not ros and ("=" in a) and not a.startswith("-"):
                sets.append(a)
            else:
                raise ConfigError(
                    f"unexpected argument {a!r}; expected key:=value or --ros-args "
                    "[--params-file F] [-p key:=value] [-r __node:=name]"
                )
            i += 1
        params: dict[str, Any] = {}
        for f in files:
            for k, v in cls.yaml_params(f, node_name).items():
                if isinstance(v, dict) and isinstance(params.get(k), dict):
                    params[k] = {**params[k], **v}
                else:
                    params[k] = v
        for item in sets:
            key, sep, raw = item.partition(":=")
            if not sep:
                key, sep, raw = item.partition("=")
            value = yaml.safe_load(raw) if raw != "" else ""
            if "." in key:
                outer, inner = key.split(".", 1)
                params[outer] = {**(params.get(outer) or {}), inner: value}
            else:
                params[key] = value
        return cls.from_params(params, where=f"{cls.__name__} ({node_name})"), node_name

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
        episodes: (lockstep) episodes to run, each started by a ``reset`` with ``seed + k``
            (0: until stopped).
        wait_subscribers: (lockstep) readers of ``action`` to wait for before the first reset
            (the sim robot, plus the recorder when one records).
        publish_action: also publish the device's action on the executed-action topic
            ``action`` (teleop drives the robot: data collection); False publishes only the
            teleop topics and the flag (a policy drives, the human may take over).
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
    publish_action: bool = True
    episodes: int = 0
    wait_subscribers: int = 1

    def validate(self) -> None:
        _positive(self, "rate_hz", "max_dpos", "max_drot", "state_timeout_s")
        from hardware.devices import DEVICES

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
        state_timeout_s: how long a step waits for its state and action messages [s]; a step
            still incomplete after it discards the episode (the reason is logged).
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
