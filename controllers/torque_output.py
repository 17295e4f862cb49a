"""The last stage of every controller: fail-closed torque saturation and rate limiting.

Each tick the raw control law's torque goes through, in order:
1. a finiteness check: a NaN/inf torque (from a NaN state) becomes a pure damping "hold"
   torque ``-hold_damping * dq`` (zero where dq itself is not finite);
2. saturation to ``±tau_max``;
3. a rate limit: ``|tau_t - tau_{t-1}| <= dtau_max * dt`` per joint.
The previous torque is always finite and within limits, so the output is too.
"""

from __future__ import annotations

import numpy as np

HOLD_DAMPING = 5.0  # [Nm s/rad]: joint damping applied when the law's output is not finite
_HOLD_DQ = 10.0  # [rad/s]: velocities beyond this are treated as this in the hold torque


class TorqueOutput:
    """Saturation, rate limit and NaN hold for an (n,) joint torque command [Nm].

    Args:
        tau_max: (n,) torque limits [Nm], > 0.
        dtau_max: torque rate limit [Nm/s], > 0 (scalar or (n,)).
        dt: control period [s], > 0.
        hold_damping: joint damping of the hold torque [Nm s/rad].
    """

    def __init__(
        self,
        tau_max: np.ndarray,
        dtau_max: float | np.ndarray,
        dt: float,
        hold_damping: float = HOLD_DAMPING,
    ) -> None:
        tau_max = np.array(tau_max, dtype=float)
        if tau_max.ndim != 1 or not np.all(tau_max > 0) or not np.all(np.isfinite(tau_max)):
            raise ValueError(f"tau_max must be a 1-D array of positive limits, got {tau_max}")
        n = tau_max.shape[0]
        step = np.broadcast_to(np.asarray(dtau_max, dtype=float) * float(dt), (n,)).copy()
        if not (dt > 0 and np.all(step > 0) and np.all(np.isfinite(step))):
            raise ValueError(f"dtau_max and dt must be positive, got {dtau_max}, {dt}")
        self.num_joints = n
        self.tau_max = tau_max
        self._neg_tau_max = -tau_max
        self._step = step  # max change per tick [Nm]
        self._neg_step = -step
        self.hold_damping = float(hold_damping)
        self.previous = np.zeros(n)  # last torque sent [Nm]
        self._delta = np.zeros(n)
        self._finite = np.zeros(n, dtype=bool)
        self.held = False  # True when the last call replaced a non-finite torque

    def reset(self, tau: np.ndarray | None = None) -> None:
        """Set the previous torque [Nm] (the rate limit starts from it); zeros by default."""
        if tau is None:
            self.previous.fill(0.0)
            return
        tau = np.asarray(tau, dtype=float)
        if tau.shape != (self.num_joints,) or not np.all(np.isfinite(tau)):
            raise ValueError(f"tau must be finite with shape ({self.num_joints},), got {tau}")
        np.clip(tau, self._neg_tau_max, self.tau_max, out=self.previous)

    def apply(self, tau: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """Make ``tau`` (n,) [Nm] safe in place (see module docstring) and return it."""
        np.isfinite(tau, out=self._finite)
        self.held = not self._finite.all()
        if self.held:
            np.clip(dq, -_HOLD_DQ, _HOLD_DQ, out=tau)  # bounded, so the product stays finite
            np.multiply(tau, -self.hold_damping, out=tau)
            np.nan_to_num(tau, copy=False, nan=0.0)
        np.minimum(tau, self.tau_max, out=tau)
        np.maximum(tau, self._neg_tau_max, out=tau)
        d = self._delta
        np.subtract(tau, self.previous, out=d)
        np.minimum(d, self._step, out=d)
        np.maximum(d, self._neg_step, out=d)
        np.add(self.previous, d, out=tau)
        np.copyto(self.previous, tau)
        return tau
