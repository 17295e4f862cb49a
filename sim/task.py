"""What a manipulation task supplies to :class:`sim.env.PandaEnv`.

A task owns its objects (MJCF), how they are placed at reset, what extra state it observes,
when it has succeeded and its dense reward. The arm, the controller, the action mapping and
the safety filter belong to the env and are the same for every task.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import mujoco
import numpy as np


@dataclass
class DomainRandomization:
    """Ranges sampled at every reset. Multipliers are uniform in ``[1 - r, 1 + r]``.

    Args:
        object_pos: half-width of the uniform object placement range [m] (task-specific use).
        object_yaw: half-width of the object yaw range [rad].
        friction: relative range of object friction.
        mass: relative range of object mass.
        gains: relative range of the controller stiffness.
        joint_noise: std of the initial joint-position noise around the home pose [rad].
    """

    object_pos: float = 0.1
    object_yaw: float = 0.4
    friction: float = 0.0
    mass: float = 0.0
    gains: float = 0.0
    joint_noise: float = 0.02


@dataclass
class Task(ABC):
    """Base class of the tasks. Subclasses override the hooks below; all units SI, world frame.

    Attributes:
        name: registry name.
        max_episode_steps: truncation horizon at the control rate.
        object_bodies: bodies whose mass/friction domain randomisation may scale.
    """

    name: str = "task"
    max_episode_steps: int = 100
    object_bodies: tuple[str, ...] = ()
    randomization: DomainRandomization = field(default_factory=DomainRandomization)

    def objects_xml(self) -> str:
        """MJCF worldbody elements of the task's objects and fixtures."""
        return ""

    def bind(self, model: mujoco.MjModel) -> None:  # noqa: B027 - optional hook
        """Look up ids once the model is compiled."""

    def reset(  # noqa: B027 - optional hook
        self, model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator
    ) -> None:
        """Place the objects (arm already at its initial pose, ``mj_forward`` not yet called)."""

    def after_reset(self, env: object) -> None:  # noqa: B027 - optional hook
        """Called once the arm and objects are placed and forward kinematics are current."""

    def observe(self, data: mujoco.MjData) -> dict[str, np.ndarray]:
        """Task state entries of the observation (keys ``state/<name>``), float32."""
        return {}

    def observation_sizes(self) -> dict[str, int]:
        """Sizes of the entries :meth:`observe` returns."""
        return {}

    @abstractmethod
    def success(self, data: mujoco.MjData) -> bool:
        """Whether the task is achieved in the current state."""

    def dense_reward(self, data: mujoco.MjData, tcp_pos: np.ndarray) -> float:
        """Shaped reward in [0, 1]; the sparse reward is ``float(success)``."""
        return float(self.success(data))


def free_joint_qpos_adr(model: mujoco.MjModel, body: str) -> int:
    """Address in ``qpos`` of the free joint of ``body`` (7 values: xyz, quat wxyz)."""
    b = model.body(body)
    if b.jntnum[0] != 1 or model.jnt_type[b.jntadr[0]] != mujoco.mjtJoint.mjJNT_FREE:
        raise ValueError(f"body {body!r} has no single free joint")
    return int(model.jnt_qposadr[b.jntadr[0]])


def yaw_quat(yaw: float) -> np.ndarray:
    """Quaternion (w, x, y, z) of a rotation by ``yaw`` [rad] about world z."""
    return np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])
