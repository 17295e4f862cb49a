"""The one place a normalised action becomes a robot target (numpy only, no torch).

An action is (7,) in [-1, 1]: ``a[:3] * max_dpos`` [m] and ``a[3:6] * max_drot`` [rad, rotation
vector] move the TCP target from the *measured* TCP pose (base frame), as SERL does, so a zero
action holds the arm where it is and a blocked arm cannot wind its target up; ``a[6]`` is the
gripper (-1 open, +1 closed). The target then passes :class:`SafetyFilter` (workspace box, a step
bound of :data:`STEP_BOUND` full action steps from the last safe target, NaN/inf -> hold) as the
last stage. A non-finite action holds both the last safe target and the last gripper command.
Before that, a finite action passes the commander's *action stages* in order
(:class:`ActionStage`: e.g. :class:`controllers.grasp_hold.GraspHold`), each of which may change
it and reports what it changed as flags of the :class:`Target`.

Every backend (MuJoCo, PyBullet, ManiSkill, the ROS 2 bridge and robot env) and the safety
reflex's substituted actions go through :class:`Commander`; :meth:`Commander.to_action` is the
inverse for backends whose own controller takes deltas (ManiSkill's ``pd_ee_delta_pose``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np

from controllers.rotations import mat_to_rotvec, rotvec_to_mat
from controllers.safety_filter import SafetyFilter

ACTION_DIM = 7
STEP_BOUND = 2.5
"""The safety filter's per-step bound in full action steps (2.5 x max_dpos, 2.5 x max_drot)."""
DEFAULT_MAX_DPOS = 0.02  # [m] per action unit and policy step
DEFAULT_MAX_DROT = 0.1  # [rad] per action unit and policy step
DEFAULT_WORKSPACE_LOW = (0.2, -0.45, 0.015)  # TCP box corners [m], base frame
DEFAULT_WORKSPACE_HIGH = (0.8, 0.45, 0.7)
OPEN = -1.0  # gripper command at reset


@dataclass(frozen=True)
class Target:
    """What one action asks of the arm.

    pos: (3,) TCP position [m], base frame. rot: (3, 3) TCP rotation, base frame.
    gripper: command in [-1 open, +1 closed]. flags: what the safety filter changed
    (:data:`controllers.safety_filter.FLAGS`).
    """

    pos: np.ndarray
    rot: np.ndarray
    gripper: float
    flags: Mapping[str, bool]


class ActionStage(Protocol):
    """A check a finite action passes before it becomes a target."""

    FLAGS: ClassVar[tuple[str, ...]]  # the flag keys apply() returns

    def reset(self, command: float) -> None:
        """Episode start; ``command`` is the gripper command the episode starts with."""
        ...

    def apply(self, action: np.ndarray, ee_pos: np.ndarray, opening: float) -> Mapping[str, bool]:
        """Change ``action`` (7,) (clipped to [-1, 1]) in place if needed, given the measured
        TCP position ``ee_pos`` (3,) [m, base frame] and finger ``opening`` [m]; returns the
        flags of what it changed (every key it can set, each True or False)."""
        ...


class Commander:
    """Normalised actions -> safe TCP targets and gripper commands.

    Args:
        max_dpos: translation per action unit and step [m].
        max_drot: rotation per action unit and step [rad].
        workspace_low, workspace_high: (3,) TCP box of the safety filter [m, base frame].
        stages: :class:`ActionStage` s every finite action passes, in order, before it becomes
            a target (they need the finger opening: :meth:`command`'s ``opening``).
    """

    def __init__(
        self,
        max_dpos: float = DEFAULT_MAX_DPOS,
        max_drot: float = DEFAULT_MAX_DROT,
        workspace_low: np.ndarray | Sequence[float] | None = None,
        workspace_high: np.ndarray | Sequence[float] | None = None,
        stages: Sequence[ActionStage] = (),
    ) -> None:
        if not (max_dpos > 0 and max_drot > 0):
            raise ValueError(f"expected max_dpos, max_drot > 0, got {max_dpos}, {max_drot}")
        self.max_dpos, self.max_drot = float(max_dpos), float(max_drot)
        self.safety = SafetyFilter(
            workspace_low=np.asarray(
                DEFAULT_WORKSPACE_LOW if workspace_low is None else workspace_low, dtype=float
            ),
            workspace_high=np.asarray(
                DEFAULT_WORKSPACE_HIGH if workspace_high is None else workspace_high, dtype=float
            ),
            max_pos_step=STEP_BOUND * self.max_dpos,
            max_rot_step=STEP_BOUND * self.max_drot,
        )
        self.gripper = OPEN
        self.stages: tuple[ActionStage, ...] = ()
        self._stage_flags: dict[str, bool] = {}
        for stage in stages:
            self.add_stage(stage)

    def add_stage(self, stage: ActionStage) -> None:
        """Append an action stage (it runs after the ones already there)."""
        self.stages = (*self.stages, stage)
        self._stage_flags.update(dict.fromkeys(stage.FLAGS, False))

    def reset(self, ee_pos: np.ndarray, ee_rot: np.ndarray, gripper: float = OPEN) -> None:
        """Start from the measured TCP pose (``ee_pos`` (3,) [m], ``ee_rot`` (3, 3), base frame)
        with the gripper command ``gripper``."""
        self.safety.reset(ee_pos, ee_rot)
        self.gripper = float(gripper)
        for stage in self.stages:
            stage.reset(self.gripper)

    def command(
        self,
        action: np.ndarray,
        ee_pos: np.ndarray,
        ee_rot: np.ndarray,
        opening: float | None = None,
    ) -> Target:
        """The safe target of ``action`` (7,) at the measured TCP pose, after the action
        stages (which read the finger ``opening`` [m]); a non-finite action holds the last safe
        target and gripper command and passes no stage."""
        a = np.asarray(action, dtype=float).reshape(-1)
        if a.shape != (ACTION_DIM,):
            raise ValueError(f"action must have shape ({ACTION_DIM},), got {np.shape(action)}")
        flags = dict(self._stage_flags)
        if np.isfinite(a).all():
            if self.stages:
                if opening is None:
                    raise ValueError("the commander's action stages need the finger opening")
                a = np.clip(a, -1.0, 1.0)
                for stage in self.stages:
                    flags.update(stage.apply(a, ee_pos, float(opening)))
            self.gripper = float(np.clip(a[6], -1.0, 1.0))
        target = self.retarget(a[:6], ee_pos, ee_rot)
        return Target(target.pos, target.rot, target.gripper, {**target.flags, **flags})

    def retarget(self, motion: np.ndarray, ee_pos: np.ndarray, ee_rot: np.ndarray) -> Target:
        """The safe target of a motion ``motion`` (6,) (an action's first six entries) at the
        measured TCP pose; the gripper command stays as it is (the reflex substitutes motions)."""
        m = np.asarray(motion, dtype=float).reshape(-1)[:6]
        cur_pos = np.asarray(ee_pos, dtype=float)
        cur_rot = np.asarray(ee_rot, dtype=float)
        if np.isfinite(m).all():
            m = np.clip(m, -1.0, 1.0)
            pos = cur_pos + m[:3] * self.max_dpos
            rot = rotvec_to_mat(m[3:6] * self.max_drot) @ cur_rot
        else:  # the filter rejects it and holds its last safe target
            pos, rot = np.full(3, np.nan), np.full((3, 3), np.nan)
        pos, rot = self.safety.filter_target(pos, rot, cur_pos, cur_rot)
        return Target(pos, rot, self.gripper, dict(self.safety.last_flags))

    def to_action(
        self, pos: np.ndarray, rot: np.ndarray, ee_pos: np.ndarray, ee_rot: np.ndarray
    ) -> np.ndarray:
        """The inverse: the action (7,) that moves the measured TCP pose to (``pos``, ``rot``)
        with the current gripper command, clipped to [-1, 1]."""
        a = np.empty(ACTION_DIM)
        a[:3] = (np.asarray(pos, dtype=float) - ee_pos) / self.max_dpos
        a[3:6] = mat_to_rotvec(np.asarray(rot, dtype=float) @ np.asarray(ee_rot).T) / self.max_drot
        a[6] = self.gripper
        return np.clip(a, -1.0, 1.0)
