"""DH forward kinematics and Jacobian against MuJoCo's ``tcp`` site and finite differences."""

import mujoco
import numpy as np
import pytest

from controllers import panda
from controllers.kinematics import panda_chain
from controllers.rotations import mat_to_rotvec
from sim.arm import scene_xml


@pytest.fixture(scope="module")
def sim() -> tuple[mujoco.MjModel, mujoco.MjData]:
    model = mujoco.MjModel.from_xml_string(scene_xml())
    return model, mujoco.MjData(model)


def _random_q(rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(panda.Q_MIN, panda.Q_MAX)


def test_fk_matches_mujoco_tcp_site(sim) -> None:
    model, data = sim
    chain = panda_chain()
    tcp = model.site("tcp").id
    rng = np.random.default_rng(0)
    for _ in range(50):
        q = _random_q(rng)
        data.qpos[:7] = q
        mujoco.mj_kinematics(model, data)
        pos, rot = chain.forward(q)
        assert np.allclose(pos, data.site_xpos[tcp], atol=1e-9)
        assert np.allclose(rot, data.site_xmat[tcp].reshape(3, 3), atol=1e-9)


def test_jacobian_matches_finite_differences_and_mj_jacsite(sim) -> None:
    model, data = sim
    chain = panda_chain()
    tcp = model.site("tcp").id
    jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
    rng = np.random.default_rng(1)
    h = 1e-6
    out = np.zeros((6, 7))
    for _ in range(30):
        q = _random_q(rng)
        jac = chain.jacobian(q).copy()
        assert chain.jacobian(q, out=out) is out and np.array_equal(out, jac)
        fd = np.zeros((6, 7))
        for i in range(7):
            dq = np.zeros(7)
            dq[i] = h
            p1, r1 = chain.forward(q + dq)
            p0, r0 = chain.forward(q - dq)
            fd[:3, i] = (p1 - p0) / (2 * h)
            fd[3:, i] = mat_to_rotvec(r1 @ r0.T) / (2 * h)  # angular velocity, base frame
        assert np.allclose(jac, fd, atol=1e-7)
        data.qpos[:7] = q
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_jacSite(model, data, jacp, jacr, tcp)
        assert np.allclose(jac[:3], jacp[:, :7], atol=1e-9)
        assert np.allclose(jac[3:], jacr[:, :7], atol=1e-9)


def test_bad_q_shape() -> None:
    with pytest.raises(ValueError):
        panda_chain().forward(np.zeros(6))
