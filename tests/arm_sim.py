"""Test helper (not a test module): the MJCF Panda driven tick by tick by a numpy controller,
and a wall to push against. Imported by the controller tests."""

import mujoco
import numpy as np

from controllers import panda
from controllers.arm_state import ArmState
from sim.arm import scene_xml
from sim.arm_reader import MjArmReader

DT = 0.002
WALL_TOP = 0.47  # [m] top face of a block 1.7 cm below the TCP at Q_HOME
WALL = (
    f'<geom name="wall" type="box" pos="0.307 0 {WALL_TOP - 0.05}" size="0.08 0.12 0.05" '
    'class="object"/>'
)


class ArmSim:
    """The MJCF Panda at Q_HOME driven by a numpy controller, one control tick per physics step.

    mj_step1 / ctrl / mj_step2, so the controller sees the state the step integrates from.
    """

    def __init__(self, controller, objects: str = "", q0: np.ndarray = panda.Q_HOME) -> None:
        self.model = mujoco.MjModel.from_xml_string(scene_xml(objects))
        self.data = mujoco.MjData(self.model)
        self.data.qpos[:7] = q0
        mujoco.mj_forward(self.model, self.data)
        self.reader = MjArmReader(self.model, with_mass=controller.needs_mass)
        self.state = ArmState()
        self.ctl = controller
        mujoco.mj_step1(self.model, self.data)
        self.reader.read(self.data, self.state)
        controller.reset(self.state)
        self.tcp = self.model.site("tcp").id

    def run(self, ticks: int, on_tick=None) -> np.ndarray:
        """(ticks, 3) TCP positions after each tick."""
        m, d, out = self.model, self.data, np.zeros((ticks, 3))
        for k in range(ticks):
            self.reader.read(d, self.state)
            d.ctrl[:7] = self.ctl.compute(self.state)
            mujoco.mj_step2(m, d)
            mujoco.mj_step1(m, d)
            out[k] = d.site_xpos[self.tcp]
            if on_tick is not None:
                on_tick(k)
        return out


def wall_force(model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
    """(3,) total contact force the wall exerts on the arm [N], world frame."""
    wall, f, total = model.geom("wall").id, np.zeros(6), np.zeros(3)
    for i in range(data.ncon):
        c = data.contact[i]
        if wall in (c.geom1, c.geom2):
            mujoco.mj_contactForce(model, data, i, f)
            fw = c.frame.reshape(3, 3).T @ f[:3]  # force on geom2 by geom1, world frame
            total += fw if c.geom1 == wall else -fw
    return total
