"""Scripted experts: state-based demonstrators with configurable noise and a constant bias.

An expert is a callable ``expert(obs) -> action (7,)`` over the env's observation dict, so it
runs wherever that dict exists (sim, or hardware with object poses from a tracker). The noise
and ``bias`` knobs make deliberately imperfect demonstrators: later stages (residual RL,
flow policy gradients) start from policies cloned from biased demos.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

import numpy as np

from controllers.rotations import orientation_error, quat_to_mat
from sim.env import DOWN

POS_GAIN = 1.0  # action units per max_dpos of position error
ROT_GAIN = 1.0  # action units per max_drot of orientation error


def yaw_down(yaw: float) -> np.ndarray:
    """(3, 3) TCP orientation pointing at the table, rotated by ``yaw`` [rad] about world z."""
    c, s = np.cos(yaw), np.sin(yaw)
    rz = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return rz @ DOWN


def grasp_yaw(object_quat: np.ndarray, symmetry: float = np.pi / 2) -> float:
    """Yaw [rad] of an object with the given rotational symmetry, wrapped near zero."""
    rot = quat_to_mat(object_quat)
    yaw = np.arctan2(rot[1, 0], rot[0, 0])
    return float((yaw + symmetry / 2) % symmetry - symmetry / 2)


class ScriptedExpert(ABC):
    """Base class: turns a desired TCP pose and gripper command into a normalised action.

    Args:
        max_dpos, max_drot: the env's action scales [m], [rad] (to convert errors to actions).
        noise: std of Gaussian noise added to the action (action units).
        bias: (7,) or scalar constant added to every action (action units).
        seed: noise generator seed.
    """

    def __init__(
        self,
        max_dpos: float = 0.02,
        max_drot: float = 0.1,
        noise: float = 0.0,
        bias: np.ndarray | float = 0.0,
        seed: int | None = None,
    ) -> None:
        self.max_dpos, self.max_drot = max_dpos, max_drot
        self.noise = float(noise)
        self.bias = np.broadcast_to(np.asarray(bias, dtype=float), (7,)).copy()
        self.rng = np.random.default_rng(seed)
        self.phase = 0

    def reset(self) -> None:
        self.phase = 0

    def move(
        self,
        obs: Mapping[str, np.ndarray],
        pos: np.ndarray,
        rot: np.ndarray,
        gripper: float,
        speed: float = 1.0,
    ) -> np.ndarray:
        """Action driving the TCP to ``pos`` (3,) [m] / ``rot`` (3, 3), gripper in [-1, 1]."""
        ee_pos = obs["state/ee_pos"].astype(float)
        ee_rot = quat_to_mat(obs["state/ee_quat"].astype(float))
        a = np.empty(7)
        a[:3] = POS_GAIN * (pos - ee_pos) / self.max_dpos
        a[:3] *= min(1.0, speed / max(np.abs(a[:3]).max(), 1e-9))
        a[3:6] = -ROT_GAIN * orientation_error(ee_rot, rot) / self.max_drot
        a[6] = gripper
        return self.finish(a)

    def finish(self, action: np.ndarray) -> np.ndarray:
        """Add noise and bias, clip to [-1, 1]; float32."""
        a = action + self.bias
        if self.noise > 0:
            a = a + self.rng.normal(0.0, self.noise, 7)
        return np.clip(a, -1.0, 1.0).astype(np.float32)

    @abstractmethod
    def __call__(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """Action (7,) float32 in [-1, 1] for the current observation."""
