"""Joint-space impedance control: a spring-damper per joint toward a target posture.

    tau = K (q_d - q) - D dq + coriolis + gravity,   D = 2 * damping_ratio * sqrt(K)

The error ``q_d - q`` is clipped per joint to ``±error_clip`` (spring torque <= K_i * clip_i),
the target and the stiffness are low-pass filtered toward their commands each tick, and the
torque goes through :class:`controllers.torque_output.TorqueOutput` (NaN hold, ±tau_max,
rate limit), exactly as in :mod:`controllers.impedance`.
"""

from __future__ import annotations

import math

import numpy as np

from controllers import panda
from controllers.arm_state import ArmState
from controllers.impedance import DT, FILTER_ALPHA, as_vector, filter_settle_ticks
from controllers.torque_output import TorqueOutput

# franka_ros joint impedance example gains [Nm/rad]
JOINT_STIFFNESS = (600.0, 600.0, 600.0, 600.0, 250.0, 150.0, 50.0)
JOINT_STIFFNESS_MIN = (0.0,) * 7
JOINT_STIFFNESS_MAX = (1500.0, 1500.0, 1500.0, 1500.0, 500.0, 300.0, 100.0)
JOINT_ERROR_CLIP = 0.1  # [rad] per joint
DAMPING_RATIO = 1.0


class JointImpedance:
    """Joint impedance controller, one ``compute`` per control tick.

    Args:
        stiffness: (n,) K [Nm/rad]; clipped into the bounds.
        damping_ratio: D = 2 * damping_ratio * sqrt(K) [Nm s/rad].
        error_clip: (n,) or scalar bound of ``q_d - q`` [rad].
        tau_max: (n,) torque limits [Nm]; default ``panda.TAU_MAX``.
        dtau_max: torque rate limit [Nm/s].
        dt: control period [s].
        filter_alpha: per-tick low-pass gain in (0, 1] for target and stiffness; 1 disables.
        stiffness_bounds: (min (n,), max (n,)) [Nm/rad] for variable impedance.
        num_joints: n.
    """

    needs_mass = False

    def __init__(
        self,
        stiffness: np.ndarray | None = None,
        damping_ratio: float = DAMPING_RATIO,
        error_clip: np.ndarray | float = JOINT_ERROR_CLIP,
        tau_max: np.ndarray | None = None,
        dtau_max: float = panda.DTAU_MAX,
        dt: float = DT,
        filter_alpha: float = FILTER_ALPHA,
        stiffness_bounds: tuple[np.ndarray, np.ndarray] | None = None,
        num_joints: int = panda.NUM_JOINTS,
    ) -> None:
        n = num_joints
        self.num_joints = n
        bounds = stiffness_bounds or (JOINT_STIFFNESS_MIN, JOINT_STIFFNESS_MAX)
        lo, hi = (as_vector(b, n, "stiffness_bounds") for b in bounds)
        if not np.all((lo >= 0) & (lo <= hi)):
            raise ValueError(f"stiffness_bounds need 0 <= min <= max, got {lo}, {hi}")
        if not (0.0 < filter_alpha <= 1.0) or damping_ratio < 0:
            raise ValueError(
                f"need 0 < filter_alpha <= 1 and damping_ratio >= 0, got {filter_alpha}, "
                f"{damping_ratio}"
            )
        self._k_min, self._k_max = lo, hi
        self.damping_ratio = float(damping_ratio)
        self.filter_alpha = float(filter_alpha)
        self._settle_n = filter_settle_ticks(self.filter_alpha)
        self._clip = as_vector(error_clip, n, "error_clip")
        if not np.all(self._clip > 0):
            raise ValueError(f"error_clip must be positive, got {self._clip}")
        self._neg_clip = -self._clip
        self.output = TorqueOutput(
            as_vector(panda.TAU_MAX if tau_max is None else tau_max, n, "tau_max"), dtau_max, dt
        )
        k = JOINT_STIFFNESS if stiffness is None else stiffness
        self._k_cmd = np.clip(as_vector(k, n, "stiffness"), lo, hi)
        self._k = self._k_cmd.copy()
        self._d = np.zeros(n)
        self._update_damping()
        self._q_cmd = np.zeros(n)
        self._q = np.zeros(n)
        self._settle = 0
        self._err = np.zeros(n)
        self._tmp = np.zeros(n)
        self._tau = np.zeros(n)
        self.rejected_targets = 0

    @property
    def target(self) -> np.ndarray:
        """(n,) filtered target joint positions [rad] (a copy)."""
        return self._q.copy()

    @property
    def stiffness(self) -> np.ndarray:
        """(n,) filtered stiffness in use [Nm/rad] (a copy)."""
        return self._k.copy()

    def reset(self, state: ArmState, tau: np.ndarray | None = None) -> None:
        """Hold the current posture (target := state.q, filters settled); ``tau`` (n,) [Nm]
        is the torque now applied (rate-limit start), zero by default."""
        if not np.all(np.isfinite(state.q)):
            raise ValueError("cannot reset to a non-finite joint position")
        np.copyto(self._q_cmd, state.q)
        np.copyto(self._q, state.q)
        np.copyto(self._k, self._k_cmd)
        self._update_damping()
        self._settle = 0
        self.output.reset(tau)

    def set_target(self, q: np.ndarray) -> bool:
        """Command joint positions (n,) [rad]; non-finite input is ignored (returns False)."""
        q = np.asarray(q, dtype=float)
        if q.shape != (self.num_joints,):
            raise ValueError(f"q must have shape ({self.num_joints},), got {q.shape}")
        if not math.isfinite(float(q.dot(q))):
            self.rejected_targets += 1
            return False
        np.copyto(self._q_cmd, q)
        self._settle = self._settle_n
        return True

    def set_stiffness(self, k: np.ndarray) -> np.ndarray:
        """Command stiffness (n,) [Nm/rad]; returns the value applied after clipping into the
        bounds. Non-finite entries keep their previous command."""
        k = np.asarray(k, dtype=float)
        if k.shape != (self.num_joints,):
            raise ValueError(f"stiffness must have shape ({self.num_joints},), got {k.shape}")
        ok = np.isfinite(k)
        self._k_cmd[ok] = np.clip(k[ok], self._k_min[ok], self._k_max[ok])
        self._settle = self._settle_n
        return self._k_cmd.copy()

    def compute(self, state: ArmState) -> np.ndarray:
        """Joint torques (n,) [Nm] for this tick; returns an internal buffer (copy to keep)."""
        if self._settle:
            self._filter_step()
        e, tau = self._err, self._tau
        np.subtract(self._q, state.q, out=e)
        np.minimum(e, self._clip, out=e)
        np.maximum(e, self._neg_clip, out=e)
        np.multiply(self._k, e, out=tau)
        np.multiply(self._d, state.dq, out=self._tmp)
        np.subtract(tau, self._tmp, out=tau)
        np.add(tau, state.coriolis, out=tau)
        np.add(tau, state.gravity, out=tau)
        return self.output.apply(tau, state.dq)

    def _filter_step(self) -> None:
        self._settle -= 1
        if self._settle == 0:
            np.copyto(self._q, self._q_cmd)
            np.copyto(self._k, self._k_cmd)
        else:
            a, t = self.filter_alpha, self._tmp
            for cmd, val in ((self._q_cmd, self._q), (self._k_cmd, self._k)):
                np.subtract(cmd, val, out=t)
                np.multiply(t, a, out=t)
                np.add(val, t, out=val)
        self._update_damping()

    def _update_damping(self) -> None:
        np.sqrt(self._k, out=self._d)
        np.multiply(self._d, 2.0 * self.damping_ratio, out=self._d)
