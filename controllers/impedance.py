"""Cartesian impedance control of the TCP with a posture task in the nullspace.

    tau = J^T (-K e - D J dq) + (I - J^T J^{T+}) (k_ns (q_ns - q) - d_ns dq) + coriolis + gravity

e (6,) is the TCP pose error in the base frame: position ``ee_pos - target_pos`` [m] and the
rotation vector of ``ee_rot @ target_rot.T`` [rad]. Each component is clipped to ``±error_clip``
before the spring acts, so the spring force on axis i never exceeds ``K_i * clip_i`` whatever
target the policy sends (the damping force comes on top and vanishes at rest). ``J^{T+}`` is
the damped pseudo-inverse ``(J J^T + lambda^2 I)^{-1} J``.

The commanded target pose and stiffness are approached by a first-order low-pass filter each
tick; damping follows the filtered stiffness, ``D = 2 * damping_ratio * sqrt(K)`` (critical for a
unit effective mass: the Panda's TCP is heavier, so the arm is somewhat underdamped). The torque
then goes through :class:`controllers.torque_output.TorqueOutput` (NaN hold, ±tau_max, rate limit).
"""

from __future__ import annotations

import math

import numpy as np

from controllers import panda
from controllers.arm_state import ArmState
from controllers.linalg import solve_into
from controllers.rotations import orientation_error, quat_from_mat_elements
from controllers.torque_output import TorqueOutput

TRANSLATIONAL_STIFFNESS = 600.0  # [N/m]
ROTATIONAL_STIFFNESS = 40.0  # [Nm/rad]
DAMPING_RATIO = 1.0  # D = 2 * ratio * sqrt(K * effective_mass)
# Apparent TCP mass of our Panda near Q_HOME, diag of (J M^-1 J^T)^-1 rounded (x, y, z [kg],
# then rotations [kg m^2]); pass as effective_mass for a truly critically damped TCP.
EFFECTIVE_MASS_PANDA = (10.0, 10.0, 10.0, 0.3, 0.3, 0.3)
NULLSPACE_STIFFNESS = 10.0  # [Nm/rad]
ERROR_CLIP_TRANSLATION = 0.01  # [m] per base-frame axis
ERROR_CLIP_ROTATION = 0.05  # [rad] per base-frame axis
STIFFNESS_MIN = (150.0, 150.0, 150.0, 10.0, 10.0, 10.0)  # [N/m]x3, [Nm/rad]x3
STIFFNESS_MAX = (2000.0, 2000.0, 2000.0, 150.0, 150.0, 150.0)
FILTER_ALPHA = 0.2  # per-tick low-pass gain; at 500 Hz within 1 % of a step after ~0.04 s
PINV_DAMPING = 1e-2  # lambda of the damped pseudo-inverse [m]
DT = 0.002  # control period [s]
_SETTLED = 1e-6  # residual fraction of a filtered step at which we snap to the command


def filter_settle_ticks(alpha: float) -> int:
    """Ticks until a first-order filter with gain ``alpha`` has less than _SETTLED left."""
    if alpha >= 1.0:
        return 1
    return math.ceil(math.log(_SETTLED) / math.log1p(-alpha))


def as_vector(x: object, n: int, name: str) -> np.ndarray:
    """(n,) float copy of a scalar or (n,) array; raises on another shape or non-finite values."""
    a = np.array(x, dtype=float)
    if a.ndim == 0:
        a = np.full(n, float(a))
    if a.shape != (n,) or not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be a finite scalar or shape ({n},), got {x!r}")
    return a


class CartesianImpedance:
    """Cartesian impedance controller (see module docstring), one ``compute`` per control tick.

    Args:
        stiffness: (6,) K [N/m]x3 then [Nm/rad]x3, base-frame axes; clipped into the bounds.
        damping_ratio: D = 2 * damping_ratio * sqrt(K * effective_mass).
        effective_mass: (6,) apparent TCP mass [kg]x3 and inertia [kg m^2]x3 that makes
            ``damping_ratio`` the true damping ratio; default ones, i.e. the usual (franka_ros)
            ``D = 2 sqrt(K)``, which is critical only for a 1 kg TCP (see EFFECTIVE_MASS_PANDA).
        nullspace_stiffness: k_ns [Nm/rad] of the posture spring toward ``q_nullspace``.
        nullspace_damping: d_ns [Nm s/rad]; default 2 * sqrt(k_ns).
        q_nullspace: (n,) posture [rad]; default ``panda.Q_HOME``.
        error_clip: (6,) per-axis bound of e [m]x3, [rad]x3.
        tau_max: (n,) torque limits [Nm]; default ``panda.TAU_MAX``.
        dtau_max: torque rate limit [Nm/s].
        dt: control period [s].
        filter_alpha: per-tick low-pass gain in (0, 1] for target pose and stiffness; 1 disables.
        stiffness_bounds: (min (6,), max (6,)) for variable impedance.
        pinv_damping: lambda [m] of the damped pseudo-inverse in the nullspace projector.
        num_joints: n.
    """

    needs_mass = False

    def __init__(
        self,
        stiffness: np.ndarray | None = None,
        damping_ratio: float = DAMPING_RATIO,
        effective_mass: np.ndarray | None = None,
        nullspace_stiffness: float = NULLSPACE_STIFFNESS,
        nullspace_damping: float | None = None,
        q_nullspace: np.ndarray | None = None,
        error_clip: np.ndarray | None = None,
        tau_max: np.ndarray | None = None,
        dtau_max: float = panda.DTAU_MAX,
        dt: float = DT,
        filter_alpha: float = FILTER_ALPHA,
        stiffness_bounds: tuple[np.ndarray, np.ndarray] | None = None,
        pinv_damping: float = PINV_DAMPING,
        num_joints: int = panda.NUM_JOINTS,
    ) -> None:
        n = num_joints
        self.num_joints = n
        if stiffness is None:
            stiffness = self._default_stiffness()
        if stiffness_bounds is None:
            stiffness_bounds = self._default_bounds()
        lo, hi = (as_vector(b, 6, "stiffness_bounds") for b in stiffness_bounds)
        if not np.all((lo >= 0) & (lo <= hi)):
            raise ValueError(f"stiffness_bounds need 0 <= min <= max, got {lo}, {hi}")
        self._k_min, self._k_max = lo, hi
        if not (0.0 < filter_alpha <= 1.0):
            raise ValueError(f"filter_alpha must be in (0, 1], got {filter_alpha}")
        if damping_ratio < 0 or nullspace_stiffness < 0 or pinv_damping <= 0:
            raise ValueError(
                "damping_ratio, nullspace_stiffness must be >= 0 and pinv_damping > 0, got "
                f"{damping_ratio}, {nullspace_stiffness}, {pinv_damping}"
            )
        self.damping_ratio = float(damping_ratio)
        self.effective_mass = as_vector(
            1.0 if effective_mass is None else effective_mass, 6, "effective_mass"
        )
        if not np.all(self.effective_mass > 0):
            raise ValueError(f"effective_mass must be positive, got {self.effective_mass}")
        self.filter_alpha = float(filter_alpha)
        self._settle_n = filter_settle_ticks(self.filter_alpha)
        self.k_ns = float(nullspace_stiffness)
        self.d_ns = (
            2.0 * math.sqrt(self.k_ns) if nullspace_damping is None else float(nullspace_damping)
        )
        self.q_ns = as_vector(
            panda.Q_HOME if q_nullspace is None else q_nullspace, n, "q_nullspace"
        )
        clip = (ERROR_CLIP_TRANSLATION,) * 3 + (ERROR_CLIP_ROTATION,) * 3
        self._clip = as_vector(clip if error_clip is None else error_clip, 6, "error_clip")
        if not np.all(self._clip > 0):
            raise ValueError(f"error_clip must be positive, got {self._clip}")
        self._neg_clip = -self._clip
        self.output = TorqueOutput(
            as_vector(panda.TAU_MAX if tau_max is None else tau_max, n, "tau_max"), dtau_max, dt
        )

        # Commanded values and their filtered versions (what the law uses).
        self._k_cmd = np.clip(as_vector(stiffness, 6, "stiffness"), lo, hi)
        self._k = self._k_cmd.copy()
        self._d = 2.0 * self.damping_ratio * np.sqrt(self._k * self.effective_mass)
        self._pos_cmd = np.zeros(3)
        self._pos = np.zeros(3)
        self._quat_cmd = [1.0, 0.0, 0.0, 0.0]  # Python floats: 4-element maths is cheaper so
        self._quat = [1.0, 0.0, 0.0, 0.0]
        self._rot = np.eye(3)
        self._settle = 0  # filter ticks left; 0 = filtered values equal the command

        # Work arrays (allocated once).
        self._err = np.zeros(6)
        self._err_pos, self._err_rot = self._err[:3], self._err[3:]
        self._xdot = np.zeros(6)
        self._f = np.zeros(6)
        self._tmp6 = np.zeros(6)
        self._tmp3 = np.zeros(3)
        self._a66 = np.zeros((6, 6))
        self._damp66 = (float(pinv_damping) ** 2) * np.eye(6)
        self._y6 = np.zeros(6)
        self._z6 = np.zeros(6)
        self._tau = np.zeros(n)
        self._task = np.zeros(n)
        self._t0 = np.zeros(n)
        self._t1 = np.zeros(n)
        self.rejected_targets = 0  # set_target calls ignored for non-finite input

    # ---- defaults that subclasses change -------------------------------------------------
    def _default_stiffness(self) -> np.ndarray:
        return np.array((TRANSLATIONAL_STIFFNESS,) * 3 + (ROTATIONAL_STIFFNESS,) * 3)

    def _default_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array(STIFFNESS_MIN), np.array(STIFFNESS_MAX)

    # ---- commands -------------------------------------------------------------------------
    @property
    def target_pos(self) -> np.ndarray:
        """(3,) filtered target TCP position [m], base frame (a read-only copy)."""
        return self._pos.copy()

    @property
    def target_rot(self) -> np.ndarray:
        """(3, 3) filtered target TCP orientation, base frame (a copy)."""
        return self._rot.copy()

    @property
    def stiffness(self) -> np.ndarray:
        """(6,) filtered stiffness in use [N/m]x3, [Nm/rad]x3 (a copy)."""
        return self._k.copy()

    @property
    def damping(self) -> np.ndarray:
        """(6,) damping in use [Ns/m]x3, [Nms/rad]x3 (a copy)."""
        return self._d.copy()

    def reset(self, state: ArmState, tau: np.ndarray | None = None) -> None:
        """Hold the current pose: target := TCP pose of ``state``, filters settled.

        ``tau`` (n,) [Nm] is the torque currently applied (the rate limit starts from it);
        zero by default. Raises ValueError if the state's pose is not finite.
        """
        q = quat_from_mat_elements(*state.ee_rot.ravel().tolist())
        if not (np.all(np.isfinite(state.ee_pos)) and math.isfinite(q[0])):
            raise ValueError("cannot reset to a non-finite TCP pose")
        np.copyto(self._pos_cmd, state.ee_pos)
        np.copyto(self._pos, state.ee_pos)
        self._quat_cmd = list(q)
        self._quat = list(q)
        self._write_rot()
        np.copyto(self._k, self._k_cmd)
        self._update_damping()
        self._settle = 0
        self.output.reset(tau)

    def set_target(self, pos: np.ndarray, rot: np.ndarray) -> bool:
        """Command a TCP pose: position (3,) [m] and rotation (3, 3), base frame.

        Non-finite input is ignored (the previous target is held) and counted in
        ``rejected_targets``; returns whether the target was accepted. The rotation is
        re-orthonormalised (through its quaternion).
        """
        pos = np.asarray(pos, dtype=float)
        rot = np.asarray(rot, dtype=float)
        if pos.shape != (3,) or rot.shape != (3, 3):
            raise ValueError(f"expected pos (3,) and rot (3, 3), got {pos.shape}, {rot.shape}")
        q = quat_from_mat_elements(*rot.ravel().tolist())
        if not (math.isfinite(float(pos.dot(pos))) and math.isfinite(q[0])):
            self.rejected_targets += 1
            return False
        np.copyto(self._pos_cmd, pos)
        # q and -q are the same rotation: take the one nearer the filtered quaternion
        if sum(a * b for a, b in zip(q, self._quat, strict=True)) < 0.0:
            q = (-q[0], -q[1], -q[2], -q[3])
        self._quat_cmd = list(q)
        self._settle = self._settle_n
        return True

    def set_stiffness(self, k: np.ndarray) -> np.ndarray:
        """Command stiffness (6,) [N/m]x3, [Nm/rad]x3; returns the value applied after clipping
        into ``stiffness_bounds``. Non-finite entries keep their previous command."""
        k = np.asarray(k, dtype=float)
        if k.shape != (6,):
            raise ValueError(f"stiffness must have shape (6,), got {k.shape}")
        ok = np.isfinite(k)
        self._k_cmd[ok] = np.clip(k[ok], self._k_min[ok], self._k_max[ok])
        self._settle = self._settle_n
        return self._k_cmd.copy()

    # ---- the control law ------------------------------------------------------------------
    def compute(self, state: ArmState) -> np.ndarray:
        """Joint torques (n,) [Nm] for this tick; returns an internal buffer (copy to keep)."""
        if self._settle:
            self._filter_step()
        e = self._err
        np.subtract(state.ee_pos, self._pos, out=self._err_pos)
        orientation_error(state.ee_rot, self._rot, out=self._err_rot)
        np.minimum(e, self._clip, out=e)
        np.maximum(e, self._neg_clip, out=e)
        np.matmul(state.jac, state.dq, out=self._xdot)
        # f = K e + D xdot: the task force is -f
        np.multiply(self._k, e, out=self._f)
        np.multiply(self._d, self._xdot, out=self._tmp6)
        np.add(self._f, self._tmp6, out=self._f)
        self._task_and_nullspace(state)
        tau = self._tau
        np.add(tau, state.coriolis, out=tau)
        np.add(tau, state.gravity, out=tau)
        return self.output.apply(tau, state.dq)

    def _posture_torque(self, state: ArmState) -> np.ndarray:
        """t0 = k_ns (q_ns - q) - d_ns dq, (n,) [Nm], in self._t0."""
        t0 = self._t0
        np.subtract(self.q_ns, state.q, out=t0)
        np.multiply(t0, self.k_ns, out=t0)
        np.multiply(state.dq, self.d_ns, out=self._t1)
        np.subtract(t0, self._t1, out=t0)
        return t0

    def _task_and_nullspace(self, state: ArmState) -> None:
        """self._tau := -J^T f + (I - J^T J^{T+}) t0."""
        jac = state.jac
        t0 = self._posture_torque(state)
        a = self._a66
        np.matmul(jac, jac.T, out=a)
        np.add(a, self._damp66, out=a)
        np.matmul(jac, t0, out=self._y6)
        solve_into(a, self._y6, self._z6)  # J^{T+} t0
        np.matmul(self._z6, jac, out=self._t1)  # J^T J^{T+} t0
        np.subtract(t0, self._t1, out=t0)
        np.matmul(self._f, jac, out=self._task)  # J^T f
        np.subtract(t0, self._task, out=self._tau)

    # ---- filters --------------------------------------------------------------------------
    def _filter_step(self) -> None:
        self._settle -= 1
        if self._settle == 0:  # close enough: snap, and stop filtering until the next command
            np.copyto(self._pos, self._pos_cmd)
            self._quat = list(self._quat_cmd)
            np.copyto(self._k, self._k_cmd)
        else:
            a = self.filter_alpha
            np.subtract(self._pos_cmd, self._pos, out=self._tmp3)
            np.multiply(self._tmp3, a, out=self._tmp3)
            np.add(self._pos, self._tmp3, out=self._pos)
            w, x, y, z = (c + a * (d - c) for c, d in zip(self._quat, self._quat_cmd, strict=True))
            n = math.sqrt(w * w + x * x + y * y + z * z)  # nlerp: never 0, signs are aligned
            self._quat = [w / n, x / n, y / n, z / n]
            np.subtract(self._k_cmd, self._k, out=self._tmp6)
            np.multiply(self._tmp6, a, out=self._tmp6)
            np.add(self._k, self._tmp6, out=self._k)
        self._write_rot()
        self._update_damping()

    def _update_damping(self) -> None:
        np.multiply(self._k, self.effective_mass, out=self._d)
        np.sqrt(self._d, out=self._d)
        np.multiply(self._d, 2.0 * self.damping_ratio, out=self._d)

    def _write_rot(self) -> None:
        w, x, y, z = self._quat
        self._rot[...] = (
            (1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)),
            (2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)),
            (2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)),
        )
