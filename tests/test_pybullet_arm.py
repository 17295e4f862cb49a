import numpy as np
import pytest

pb = pytest.importorskip("pybullet", reason="pybullet not installed (extra 'pybullet')")

from controllers import panda  # noqa: E402
from controllers.arm_state import ArmState  # noqa: E402
from sim.pybullet_arm import HAND_LINK, PyBulletPanda  # noqa: E402

pytestmark = pytest.mark.pybullet


@pytest.fixture
def arm():
    client = pb.connect(pb.DIRECT)
    pb.setGravity(0, 0, -9.81, physicsClientId=client)
    pb.setPhysicsEngineParameter(fixedTimeStep=0.002, physicsClientId=client)
    yield PyBulletPanda(client, with_mass=True)
    pb.disconnect(physicsClientId=client)


def test_our_dh_model_matches_the_urdf(arm):
    rng = np.random.default_rng(0)
    state = ArmState(7)
    for _ in range(5):
        q = panda.Q_HOME + rng.uniform(-0.4, 0.4, 7)
        arm.reset(q)
        arm.read(state)
        hand = pb.getLinkState(arm.body, HAND_LINK, computeForwardKinematics=True)
        rot = np.array(pb.getMatrixFromQuaternion(hand[5])).reshape(3, 3)
        np.testing.assert_allclose(state.ee_pos, hand[4] + rot[:, 2] * panda.TCP_OFFSET, atol=1e-6)
        np.testing.assert_allclose(state.ee_rot, rot, atol=1e-6)


def test_gravity_torque_holds_the_arm_and_mass_is_symmetric(arm):
    arm.reset(panda.Q_HOME)
    state = ArmState(7)
    arm.read(state)
    assert np.linalg.norm(state.gravity) > 5.0  # PyBullet does not compensate gravity itself
    np.testing.assert_allclose(state.mass, state.mass.T, atol=1e-9)
    assert np.all(np.linalg.eigvalsh(state.mass) > 0)
    for _ in range(500):  # 1 s of pure gravity compensation
        arm.read(state)
        arm.apply_torque(state.gravity + state.coriolis)
        pb.stepSimulation(physicsClientId=arm.client)
    np.testing.assert_allclose(arm.read(state).q, panda.Q_HOME, atol=2e-3)


def test_gripper_closes_and_opens(arm):
    arm.reset(panda.Q_HOME)
    arm.set_gripper(0.0)
    for _ in range(250):
        pb.stepSimulation(physicsClientId=arm.client)
    assert arm.gripper_opening() < 0.005
    assert np.allclose(arm.external_wrench(np.zeros(3)), 0.0)  # touching nothing
    arm.set_gripper(panda.FINGER_TRAVEL)
    for _ in range(250):
        pb.stepSimulation(physicsClientId=arm.client)
    assert arm.gripper_opening() == pytest.approx(0.08, abs=2e-3)
