"""``backend=ros2``: ``robotrl eval`` and ``robotrl train-rl`` on a robot over ROS 2 topics.

``sim.make(task, backend="ros2", ...)`` (``sim.registry.BACKENDS``) builds a
:class:`RobotBackendEnv`: a :class:`hardware.ros2.robot_env.RosRobotEnv` on the configured topic
profile that owns its transport (``make_transport``: rclpy when importable, else Cyclone DDS),
with the observation keys, action semantics and horizon of the sim task, so the same checkpoint,
evaluation loop and residual actor run on the arm (or on ``robotrl-sim-robot``) unchanged.

Where the robot env's settings come from (later wins): the defaults of :class:`RobotEnvConfig`,
the ``robotrl_robot_env`` section (merged over ``/**``) of a ROS 2 parameter file
(``params_file``), then the ``profile`` / ``domain_id`` arguments (``ros2.profile``,
``ros2.domain_id`` on the command line).

Task semantics: reset, reward and success come from the robot's ``episode`` messages (the
episode protocol of ``hardware/ros2/topics.py``). ``robotrl-sim-robot`` answers them with its
task oracle. A real arm has no oracle: something must answer ``reset [seed]`` with an
``episode`` message (a reset routine, or the operator through ``robotrl-teleop-node
publish_episodes:=true``), and the reward must come from a success classifier
(``reward_classifier``: a ``robotrl train-reward`` output; reward, termination and
``info["success"]`` then follow the classifier, the oracle's verdict, if any, stays in
``info["oracle_success"]``). The task's object state (``state/cube_pos`` ...) is read from the
``task_state`` topic (``task_state: true``): the sim robot publishes it, on a real arm a
perception node must.

No torch here unless a reward classifier is asked for (it is loaded lazily).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym

from controllers.commander import (
    DEFAULT_MAX_DPOS,
    DEFAULT_MAX_DROT,
    DEFAULT_WORKSPACE_HIGH,
    DEFAULT_WORKSPACE_LOW,
)
from hardware.ros2.node_params import NodeConfig
from hardware.ros2.robot_env import RosRobotEnv
from hardware.ros2.topics import CONTROL_HZ, STATE_TIMEOUT_S, ConfigError
from hardware.ros2.transport import Transport, make_transport
from robotrl.algos.reward_wrapper import with_reward_classifier
from sim.registry import task_horizon
from sim.registry import task_observation_sizes as task_sizes


@dataclass
class RobotEnvConfig(NodeConfig):
    """The robot env of ``backend=ros2`` (section ``robotrl_robot_env`` of a parameter file).

    Attributes:
        control_hz: env step rate [Hz] (the rate the checkpoint was trained at).
        state_timeout_s: watchdog bound [s]: older state -> hold, refuse the action.
        via_bridge: publish normalised actions on ``action`` for a ``robotrl-bridge`` process
            (its safety filter is the last stage); False: filter and command in this process.
        max_dpos, max_drot: action scale per unit and step [m, rad] (the sim's).
        workspace_low, workspace_high: (3,) TCP box of the safety filter [m, base frame].
        stiffness: (6,) Cartesian stiffness [N/m x3, Nm/rad x3] sent once; empty: the robot's.
        grasp_release_z: TCP height [m] above which a held object stays gripped
            (:mod:`controllers.grasp_hold`); 0: off.
        max_episode_steps: truncation horizon; 0: the sim task's.
        task_state: read the task's object state (``state/cube_pos`` ...) from ``task_state``.
        lockstep: the robot is a sim robot stepping once per equilibrium pose
            (``robotrl-sim-robot lockstep:=true lockstep_on:=equilibrium_pose``; with
            ``via_bridge`` the bridge must be in lockstep too): each step waits for its answer.
        reset_timeout_s: how long a reset waits for the robot's ``episode`` answer [s].
    """

    NODE_NAME: ClassVar[str] = "robotrl_robot_env"

    control_hz: float = CONTROL_HZ
    state_timeout_s: float = STATE_TIMEOUT_S
    via_bridge: bool = False
    max_dpos: float = DEFAULT_MAX_DPOS
    max_drot: float = DEFAULT_MAX_DROT
    workspace_low: tuple[float, ...] = DEFAULT_WORKSPACE_LOW
    workspace_high: tuple[float, ...] = DEFAULT_WORKSPACE_HIGH
    stiffness: tuple[float, ...] = ()
    grasp_release_z: float = 0.0
    max_episode_steps: int = 0
    task_state: bool = True
    lockstep: bool = False
    reset_timeout_s: float = 30.0

    def validate(self) -> None:
        for n in ("control_hz", "state_timeout_s", "max_dpos", "max_drot", "reset_timeout_s"):
            if not getattr(self, n) > 0:
                raise ConfigError(f"{n} must be positive, got {getattr(self, n)}")
        if self.max_episode_steps < 0:
            raise ConfigError(f"max_episode_steps must be >= 0, got {self.max_episode_steps}")
        for n in ("workspace_low", "workspace_high"):
            if len(getattr(self, n)) != 3:
                raise ConfigError(f"{n} must have 3 values [m], got {getattr(self, n)}")
        if self.stiffness and len(self.stiffness) != 6:
            raise ConfigError(f"stiffness must be empty or 6 values, got {self.stiffness}")
        if not self.grasp_release_z >= 0:
            raise ConfigError(f"grasp_release_z must be >= 0 [m], got {self.grasp_release_z}")


def load_config(
    params_file: str | None = None, profile: str | None = None, domain_id: int | None = None
) -> RobotEnvConfig:
    """:class:`RobotEnvConfig` from the defaults, ``params_file`` (section
    ``robotrl_robot_env`` over ``/**``) and the ``profile`` / ``domain_id`` overrides."""
    params: dict[str, Any] = {}
    if params_file:
        if not Path(params_file).is_file():
            raise ConfigError(f"ros2.params_file {params_file!r} does not exist")
        params = RobotEnvConfig.yaml_params(params_file)
    if profile is not None:
        params["profile"] = profile
    if domain_id is not None:
        params["domain_id"] = int(domain_id)
    return RobotEnvConfig.from_params(params, where=params_file or "ros2 backend")


class RobotBackendEnv(RosRobotEnv):
    """:class:`RosRobotEnv` of a sim task: its observation keys and horizon, the sim's action
    scales as attributes (``max_dpos``, ``max_drot``: scripted experts and humans read them),
    and the transport closed with the env.

    Args:
        transport: the transport.
        task: sim task name (``sim.TASKS``): horizon and task observation entries.
        cfg: robot env settings.
        cameras: camera names (``images/<name>`` from the profile's Image topics).
        image_size: (H, W) of the camera images.
        own_transport: close ``transport`` with the env.
    """

    def __init__(
        self,
        transport: Transport,
        task: str,
        cfg: RobotEnvConfig,
        *,
        cameras: Sequence[str] = (),
        image_size: tuple[int, int] = (96, 96),
        own_transport: bool = True,
    ) -> None:
        horizon = cfg.max_episode_steps or task_horizon(task)
        self.transport = transport
        self.task_name = task
        self.config = cfg
        super().__init__(
            transport,
            cfg.topic_profile(),
            control_hz=cfg.control_hz,
            command="action" if cfg.via_bridge else "equilibrium_pose",
            max_dpos=cfg.max_dpos,
            max_drot=cfg.max_drot,
            workspace_low=cfg.workspace_low,
            workspace_high=cfg.workspace_high,
            stiffness=cfg.stiffness or None,
            grasp_release_z=cfg.grasp_release_z,
            state_timeout_s=cfg.state_timeout_s,
            max_episode_steps=horizon,
            task_sizes=task_sizes(task) if cfg.task_state else None,
            cameras=cameras,
            image_size=image_size,
            reset_timeout_s=cfg.reset_timeout_s,
            lockstep=cfg.lockstep,
        )
        self.max_dpos, self.max_drot = cfg.max_dpos, cfg.max_drot
        self._closed = False
        self._own_transport = own_transport

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """:meth:`RosRobotEnv.step`, unless the robot was reset by someone else since this env's
        reset (an evaluation env on the same robot, an operator): then nothing is sent and the
        episode ends, truncated, with ``info["interrupted"]`` saying why (one robot, one
        episode: a sim gives every env its own world, a robot does not)."""
        with self._episode_lock:  # the robot's newest episode message
            ep = dict(self._episode) if self._episode is not None else None
        if ep is not None and int(ep["seed"]) != self._seed and self._last_obs is not None:
            reason = f"the robot was reset to seed {int(ep['seed'])} (this episode: {self._seed})"
            info = {"success": False, "intervention": False, "safety": {}, "hold": True}
            info.update(hold_reason=reason, interrupted=reason)
            return self._last_obs, 0.0, False, True, info
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {**info, "interrupted": ""}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        super().close()
        if self._own_transport:
            self.transport.close()


def make_ros2(
    task: str,
    *,
    profile: str | None = None,
    domain_id: int | None = None,
    params_file: str | None = None,
    reward_classifier: str | None = None,
    controller: str | None = None,
    cameras: Sequence[str] = (),
    image_size: Sequence[int] = (96, 96),
    transport: Transport | None = None,
    **unsupported: Any,
) -> gym.Env:
    """The robot env of ``task`` over ROS 2 (``sim.make(task, backend="ros2", ...)``).

    Args:
        task: sim task (observation entries, horizon).
        profile: topic profile (``franka``, ``generic``, ``sim``); None: the parameter file's.
        domain_id: DDS domain; None: the parameter file's, -1 there: ``ROS_DOMAIN_ID``.
        params_file: ROS 2 parameter YAML (section ``robotrl_robot_env``, see
            :class:`RobotEnvConfig`).
        reward_classifier: ``robotrl train-reward`` output directory: reward, termination and
            success from it (its cameras are subscribed too).
        controller: ignored (the robot runs its own impedance controller; the sim robot node
            its ``controller`` parameter).
        cameras, image_size: the checkpoint's cameras and (H, W).
        transport: use this transport (not closed with the env; tests); None: the env's own
            ``make_transport`` on the domain.
    """
    del controller  # the robot's own controller runs; kept so checkpoint kwargs pass through
    if unsupported:
        raise ValueError(
            f"backend=ros2 does not take {sorted(unsupported)} (safety monitor/reflex run in "
            "the sim env; on the robot the safety filter is the commander's or the bridge's)"
        )
    cfg = load_config(params_file, profile, domain_id)

    def build(cams: Sequence[str], size: tuple[int, int]) -> RobotBackendEnv:
        if transport is not None:
            return RobotBackendEnv(
                transport, task, cfg, cameras=cams, image_size=size, own_transport=False
            )
        domain = None if cfg.domain_id < 0 else cfg.domain_id
        tr = make_transport(domain_id=domain, node_name=RobotEnvConfig.NODE_NAME)
        return RobotBackendEnv(tr, task, cfg, cameras=cams, image_size=size)

    size = (int(image_size[0]), int(image_size[1]))
    if reward_classifier:
        return with_reward_classifier(build, reward_classifier, tuple(cameras), size)
    return build(tuple(cameras), size)


__all__ = [
    "RobotBackendEnv",
    "RobotEnvConfig",
    "load_config",
    "make_ros2",
]
