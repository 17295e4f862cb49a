"""Joint impedance: the law, a posture step on the MuJoCo Panda, fail-closed and limits."""

import mujoco
import numpy as np
import pytest

from controllers import panda
from controllers.arm_state import ArmState
from controllers.joint_impedance import JOINT_STIFFNESS, JointImpedance
from sim.arm import scene_xml
from sim.arm_reader import MjArmReader


def test_law_matches_formula() -> None:
    rng = np.random.default_rng(0)
    ctl = JointImpedance(filter_alpha=1.0, error_clip=10.0, tau_max=np.full(7, 1e6), dtau_max=1e12)
    s = ArmState()
    s.q[:] = panda.Q_HOME
    ctl.reset(s)
    qd = panda.Q_HOME + rng.normal(0, 0.05, 7)
    ctl.set_target(qd)
    s.dq[:] = rng.normal(0, 0.3, 7)
    s.coriolis[:] = rng.normal(0, 0.1, 7)
    k = np.array(JOINT_STIFFNESS)
    expected = k * (qd - s.q) - 2 * np.sqrt(k) * s.dq + s.coriolis
    assert np.allclose(ctl.compute(s), expected)


def test_posture_step_in_mujoco() -> None:
    """A 0.05 rad step on every joint converges to < 2 mrad within 1 s."""
    model = mujoco.MjModel.from_xml_string(scene_xml())
    data = mujoco.MjData(model)
    data.qpos[:7] = panda.Q_HOME
    mujoco.mj_forward(model, data)
    reader, s, ctl = MjArmReader(model), ArmState(), JointImpedance()
    mujoco.mj_step1(model, data)
    ctl.reset(reader.read(data, s))
    target = panda.Q_HOME + 0.05
    ctl.set_target(target)
    for _ in range(500):
        reader.read(data, s)
        data.ctrl[:7] = ctl.compute(s)
        mujoco.mj_step2(model, data)
        mujoco.mj_step1(model, data)
    assert np.all(np.abs(data.qpos[:7] - target) < 2e-3)


def test_clip_nan_limits_and_stiffness_bounds() -> None:
    ctl = JointImpedance()
    s = ArmState()
    s.q[:] = panda.Q_HOME
    ctl.reset(s)
    assert not ctl.set_target(np.full(7, np.nan))
    ctl.set_target(panda.Q_HOME + 1.0)  # far: spring torque bounded by K * clip
    for _ in range(200):
        tau = ctl.compute(s)
    assert np.allclose(tau, np.minimum(np.array(JOINT_STIFFNESS) * 0.1, panda.TAU_MAX))
    prev = tau.copy()
    s.dq[2] = np.inf
    tau = ctl.compute(s)
    assert np.all(np.isfinite(tau)) and ctl.output.held
    assert np.all(np.abs(tau - prev) <= panda.DTAU_MAX * 0.002 + 1e-9)
    applied = ctl.set_stiffness(np.full(7, 1e5))
    assert np.all(applied <= 1500.0)
    with pytest.raises(ValueError):
        ctl.set_target(np.zeros(6))
