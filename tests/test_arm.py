import mujoco
import numpy as np
import pytest

from controllers import panda
from sim.arm import PHYSICS_DT, scene_xml


@pytest.fixture(scope="module")
def model():
    return mujoco.MjModel.from_xml_string(scene_xml())


def test_physics_rate_and_structure(model):
    assert model.opt.timestep == PHYSICS_DT == 0.002
    for i in range(7):
        j = model.joint(f"joint{i + 1}")
        np.testing.assert_allclose(j.range, [panda.Q_MIN[i], panda.Q_MAX[i]])
        a = model.actuator(f"torque{i + 1}")
        np.testing.assert_allclose(a.ctrlrange, [-panda.TAU_MAX[i], panda.TAU_MAX[i]])
    for name in ("ft_force", "ft_torque"):
        assert model.sensor(name).dim[0] == 3
    for cam in ("front", "wrist"):
        assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, cam) >= 0


def test_link_masses_are_the_identified_values(model):
    for i in range(7):
        assert model.body(f"link{i + 1}").mass[0] == pytest.approx(panda.LINK_MASS[i])
    assert model.body("hand").mass[0] == pytest.approx(panda.HAND_MASS)
    assert np.all(model.body_inertia[1:] > 0)


def test_gravity_compensated_arm_holds_still_without_torque(model):
    """The sim compensates arm gravity like the real robot: zero torque, no sagging."""
    data = mujoco.MjData(model)
    data.qpos[:7] = panda.Q_HOME
    mujoco.mj_forward(model, data)
    for _ in range(250):  # 0.5 s
        mujoco.mj_step(model, data)
    assert np.abs(data.qpos[:7] - panda.Q_HOME).max() < 1e-6


def test_gripper_closes_and_opens(model):
    data = mujoco.MjData(model)
    data.qpos[:7] = panda.Q_HOME
    grip = model.actuator("gripper").id
    data.ctrl[grip] = panda.FINGER_TRAVEL
    for _ in range(300):
        mujoco.mj_step(model, data)
    left, right = data.joint("finger_left").qpos[0], data.joint("finger_right").qpos[0]
    assert left == pytest.approx(panda.FINGER_TRAVEL, abs=2e-3)
    assert right == pytest.approx(left, abs=1e-3)  # coupled
    data.ctrl[grip] = 0.0
    for _ in range(300):
        mujoco.mj_step(model, data)
    assert data.joint("finger_left").qpos[0] < 2e-3


def test_arm_does_not_collide_with_itself(model):
    data = mujoco.MjData(model)
    data.qpos[:7] = panda.Q_HOME
    mujoco.mj_forward(model, data)
    assert data.ncon == 0
