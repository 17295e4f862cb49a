"""Reads the simulated arm's state out of MjData for the numpy controllers (the sim's sensor
driver: on hardware the same :class:`~controllers.arm_state.ArmState` is filled from ROS 2)."""

from __future__ import annotations

import mujoco
import numpy as np

from controllers import panda
from controllers.arm_state import ArmState


class MjArmReader:
    """Fills an :class:`~controllers.arm_state.ArmState` from MjData for the numpy controllers.

    Coriolis is ``qfrc_bias - qfrc_gravcomp`` (gravity is compensated by ``gravcomp``), so
    ``state.gravity`` stays zero; ``mass`` is filled only when ``with_mass``. Positions and
    velocities must be current (after ``mj_step1`` or ``mj_forward``).
    """

    def __init__(self, model: mujoco.MjModel, with_mass: bool = False) -> None:
        self.model = model
        self.with_mass = with_mass
        self._tcp = model.site("tcp").id
        joints = [model.joint(f"joint{i + 1}").id for i in range(panda.NUM_JOINTS)]
        self._qadr = model.jnt_qposadr[joints].copy()
        self._vadr = model.jnt_dofadr[joints].copy()
        self._jacp = np.zeros((3, model.nv))
        self._jacr = np.zeros((3, model.nv))
        self._mass = np.zeros((model.nv, model.nv))
        self._mass_idx = np.ix_(self._vadr, self._vadr)

    def read(self, data: mujoco.MjData, state: ArmState) -> ArmState:
        """Fill ``state`` in place from ``data`` and return it."""
        v = self._vadr
        state.q[:] = data.qpos[self._qadr]
        state.dq[:] = data.qvel[v]
        state.ee_pos[:] = data.site_xpos[self._tcp]
        state.ee_rot.flat[:] = data.site_xmat[self._tcp]
        mujoco.mj_jacSite(self.model, data, self._jacp, self._jacr, self._tcp)
        state.jac[:3] = self._jacp[:, v]
        state.jac[3:] = self._jacr[:, v]
        np.subtract(data.qfrc_bias[v], data.qfrc_gravcomp[v], out=state.coriolis)
        if self.with_mass:
            mujoco.mj_fullM(self.model, data, self._mass)
            state.mass[:] = self._mass[self._mass_idx]
        return state
