"""The deterministic safety filter: the last thing every command passes before the robot.

It fails closed. Targets (at policy rate): NaN/inf -> hold the last safe target; the position is
clamped into a workspace box and each step from the previous safe target is bounded in
translation and rotation. Torques (every control tick): NaN/inf anywhere -> a pure damping hold
torque; near a joint limit no torque pushes further toward it and a spring-damper pushes back;
above the velocity limit no torque accelerates the joint further and a brake acts; the result is
always within ±tau_max and finite.

What changed is recorded per call in ``last_flags`` (one reused dict of bools) and accumulated
in ``counts``; the env copies them into ``info["safety"]``.
"""

from __future__ import annotations

import math

import numpy as np

from controllers import panda
from controllers.rotations import (
    mat_to_rotvec,
    quat_from_mat_elements,
    quat_to_mat,
    rotvec_to_mat,
)

MAX_POS_STEP = 0.05  # [m] per policy step
MAX_ROT_STEP = 0.3  # [rad] per policy step
JOINT_LIMIT_MARGIN = 0.1  # [rad]: width of the zone inside each joint limit where we intervene
JOINT_LIMIT_STIFFNESS = 100.0  # [Nm/rad] push-back per rad of depth into the zone
JOINT_LIMIT_DAMPING = 10.0  # [Nm s/rad] brake on motion toward the limit inside the zone
VELOCITY_BRAKE = 20.0  # [Nm s/rad] per rad/s above dq_max
ROTATION_TOLERANCE = 1e-3  # max |R R^T - I| of an accepted target rotation
HOLD_DAMPING = 5.0  # [Nm s/rad] hold torque -HOLD_DAMPING * dq on non-finite input

FLAGS = (
    "nan",
    "workspace_clamped",
    "step_limited",
    "torque_clipped",
    "joint_limit",
    "velocity_limit",
)


def _limits(x: object, n: int, name: str) -> np.ndarray:
    a = np.array(x, dtype=float)
    if a.ndim == 0:
        a = np.full(n, float(a))
    if a.shape != (n,) or not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite with shape ({n},), got {x!r}")
    return a


class SafetyFilter:
    """Workspace, step, joint-limit, velocity and torque limits; deterministic, fails closed.

    Args:
        workspace_low, workspace_high: (3,) corners of the allowed TCP box [m], base frame.
        max_pos_step: max TCP target translation between policy steps [m].
        max_rot_step: max TCP target rotation between policy steps [rad].
        q_min, q_max: (n,) joint limits [rad]; default the Panda's.
        dq_max: (n,) joint velocity limits [rad/s].
        tau_max: (n,) joint torque limits [Nm].
        joint_margin: width of the joint-limit zone [rad].
    """

    def __init__(
        self,
        workspace_low: np.ndarray,
        workspace_high: np.ndarray,
        max_pos_step: float = MAX_POS_STEP,
        max_rot_step: float = MAX_ROT_STEP,
        q_min: np.ndarray | None = None,
        q_max: np.ndarray | None = None,
        dq_max: np.ndarray | None = None,
        tau_max: np.ndarray | None = None,
        joint_margin: float = JOINT_LIMIT_MARGIN,
    ) -> None:
        self.workspace_low = _limits(workspace_low, 3, "workspace_low")
        self.workspace_high = _limits(workspace_high, 3, "workspace_high")
        if not np.all(self.workspace_low <= self.workspace_high):
            raise ValueError(
                f"workspace_low must be <= workspace_high, got {workspace_low}, {workspace_high}"
            )
        if not (max_pos_step > 0 and max_rot_step > 0 and joint_margin >= 0):
            raise ValueError(
                "max_pos_step, max_rot_step must be > 0 and joint_margin >= 0, got "
                f"{max_pos_step}, {max_rot_step}, {joint_margin}"
            )
        self.max_pos_step = float(max_pos_step)
        self.max_rot_step = float(max_rot_step)
        q_min = panda.Q_MIN if q_min is None else q_min
        n = np.asarray(q_min).shape[0]
        self.num_joints = n
        self.q_min = _limits(q_min, n, "q_min")
        self.q_max = _limits(panda.Q_MAX if q_max is None else q_max, n, "q_max")
        self.dq_max = _limits(panda.DQ_MAX if dq_max is None else dq_max, n, "dq_max")
        self.tau_max = _limits(panda.TAU_MAX if tau_max is None else tau_max, n, "tau_max")
        if not (np.all(self.q_min < self.q_max) and np.all(self.dq_max > 0)):
            raise ValueError("need q_min < q_max and dq_max > 0")
        if not np.all(self.tau_max > 0):
            raise ValueError(f"tau_max must be positive, got {self.tau_max}")
        self._neg_tau_max = -self.tau_max
        half = 0.5 * (self.q_max - self.q_min)
        margin = np.minimum(float(joint_margin), half)
        self._lo_zone = (self.q_min + margin).tolist()
        self._hi_zone = (self.q_max - margin).tolist()
        self._lo_zone_arr = np.array(self._lo_zone)
        self._hi_zone_arr = np.array(self._hi_zone)
        self._dq_max_list = self.dq_max.tolist()

        self._safe_pos: np.ndarray | None = None  # last safe target
        self._safe_rot: np.ndarray | None = None
        self._out = np.zeros(n)
        self._tmp = np.zeros(n)
        self._mask = np.zeros(n, dtype=bool)
        self.last_flags: dict[str, bool] = dict.fromkeys(FLAGS, False)
        self.counts: dict[str, int] = dict.fromkeys(FLAGS, 0)

    # ---- targets (policy rate) -------------------------------------------------------------
    def reset(self, pos: np.ndarray, rot: np.ndarray) -> None:
        """Start from a known-safe target: TCP position (3,) [m] and rotation (3, 3), base frame."""
        pos = np.array(pos, dtype=float)
        q = quat_from_mat_elements(*np.asarray(rot, dtype=float).ravel().tolist())
        if pos.shape != (3,) or not (np.all(np.isfinite(pos)) and math.isfinite(q[0])):
            raise ValueError(f"reset needs a finite pose, got {pos}, {rot}")
        self._safe_pos = pos
        self._safe_rot = quat_to_mat(np.array(q))
        self._clear_flags()

    def filter_target(
        self,
        pos: np.ndarray,
        rot: np.ndarray,
        current_pos: np.ndarray,
        current_rot: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Safe TCP target (position (3,) [m], rotation (3, 3)), base frame, as new arrays.

        Args:
            pos, rot: the requested target.
            current_pos, current_rot: the measured TCP pose (used to hold when no safe target
                exists yet).
        """
        self._clear_flags()
        flags = self.last_flags
        prev_pos, prev_rot = self._previous_safe(current_pos, current_rot)
        pos = np.asarray(pos, dtype=float)
        rot = np.asarray(rot, dtype=float)
        if pos.shape != (3,) or rot.shape != (3, 3):
            raise ValueError(f"expected pos (3,) and rot (3, 3), got {pos.shape}, {rot.shape}")
        q = quat_from_mat_elements(*rot.ravel().tolist())
        valid = bool(np.isfinite(pos).all() and np.isfinite(rot).all()) and math.isfinite(q[0])
        # a finite matrix that is not a rotation is as meaningless as NaN: hold
        if valid and not np.all(np.abs(rot) <= 1.0 + ROTATION_TOLERANCE):
            valid = False
        if valid and not np.allclose(rot @ rot.T, np.eye(3), atol=ROTATION_TOLERANCE):
            valid = False
        if not valid:
            flags["nan"] = True
            pos, rot = prev_pos, prev_rot
        else:
            pos = pos.copy()
            rot = quat_to_mat(np.array(q))  # re-orthonormalised
        pos = self._clamp(pos)
        step = pos - prev_pos
        dist = float(np.linalg.norm(step))
        if dist > self.max_pos_step:
            pos = prev_pos + step * (self.max_pos_step / dist)
            flags["step_limited"] = True
        pos = self._clamp(pos)  # prev_pos may lie outside the box when it is the measured pose
        rel = mat_to_rotvec(rot @ prev_rot.T)
        angle = float(np.linalg.norm(rel))
        if angle > self.max_rot_step:
            rot = rotvec_to_mat(rel * (self.max_rot_step / angle)) @ prev_rot
            flags["step_limited"] = True
        self._safe_pos, self._safe_rot = pos, rot
        self._count()
        return pos.copy(), rot.copy()

    def _previous_safe(
        self, current_pos: np.ndarray, current_rot: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The last safe target; else the measured pose; else the workspace centre, identity."""
        if self._safe_pos is not None and self._safe_rot is not None:
            return self._safe_pos, self._safe_rot
        pos = np.array(current_pos, dtype=float).reshape(3)
        q = quat_from_mat_elements(*np.asarray(current_rot, dtype=float).ravel().tolist())
        if not (np.all(np.isfinite(pos)) and math.isfinite(q[0])):
            self.last_flags["nan"] = True
            return 0.5 * (self.workspace_low + self.workspace_high), np.eye(3)
        return pos, quat_to_mat(np.array(q))

    def _clamp(self, pos: np.ndarray) -> np.ndarray:
        clamped = np.clip(pos, self.workspace_low, self.workspace_high)
        if not np.array_equal(clamped, pos):
            self.last_flags["workspace_clamped"] = True
        return clamped

    # ---- torques (every control tick) ------------------------------------------------------
    def filter_torque(
        self,
        tau: np.ndarray,
        q: np.ndarray,
        dq: np.ndarray,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """Safe joint torques (n,) [Nm] for the commanded ``tau`` at state (q [rad], dq [rad/s]).

        Writes into ``out`` (or an internal buffer that the next call reuses) and returns it.
        """
        self._clear_flags()
        flags = self.last_flags
        out = self._out if out is None else out
        m = self._mask
        finite = True
        for a in (tau, q, dq):
            np.isfinite(a, out=m)
            finite = finite and bool(m.all())
        if not finite:
            flags["nan"] = True
            np.clip(dq, -self.dq_max, self.dq_max, out=out)  # finite, so the product is too
            np.multiply(out, -HOLD_DAMPING, out=out)
            np.nan_to_num(out, copy=False, nan=0.0)
        else:
            np.copyto(out, tau)
            self._limit_velocity(out, dq)
            self._limit_joints(out, q, dq)
        t, m = self._tmp, self._mask
        np.abs(out, out=t)
        np.greater(t, self.tau_max, out=m)
        if m.any():
            flags["torque_clipped"] = True
            np.minimum(out, self.tau_max, out=out)
            np.maximum(out, self._neg_tau_max, out=out)
        self._count()
        return out

    def _limit_velocity(self, out: np.ndarray, dq: np.ndarray) -> None:
        t, m = self._tmp, self._mask
        np.abs(dq, out=t)
        np.greater(t, self.dq_max, out=m)
        if not m.any():
            return
        self.last_flags["velocity_limit"] = True
        for i, v in enumerate(dq.tolist()):
            excess = abs(v) - self._dq_max_list[i]
            if excess > 0.0:  # never accelerate further; brake in proportion to the excess
                if v > 0.0:
                    out[i] = min(float(out[i]), 0.0) - VELOCITY_BRAKE * excess
                else:
                    out[i] = max(float(out[i]), 0.0) + VELOCITY_BRAKE * excess

    def _limit_joints(self, out: np.ndarray, q: np.ndarray, dq: np.ndarray) -> None:
        m = self._mask
        np.less(q, self._lo_zone_arr, out=m)
        low = bool(m.any())
        np.greater(q, self._hi_zone_arr, out=m)
        if not (low or m.any()):
            return
        self.last_flags["joint_limit"] = True
        dql = dq.tolist()
        for i, qi in enumerate(q.tolist()):
            lo, hi, v = self._lo_zone[i], self._hi_zone[i], dql[i]
            if qi < lo:  # nothing pushes toward q_min; spring back, brake motion toward it
                push = JOINT_LIMIT_STIFFNESS * (lo - qi) - JOINT_LIMIT_DAMPING * min(v, 0.0)
                out[i] = max(float(out[i]), 0.0) + push
            elif qi > hi:
                push = JOINT_LIMIT_STIFFNESS * (qi - hi) + JOINT_LIMIT_DAMPING * max(v, 0.0)
                out[i] = min(float(out[i]), 0.0) - push

    # ---- bookkeeping -----------------------------------------------------------------------
    def _clear_flags(self) -> None:
        for k in FLAGS:
            self.last_flags[k] = False

    def _count(self) -> None:
        for k, v in self.last_flags.items():
            if v:
                self.counts[k] += 1

    def reset_counts(self) -> None:
        """Zero the cumulative ``counts``."""
        for k in FLAGS:
            self.counts[k] = 0
