"""Operational-space control: Cartesian impedance weighted by the TCP's apparent inertia.

    F   = Lambda (-K e - D xdot),            Lambda = (J M^-1 J^T + lambda I)^-1
    tau = J^T F + (I - J^T Jbar^T) t0 + coriolis + gravity,   Jbar = M^-1 J^T Lambda

with t0 = k_ns (q_ns - q) - d_ns dq the posture torque, projected into the dynamically
consistent nullspace. Because F is scaled by Lambda, K is a stiffness per unit apparent mass
[1/s^2] and ``D = 2 * damping_ratio * sqrt(K)`` [1/s] is truly critical for every axis (up to
model error and Coriolis). The error is clipped as in :mod:`controllers.impedance`, which bounds
the commanded acceleration by K_i * clip_i; the force bound is then Lambda-dependent. Everything
else (filters, variable stiffness, NaN hold, torque and rate limits) is shared with
:class:`controllers.impedance.CartesianImpedance`.
"""

from __future__ import annotations

import numpy as np

from controllers.arm_state import ArmState
from controllers.impedance import CartesianImpedance
from controllers.linalg import solve_into

OSC_TRANSLATIONAL_STIFFNESS = 200.0  # [1/s^2]: natural frequency ~14 rad/s
OSC_ROTATIONAL_STIFFNESS = 200.0  # [1/s^2]
OSC_STIFFNESS_MIN = (25.0,) * 6  # [1/s^2]
OSC_STIFFNESS_MAX = (1000.0,) * 6
INERTIA_DAMPING = (
    1e-3  # lambda added to J M^-1 J^T [1/kg, 1/(kg m^2)]: caps Lambda near singularities
)


class OperationalSpace(CartesianImpedance):
    """Inertia-weighted Cartesian impedance; reads ``state.mass`` (``needs_mass = True``).

    Takes the arguments of :class:`~controllers.impedance.CartesianImpedance` with stiffness
    in [1/s^2] (defaults above), plus ``inertia_damping``.
    """

    needs_mass = True

    def __init__(
        self, *args: object, inertia_damping: float = INERTIA_DAMPING, **kwargs: object
    ) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        if not inertia_damping > 0:
            raise ValueError(f"inertia_damping must be > 0, got {inertia_damping}")
        n = self.num_joints
        self._minv_jt = np.zeros((n, 6))  # M^-1 J^T
        self._lam_reg = float(inertia_damping) * np.eye(6)
        self._lam_f = np.zeros(6)

    def _default_stiffness(self) -> np.ndarray:
        return np.array((OSC_TRANSLATIONAL_STIFFNESS,) * 3 + (OSC_ROTATIONAL_STIFFNESS,) * 3)

    def _default_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array(OSC_STIFFNESS_MIN), np.array(OSC_STIFFNESS_MAX)

    def _task_and_nullspace(self, state: ArmState) -> None:
        """self._tau := -J^T Lambda f + (I - J^T Jbar^T) t0, with f = K e + D xdot."""
        jac = state.jac
        x = self._minv_jt
        solve_into(state.mass, jac.T, x)  # M^-1 J^T
        a = self._a66
        np.matmul(jac, x, out=a)  # Lambda^-1
        np.add(a, self._lam_reg, out=a)
        solve_into(a, self._f, self._lam_f)  # Lambda f
        np.matmul(self._lam_f, jac, out=self._task)  # J^T Lambda f
        t0 = self._posture_torque(state)
        np.matmul(t0, x, out=self._y6)  # J M^-1 t0
        solve_into(a, self._y6, self._z6)  # Jbar^T t0
        np.matmul(self._z6, jac, out=self._t1)
        np.subtract(t0, self._t1, out=t0)
        np.subtract(t0, self._task, out=self._tau)
